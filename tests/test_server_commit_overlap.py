"""A write's change log and COMMIT run on the committer's thread while its views are maintained
(`server.committer`). When that COMMIT fails for real (a DuckDB transaction conflict: the
table is altered and altered back from another connection just before it), the request gets
the error, nothing of it is applied or shown (the table, the views, the clock), the views are
rebuilt from the store and equal DuckDB running their SELECTs, and the writes after it go on.

In process on a real DuckDB file, through each path a write commits by: a request of its own
(`_transact`: a COPY, a script), and group commit (`_try_group`: requests queued together).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest
from server_harness import views_equal_duckdb

from server import writes
from server.core import Database
from server.errors import ApiError
from server.executors import InProcessExecutor
from server.settings import Settings

VIEWS = {
    "by_k": "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k",
    "small": "SELECT id, v FROM t WHERE k < 3",
    "top": "SELECT k, max(v) AS hi, min(id) AS lo FROM t GROUP BY k",
}


def _conflict_once(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the next COMMIT fail: just before it (in `advance_clock`, on the committer's
    thread, while the views are being maintained), another connection alters table t and
    alters it back, which DuckDB refuses to commit an insert into t after. Returns a list
    that counts the conflicts made."""
    made: list[int] = []
    advance = writes.advance_clock

    def conflicting(state: Any, w: Any) -> None:
        if not made:
            made.append(w.ts)
            other = db.store.cursor()
            other.execute("ALTER TABLE t ADD COLUMN spoiler INTEGER")
            other.execute("ALTER TABLE t DROP COLUMN spoiler")
            other.close()
        advance(state, w)

    monkeypatch.setattr(writes, "advance_clock", conflicting)
    return made


def _check(db: Database, rows: int) -> None:
    assert db.query("SELECT count(*) FROM t")["rows"] == [[rows]]
    views_equal_duckdb(db, VIEWS)


def _database(tmp_path: Path) -> Database:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    db.execute("CREATE TABLE t (id BIGINT, k INTEGER, v DOUBLE)")
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    db.execute("INSERT INTO t SELECT x, x % 7, x * 1.5 FROM range(500) r(x)")
    return db


def test_a_copy_whose_commit_fails_applies_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    db = _database(tmp_path)
    try:
        imp = tmp_path / "data" / "import"
        duckdb.connect().execute(
            f"COPY (SELECT x::BIGINT AS id, (x % 5)::INTEGER AS k, x / 4 AS v "
            f"FROM range(1000, 21000) r(x)) TO '{imp / 'more.parquet'}' (FORMAT parquet)")
        ts = db.last_ts
        made = _conflict_once(db, monkeypatch)
        with pytest.raises(ApiError) as err:
            db.execute("COPY t FROM 'more.parquet'")
        assert made == [ts + 1]
        assert "conflict" in err.value.message.lower()
        assert db.last_ts == db.committed_ts == db.completed_ts == ts
        _check(db, 500)
        # the same load again commits, and the views take it
        db.execute("COPY t FROM 'more.parquet'")
        assert db.last_ts == ts + 1
        _check(db, 20_500)
    finally:
        db.close()


