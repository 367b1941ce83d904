"""Restart benchmark (issue 10, item 6): how long a restarted server takes to answer `/health`
(time-to-health) and to have every view up (time-to-ready, `/health` `ready`), for

- big:   a table of `--rows` rows (default 1,000,000) with three views;
- small: a table of `--small-rows` rows (default 1,000) after `--writes` single-row writes
  (default 100,000), with one view, at the default history retention.

Each scenario restarts twice: after a clean stop (SIGTERM) and after SIGKILL. It prints the
times, the server's peak RSS during the restart, and what recovery replayed (`/health`
`recovery`), and checks that every view equals DuckDB's answer over the tables after the
restart (exit status 1 on a mismatch). The server is a real `diffsql serve` subprocess;
`--repo DIR` runs the server from another checkout (e.g. an older commit, for a before/after
comparison; its /health may lack `ready`, then time-to-ready is time-to-health).

    python bench/restart.py                                   # full sizes
    python bench/restart.py --rows 200000 --writes 10000      # smaller
    python bench/restart.py --only big --executor columnar    # views on the columnar executor
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from support import free_port, peak_rss_mb

REPO = Path(__file__).resolve().parent.parent

BIG_VIEWS = {
    "by_k": "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k",
    "small_k": "SELECT id, v FROM t WHERE k < 5",
    "buckets": "SELECT k % 10 AS b, max(v) AS top, min(id) AS first FROM t GROUP BY k % 10",
}
SMALL_VIEWS = {"totals": "SELECT k, sum(v) AS total, count(*) AS n FROM s GROUP BY k"}


class Server:
    def __init__(self, repo: Path, data: Path, extra: list[str]) -> None:
        self.repo, self.data, self.extra = repo, data, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> tuple[float, float, dict[str, Any]]:
        """Start; return (time-to-health, time-to-ready, final /health)."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = dict(os.environ, PYTHONPATH=str(self.repo))
        env.pop("DIFFSQL_TOKEN", None)
        log = open(self.data.parent / "server.log", "ab")  # noqa: SIM115 - closed with the process
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port",
             str(port), "--data-dir", str(self.data), "--log-level", "warning", *self.extra],
            cwd=self.repo, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        health_at = None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited; see server.log")
            try:
                r = httpx.get(self.url + "/health", timeout=5)
                if r.status_code == 200:
                    if health_at is None:
                        health_at = time.monotonic() - t0
                    body = r.json()
                    if body.get("ready", True):
                        return health_at, time.monotonic() - t0, body
            except httpx.HTTPError:
                pass
            time.sleep(0.02)

    def sql(self, text: str, client: httpx.Client | None = None) -> Any:
        r = (client or httpx).post(self.url + "/sql", json={"sql": text}, timeout=3600)
        r.raise_for_status()
        return r.json()

    def query(self, text: str) -> list[Any]:
        r = httpx.post(self.url + "/query", json={"sql": text}, timeout=600)
        r.raise_for_status()
        return r.json()["rows"]  # type: ignore[no-any-return]

    def stop(self, kill: bool = False) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.proc.wait(600)


def _fingerprint(columns: str) -> str:
    return f"SELECT count(*), sum(hash({columns}) % 1000003)"


def _check(server: Server, views: dict[str, tuple[str, str]]) -> bool:
    """Each view equals DuckDB over the tables (an order-insensitive fingerprint)."""
    ok = True
    for name, (sql, columns) in views.items():
        got = server.query(f"{_fingerprint(columns)} FROM {name}")
        want = server.query(f"{_fingerprint(columns)} FROM ({sql}) x")
        if got != want:
            print(f"  MISMATCH {name}: view {got} != DuckDB {want}")
            ok = False
    return ok


def _restarts(server: Server, views: dict[str, tuple[str, str]], label: str) -> bool:
    ok = True
    for how in ("clean", "kill"):
        server.stop(kill=how == "kill")
        health, ready, body = server.start()
        assert server.proc is not None
        rss = peak_rss_mb(server.proc.pid)
        print(
            f"{label:>6} restart after {how:>5}: time-to-health {health:7.2f} s, time-to-ready "
            f"{ready:7.2f} s, peak RSS {rss:7.0f} MB, recovery {body.get('recovery', '-')}"
        )
        ok = _check(server, views) and ok
    return ok


def bench_big(args: argparse.Namespace, repo: Path, tmp: Path) -> bool:
    limits = ["--query-timeout", "600"]
    if "--write-timeout" in (repo / "server" / "cli.py").read_text():  # not in older servers
        limits += ["--write-timeout", "3600"]
    server = Server(repo, tmp / "big" / "data", limits + args.server_args)
    (tmp / "big").mkdir()
    server.start()
    t0 = time.monotonic()
    server.sql(
        "CREATE TABLE t (id BIGINT, k INTEGER, v DOUBLE);"
        f"INSERT INTO t SELECT x, x % 1000, (x * 7919) % 100003 FROM range({args.rows}) r(x)"
    )
    for name, sql in BIG_VIEWS.items():
        server.sql(f"CREATE VIEW {name} AS {sql}")
    print(f"   big: {args.rows:,} rows and {len(BIG_VIEWS)} views created in "
          f"{time.monotonic() - t0:.1f} s")
    views = {
        "by_k": (BIG_VIEWS["by_k"], "k::BIGINT, n::BIGINT, total::DOUBLE"),
        "small_k": (BIG_VIEWS["small_k"], "id::BIGINT, v::DOUBLE"),
        "buckets": (BIG_VIEWS["buckets"], "b::BIGINT, top::DOUBLE, first::BIGINT"),
    }
    try:
        return _restarts(server, views, "big")
    finally:
        server.stop()


def bench_small(args: argparse.Namespace, repo: Path, tmp: Path) -> bool:
    server = Server(repo, tmp / "small" / "data", args.server_args)
    (tmp / "small").mkdir()
    server.start()
    server.sql(
        "CREATE TABLE s (id INTEGER PRIMARY KEY, k INTEGER, v BIGINT);"
        f"INSERT INTO s SELECT x, x % 10, 0 FROM range({args.small_rows}) r(x);"
        + "".join(f"CREATE VIEW {n} AS {q};" for n, q in SMALL_VIEWS.items())
    )
    t0 = time.monotonic()
    counter = iter(range(args.writes))
    lock = threading.Lock()

    def writer() -> None:
        with httpx.Client(timeout=600) as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                server.sql(f"UPDATE s SET v = v + 1 WHERE id = {i % args.small_rows}", client)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(f" small: {args.small_rows:,} rows after {args.writes:,} writes "
          f"({time.monotonic() - t0:.1f} s of writing)")
    views = {"totals": (SMALL_VIEWS["totals"], "k::BIGINT, total::HUGEINT, n::BIGINT")}
    try:
        return _restarts(server, views, "small")
    finally:
        server.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--small-rows", type=int, default=1_000)
    p.add_argument("--writes", type=int, default=100_000)
    p.add_argument("--only", choices=["big", "small"], default=None)
    p.add_argument("--executor", default=None, help="the server's --executor (default: its own)")
    p.add_argument("--repo", type=Path, default=REPO, help="run the server from this checkout")
    args = p.parse_args()
    args.server_args = ["--executor", args.executor] if args.executor else []
    ok = True
    with tempfile.TemporaryDirectory(prefix="diffsql-restart-") as d:
        if args.only in (None, "big"):
            ok = bench_big(args, args.repo.resolve(), Path(d)) and ok
        if args.only in (None, "small"):
            ok = bench_small(args, args.repo.resolve(), Path(d)) and ok
    print("views equal DuckDB after every restart" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
