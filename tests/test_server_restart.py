"""Restart (issue 10, item 6), against a real server process: `/health` answers while the views
hydrate (they report `hydrating`; requests that need them wait, or get 503 `hydrating`); a
restart rebuilds current state from the tables and the checkpointed view history, replaying no
change log after a clean shutdown and at most `--checkpoint-interval` timestamps after a crash;
views equal DuckDB and feeds resume with exactly the history they had before.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from server_harness import SSE, Server, multiset

VIEWS = {
    "sums": "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k",
    "big": "SELECT t.k, t.v, u.name FROM t JOIN u ON t.k = u.k WHERE t.v % 3 <> 1",
    "over": "SELECT count(*) AS n, max(total) AS top FROM sums",
}


def _history(s: Server, view: str, upto: int) -> list[dict[str, Any]]:
    """Every update message of `view`'s feed from `since=0` through progress `upto`."""
    sse = SSE(s, view, since=0)
    assert sse.status == 200
    out = []
    try:
        while True:
            m = sse.next()
            if m["type"] == "update":
                out.append({"timestamp": m["timestamp"],
                            "updates": sorted(json.dumps(u) for u in m["updates"])})
            elif m["type"] == "progress" and m["timestamp"] >= upto:
                return out
    finally:
        sse.close()


def _check_views(s: Server) -> None:
    """Every view equals DuckDB over the tables (large ones through an order-insensitive
    fingerprint: /query results are limited in size)."""
    for name, q in VIEWS.items():
        got = s.rows(name)["rows"]
        q = q.replace("FROM sums", f"FROM ({VIEWS['sums']})")
        if len(got) <= 10_000:
            assert multiset(got) == multiset(s.query(q)["rows"]), name
            continue
        assert name == "big"
        fingerprint = "SELECT count(*), sum(hash(k::BIGINT, v::BIGINT, name) % 1000003) FROM "
        want = s.query(f"{fingerprint} ({q}) x")["rows"][0]
        rows = s.query(f"{fingerprint} {name} x")["rows"][0]
        assert rows == want, name
        assert len(got) == want[0], name


def _populate(s: Server, writes: int) -> int:
    s.sql(
        "CREATE TABLE t (k INTEGER, v INTEGER); CREATE TABLE u (k INTEGER, name VARCHAR);"
        "INSERT INTO u SELECT x, 'n' || x FROM range(20) r(x);"
        + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
    )
    last = 0
    for i in range(writes):
        last = s.sql(
            f"INSERT INTO t VALUES ({i % 20}, {i}), ({(i * 7) % 20}, {i * 3});"
            f"DELETE FROM t WHERE v = {i - 5}"
        )[0]["timestamp"]
    return last


