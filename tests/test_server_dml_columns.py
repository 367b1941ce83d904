"""Large DML statements reach the change log and the views as columns.

Invariants checked, in process on a real DuckDB file with `statements.DML_ROWS` lowered to 3
(so every statement of more than 3 rows takes the columns path for the rest of its rows): a
seeded stream of INSERT ... SELECT, UPDATE and DELETE statements (with plain INSERTs between
them) over two tables, one of them taken as if its types did not convert exactly through Arrow
(`Store.exact_types` false, as every table is under a Spark executor: its rows stay Python
rows); after each write, every view (aggregates with
MIN/MAX and DISTINCT, a join, a filter, a top-k) equals DuckDB running its SELECT over an
oracle that ran the same statements, each table's row count equals DuckDB's, and a view read
`as_of` an earlier timestamp still equals what DuckDB answered then; after reopening the data
directory (recovery replays the change logs, which the columns path wrote through DuckDB)
everything still equals DuckDB. The columns path was taken (Write.loads and Write.unloads of
DML rows), and with the default `DML_ROWS` a statement of a few rows never takes it.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

import server.statements as statements
from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings
from tests.db_support import bag as _bag
from tests.db_support import create_both
from tests.db_support import oracle_bag as _oracle

DDL = [
    "CREATE TABLE t (id INTEGER, k INTEGER, v DOUBLE, s VARCHAR, d DATE, m DECIMAL(10,2), "
    "r REAL, b BOOLEAN, ts TIMESTAMP, sm SMALLINT, bg BIGINT)",
    "CREATE TABLE u (id INTEGER, k INTEGER, w REAL)",
]
VIEWS = {
    "agg": "SELECT k, count(*) AS n, sum(v) AS sv, min(v) AS lo, max(d) AS hi, sum(m) AS sm, "
           "count(DISTINCT s) AS ds FROM t GROUP BY k",
    "total": "SELECT count(*) AS n, min(id) AS lo, max(s) AS hi FROM t",
    "joined": "SELECT t.k, u.id, t.v FROM t JOIN u ON t.id = u.id WHERE t.v > 10",
    "small": "SELECT id, s, r, b, ts, sm, bg FROM t WHERE k = 1",
    "kinds": "SELECT b, count(*) AS n, min(r) AS r0, max(ts) AS t1, sum(sm) AS ssm, "
             "max(bg) AS bg1 FROM t GROUP BY b",
    "top": "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 4",
    "by_u": "SELECT k, count(*) AS n, max(w) AS wmax FROM u GROUP BY k",
}


def _statements(rng: random.Random) -> list[str]:
    out = ["INSERT INTO t SELECT x, x % 5, (x * 37 % 101) / 4.0, 's' || (x % 13), "
           "DATE '2020-01-01' + (x % 50)::INTEGER, (x % 97) / 4, x / 3, x % 3 = 0, "
           "TIMESTAMP '2021-01-01 10:00:00' + to_seconds(x * 7), x % 300, x * 100003 "
           "FROM range(400) r(x)",
           "INSERT INTO u SELECT x, x % 3, (x % 17) / 8 FROM range(300) r(x)"]
    for step in range(14):
        op = rng.randrange(6)
        if op == 0:
            lo = 1000 + 100 * step
            out.append(f"INSERT INTO t SELECT x, x % 7, (x * 13 % 89) / 2.0, 's' || (x % 5), "
                       f"DATE '2021-06-01' + (x % 30)::INTEGER, (x % 41) / 8, x / 7, "
                       f"x % 2 = 0, TIMESTAMP '2022-03-04 05:06:07' + to_seconds(x), "
                       f"x % 100, -x "
                       f"FROM range({lo}, {lo + rng.randint(1, 120)}) r(x)")
        elif op == 1:
            out.append(f"UPDATE t SET v = v + 1.5, s = s || 'x', r = r * 2, b = NOT b "
                       f"WHERE id % {rng.randint(2, 6)} = 0")
        elif op == 2:
            out.append(f"DELETE FROM t WHERE id % {rng.randint(5, 11)} = {rng.randint(0, 4)}")
        elif op == 3:
            out.append(f"UPDATE u SET w = w + 0.5, k = k + 1 "
                       f"WHERE id % {rng.randint(2, 5)} = 1")
        elif op == 4:
            out.append(f"DELETE FROM u WHERE id % {rng.randint(3, 9)} = 2")
        else:
            out.append(f"INSERT INTO t VALUES ({5000 + step}, 1, 99.5, 'plain', "
                       f"DATE '2022-02-02', 1.25, 0.5, NULL, NULL, 7, 8)")
    return out


def _check(db: Database, oracle: duckdb.DuckDBPyConnection, where: str) -> None:
    for name, sql in VIEWS.items():
        assert _bag(db.view_rows(name, None)["rows"]) == _oracle(oracle, sql), (where, name)
    for table in ("t", "u"):
        want = oracle.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert want is not None
        assert db.table_info(table)["row_count"] == want[0], (where, table)


@pytest.mark.parametrize("seed", range(3))
def test_large_dml_as_columns_equals_duckdb(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(statements, "DML_ROWS", 3)
    taken: list[tuple[str, int, int]] = []
    real = statements.Store.append_log_arrow

    def spy(self: Any, rec: Any, ts: int, rows: Any, diff: int = 1) -> None:
        taken.append((rec.name, diff, rows.num_rows))
        real(self, rec, ts, rows, diff)

    monkeypatch.setattr(statements.Store, "append_log_arrow", spy)
    exact = statements.Store.exact_types
    monkeypatch.setattr(statements.Store, "exact_types",
                        staticmethod(lambda rec: rec.name != "u" and exact(rec)))
    rng = random.Random(seed)
    oracle = duckdb.connect()
    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        create_both(db, oracle, DDL, VIEWS)
        past: list[tuple[int, dict[str, Counter[str]]]] = []
        for stmt in _statements(rng):
            ts = db.execute(stmt)["results"][0]["timestamp"]
            oracle.execute(stmt)
            _check(db, oracle, stmt)
            past.append((ts, {n: _oracle(oracle, q) for n, q in VIEWS.items()}))
        for ts, answers in past[-4:]:  # the retained history, as of earlier timestamps
            for name, want in answers.items():
                assert _bag(db.view_rows(name, ts)["rows"]) == want, (ts, name)
        # an UPDATE that leaves every row as it was changes nothing: no timestamp, no log
        logged = len(taken)
        noop = db.execute("UPDATE t SET v = v, s = s")["results"][0]
        assert noop["rowcount"] > 3 and noop["timestamp"] == past[-1][0]
        assert len(taken) == logged
    finally:
        db.close()
    # the columns path was taken for t, with insertions and deletions; never for u
    assert {("t", 1), ("t", -1)} <= {(n, d) for n, d, _ in taken}
    assert all(n == "t" for n, _, _ in taken)
    db = Database(settings, InProcessExecutor())
    try:
        _check(db, oracle, "after reopening")
    finally:
        db.close()


def test_small_dml_stays_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default `DML_ROWS`, a statement of fewer rows logs them as rows."""
    taken: list[int] = []
    real = statements.Store.append_log_arrow

    def spy(self: Any, rec: Any, ts: int, rows: Any, diff: int = 1) -> None:
        taken.append(rows.num_rows)
        real(self, rec, ts, rows, diff)

    monkeypatch.setattr(statements.Store, "append_log_arrow", spy)
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        db.execute(DDL[0])
        db.execute(f"CREATE VIEW agg AS {VIEWS['agg']}")
        n = statements.DML_ROWS
        db.execute(f"INSERT INTO t (id, k, v, s, d, m) SELECT x, x % 5, x, 's', "
                   f"DATE '2020-01-01', 1 FROM range({n}) r(x)")
        db.execute("UPDATE t SET v = v + 1")
        db.execute("DELETE FROM t WHERE id % 2 = 0")
        assert taken == []
        db.execute(f"INSERT INTO t (id, k, v, s, d, m) SELECT x, x % 5, x, 's', "
                   f"DATE '2020-01-01', 1 FROM range({n + 10}) r(x)")
        assert taken == [10]  # the first DML_ROWS as rows, the rest as columns
    finally:
        db.close()


