"""Join ordering (planner/joins.py): many-way joins maintained incrementally equal DuckDB.

Twelve random tables ``j1..j12 (a, b, c INTEGER)`` with NULLs; each view is built once and
maintained through 21 random write batches (inserts, deletes, updates), compared with DuckDB
after every batch; then the same updates are replayed grouped differently (all in one epoch,
and in random groups) and every snapshot must again equal DuckDB (batching invariance). The
views cover chains and stars of 4, 6 and 12 tables, FROM lists in scrambled order, constant
filters, explicit inner joins mixed with comma joins, expression keys, cycles in the join graph,
non-equi predicates, and outer joins mixed in (which must not be reordered).
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections import Counter
from typing import Any

import duckdb
import pytest
from planner_support import norm

import engine
from planner import Catalog, Column, TableSchema, compile_view
from planner.cardinality import Estimator
from planner.ir import DeltaJoin, Get, Join, Mfp, walk
from planner.joins import cheapest_order, joined_rows
from server.statistics import TableStatistics

N = 12
TABLES = [f"j{i}" for i in range(1, N + 1)]


def _chain(k: int, order: list[int] | None = None) -> str:
    order = order or list(range(1, k + 1))
    cols = ", ".join(f"j{i}.c" for i in range(1, k + 1))
    conds = " AND ".join(f"j{i}.b = j{i + 1}.a" for i in range(1, k))
    return f"SELECT {cols} FROM " + ", ".join(f"j{i}" for i in order) + f" WHERE {conds}"


def _star(k: int) -> str:
    cols = ", ".join(f"j{i}.c" for i in range(1, k + 1))
    spokes = " AND ".join(f"j1.{'abc'[i % 3]} = j{i}.{'abc'[(i + 1) % 3]}"
                          for i in range(2, k + 1))
    return f"SELECT {cols} FROM " + ", ".join(TABLES[:k]) + f" WHERE {spokes}"


VIEWS = [
    # the example: no equi-join at all, only constant filters (cross product of four
    # filtered tables)
    "SELECT j1.b, j2.b, j3.b, j4.b FROM j1, j2, j3, j4 WHERE j1.a = 5 AND j2.a = 6 AND "
    "j3.a = 7 AND j4.a = 8",
    _chain(4) + " AND j1.c > 2",
    _chain(6, [4, 1, 6, 2, 5, 3]),
    _chain(6) + " AND j3.c = 4 AND j6.a < 7",
    _chain(12) + " AND j1.a = 3 AND j12.c <> 2",
    _chain(12, [12, 3, 7, 1, 9, 5, 11, 2, 8, 4, 10, 6]),
    _star(4),
    _star(6) + " AND j1.c IS NOT NULL",
    _star(12),
    # explicit inner joins mixed with comma joins, equalities in ON and in WHERE
    "SELECT j1.a, j2.c, j3.c, j5.c FROM j1 JOIN j2 ON j1.b = j2.a, j3, j4 JOIN j5 ON "
    "j4.b = j5.a WHERE j2.b = j3.a AND j3.b = j4.a",
    # expression keys and casts
    "SELECT j1.c, j2.c, j3.c FROM j1, j2, j3 WHERE j1.a + 1 = j2.a AND j2.b = j3.b * 2 "
    "AND CAST(j3.c AS DOUBLE) = j1.b",
    # a cycle in the join graph and a non-equi predicate
    "SELECT j1.a, j2.b, j3.c FROM j1, j2, j3 WHERE j1.a = j2.a AND j2.b = j3.b AND "
    "j3.c = j1.c AND j1.b < j3.a",
    # OR across tables stays a residual filter; duplicates are kept (multiset)
    "SELECT j1.a FROM j1, j2, j3 WHERE j1.b = j2.b AND j2.c = j3.c AND (j1.a = 1 OR j3.a = 2)",
    # aggregate over a chain
    "SELECT j1.a, count(*), sum(j4.c) FROM j1, j2, j3, j4 WHERE j1.b = j2.a AND j2.b = j3.a "
    "AND j3.b = j4.a GROUP BY j1.a",
    # outer joins mixed in: the WHERE predicates on the nullable side must stay above them
    "SELECT j1.a, j2.c, j3.c FROM j1 LEFT JOIN j2 ON j1.b = j2.a, j3 WHERE j3.a = j1.a "
    "AND j2.b IS NULL",
    "SELECT j1.c, j2.c, j3.c FROM j1, j2 LEFT JOIN j3 ON j2.b = j3.a AND j3.c > 3 "
    "WHERE j1.b = j2.a AND (j3.c IS NULL OR j3.c < 8)",
    "SELECT j1.a, j2.a, j3.a, j4.c FROM j1 FULL JOIN j2 ON j1.b = j2.a JOIN j3 ON "
    "j3.a = j2.b, j4 WHERE j4.a = j3.b AND j4.c = j1.c",
    "SELECT j1.a, j2.c, j3.c, j4.c FROM j1 RIGHT JOIN j2 ON j1.b = j2.a AND j1.c = 1 "
    "LEFT JOIN j3 ON j3.a = j2.b, j4 WHERE j4.b = j2.c",
    # a correlated subquery over a join (decorrelation keys match NULL with NULL)
    "SELECT j1.a, j2.c FROM j1, j2 WHERE j1.b = j2.a AND EXISTS (SELECT 1 FROM j5, j6 "
    "WHERE j5.b = j6.a AND j5.a = j1.c)",
    # the same table twice
    "SELECT x.a, y.c, j3.c FROM j1 x, j1 y, j3 WHERE x.b = y.a AND y.b = j3.a AND x.c = 2",
    # JOIN binds tighter than the comma: a, (b RIGHT JOIN c), whose unmatched c rows meet
    # every row of a (they were a row with a's columns NULL)
    "SELECT j1.c, j2.c, j3.c FROM j1, j2 RIGHT JOIN j3 ON j2.a = j3.a WHERE j1.a < 3",
    "SELECT j1.a, j2.b, j3.b, j4.c FROM j1 JOIN j4 ON j1.b = j4.a, j2 FULL JOIN j3 "
    "ON j2.b = j3.a AND j3.c > 2 WHERE j1.c = 1",
]


def _catalog(statistics: Any = None) -> Catalog:
    return Catalog(tables={t: TableSchema(t, [Column(c, "INTEGER") for c in "abc"])
                           for t in TABLES}, statistics=statistics)


class RandomStatistics:
    """Seeded made-up statistics, unrelated to the data: the plan they choose must still give
    DuckDB's answer (statistics only order joins)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def _draw(self, *what: str) -> random.Random:
        return random.Random(zlib.crc32("/".join((str(self.seed), *what)).encode()))

    def rows(self, table: str) -> int | None:
        return self._draw(table).choice([0, 1, 3, 10, 40, 1000, 10**6])

    def distinct(self, table: str, column: str) -> int | None:
        n = self.rows(table) or 1
        return self._draw(table, column).choice([1, 2, max(1, n // 10), n, None])


class JoinWorld:
    """Authoritative rows in Python, mirrored into DuckDB before every comparison."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rows: dict[str, list[tuple[Any, ...]]] = {
            t: [self.row() for _ in range(12)] for t in TABLES}
        self.con = duckdb.connect()
        for t in TABLES:
            self.con.execute(f"CREATE TABLE {t} (a INTEGER, b INTEGER, c INTEGER)")

    def value(self) -> int | None:
        return None if self.rng.random() < 0.15 else self.rng.randint(0, 9)

    def row(self) -> tuple[Any, ...]:
        return (self.value(), self.value(), self.value())

    def batch(self) -> list[tuple[str, tuple[Any, ...], int]]:
        out: list[tuple[str, tuple[Any, ...], int]] = []
        for _ in range(self.rng.randint(1, 8)):
            t = self.rng.choice(TABLES)
            rows = self.rows[t]
            op = self.rng.random()
            if op < 0.4 or not rows:
                r = self.row()
                rows.append(r)
                out.append((t, r, 1))
            elif op < 0.7:
                out.append((t, rows.pop(self.rng.randrange(len(rows))), -1))
            else:
                i = self.rng.randrange(len(rows))
                old = rows[i]
                j = self.rng.randrange(3)
                new = old[:j] + (self.value(),) + old[j + 1:]
                rows[i] = new
                out += [(t, old, -1), (t, new, 1)]
        return out

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        return {t: list(rs) for t, rs in self.rows.items()}

    def duck(self, rows: dict[str, list[tuple[Any, ...]]], views: list[str]) -> list[Counter]:
        for t in TABLES:
            self.con.execute(f"DELETE FROM {t}")
            if rows[t]:
                self.con.executemany(f"INSERT INTO {t} VALUES (?, ?, ?)", rows[t])
        return [norm(Counter(self.con.execute(sql).fetchall())) for sql in views]


def _replay(views: list[str], initial: dict[str, list[tuple[Any, ...]]],
            groups: list[list[tuple[str, tuple[Any, ...], int]]],
            cat: Catalog | None = None) -> list[list[Counter]]:
    """Snapshots of every view after the initial load and after each group (one epoch each)."""
    cat = cat or _catalog()
    df = engine.Dataflow()
    handles, sources = {}, {}
    for t in TABLES:
        handles[t], sources[t] = df.new_input(t)
    caps = [compile_view(v, cat).build(df, sources).capture() for v in views]
    for t, rows in initial.items():
        handles[t].send([(r, 1) for r in rows])
    out = []
    for epoch, group in enumerate([[], *groups], start=1):
        for t, r, d in group:
            handles[t].send([(r, d)])
        for h in handles.values():
            h.advance_to(epoch)
        df.run()
        out.append([norm(c.snapshot()) for c in caps])
    return out


def _apply(rows: dict[str, list[tuple[Any, ...]]],
           batch: list[tuple[str, tuple[Any, ...], int]]) -> None:
    for t, r, d in batch:
        if d > 0:
            rows[t].append(r)
        else:
            rows[t].remove(r)


def _scenario(world: JoinWorld, views: list[str]) -> tuple[
        dict[str, list[tuple[Any, ...]]], list[list[tuple[str, tuple[Any, ...], int]]],
        list[list[Counter]]]:
    """The world's initial rows, 21 random batches, and DuckDB's answer for every view after
    the initial load and after each batch."""
    initial = world.snapshot()
    batches = [world.batch() for _ in range(21)]
    rows = {t: list(rs) for t, rs in initial.items()}
    states = [{t: list(rs) for t, rs in rows.items()}]
    for b in batches:
        _apply(rows, b)
        states.append({t: list(rs) for t, rs in rows.items()})
    return initial, batches, [world.duck(s, views) for s in states]


GROUPS = 4


@pytest.mark.parametrize("group", range(GROUPS))
def test_joins_match_duckdb_every_batch_and_every_batching(group: int) -> None:
    views = [v for i, v in enumerate(VIEWS) if i % GROUPS == group]
    world = JoinWorld(1300 + group)
    initial, batches, want = _scenario(world, views)
    assert any(w for ws in want for w in ws), "the data makes every view empty"

    got = _replay(views, initial, batches)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        for v, gv, wv in zip(views, g, w, strict=True):
            assert gv == wv, (k, v, dict(gv - wv), dict(wv - gv))

    # batching invariance: all in one epoch, then random groups of consecutive batches
    one = _replay(views, initial, [[u for b in batches for u in b]])
    assert one[-1] == want[-1]
    rng = random.Random(group)
    cuts = sorted(rng.sample(range(1, len(batches)), 5))
    spans = list(zip([0, *cuts], [*cuts, len(batches)], strict=True))
    grouped = _replay(views, initial, [[u for b in batches[i:j] for u in b] for i, j in spans])
    for (_, j), g in zip(spans, grouped[1:], strict=True):
        assert g == want[j]


def _joins(sql: str, statistics: Any = None) -> list[Join | DeltaJoin]:
    return [n for n in walk(compile_view(sql, _catalog(statistics)).plan)
            if isinstance(n, (Join, DeltaJoin))]


def _linked(dj: DeltaJoin) -> bool:
    """Every step of every path of the delta join has a key (no cross product)."""
    own = dj.owners()
    for path in dj.paths():
        for n, j in enumerate(path[1:], start=1):
            seen = set(path[:n])
            if not any({own[a][0], own[b][0]} & {j} and {own[a][0], own[b][0]} - {j} <= seen
                       and own[a][0] != own[b][0] for a, b in dj.keys):
                return False
    return True


TRANSITIVE = [
    # j1 and j3 are linked only through j2's column: with statistics that make j2 the largest
    # table the join starts at j1 and j3 on the implied j1.a = j3.a, never crossing them
    "SELECT j1.c, j2.c, j3.c FROM j1, j2, j3 WHERE j1.a = j2.a AND j2.a = j3.a",
    "SELECT j1.c, j4.c FROM j1, j2, j3, j4 WHERE j1.a = j2.a AND j3.b = j2.a AND j3.c = j4.c "
    "AND j4.a = 1",
    # two columns of one table in a class: joined to the class through one of them (an
    # implied edge), the other still needs its key (it was taken as equal already)
    "SELECT j1.c, j2.c, j3.c FROM j1 JOIN j2 ON j1.a = j2.a JOIN j3 ON j2.a = j3.a "
    "AND j2.a = j3.b",
    "SELECT j1.c, j2.b, j3.c, j4.a FROM j1, j2, j3, j4 WHERE j1.a = j2.b AND j2.b = j3.a "
    "AND j3.a = j4.b AND j2.b = j4.c AND j1.b = j1.a",
]


@pytest.mark.parametrize("seed", [None, *range(6)])
def test_equi_joins_are_never_cross_products(seed: int | None) -> None:
    stats = None if seed is None else RandomStatistics(seed)
    for sql in (_chain(4), _chain(6, [4, 1, 6, 2, 5, 3]), _chain(12),
                _chain(12, [12, 3, 7, 1, 9, 5, 11, 2, 8, 4, 10, 6]), _star(6), _star(12),
                *(TRANSITIVE if stats else [])):
        joins = _joins(sql, stats)
        assert joins and all(j.keys if isinstance(j, Join) else _linked(j) for j in joins), sql


@pytest.mark.parametrize("stats", ["duckdb", 0, 1, 2, 3])
def test_joins_ordered_by_statistics_match_duckdb(stats: str | int) -> None:
    """Every view planned with statistics (DuckDB's own, of the initial data, or made up) is
    maintained through 21 batches and equals DuckDB after each: the order statistics choose,
    and the implied equalities it joins on, never change a result."""
    views = VIEWS + TRANSITIVE
    world = JoinWorld(1400 + (stats if isinstance(stats, int) else 9))
    initial, batches, want = _scenario(world, views)
    if stats == "duckdb":
        world.duck(initial, [])
        statistics: Any = TableStatistics(world.con, {t: dict.fromkeys("abc", "INTEGER")
                                                      for t in TABLES})
    else:
        statistics = RandomStatistics(int(stats))
    cat = _catalog(statistics)
    got = _replay(views, initial, batches, cat)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        for v, gv, wv in zip(views, g, w, strict=True):
            assert gv == wv, (k, v, stats, dict(gv - wv), dict(wv - gv))


@pytest.mark.parametrize("seed", range(40))
def test_cheapest_order_is_the_cheapest_connected_order(seed: int) -> None:
    """The dynamic programme's order costs no more than any left-deep order that joins a linked
    input whenever one exists (brute force over every permutation of up to 6 inputs)."""
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    inputs = [Get(f"j{i + 1}", 3) for i in range(n)]
    edges = []
    for j in range(1, n):  # a random spanning tree, then extra edges (cycles)
        edges.append((rng.randrange(j), rng.randrange(3), j, rng.randrange(3)))
    for _ in range(rng.randint(0, 3)):
        a, b = rng.sample(range(n), 2)
        edges.append((a, rng.randrange(3), b, rng.randrange(3)))
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, _, b, _ in edges:
        adj[a].add(b)
        adj[b].add(a)
    est = Estimator(_catalog(RandomStatistics(seed)))
    rows = joined_rows(inputs, edges, est)

    def cost(order: list[int] | tuple[int, ...]) -> float:
        masks = itertools.accumulate((1 << i for i in order), lambda m, b: m | b)
        return sum(rows(m) for k, m in enumerate(masks, start=1) if 2 <= k < n)

    def connected(order: tuple[int, ...]) -> bool:
        return all(adj[j] & set(order[:k]) for k, j in enumerate(order) if k)

    got = cheapest_order(inputs, edges, adj, est)
    assert sorted(got) == list(range(n)) and connected(tuple(got))
    best = min(cost(p) for p in itertools.permutations(range(n)) if connected(p))
    assert cost(got) <= best * (1 + 1e-9), (got, cost(got), best)


def test_constant_filters_sit_on_their_tables() -> None:
    """The issue's four-table example: no join key exists, but every table is filtered before
    the cross product, and no filter is left above a join."""
    plan = compile_view(VIEWS[0], _catalog()).plan
    for n in walk(plan):
        if isinstance(n, Mfp) and n.filter:
            assert not any(isinstance(k, Join) for k in walk(n.input)), n
    gets = [n for n in walk(plan) if isinstance(n, Mfp) and isinstance(n.input, Get)]
    assert len(gets) == 4 and all(m.filter for m in gets)


def test_explain_shows_join_order() -> None:
    """A scrambled FROM list is joined along the chain, starting at the filtered table."""
    sql = ("SELECT j1.c, j4.c FROM j4, j2, j1, j3 WHERE j1.b = j2.a AND j2.b = j3.a "
           "AND j3.b = j4.a AND j4.c = 7")
    text = compile_view(sql, _catalog()).explain()
    assert "Join cross" not in text
    gets = [line.strip() for line in text.splitlines() if line.strip().startswith("Get ")]
    assert gets == ["Get j4", "Get j3", "Get j2", "Get j1"], text


def test_outer_join_is_not_reordered() -> None:
    """WHERE j2.b IS NULL over a LEFT JOIN must filter after the join (it keeps the unmatched
    rows), never be pushed into j2 below it."""
    plan = compile_view(VIEWS[14], _catalog()).plan
    for n in walk(plan):
        if isinstance(n, Mfp) and isinstance(n.input, Get) and n.input.name == "j2":
            assert not any("is_null" in repr(f) and "not" not in repr(f) for f in n.filter)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM l FULL JOIN r USING (k)",
    "SELECT * FROM l RIGHT JOIN r USING (k)",
    "SELECT * FROM l LEFT JOIN r USING (k)",
    "SELECT * FROM l NATURAL FULL JOIN r",
    "SELECT * FROM l NATURAL RIGHT JOIN r",
    "SELECT l.k, r.k, k, id FROM l FULL JOIN r USING (k)",
    "SELECT l.k, r.k, k FROM l RIGHT JOIN r USING (k)",
    "SELECT * FROM l FULL JOIN r USING (k) FULL JOIN l AS l2 USING (k)",
])
def test_select_star_of_outer_joins_using_lists_columns_as_duckdb(sql: str) -> None:
    """`*` over a FULL or RIGHT JOIN ... USING (or NATURAL) lists each USING column where the
    left side has it, as DuckDB does (it came last, so positional column names and rows read
    by position were off); `l.k` and `r.k` stay each side's own."""
    import duckdb

    from planner import Catalog, Column, TableSchema

    left = [(1, 1, 0.5), (2, 2, 1.5), (3, None, 2.0)]
    right = [(10, 1, 9.5), (11, 3, 8.5), (12, None, 1.0)]
    con = duckdb.connect()
    con.execute("CREATE TABLE l (id INTEGER, k INTEGER, f DOUBLE)")
    con.execute("CREATE TABLE r (rid INTEGER, k INTEGER, g DOUBLE)")
    con.executemany("INSERT INTO l VALUES (?, ?, ?)", [list(x) for x in left])
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", [list(x) for x in right])
    cur = con.execute(sql)
    want_names = [d[0] for d in cur.description]
    want = Counter(cur.fetchall())
    cat = Catalog(tables={
        "l": TableSchema("l", [Column("id", "INTEGER"), Column("k", "INTEGER"), Column("f", "DOUBLE")]),
        "r": TableSchema("r", [Column("rid", "INTEGER"), Column("k", "INTEGER"), Column("g", "DOUBLE")])})
    cv = compile_view(sql, cat)
    # (a view names a repeated column k, k_1, k_2: DuckDB's result repeats k)
    assert [c.name if c.name in want_names else c.name.rsplit("_", 1)[0] for c in cv.columns] \
        == want_names
    assert Counter(cv.evaluate({"l": Counter(left), "r": Counter(right)})) == want