def test_clean_restart_replays_no_history(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--checkpoint-interval", "50").start()
    try:
        last = _populate(s, 120)
        before = {n: _history(s, n, last) for n in VIEWS}
        as_of = s.rows("sums", as_of=last - 30)
    finally:
        s.stop()
    s.start()
    try:
        s.rows("sums")  # waits for the views if they are still hydrating
        health = s.http.get("/health").json()
        assert health["ready"] is True and health["hydrating"] == []
        assert health["recovery"]["replayed_timestamps"] == 0, health
        assert health["recovery"]["checkpoint"] == last
        for n in VIEWS:
            assert _history(s, n, last) == before[n], n
        assert s.rows("sums", as_of=last - 30) == as_of
        _check_views(s)
        # Writes go on from where they were, and history keeps growing after the restart.
        nxt = s.sql("UPDATE t SET v = v + 1 WHERE k = 3")[0]["timestamp"]
        assert nxt == last + 1
        _check_views(s)
    finally:
        s.stop()


def test_crash_restart_replays_at_most_the_checkpoint_interval(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--checkpoint-interval", "40").start()
    try:
        last = _populate(s, 130)
        before = {n: _history(s, n, last) for n in VIEWS}
        s.kill()  # SIGKILL: no shutdown checkpoint
        s.start()
        s.rows("sums")
        health = s.http.get("/health").json()
        rec = health["recovery"]
        assert 0 < rec["replayed_timestamps"] <= 40, rec
        assert last - 40 <= rec["checkpoint"] < last, rec
        for n in VIEWS:
            assert _history(s, n, last) == before[n], n
        _check_views(s)
        # A second crash right after the restart: the same history again.
        s.kill()
        s.start()
        for n in VIEWS:
            assert _history(s, n, last) == before[n], n
        _check_views(s)
        # The clock survives the crashes (the last writes changed only rows: it is read back
        # from the change logs), so the next write takes the next timestamp.
        assert s.sql("UPDATE t SET v = v + 1 WHERE k = 3")[0]["timestamp"] == last + 1
    finally:
        s.stop()


def test_grouped_writes_are_replayed_at_most_the_interval_crash_after_crash(
        tmp_path: Path) -> None:
    """Single-row INSERTs (committed in groups): a write is acknowledged only once the
    checkpoint it made due is made, and no group takes the clock past a checkpoint. Each was
    missing: a crash right after an acknowledgement replayed 7, 8, 9, ... timestamps at an
    interval of 7, one more each time, and 32 concurrent writers' groups replayed up to 32."""
    interval = 7
    s = Server(tmp_path / "data", "--checkpoint-interval", str(interval)).start()
    try:
        s.sql("CREATE TABLE t (k INTEGER NOT NULL); CREATE VIEW c AS SELECT count(*) AS n FROM t")
        s.stop()
        s.start()  # checkpointed at shutdown: the 7th INSERT below makes the next one due
        acked = []
        for i in range(interval):
            s.sql(f"INSERT INTO t VALUES ({i})")
            acked.append(i)
        for i in range(3):
            s.kill()  # right after an acknowledgement: no shutdown checkpoint
            s.start()
            rec = s.http.get("/health").json()["recovery"]
            assert rec["replayed_timestamps"] <= interval, rec
            s.sql(f"INSERT INTO t VALUES ({100 + i})")
            acked.append(100 + i)
        # Concurrent writers: groups of many requests, each at its own timestamp.
        def writer(j: int) -> list[int]:
            with httpx.Client(base_url=s.url, timeout=60) as c:
                for n in range(10):
                    r = c.post("/sql", json={"sql": f"INSERT INTO t VALUES ({1000 * j + n})"})
                    assert r.status_code == 200, r.text
            return [1000 * j + n for n in range(10)]

        with ThreadPoolExecutor(16) as pool:
            for keys in pool.map(writer, range(1, 17)):
                acked += keys
        s.kill()
        s.start()
        rec = s.http.get("/health").json()["recovery"]
        assert rec["replayed_timestamps"] <= interval, rec
        assert sorted(r[0] for r in s.query("SELECT k FROM t")["rows"]) == sorted(acked)
        assert s.rows("c")["rows"] == [[len(acked)]]
    finally:
        s.stop()


def test_clock_survives_a_crash_whatever_the_last_write_was(tmp_path: Path) -> None:
    """Row-only writes store the clock in their change-log rows, other writes in the meta
    table: after SIGKILL the next timestamp follows the last acknowledged one in every case."""
    s = Server(tmp_path / "data").start()
    try:
        def ts(sql: str) -> int:
            return int(s.sql(sql)[-1]["timestamp"])

        ts("CREATE TABLE a (x INTEGER); CREATE TABLE b (x INTEGER)")
        steps = [
            "INSERT INTO a VALUES (1), (2)",  # rows only: logged at its timestamp
            "INSERT INTO b VALUES (1)",
            "DROP TABLE b",  # the log holding the largest timestamp goes with it
            "DELETE FROM a WHERE x = 1",
            "DELETE FROM a WHERE x = 99",  # changes nothing: takes no timestamp
            "UPDATE a SET x = x",  # nets to nothing
            "CREATE VIEW v AS SELECT count(*) AS n FROM a",
            "INSERT INTO a VALUES (3)",
        ]
        for sql in steps:
            last = ts(sql)
            s.kill()
            s.start()
            nxt = ts("CREATE TABLE IF NOT EXISTS a (x INTEGER)")  # a no-op: names the clock
            assert nxt == last, (sql, nxt, last)
    finally:
        s.stop()


def test_health_answers_while_views_hydrate(tmp_path: Path) -> None:
    # Enough rows that hydrating the views takes a while; `--hydrate-wait 0`: requests that
    # need a hydrating view are answered 503 at once instead of waiting.
    s = Server(tmp_path / "data", "--hydrate-wait", "0", "--write-timeout", "600").start()
    try:
        s.sql(
            "CREATE TABLE t (k INTEGER, v INTEGER); CREATE TABLE u (k INTEGER, name VARCHAR);"
            "INSERT INTO u SELECT x, 'n' || x FROM range(20) r(x);"
            "INSERT INTO t SELECT x % 20, x FROM range(150000) r(x);"
            + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
        )
    finally:
        s.stop()
    s.start(wait_ready=False)
    try:
        first = s.http.get("/health")
        assert first.status_code == 200
        body = first.json()
        assert body["ready"] is False, body
        assert "sums" in body["hydrating"] or "big" in body["hydrating"], body
        assert body["failed_views"] == [], body  # hydrating is not failed
        info = s.http.get("/views/over").json()
        assert info["status"] == "hydrating", info
        seen_503 = False
        for path in ("/views/over/rows", "/views/over/changes"):
            r = s.http.get(path, params={"snapshot": "false"})
            if r.status_code == 503:
                err = r.json()["error"]
                assert err["code"] == "hydrating", err
                seen_503 = True
        r = s.http.post("/sql", json={"sql": "INSERT INTO u VALUES (99, 'x')"})
        if r.status_code == 503:
            assert r.json()["error"]["code"] == "hydrating"
            seen_503 = True
        assert seen_503
        # /health stays prompt throughout.
        worst = 0.0
        deadline = time.monotonic() + 300
        while not s.http.get("/health").json()["ready"]:
            assert time.monotonic() < deadline, "the views never became ready"
            t0 = time.monotonic()
            assert s.http.get("/health").status_code == 200
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.1)
        assert worst < 2.0, worst  # generous: hydration shares the GIL with the event loop
        assert s.http.get("/views/over").json()["status"] == "running"
        _check_views(s)
    finally:
        s.stop()
