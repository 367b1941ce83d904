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
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

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


def _bag(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(r)) for r in rows)


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
    for name, sql in VIEWS.items():
        got = _bag(db.view_rows(name, None)["rows"])
        assert got == _bag(db.query(sql)["rows"]), name


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
