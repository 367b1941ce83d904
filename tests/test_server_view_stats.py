"""A view's arrangement statistics (`GET /views/{name}`'s `arrangements`) are counted when a
read asks for them, not at every write, and a read never waits for a write to count them."""

from __future__ import annotations

import threading

from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings


def _traces(db: Database, name: str) -> list[dict]:
    return [dict(s) for s in db.views[name].df.arrangement_stats()]


def test_arrangement_stats_are_counted_when_asked_and_never_wait_for_a_write() -> None:
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (k INT, v INT);"
                   "CREATE VIEW c AS SELECT k, v FROM t;"
                   "CREATE VIEW s AS SELECT k, sum(v) AS total FROM t GROUP BY k")
        for i in range(20):
            db.execute(f"INSERT INTO t VALUES ({i % 3}, {i})")
        first = db.view_info("c")["arrangements"]
        # counted now: what the dataflow's arrangements hold after the last write
        assert first["traces"] == _traces(db, "c")
        assert first["records"] == sum(s["records"] for s in _traces(db, "c")) > 0
        assert [v["arrangements"]["traces"] for v in db.view_list()] == [
            _traces(db, "c"), _traces(db, "s")]

        db.execute("INSERT INTO t VALUES (7, 100)")  # c's output gains a row
        held, release = threading.Event(), threading.Event()

        def writer() -> None:  # stands for a write in progress
            with db.write_lock:
                held.set()
                release.wait(30)

        th = threading.Thread(target=writer)
        th.start()
        try:
            assert held.wait(30)
            during = db.view_info("c")["arrangements"]  # answered while the lock is held
            assert during == first, "the last count, not one taken under a running write"
        finally:
            release.set()
            th.join()
        after = db.view_info("c")["arrangements"]
        assert after["traces"] == _traces(db, "c")
        assert after["records"] > first["records"]
    finally:
        db.close()
