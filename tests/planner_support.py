"""Shared fixtures for the planner tests: NULL-heavy random tables, a DuckDB mirror, and
multiset comparison with float tolerance.

Invariant: ``World`` keeps the authoritative table contents in Python; after every batch the
DuckDB mirror is rebuilt from them and the same (data, diff) updates go to the engine inputs, so
both sides always see identical data.
"""

from __future__ import annotations

import datetime
import decimal
import math
import os
import random
import sys
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import duckdb  # noqa: E402

from planner import Catalog, Column, TableSchema, ViewDef, compile_view  # noqa: E402

SCHEMAS = {
    "t": [("id", "INTEGER"), ("a", "INTEGER"), ("b", "VARCHAR"), ("c", "DOUBLE"),
          ("d", "DATE"), ("flag", "BOOLEAN")],
    "u": [("id", "INTEGER"), ("a", "INTEGER"), ("s", "VARCHAR"), ("m", "DECIMAL(8,2)")],
    "e": [("src", "INTEGER"), ("dst", "INTEGER")],
}

STRINGS = ["x", "y", "ab", "Ba", "abc", " a ", "q", "xa"]
FLOATS = [0.5, 1.25, 2.0, -3.5, 10.0, 2.5, -0.75]
# with NaN, which DuckDB groups, joins and orders as one value greater than every other
NAN_FLOATS = [*FLOATS, float("nan"), float("nan"), float("inf"), 0.0, -0.0]
DATES = [datetime.date(2023, 1, 31), datetime.date(2023, 12, 1), datetime.date(2024, 2, 29),
         datetime.date(2022, 6, 15)]


def maybe(rng: random.Random, v: Any, p: float = 0.25) -> Any:
    return None if rng.random() < p else v


def random_row(rng: random.Random, table: str, next_id: int,
               floats: list[float] = FLOATS) -> tuple[Any, ...]:
    if table == "t":
        return (next_id, maybe(rng, rng.randint(-2, 6)), maybe(rng, rng.choice(STRINGS)),
                maybe(rng, rng.choice(floats)), maybe(rng, rng.choice(DATES)),
                maybe(rng, rng.random() < 0.5))
    if table == "u":
        # a DECIMAL(8,2) as DuckDB stores it and gives it back: two decimal places (12.50, not
        # 12.5; the columnar executor keeps the two apart, as they print differently)
        return (next_id, maybe(rng, rng.randint(-1, 6)), maybe(rng, rng.choice(STRINGS[:5])),
                maybe(rng, decimal.Decimal(rng.randint(-500, 2000)).scaleb(-2)))
    return (maybe(rng, rng.randint(1, 9), 0.08), maybe(rng, rng.randint(1, 9), 0.08))


def catalog(views: dict[str, str] | None = None) -> Catalog:
    cat = Catalog(tables={n: TableSchema(n, [Column(c, t) for c, t in cols])
                          for n, cols in SCHEMAS.items()})
    for name, sql in (views or {}).items():
        cv = compile_view(sql, cat, name=name)
        cat.views[name] = ViewDef(name, sql, cv.columns)
    return cat


def norm_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (float, decimal.Decimal)):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return f
        r = round(f, 6)
        return 0.0 if r == 0 else r
    return v


def norm(bag: dict[tuple[Any, ...], int] | Counter) -> Counter:
    out: Counter = Counter()
    for row, c in bag.items():
        if c:
            out[tuple(norm_value(v) for v in row)] += c
    return +out


class World:
    """Random tables mirrored in DuckDB and (optionally) fed to engine input handles."""

    def __init__(self, seed: int, sizes: dict[str, int] | None = None,
                 floats: list[float] = FLOATS) -> None:
        self.rng = random.Random(seed)
        self.floats = floats
        self.con = duckdb.connect()
        self.rows: dict[str, list[tuple[Any, ...]]] = {}
        self.next_id = 1000
        for name, cols in SCHEMAS.items():
            self.con.execute(f"CREATE TABLE {name} (" + ", ".join(f"{c} {t}" for c, t in cols)
                             + ")")
            n = (sizes or {}).get(name, 40 if name != "e" else 14)
            self.rows[name] = [self.new_row(name) for _ in range(n)]
        self.sync()

    def new_row(self, table: str) -> tuple[Any, ...]:
        self.next_id += 1
        return random_row(self.rng, table, self.next_id % 50, self.floats)

    def sync(self) -> None:
        for name, cols in SCHEMAS.items():
            self.con.execute(f"DELETE FROM {name}")
            if self.rows[name]:
                self.con.executemany(
                    f"INSERT INTO {name} VALUES (" + ", ".join("?" for _ in cols) + ")",
                    [list(r) for r in self.rows[name]])

    def random_batch(self, size: int = 6) -> list[tuple[str, tuple[Any, ...], int]]:
        """Random INSERT/UPDATE/DELETE, applied to self.rows; returns (table, row, diff)."""
        out: list[tuple[str, tuple[Any, ...], int]] = []
        for _ in range(size):
            table = self.rng.choice(list(SCHEMAS))
            rows = self.rows[table]
            op = self.rng.random()
            if op < 0.4 or not rows:
                r = self.new_row(table)
                rows.append(r)
                out.append((table, r, 1))
            elif op < 0.7:
                r = rows.pop(self.rng.randrange(len(rows)))
                out.append((table, r, -1))
            else:  # UPDATE: one column changes
                i = self.rng.randrange(len(rows))
                old = rows[i]
                fresh = self.new_row(table)
                j = self.rng.randrange(1 if table != "e" else 0, len(old))
                new = old[:j] + (fresh[j],) + old[j + 1:]
                rows[i] = new
                out += [(table, old, -1), (table, new, 1)]
        return out

    def bags(self) -> dict[str, Counter]:
        return {n: Counter(rs) for n, rs in self.rows.items()}

    def duck(self, sql: str) -> Counter:
        return norm(Counter(self.con.execute(sql).fetchall()))


