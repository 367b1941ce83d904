"""Group commit over HTTP: concurrent writers are committed together, each request keeping its
own timestamp and its all-or-nothing.

Eight clients write at once: single-row INSERTs, UPDATEs of their own rows, and requests that
fail part-way (an INSERT then a duplicate primary key). Afterwards every acknowledged request
is in the table and no refused one is, every acknowledged change has a timestamp of its own,
each view as of each such timestamp shows that write and not before it, a change feed read
across the whole run adds up to the view, every view equals DuckDB recomputing it, and all of
that survives a SIGKILL and restart.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from server_harness import SSE, Feed, FeedRecorder, Server, multiset

VIEWS = {
    "per_writer": "SELECT w, count(*) AS n, sum(v) AS s FROM t GROUP BY w",
    "rows": "SELECT id, w, v FROM t WHERE v >= 0",
    "joined": "SELECT t.id, t.v, o.name FROM t JOIN owner o ON t.w = o.w",
}
WRITERS = 8
REQUESTS = 40


def _run_writers(writer: Callable[[int], None]) -> list[str]:
    """Run `writer(w)` for every writer at once and wait for them all; what each raised (an
    exception in a thread would otherwise be only a warning, and the test would pass)."""
    raised: list[str] = []

    def run(w: int) -> None:
        try:
            writer(w)
        except Exception as e:  # noqa: BLE001 - reported by the test's own thread
            raised.append(f"writer {w}: {e!r}")

    threads = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return raised


def _check_views(s: Server) -> None:
    for name, sql in VIEWS.items():
        assert multiset(s.rows(name)["rows"]) == multiset(s.query(sql)["rows"]), name


def _check_durable(s: Server, want: set[tuple[int, int, int]]) -> None:
    """All of it is durable: after a SIGKILL and restart the table holds exactly `want`, and
    the views equal DuckDB."""
    s.kill()
    s.start()
    assert {tuple(r) for r in s.query("SELECT id, w, v FROM t")["rows"]} == want
    _check_views(s)


def test_concurrent_writers_each_keep_their_timestamp_and_atomicity(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, w INTEGER, v INTEGER);"
            "CREATE TABLE owner (w INTEGER, name VARCHAR);"
            + "".join(f"INSERT INTO owner VALUES ({w}, 'writer {w}');" for w in range(WRITERS))
            + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
        )
        start_ts = s.rows("per_writer")["timestamp"]
        feed_source = SSE(s, "per_writer", since=start_ts)
        expected: list[dict[int, int]] = [{} for _ in range(WRITERS)]
        acked: list[list[tuple[str, int, int]]] = [[] for _ in range(WRITERS)]  # kind, id, ts
        refused: list[list[int]] = [[] for _ in range(WRITERS)]
        problems: list[str] = []

        def writer(w: int) -> None:
            with httpx.Client(base_url=s.url, timeout=60) as http:
                for k in range(REQUESTS):
                    key = w * 1000 + k
                    if k % 7 == 6:
                        # Fails on its second statement: its first must not be applied.
                        sql = (
                            f"INSERT INTO t VALUES ({key}, {w}, {k});"
                            f"INSERT INTO t VALUES ({w * 1000}, {w}, 0)"
                        )
                    elif k % 5 == 4 and expected[w]:
                        key = max(expected[w])
                        sql = f"UPDATE t SET v = v + 1 WHERE id = {key}"
                    else:
                        sql = f"INSERT INTO t VALUES ({key}, {w}, {k})"
                    r = http.post("/sql", json={"sql": sql})
                    if k % 7 == 6:
                        if r.status_code // 100 != 4:
                            problems.append(f"{sql}: {r.status_code} {r.text}")
                        refused[w].append(key)
                        continue
                    if r.status_code != 200:
                        problems.append(f"{sql}: {r.status_code} {r.text}")
                        continue
                    ts = r.json()["results"][0]["timestamp"]
                    if sql.startswith("UPDATE"):
                        expected[w][key] += 1
                        acked[w].append(("update", key, ts))
                    else:
                        expected[w][key] = k
                        acked[w].append(("insert", key, ts))

        problems += _run_writers(writer)
        assert not problems, problems[:3]

        # Every acknowledged request is in the table, exactly; no refused one is.
        want = {(key, w, v) for w in range(WRITERS) for key, v in expected[w].items()}
        got = {tuple(r) for r in s.query("SELECT id, w, v FROM t")["rows"]}
        assert got == want
        assert not {key for keys in refused for key in keys} & {r[0] for r in got}
        _check_views(s)

        # Each acknowledged change has a timestamp of its own, in each writer's order.
        stamps = [ts for a in acked for _, _, ts in a]
        assert len(stamps) == len(set(stamps)) == sum(len(e) for e in acked) > 0
        for a in acked:
            assert [ts for _, _, ts in a] == sorted(ts for _, _, ts in a)
        # As of its timestamp a view shows an insert; as of the timestamp before, it does not.
        for a in acked:
            for kind, key, ts in [x for x in a if x[0] == "insert"][:3]:
                at = {r[0] for r in s.rows("rows", as_of=ts)["rows"]}
                before = {r[0] for r in s.rows("rows", as_of=ts - 1)["rows"]}
                assert key in at and key not in before, (kind, key, ts)

        # The change feed delivers every timestamp's update once, in order, adding up to the view.
        final = s.rows("per_writer")["timestamp"]
        feed = Feed()
        feed.read_until(feed_source, final)
        feed_source.close()
        assert feed.seen == sorted(set(feed.seen))
        view = Counter(json.dumps(r) for r in s.rows("per_writer")["rows"])
        assert feed.contents == view

        _check_durable(s, want)
    finally:
        s.stop()


class _Recording:
    """The store's DuckDB connection, recording the text of every statement it runs."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.texts: list[str] = []

    def execute(self, query: str, *args: Any) -> Any:
        self.texts.append(query)
        return self._conn.execute(query, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _queue(db: Any, scripts: list[str]) -> dict[int, Any]:
    """Run `scripts` as concurrent requests queued in this order behind the write lock, so
    one writer commits them as one group; each one's response or exception."""
    outcomes: dict[int, Any] = {}

    def run(i: int) -> None:
        try:
            outcomes[i] = db.execute(scripts[i])
        except Exception as e:  # noqa: BLE001 - the outcome under test
            outcomes[i] = e

    threads = []
    with db.write_lock:
        for i in range(len(scripts)):
            threads.append(threading.Thread(target=run, args=(i,)))
            threads[-1].start()
            while len(db.write_queue) < i + 1:
                time.sleep(0.001)
    for t in threads:
        t.join()
    return outcomes


def test_a_group_commits_together_and_a_failing_request_fails_alone() -> None:
    """In process, so the group is certain: nine requests queue while the write lock is held,
    then one writer commits them all. The two that fail part-way leave no trace; each other
    has its own timestamp, in queue order, and the views' history and contents equal DuckDB
    recomputing them as of every one of those timestamps."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER);"
            "INSERT INTO t VALUES (0, 0);"
            "CREATE VIEW total AS SELECT count(*) AS n, sum(v) AS s FROM t;"
            "CREATE VIEW ids AS SELECT id FROM t"
        )
        start = db.last_ts
        scripts = [
            "INSERT INTO t VALUES (1, 10)",
            "INSERT INTO t VALUES (2, 20); UPDATE t SET v = v + 1 WHERE id = 1",
            "INSERT INTO t VALUES (3, 30); INSERT INTO t VALUES (0, 99)",  # duplicate key
            "DELETE FROM t WHERE id = 42",  # changes nothing: takes no timestamp
            "UPDATE t SET v = v * 2 WHERE id = 2",
            "INSERT INTO t VALUES (4, 40), (5, 50)",
            "DELETE FROM t WHERE id = 0",
            "INSERT INTO t VALUES (6, 60)",
            "INSERT INTO t VALUES (7, 70); UPDATE t SET id = 1 WHERE id = 7",  # duplicate key
        ]
        outcomes = _queue(db, scripts)

        for failed in (2, 8):
            assert isinstance(outcomes[failed], Exception), outcomes[failed]
            assert "Duplicate key" in str(outcomes[failed])
        stamps = {i: o["results"][0]["timestamp"] for i, o in outcomes.items() if i not in (2, 8)}
        # One timestamp per request that changed something, in queue order; the no-op request
        # names the state it saw (the timestamp of the request before it).
        assert [stamps[i] for i in (0, 1, 4, 5, 6, 7)] == list(range(start + 1, start + 7))
        assert stamps[3] == stamps[1]
        assert db.last_ts == db.completed_ts == start + 6
        rows = sorted(tuple(r) for r in db.query("SELECT id, v FROM t")["rows"])
        assert rows == [(1, 11), (2, 40), (4, 40), (5, 50), (6, 60)]
        # Each view as of each timestamp equals DuckDB over the table replayed serially.
        replay = [
            "INSERT INTO t VALUES (1, 10)",
            "INSERT INTO t VALUES (2, 20); UPDATE t SET v = v + 1 WHERE id = 1",
            "UPDATE t SET v = v * 2 WHERE id = 2",
            "INSERT INTO t VALUES (4, 40), (5, 50)",
            "DELETE FROM t WHERE id = 0",
            "INSERT INTO t VALUES (6, 60)",
        ]
        con = duckdb.connect()
        con.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER)")
        con.execute("INSERT INTO t VALUES (0, 0)")
        for k, sql in enumerate(replay, start=start + 1):
            con.execute(sql)
            for view, q in (
                ("total", "SELECT count(*), sum(v) FROM t"),
                ("ids", "SELECT id FROM t"),
            ):
                want = sorted(tuple(r) for r in con.execute(q).fetchall())
                got = sorted(tuple(r) for r in db.view_rows(view, k)["rows"])
                assert got == want, (view, k)
            # The history holds one batch per timestamp for a view the write changed.
            assert [t for t, _ in db.views["total"].history if t == k] == [k]
    finally:
        db.close()


def test_a_view_that_fails_inside_a_group_runs_again_after_it() -> None:
    """A view that fails at one request's timestamp of a group, when a later request of the
    group changes what it reads, is built afresh at the group's last timestamp, as that
    request alone would have retried it (it stayed failed until some later write); a view
    that fails at the last timestamp stays failed."""
    from server.core import Database
    from server.errors import Conflict
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (k INTEGER); CREATE TABLE u (k INTEGER, w INTEGER);"
                   "CREATE VIEW f AS SELECT t.k, (SELECT u.w FROM u WHERE u.k = t.k) AS w "
                   "FROM t; INSERT INTO t VALUES (1); INSERT INTO u VALUES (1, 10)")
        # the subquery gives two rows at the first timestamp only
        outcomes = _queue(db, ["INSERT INTO u VALUES (1, 11)", "DELETE FROM u WHERE w = 11"])
        assert [o["failed_views"][0]["name"] for o in outcomes.values()] == ["f", "f"]
        assert db.view_rows("f", None)["rows"] == [[1, 10]]
        # and then fails at the last timestamp of a group: it stays failed
        _queue(db, ["INSERT INTO t VALUES (2)", "INSERT INTO u VALUES (1, 12)"])
        with pytest.raises(Conflict) as info:
            db.view_rows("f", None)
        assert info.value.code == "view_failed"
    finally:
        db.close()


def test_a_request_that_times_out_in_a_group_fails_alone() -> None:
    """A request of a group that passes the write time limit is rolled back alone (408
    `timeout`); the requests queued before and after it commit, each at its own timestamp."""
    from server.core import Database
    from server.errors import Timeout
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True, write_timeout=0.5), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT, v BIGINT); CREATE VIEW n AS SELECT count(*) FROM t")
        start = db.last_ts
        scripts = [
            "INSERT INTO t VALUES (1, 1)",
            "INSERT INTO t VALUES (2, 2); "
            "INSERT INTO t SELECT 3, count(*) FROM range(1000000000) a, range(1000) b",
            "INSERT INTO t VALUES (4, 4)",
        ]
        outcomes = _queue(db, scripts)
        assert isinstance(outcomes[1], Timeout) and outcomes[1].code == "timeout"
        assert [outcomes[i]["results"][0]["timestamp"] for i in (0, 2)] == [start + 1, start + 2]
        assert sorted(tuple(r) for r in db.query("SELECT * FROM t")["rows"]) == [(1, 1), (4, 4)]
        assert db.view_rows("n", None)["rows"] == [[2]]
    finally:
        db.close()


def test_adjacent_inserts_run_as_one_statement_and_keep_their_own_timestamps() -> None:
    """INSERT ... VALUES requests queued together into one table run as one DuckDB statement
    (fewer statements per group: writes/s grow with concurrency), yet each keeps its own
    timestamp, rows and all-or-nothing: the views as of every timestamp equal DuckDB replaying
    the acknowledged requests one by one, and a request that fails (a duplicate key, also
    against a row of the same combined statement; a bad cast) fails alone."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    views = {
        "total": "SELECT count(*) AS n, sum(v) AS s FROM t",
        "everything": "SELECT id, s, v FROM t",
        "joined": "SELECT t.id, u.x FROM t JOIN u ON t.id = u.x",
    }
    db = Database(Settings(memory=True), InProcessExecutor())
    con = duckdb.connect()
    try:
        schema = "CREATE TABLE t (id BIGINT PRIMARY KEY, s VARCHAR, v DOUBLE); CREATE TABLE u (x BIGINT)"
        db.execute(schema + ";" + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in views.items()))
        con.execute(schema)
        recording = _Recording(db.store.conn)
        db.store.conn = recording  # type: ignore[assignment]
        groups = [
            [  # every request succeeds
                "INSERT INTO t VALUES (1, 'a', 1.5)",
                "INSERT INTO t VALUES (2, 'b', 2.5), (3, 'c', NULL)",
                "INSERT INTO t (id, s) VALUES (4, 'd')",  # another target text: a run of its own
                "INSERT INTO t (id, s) VALUES (5, 'e')",
                "INSERT INTO t VALUES (6, 'it''s', '6.25')",  # cast as the column's type
                "INSERT INTO u VALUES (1), (6)",
                "INSERT INTO t VALUES (7, 'g', 7 * 2 + 0.5)",
                "INSERT INTO t VALUES (20, 'p', 20)",
                "INSERT INTO t VALUES (21, 'q', (SELECT max(v) FROM t))",  # reads t: alone
                "INSERT INTO u VALUES (7)",
            ],
            [  # failures: the group runs again uncombined and each fails alone
                "INSERT INTO t VALUES (8, 'h', 8)",
                "INSERT INTO t VALUES (1, 'dup', 0)",  # duplicate of a committed row
                "INSERT INTO t VALUES (9, 'i', 9)",
                "INSERT INTO t VALUES (10, 'j', 10)",
                "INSERT INTO t VALUES (10, 'dup', 0)",  # duplicate of the request before
                "INSERT INTO t VALUES (11, 'k', (SELECT max(v) FROM t))",  # reads t: alone
                "INSERT INTO t VALUES (12, 'l', 'not a number')",  # bad cast
                "INSERT INTO t VALUES (13, 'm', 13), (14, 'n', 14)",
            ],
        ]
        failing = {(1, 1): "duplicate key", (1, 4): "duplicate key", (1, 6): "conversion"}
        for g, scripts in enumerate(groups):
            start = db.last_ts
            recording.texts.clear()
            outcomes = _queue(db, scripts)
            acked = [i for i in range(len(scripts)) if (g, i) not in failing]
            for i in range(len(scripts)):
                if (g, i) in failing:
                    assert isinstance(outcomes[i], Exception), (scripts[i], outcomes[i])
                    assert failing[g, i] in str(outcomes[i]).lower(), outcomes[i]
            stamps = [outcomes[i]["results"][0]["timestamp"] for i in acked]
            assert stamps == list(range(start + 1, start + 1 + len(acked)))
            assert [outcomes[i]["results"][0]["rowcount"] for i in acked] == [
                scripts[i].count("), (") + 1 for i in acked
            ]
            if g == 0:
                # Each run of adjacent requests into one target became one statement: t's
                # first two, the two with a column list, (6) alone (u's request follows it),
                # (7) and (20); the one that reads t ran alone, after them.
                into_t = [x for x in recording.texts if x.startswith(
                    ("INSERT INTO t", "WITH __diffsql_rows AS (INSERT INTO t"))]
                assert len(into_t) == 5, into_t
                assert "(1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', NULL)" in into_t[0]
                assert "(4, 'd'), (5, 'e')" in into_t[1]
                # (6) ran alone: it wrote its change log in the same statement
                assert into_t[2].startswith("WITH") and "(6, 'it''s', '6.25')" in into_t[2]
                assert "(20, 'p', 20)" in into_t[3] and "SELECT" in into_t[4]
            logged: dict[tuple[str, int], Counter[Any]] = {}
            for name in ("t", "u"):
                for ts, row, diff in db.store.read_log(db.tables[name], start):
                    logged.setdefault((name, ts), Counter())[row] += diff
            for k, i in enumerate(acked, start=start + 1):
                before = {n: Counter(con.execute(f"SELECT * FROM {n}").fetchall()) for n in "tu"}
                con.execute(scripts[i])
                # The change log (what recovery replays) holds exactly this request's rows, at
                # its own timestamp, whether it was combined with others or ran alone.
                for n in "tu":
                    added = Counter(con.execute(f"SELECT * FROM {n}").fetchall()) - before[n]
                    assert logged.pop((n, k), Counter()) == added, (scripts[i], n, k)
                for view, q in views.items():
                    want = sorted(map(tuple, con.execute(q).fetchall()), key=repr)
                    got = sorted(map(tuple, db.view_rows(view, k)["rows"]), key=repr)
                    assert got == want, (view, k)
            assert not logged, logged  # nothing logged at a timestamp no request has
        # The history holds one batch per timestamp of a write to t.
        ts_of_t = [t for t, _ in db.views["everything"].history]
        assert ts_of_t == sorted(set(ts_of_t))
    finally:
        con.close()
        db.close()


