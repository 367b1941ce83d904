"""A view is built to be read from its creation's timestamp: every update its output trace
holds is at that timestamp or later, constants included (a global aggregate's row for an
empty input, the NULL of a scalar subquery over no rows), and its contents equal DuckDB's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb

from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings


def test_a_view_holds_nothing_before_its_creation(tmp_path: Path) -> None:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    duck = duckdb.connect()
    try:
        for con in (db, duck):
            con.execute("CREATE TABLE t (id INTEGER, a INTEGER)")
        for i in range(6):  # several timestamps before the views exist
            stmt = f"INSERT INTO t VALUES ({i}, {i % 3})"
            db.execute(stmt)
            duck.execute(stmt)
        sqls = {"agg": "SELECT count(*) AS n, max(a) AS m FROM t",
                "scalar": "SELECT id, a - (SELECT avg(a) FROM t) AS d FROM t"}
        for name, sql in sqls.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        for name, sql in sqls.items():
            view = db.views[name]
            times = {t for b in view.arranged.trace.existing_batches()
                     for _, entries in b.updates.items() for _, t, _ in entries}
            assert times and min(times) >= (view.created_ts,), (name, times, view.created_ts)
            got = Counter(tuple(r) for r in db.view_rows(name, None)["rows"])
            want = Counter(tuple(r) for r in duck.execute(sql).fetchall())
            assert got == want, name
    finally:
        db.close()


def test_a_view_over_a_view_keeps_its_constants_from_the_start(tmp_path: Path) -> None:
    """A view that imports another view's arrangement reads its batches at their own, earlier
    timestamps, so its constants enter at the start of time: the subquery's count of the
    upstream view is one row at every one of them (entered at the view's creation instead,
    the global aggregate's empty-input row was retracted at an earlier time, and the scalar
    subquery failed with "more than one row")."""
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    duck = duckdb.connect()
    try:
        for con in (db, duck):
            con.execute("CREATE TABLE t (id INTEGER, a INTEGER)")
            con.execute("INSERT INTO t VALUES (0, 1)")
            con.execute("CREATE VIEW v AS SELECT id, a FROM t")
        for i in range(1, 4):
            for con in (db, duck):
                con.execute(f"INSERT INTO t VALUES ({i}, {i})")
        sqls = {"w": "SELECT id, (SELECT x FROM (SELECT count(*) AS x FROM v) s WHERE x = 0)"
                     " AS z FROM v",
                "n": "SELECT id, (SELECT count(*) FROM v) AS n FROM v"}
        for name, sql in sqls.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
            assert db.views[name].imports == ["v"]
        db.execute("INSERT INTO t VALUES (9, 9)")
        duck.execute("INSERT INTO t VALUES (9, 9)")
        for name, sql in sqls.items():
            got = Counter(tuple(r) for r in db.view_rows(name, None)["rows"])
            assert got == Counter(duck.execute(sql).fetchall()), name
    finally:
        db.close()