def take_bulk_paths(monkeypatch: Any) -> None:
    """Make every path that only a large batch takes (a reduce's first rows built as columns,
    joins of rows as tables, counted and sorted batches, array indexes) taken at any size,
    so that views over the small tables of these suites cover them."""
    import engine.columns_at as columns_at
    import engine.columns_join as columns_join
    import engine.operators.half_join as half_join
    import engine.operators.reduce_total as reduce_total
    import engine.rows_at as rows_at
    import engine.rows_batch as rows_batch
    import planner.aggregate_columns as aggregate_columns

    for module, name in ((half_join, "COLUMNS_MIN_ROWS"), (reduce_total, "ROWS_AS_COLUMNS"),
                         (columns_join, "ROWS_AS_TABLE"), (columns_at, "COUNTED_MIN_ROWS"),
                         (rows_at, "GROUP_SORT_MIN_ROWS"), (rows_batch, "SORTED_MIN_ROWS"),
                         (rows_batch, "VECTOR_MIN_KEYS"),
                         (aggregate_columns, "ARRAY_INDEX_MIN")):
        monkeypatch.setattr(module, name, 1)


def mode_executor(mode: str, monkeypatch: Any) -> Any:
    """Set up an oracle mode and return the dataflow's executor: "rows" and "columns" as
    they are (the in-process executor), "bulk" with every large-batch path taken
    (`take_bulk_paths`), "columnar" as "bulk" on the columnar executor (`--executor
    columnar`: interned rows, compiled kernels)."""
    from engine.executors.columnar import ColumnarExecutor

    if mode in ("bulk", "columnar"):
        take_bulk_paths(monkeypatch)
    return ColumnarExecutor() if mode == "columnar" else None


def replay_against_duckdb(world: World, views: list[str], cat: Catalog | None = None,
                          batches: int = 22, base_views: dict[str, str] | None = None,
                          columns: bool = False, executor: Any = None) -> None:
    """Build `views` on a fresh dataflow (on `executor`, by default the in-process one) before
    any data arrives, then send the world's rows
    and `batches` - 1 random write batches, one epoch each; after every epoch each view must
    equal DuckDB running the same SELECT over the same data. `base_views` are views the others
    read (built first, and created in the DuckDB mirror too). With `columns` the first
    contents enter as Arrow columns read from the DuckDB mirror (`send_columns`, as a server
    restart sends them: the vectorised path), else as rows."""
    import engine
    from server.store import arrow_of

    cat = cat or catalog(base_views)
    df = engine.Dataflow(executor=executor)
    handles, sources = {}, {}
    for name in SCHEMAS:
        handles[name], sources[name] = df.new_input(name)
    for name, sql in (base_views or {}).items():
        world.con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        sources[name] = compile_view(sql, cat, name=name).build(df, sources)
    caps = [(s, compile_view(s, cat).build(df, sources).capture()) for s in views]
    for name, rows in world.rows.items():
        if columns:
            handles[name].send_columns(arrow_of(world.con.sql(f"SELECT * FROM {name}")))
        else:
            handles[name].send([(r, 1) for r in rows])
    for batch in range(batches):
        for h in handles.values():
            h.advance_to(batch + 1)
        df.run()
        # quiescent: one more pass finds nothing to do (a loop-free run stops after one pass)
        assert not df.step()
        world.sync()
        for sql, cap in caps:
            snap = cap.snapshot()
            # a row left beside its unmatched retraction would cancel out in `norm`'s counts
            assert all(c > 0 for c in snap.values()), (batch, sql, snap)
            got, want = norm(snap), world.duck(sql)
            assert got == want, (batch, sql, dict(got - want), dict(want - got))
        for table, row, diff in world.random_batch(6):
            handles[table].send([(row, diff)])


def record_declines(monkeypatch: Any, owner: Any, name: str) -> list[bool]:
    """Wrap `owner.name` (a function that returns None to decline) so that every call
    appends whether it answered (not None) to the returned list, which the test reads."""
    answered: list[bool] = []
    real = getattr(owner, name)

    def spy(*args: Any) -> Any:
        out = real(*args)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(owner, name, spy)
    return answered