def test_a_lone_insert_logs_its_rows_in_its_own_statement() -> None:
    """A request of one plain INSERT writes its change log in the INSERT's own statement: no
    second statement, and the log holds exactly its rows (duplicates, NULLs and casts as
    stored) at its timestamp, as recovery reads them. Other requests log as before."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT, s VARCHAR, v DECIMAL(10, 2));"
                   "CREATE VIEW everything AS SELECT * FROM t")
        recording = _Recording(db.store.conn)
        db.store.conn = recording  # type: ignore[assignment]
        requests = [
            "INSERT INTO t VALUES (1, 'a', 1.5), (1, 'a', 1.5), (2, NULL, '2.25')",
            "INSERT INTO t VALUES (3, 'x', 3)",
            "INSERT INTO t VALUES (4, 'y', 4); DELETE FROM t WHERE id = 3",  # two statements
            "DELETE FROM t WHERE id = 1",
        ]
        stamps = []
        for text in requests:
            recording.texts.clear()
            stamps.append(db.execute(text)["results"][0]["timestamp"])
            logs = [x for x in recording.texts if "diffsql.\"log_" in x or "diffsql.log_" in x]
            assert len(logs) == 1, recording.texts
            if text.count(";") == 0 and text.startswith("INSERT"):
                # one statement in all: it commits itself
                assert recording.texts == logs, recording.texts
                assert logs[0].startswith("WITH __diffsql_rows AS (INSERT INTO t"), logs
            else:
                assert recording.texts[0].startswith("BEGIN") and recording.texts[-1] == "COMMIT"
        rec = db.tables["t"]
        got: dict[int, Counter[Any]] = {}
        for ts, row, diff in db.store.read_log(rec, 0):
            got.setdefault(ts, Counter())[row] += diff
        d = __import__("decimal").Decimal
        want = {
            stamps[0]: Counter({(1, "a", d("1.50")): 2, (2, None, d("2.25")): 1}),
            stamps[1]: Counter({(3, "x", d("3.00")): 1}),
            stamps[2]: Counter({(4, "y", d("4.00")): 1, (3, "x", d("3.00")): -1}),
            stamps[3]: Counter({(1, "a", d("1.50")): -2}),
        }
        assert got == want
    finally:
        db.close()


def test_a_lone_insert_runs_in_a_transaction_when_the_logs_are_due_a_trim() -> None:
    """A lone plain INSERT commits by itself only while its clock needs no statement: when
    the change logs are due a trim it runs in a transaction with the trim, which keeps the
    retention horizon; every write is in the log from the horizon on, at its timestamp."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True, history_retention=10), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT)")
        recording = _Recording(db.store.conn)
        db.store.conn = recording  # type: ignore[assignment]
        transactions = []
        stamps = []
        for i in range(25):
            recording.texts.clear()
            stamps.append(db.execute(f"INSERT INTO t VALUES ({i})")["results"][0]["timestamp"])
            transactions.append("COMMIT" in recording.texts)
            if transactions[-1]:
                assert any(x.startswith("DELETE FROM diffsql") for x in recording.texts)
        # The trim is due from ts = retention + 1 on (one step of retention // 10 = 1).
        assert transactions == [ts > 10 for ts in stamps], list(zip(stamps, transactions, strict=True))
        log = db.store.read_log(db.tables["t"], 0)
        assert log == [
            (ts, (i,), 1) for i, ts in enumerate(stamps) if ts > stamps[-1] - 10]
        assert db.history_since == stamps[-1] - 10
    finally:
        db.close()