def test_decimal_batches_are_absorbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large statements over a DECIMAL column, with the default thresholds: their first
    `DML_ROWS` rows come as Python rows of Decimals and the rest as Arrow decimals, and a
    GROUP BY with SUM, MIN and MAX over it absorbs each batch as columns (both parts, made
    columns by `keyed_columns_split`) into states whose MIN/MAX values are held in arrays at
    the column's scale; every view equals DuckDB after each statement, and after reopening."""
    from tests.db_support import record_absorbs

    absorbed = record_absorbs(monkeypatch)
    ddl = ["CREATE TABLE p (id BIGINT, k INTEGER, m DECIMAL(15,2))"]
    views = {
        "by_k": "SELECT k, count(*) AS n, sum(m) AS sm, min(m) AS lo, max(m) AS hi FROM p "
                "GROUP BY k",
        "neg": "SELECT id, m FROM p WHERE m < 0",
    }
    oracle = duckdb.connect()
    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        create_both(db, oracle, ddl, views)
        n = 3 * statements.DML_ROWS
        stmts = [
            f"INSERT INTO p SELECT x, x % 7, ((x * 7919) % 20011 - 10000) / 100 "
            f"FROM range({n}) r(x)",
            f"INSERT INTO p SELECT x + {n}, x % 7, ((x * 104729) % 30011 - 15000) / 100 "
            f"FROM range({n}) r(x)",
            "UPDATE p SET m = m + 0.05 WHERE id % 3 = 0",
            "DELETE FROM p WHERE id % 4 = 1",
        ]
        for i, stmt in enumerate(stmts):
            db.execute(stmt)
            ((changed,),) = oracle.execute(stmt).fetchall()
            for name, sql in views.items():
                assert _bag(db.view_rows(name, None)["rows"]) == _oracle(oracle, sql), (stmt, name)
            if i:  # (the first fills the empty view: a build, not an absorb)
                # every row of the batch absorbed (an UPDATE's old and new rows), none by rows
                assert sum(map(abs, absorbed)) == changed * (2 if "UPDATE" in stmt else 1)
            absorbed.clear()
    finally:
        db.close()
    db = Database(settings, InProcessExecutor())
    try:
        for name, sql in views.items():
            assert _bag(db.view_rows(name, None)["rows"]) == _oracle(oracle, sql), name
    finally:
        db.close()