def test_a_group_whose_commit_fails_answers_every_request(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    db = _database(tmp_path)
    try:
        ts = db.last_ts
        made = _conflict_once(db, monkeypatch)
        answers: list[tuple[Any, Any]] = []
        done = threading.Event()

        def answer(result: Any, error: Any) -> None:
            answers.append((result, error))
            if len(answers) == 3:
                done.set()

        # three requests queued before a writer drains them: one group, one COMMIT
        starts = [db.submit(f"INSERT INTO t VALUES ({1000 + i}, 1, {i}.5)", answer)
                  for i in range(3)]
        assert starts == [True, False, False]
        db.lead()
        assert done.wait(30)
        assert made == [ts + 3]  # the clock of the group's last write
        assert all(r is None and "conflict" in str(e).lower() for r, e in answers), answers
        assert db.last_ts == db.committed_ts == db.completed_ts == ts
        _check(db, 500)
        # the next group commits
        db.execute("UPDATE t SET v = v + 1 WHERE k = 1")
        db.execute("INSERT INTO t VALUES (2000, 2, 7.0)")
        _check(db, 501)
    finally:
        db.close()


def test_a_bulk_change_then_drop_table_in_one_request(tmp_path: Path) -> None:
    """The change log entries a COPY or a large DML statement queues for COMMIT go with the
    table when the same request drops it."""
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        imp = tmp_path / "data" / "import"
        duckdb.connect().execute(f"COPY (SELECT x::BIGINT AS id FROM range(5000) r(x)) TO "
                                 f"'{imp / 'ids.parquet'}' (FORMAT parquet)")
        db.execute("CREATE TABLE keep (id BIGINT); CREATE VIEW n AS SELECT count(*) AS c FROM keep")
        db.execute("CREATE TABLE gone (id BIGINT); COPY gone FROM 'ids.parquet'; "
                   "COPY keep FROM 'ids.parquet'; DROP TABLE gone")
        db.execute("CREATE TABLE gone (id BIGINT); INSERT INTO gone SELECT * FROM range(5000); "
                   "DELETE FROM gone; DELETE FROM keep WHERE id < 4000; DROP TABLE gone")
        assert db.query("SELECT count(*) FROM keep")["rows"] == [[1000]]
        assert db.view_rows("n", None)["rows"] == [[1000]]
        assert "gone" not in db.tables
    finally:
        db.close()
    # what the change logs hold is what a restart replays
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        assert db.view_rows("n", None)["rows"] == [[1000]]
    finally:
        db.close()


def test_views_wait_for_the_commit_only_where_they_must(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A view built afresh from the store (a failed view retried) starts only once the COMMIT
    is done; a view the write does not touch is complete through its timestamp as soon as the
    COMMIT is done (not before), while the other views' dataflows still run."""
    from server import publish
    from server.store import Store

    db = _database(tmp_path)
    try:
        db.execute("CREATE TABLE u (s VARCHAR); CREATE VIEW nums AS "
                   "SELECT CAST(s AS INTEGER) AS n FROM u; "
                   "CREATE VIEW other AS SELECT count(*) AS c FROM u")
        db.execute("INSERT INTO u VALUES ('1'), ('x')")  # fails view nums
        assert db.views["nums"].status == "failed"
        events: list[str] = []
        commit, rebuild, run = Store.commit, publish.rebuild, writes.advance_clock

        def slow_commit(store: Store) -> None:
            events.append("before COMMIT other=%d" % db.views["other"].complete_ts)
            threading.Event().wait(0.3)  # the views' dataflows run meanwhile
            commit(store)
            events.append("COMMIT")

        def probing_rebuild(*args: Any, **kwargs: Any) -> Any:
            events.append("rebuild")
            return rebuild(*args, **kwargs)

        monkeypatch.setattr(Store, "commit", slow_commit)
        monkeypatch.setattr(publish, "rebuild", probing_rebuild)
        before = db.last_ts
        db.execute("DELETE FROM u WHERE s = 'x'")  # retries nums
        # (then the checkpoint a view built afresh asks for, writes.py `_maybe_checkpoint`)
        assert events[:3] == [f"before COMMIT other={before}", "COMMIT", "rebuild"], events
        assert db.views["nums"].status == "running"
        assert db.view_rows("nums", None)["rows"] == [[1]]

        # a write to t: `other` (over u) is complete through it once committed, while the
        # views over t still run
        seen: list[int] = []
        from server.views import MaintainedView
        maintain = MaintainedView.run_schedule

        def watching(view: MaintainedView, *args: Any, **kwargs: Any) -> Any:
            if view.name == "by_k":
                for _ in range(200):  # until the COMMIT is done
                    if db.committed_ts == ts:
                        break
                    threading.Event().wait(0.01)
                # `other` reads only u; `small` reads t: not complete until installed
                seen.append((db.views["other"].complete_ts, db.views["small"].complete_ts))
            return maintain(view, *args, **kwargs)

        monkeypatch.setattr(MaintainedView, "run_schedule", watching)
        events.clear()
        ts = db.last_ts + 1
        db.execute("DELETE FROM t WHERE k = 6")
        assert events == [f"before COMMIT other={ts - 1}", "COMMIT"], events
        assert seen == [(ts, ts - 1)]
        _check(db, 500 - len(range(6, 500, 7)))
        # the same for a write that only loads rows (a COPY: no row batch, a load)
        duckdb.connect().execute(
            f"COPY (SELECT 5000 + x AS id, (x % 7)::INTEGER AS k, x::DOUBLE AS v FROM "
            f"range(5000) r(x)) TO '{tmp_path / 'data' / 'import' / 'more.parquet'}'")
        seen.clear()
        ts = db.last_ts + 1
        db.execute("COPY t FROM 'more.parquet'")
        assert seen == [(ts, ts - 1)]
        _check(db, 5500 - len(range(6, 500, 7)))
        del run
    finally:
        db.close()
