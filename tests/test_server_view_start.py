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