def test_a_lone_insert_that_committed_stands_when_its_deadline_fires_after_it() -> None:
    """A lone INSERT commits by its own statement: if the write deadline fires after that
    statement ended but before the writer disarmed it, the write stands (answered, logged
    once, at its own timestamp) and is not run a second time; the next write is unharmed."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    class _SlowAfterInsert(_Recording):
        def execute(self, query: str, *args: Any) -> Any:
            out = super().execute(query, *args)
            if query.startswith("WITH __diffsql_rows"):
                time.sleep(0.6)  # the statement is over; the 0.2 s deadline fires now
            return out

    db = Database(Settings(memory=True, write_timeout=0.2), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t")
        db.store.conn = _SlowAfterInsert(db.store.conn)  # type: ignore[assignment]
        first = db.execute("INSERT INTO t VALUES (1)")["results"][0]
        db.store.conn = db.store.conn._conn  # type: ignore[attr-defined]
        second = db.execute("INSERT INTO t VALUES (2)")["results"][0]
        assert (first["rowcount"], second["rowcount"]) == (1, 1)
        assert second["timestamp"] == first["timestamp"] + 1
        assert db.store.conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]
        log = db.store.read_log(db.tables["t"], 0)
        assert log == [(first["timestamp"], (1,), 1), (second["timestamp"], (2,), 1)]
        assert sorted(map(tuple, db.view_rows("v", second["timestamp"])["rows"])) == [(1,), (2,)]
    finally:
        db.close()


def test_a_lone_insert_stopped_by_its_time_limit_is_not_run_again() -> None:
    """A lone INSERT interrupted by the write deadline fails with `timeout` at once, nothing
    applied: it is not run a second time in a transaction (which would wait for the limit
    again). The statement is made slow by the connection (it sleeps past the deadline,
    which interrupts it, and fails as DuckDB fails an interrupted statement)."""
    import duckdb

    from server.core import Database
    from server.errors import ApiError
    from server.executors import InProcessExecutor
    from server.settings import Settings

    class _Interrupted(_Recording):
        def execute(self, query: str, *args: Any) -> Any:
            if query.startswith(("WITH __diffsql_rows", "INSERT INTO t")):
                self.texts.append(query)
                time.sleep(0.6)  # the 0.2 s deadline fires meanwhile
                raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
            return super().execute(query, *args)

    db = Database(Settings(memory=True, write_timeout=0.2), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT)")
        slow = _Interrupted(db.store.conn)
        db.store.conn = slow  # type: ignore[assignment]
        try:
            db.execute("INSERT INTO t VALUES (1)")
        except ApiError as e:
            assert e.code == "timeout", e
        else:
            raise AssertionError("the write was not stopped")
        inserts = [x for x in slow.texts if "INSERT INTO t" in x]
        assert len(inserts) == 1 and inserts[0].startswith("WITH"), slow.texts
        db.store.conn = slow._conn
        assert db.store.conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
        assert db.execute("INSERT INTO t VALUES (2)")["results"][0]["rowcount"] == 1
    finally:
        db.close()


def test_a_leader_waits_for_the_last_groups_writers_only_after_a_group_of_several() -> None:
    """Commit delay (`writes._siblings`): after a group of several requests, the next leader
    waits (at most `GROUP_WAIT`) for as many to be queued, so the writers answered by the last
    group can join the next; after a group of one it never waits, so a lone writer's latency
    is unchanged; and a wait nobody ends lasts no longer than `GROUP_WAIT`."""
    import threading as th

    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings
    from server.writes import GROUP_WAIT

    class Counted(th.Condition):
        waits: list[float] = []

        entered: th.Event | None = None

        def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
            if self.entered is not None:
                self.entered.set()
            t0 = time.perf_counter()
            try:
                return super().wait_for(predicate, timeout)
            finally:
                self.waits.append(time.perf_counter() - t0)

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT); CREATE VIEW n AS SELECT count(*) AS n FROM t")
        db.queued = Counted(db.queue_lock)
        for i in range(5):  # a lone writer: groups of one, never a wait
            db.execute(f"INSERT INTO t VALUES ({i})")
        assert Counted.waits == [] and db.last_group == 1
        # Four queued together commit as one group, each at its own timestamp.
        outcomes = _queue(db, [f"INSERT INTO t VALUES ({10 + i})" for i in range(4)])
        assert db.last_group == 4
        stamps = sorted(o["results"][0]["timestamp"] for o in outcomes.values())
        assert stamps == list(range(stamps[0], stamps[0] + 4))
        assert Counted.waits == []  # four were queued: nothing to wait for
        # The lone writer again: one wait, which times out (nobody else writes), then none.
        db.execute("INSERT INTO t VALUES (20)")
        assert len(Counted.waits) == 1 and GROUP_WAIT * 0.9 <= Counted.waits[0] < GROUP_WAIT + 0.5
        assert db.last_group == 1
        db.execute("INSERT INTO t VALUES (21)")
        assert len(Counted.waits) == 1
        # A wait that others end: after a group of three, the leader waits (here with a long
        # limit) until the other two are queued, and the three commit as one group.
        import server.writes as writes

        db.last_group = 3
        waiting = th.Event()
        Counted.entered = waiting  # type: ignore[attr-defined]
        done: dict[int, Any] = {}

        def run(i: int) -> None:
            done[i] = db.execute(f"INSERT INTO t VALUES ({30 + i})")

        limit, writes.GROUP_WAIT = writes.GROUP_WAIT, 30.0
        try:
            threads = [th.Thread(target=run, args=(0,))]
            threads[0].start()
            assert waiting.wait(10), "the leader waits for the last group's writers"
            for i in (1, 2):
                threads.append(th.Thread(target=run, args=(i,)))
                threads[-1].start()
            for t in threads:
                t.join()
        finally:
            writes.GROUP_WAIT = limit
        assert db.last_group == 3 and Counted.waits[-1] < 10
        stamps = sorted(d["results"][0]["timestamp"] for d in done.values())
        assert stamps == list(range(stamps[0], stamps[0] + 3))
        assert db.view_rows("n", db.last_ts)["rows"] == [[5 + 4 + 2 + 3]]
    finally:
        db.close()


def test_submitted_inserts_are_committed_by_one_writer_and_answered_through_callbacks() -> None:
    """`Database.submit` (the event loop's way in): plain INSERTs queue without a thread, the
    first submitter is told to start `lead`, later ones are not while it drains the queue. One
    group commits them, the duplicate key fails alone with a 409, every other request gets its
    own timestamp in queue order, and the view equals DuckDB. Once the queue is empty the
    writer stops, and the next submitter must start one again; anything else is refused."""
    from server.core import Database
    from server.errors import ApiError
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER);"
                   "CREATE VIEW total AS SELECT count(*) AS n, sum(v) AS s FROM t")
        start = db.last_ts
        answers: dict[int, tuple[Any, Any]] = {}
        threads_before = threading.active_count()

        def answer(i: int) -> Any:
            return lambda result, error: answers.__setitem__(i, (result, error))

        keys = [1, 2, 1, 3, 4]  # the third is a duplicate of the first
        starts = [db.submit(f"INSERT INTO t VALUES ({k}, {10 * k})", answer(i))
                  for i, k in enumerate(keys)]
        assert starts == [True, False, False, False, False]
        assert len(db.write_queue) == len(keys) and not answers
        assert threading.active_count() == threads_before  # queued, no thread waits
        db.lead()
        assert not db.write_queue and not db.leading
        assert sorted(answers) == list(range(len(keys)))
        result, error = answers[2]
        assert result is None and isinstance(error, ApiError) and error.status == 409
        assert error.code == "constraint_violation" and 'duplicate key "1"' in str(error)
        stamps = [answers[i][0]["results"][0]["timestamp"] for i in (0, 1, 3, 4)]
        assert stamps == list(range(start + 1, start + 5))
        assert all(answers[i][1] is None for i in (0, 1, 3, 4))
        assert db.last_ts == db.completed_ts == start + 4
        con = duckdb.connect()
        con.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER)")
        for k in (1, 2, 3, 4):
            con.execute(f"INSERT INTO t VALUES ({k}, {10 * k})")
            want = [tuple(r) for r in con.execute("SELECT count(*), sum(v) FROM t").fetchall()]
            assert [tuple(r) for r in db.view_rows("total", start + k)["rows"]] == want

        # The writer stopped: the next request starts one again.
        assert db.submit("INSERT INTO t VALUES (5, 50)", answer(5)) is True
        db.lead()
        assert answers[5][0]["results"][0]["timestamp"] == start + 5
        # Anything but a short plain INSERT runs on a thread of its own (`execute`).
        for other in ("UPDATE t SET v = 0", "SELECT 1", "INSERT INTO t SELECT 6, 60",
                      "INSERT INTO t VALUES " + ", ".join(f"({k}, 0)" for k in range(7, 900))):
            assert db.submit(other, answer(99)) is None
        assert not db.write_queue and 99 not in answers
    finally:
        db.close()


def test_concurrent_plain_inserts_over_http_fail_alone_and_keep_their_timestamps(
    tmp_path: Path,
) -> None:
    """Over HTTP a single-row INSERT is queued from the event loop (no thread of its own).
    Eight clients write at once; every fifth request repeats a key already written and is
    answered 409 `constraint_violation` with nothing applied, while the others each get a
    timestamp of their own, in each client's order. A request of two statements goes the
    threaded way and is grouped with them. The table and the views equal DuckDB, and survive
    a SIGKILL."""
    s = Server(tmp_path / "data").start()
    try:
        s.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, w INTEGER, v INTEGER);"
              "CREATE TABLE owner (w INTEGER, name VARCHAR);"
              + "".join(f"INSERT INTO owner VALUES ({w}, 'writer {w}');" for w in range(WRITERS))
              + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items()))
        written: list[list[tuple[int, int, int, int]]] = [[] for _ in range(WRITERS)]
        problems: list[str] = []

        def writer(w: int) -> None:
            with httpx.Client(base_url=s.url, timeout=60) as http:
                for k in range(30):
                    key = w * 1000 + k
                    if k % 5 == 4:
                        sql = f"INSERT INTO t VALUES ({w * 1000}, {w}, -1)"  # a duplicate key
                    elif k == 7:
                        sql = (f"INSERT INTO t VALUES ({key}, {w}, {k});"
                               f"UPDATE t SET v = v + 1 WHERE id = {key}")
                    else:
                        sql = f"INSERT INTO t VALUES ({key}, {w}, {k})"
                    r = http.post("/sql", json={"sql": sql})
                    if k % 5 == 4:
                        if (r.status_code != 409
                                or r.json()["error"]["code"] != "constraint_violation"):
                            problems.append(f"{sql}: {r.status_code} {r.text}")
                        continue
                    if r.status_code != 200:
                        problems.append(f"{sql}: {r.status_code} {r.text}")
                        continue
                    ts = r.json()["results"][-1]["timestamp"]
                    written[w].append((key, w, k + (k == 7), ts))

        problems += _run_writers(writer)
        assert not problems, problems[:3]
        want = {(key, w, v) for rows in written for key, w, v, _ in rows}
        assert {tuple(r) for r in s.query("SELECT id, w, v FROM t")["rows"]} == want
        stamps = [ts for rows in written for *_, ts in rows]
        assert len(stamps) == len(set(stamps)) == len(want)
        for rows in written:
            assert [ts for *_, ts in rows] == sorted(ts for *_, ts in rows)
        _check_views(s)
        _check_durable(s, want)
    finally:
        s.stop()


def test_a_feed_that_starts_while_a_group_is_published_never_goes_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A view that a group of writes does not touch is complete through the group's last
    timestamp as soon as the group commits, before the group's timestamps are published one by
    one: a feed that starts in between began at that last timestamp, and the group's earlier
    progress went back from it (progress 51, progress 50, 51, ...). Every feed's timestamps
    only grow, and replayed they equal the view as of each timestamp."""
    import server.publish as publish
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1); CREATE TABLE b (k INTEGER);"
                   "CREATE VIEW va AS SELECT x FROM a;"
                   "CREATE VIEW vb AS SELECT k, count(*) AS n FROM b GROUP BY k")
        real = publish._install
        recorders: list[FeedRecorder] = []

        def install(state: Any, ws: Any, outcome: Any) -> None:
            if not recorders:  # a client subscribes once the first group has committed
                recorders.append(FeedRecorder(db, ["va", "vb"]))
            real(state, ws, outcome)

        monkeypatch.setattr(publish, "_install", install)
        first = db.last_ts
        _queue(db, [f"INSERT INTO b VALUES ({i % 2})" for i in range(3)])
        _queue(db, ["INSERT INTO a VALUES (2)", "INSERT INTO b VALUES (9)"])
        last = db.last_ts
        assert last == first + 5
        (rec,) = recorders
        queues = asyncio.run_coroutine_threadsafe(rec._frames(last), rec.loop).result(30)
        for name, (_, initial) in rec.subs.items():
            stamps = [f.timestamp for f in [*initial, *queues[name]] if f.type == "progress"]
            assert stamps == sorted(set(stamps)) and stamps[-1] == last, (name, stamps)
        states = rec.states(range(first + 3, last + 1))
        for name, seen in states.items():
            for ts, rows in seen.items():
                assert rows == multiset(db.view_rows(name, ts)["rows"]), (name, ts)
    finally:
        db.close()
