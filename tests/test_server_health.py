"""`/health` answers at once whatever else the server is doing.

Invariant checked against a real server process: with every worker thread busy (more slow
`/query` requests in flight than the thread pool has threads), `/health` still answers within a
fraction of a second, because it runs on the event loop and takes no lock, and because at most
`--query-concurrency` queries run DuckDB at once (each running query contends for the GIL with
the event loop; with 40 running, a probe took up to 0.5 s, with the default bound under 15 ms).
The bound's other side: a query that finds no slot within the time limit is answered 503 `busy`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from server_harness import Server

# Starlette's thread pool has 40 threads: 48 slow queries leave none free.
SLOW_QUERIES = 48
SLOW_SQL = "SELECT count(*) FROM range(4000000000) a(x) WHERE x % 7 = 3"


def test_health_answers_while_every_worker_thread_is_busy(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--query-timeout", "30").start()
    stop = threading.Event()
    started = threading.Barrier(SLOW_QUERIES + 1, timeout=60)

    def slow() -> None:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            started.wait()
            while not stop.is_set():
                try:
                    client.post("/query", json={"sql": SLOW_SQL})
                except httpx.HTTPError:
                    if not stop.is_set():
                        raise

    threads = [threading.Thread(target=slow, daemon=True) for _ in range(SLOW_QUERIES)]
    try:
        for th in threads:
            th.start()
        started.wait()
        time.sleep(1.5)  # the queries have taken every thread
        waits = []
        for _ in range(10):
            t0 = time.monotonic()
            r = server.http.get("/health", timeout=30)
            waits.append(time.monotonic() - t0)
            assert r.status_code == 200 and r.json()["status"] == "ok"
            time.sleep(0.1)
        assert max(waits) < 0.25, waits
    finally:
        stop.set()
        server.stop()
        for th in threads:
            th.join(timeout=10)


def test_queries_beyond_the_concurrency_bound_wait_then_are_busy(tmp_path: Path) -> None:
    # Two slots, six queries that each run until the 2 s limit: at most two run in the first
    # 2 s and two more in the next (408 `timeout` for those); the others waited 2 s for a slot
    # and got 503 `busy`. Without the bound all six would run, and all six would time out.
    server = Server(tmp_path / "data", "--query-timeout", "2", "--query-concurrency", "2").start()
    results: list[httpx.Response] = []
    started = threading.Barrier(6, timeout=60)

    def slow() -> None:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            started.wait()
            results.append(client.post("/query", json={"sql": SLOW_SQL}))

    try:
        threads = [threading.Thread(target=slow) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        codes = sorted(r.status_code for r in results)
        assert len(codes) == 6 and set(codes) <= {408, 503}, codes
        assert 2 <= codes.count(408) <= 4, codes
        busy = [r.json()["error"] for r in results if r.status_code == 503]
        assert all(e["code"] == "busy" and "2 concurrent queries" in e["message"]
                   for e in busy), busy
        # The server still serves, and a slot is free again.
        r = server.http.post("/query", json={"sql": "SELECT 41 + 1 AS x"})
        assert r.status_code == 200 and r.json()["rows"] == [[42]]
    finally:
        server.stop()
