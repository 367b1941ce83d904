"""`/health` answers at once whatever else the server is doing.

Invariant checked against a real server process: with every worker thread busy (more slow
`/query` requests in flight than the thread pool has threads), `/health` still answers within a
fraction of a second, because it runs on the event loop and takes no lock.
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
        assert max(waits) < 0.5, waits
    finally:
        stop.set()
        server.stop()
        for th in threads:
            th.join(timeout=10)
