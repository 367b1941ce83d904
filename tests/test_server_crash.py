"""Crash safety (acceptance 2): clients write continuously, the server is killed with SIGKILL,
and after a restart every acknowledged write is present, no partial request is, and every view
equals recomputation by DuckDB over the tables.

Each request of writer w (number k) inserts row (w, k), bumps acct[w].bal and deletes row
(w, k-3), all in one request; so after any crash, with K the number of committed requests of w
(read off bal), the rows of w must be exactly k in [K-3, K-1], and K is the number of
acknowledged requests, or one more (the request in flight when the server died).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from server_harness import Server, multiset

VIEWS = {
    "per_writer": "SELECT w, count(*) AS n, sum(k) AS s FROM log GROUP BY w",
    "joined": "SELECT l.w, l.k, a.bal FROM log l JOIN acct a ON l.w = a.id",
}
WRITERS = 2


def test_kill_9_keeps_acknowledged_writes(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    s.sql(
        "CREATE TABLE acct (id INTEGER PRIMARY KEY, bal BIGINT NOT NULL);"
        "CREATE TABLE log (w INTEGER, k BIGINT);"
        + "".join(f"INSERT INTO acct VALUES ({w}, 0);" for w in range(WRITERS))
        + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
    )
    acked = [0] * WRITERS
    stop = threading.Event()

    def writer(w: int) -> None:
        client = httpx.Client(base_url=s.url, timeout=10)
        k = 0
        while not stop.is_set():
            sql = (
                f"INSERT INTO log VALUES ({w}, {k}); UPDATE acct SET bal = bal + 1 "
                f"WHERE id = {w}; DELETE FROM log WHERE w = {w} AND k = {k - 3}"
            )
            try:
                r = client.post("/sql", json={"sql": sql})
            except httpx.HTTPError:
                break
            if r.status_code != 200:
                break
            k += 1
            acked[w] = k
        client.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while min(acked) < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    s.kill()
    stop.set()
    for t in threads:
        t.join(15)
    assert min(acked) >= 5, acked

    s.start()
    try:
        bal = dict(s.query("SELECT id, bal FROM acct")["rows"])
        for w in range(WRITERS):
            committed = bal[w]
            assert acked[w] <= committed <= acked[w] + 1, (w, acked[w], committed)
            rows = s.query(f"SELECT k FROM log WHERE w = {w} ORDER BY k")["rows"]
            assert [r[0] for r in rows] == list(range(max(0, committed - 3), committed))
        for name, body in VIEWS.items():
            got = s.rows(name)
            want = s.query(body)
            assert multiset(got["rows"]) == multiset(want["rows"]), name
            assert got["timestamp"] == want["timestamp"]
        # The server keeps working after recovery, and views keep being maintained.
        s.sql("INSERT INTO log VALUES (0, 1000)")
        for name, body in VIEWS.items():
            assert multiset(s.rows(name)["rows"]) == multiset(s.query(body)["rows"])
    finally:
        s.stop()
