"""Single-row writes through the HTTP server: writes/s with 1 and N concurrent clients.

Starts the real server (`diffsql serve`, uvicorn on 127.0.0.1, a temporary data directory),
creates a table with two views over it (an aggregate and a filter), then for each client count
runs that many threads, each POSTing single-row INSERTs to /sql for `--seconds`. Afterwards it
checks every acknowledged row is in the table and both views equal DuckDB recomputing them
(via /query over the same snapshot). It then runs the same writes in process through
`Database.execute` (no HTTP: the server's own cost), and prints DuckDB's own figure from the
same run: single-row INSERT + COMMIT per second into a DuckDB file on one connection.

    python bench/http_writes.py --seconds 5 --clients 1,8
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import duckdb
import httpx

REPO = Path(__file__).resolve().parents[1]

VIEWS = {
    "agg": "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k",
    "big": "SELECT id, k, v FROM t WHERE v > 50",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1.0).json().get("ready"):
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start")


def _clients(url: str, n: int, seconds: float, ids: itertools.count[int]) -> tuple[int, list[int]]:
    """`n` threads inserting single rows for `seconds`; returns (writes, acknowledged ids)."""
    acked: list[list[int]] = [[] for _ in range(n)]
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        with httpx.Client(base_url=url, timeout=60.0) as http:
            while time.monotonic() < stop:
                key = next(ids)
                sql = f"INSERT INTO t VALUES ({key}, {key % 10}, {key % 100})"
                r = http.post("/sql", json={"sql": sql})
                if r.status_code != 200:
                    errors.append(r.text)
                    return
                acked[i].append(key)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"write failed: {errors[0]}")
    flat = [k for a in acked for k in a]
    return len(flat), flat


def _check(url: str, acked: list[int]) -> bool:
    with httpx.Client(base_url=url, timeout=60.0) as http:
        ids = {r[0] for r in http.post("/query", json={"sql": "SELECT id FROM t"}).json()["rows"]}
        ok = set(acked) <= ids
        for name, sql in VIEWS.items():
            got = http.get(f"/views/{name}/rows").json()["rows"]
            want = http.post("/query", json={"sql": sql}).json()["rows"]
            same = Counter(json.dumps(r) for r in got) == Counter(json.dumps(r) for r in want)
            ok = ok and same
    return ok


def _in_process(data_dir: Path, counts: list[int], seconds: float) -> tuple[dict[int, float], bool]:
    """The same writes through `Database.execute` in this process (no HTTP): the server's own
    cost per write, with 1 and N writer threads."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(data_dir=data_dir), InProcessExecutor())
    rates: dict[int, float] = {}
    try:
        db.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, k INTEGER, v INTEGER);"
            + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
        )
        ids = itertools.count(1)
        acked: list[int] = []
        for n in counts:
            done: list[list[int]] = [[] for _ in range(n)]
            stop = time.monotonic() + seconds

            def run(i: int, done: list[list[int]] = done, stop: float = stop) -> None:
                while time.monotonic() < stop:
                    key = next(ids)
                    db.execute(f"INSERT INTO t VALUES ({key}, {key % 10}, {key % 100})")
                    done[i].append(key)

            began = time.monotonic()
            threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rates[n] = sum(len(d) for d in done) / (time.monotonic() - began)
            acked += [k for d in done for k in d]
            print(f"in-process writers={n} writes_per_s={rates[n]:.0f}", flush=True)
        ok = {r[0] for r in db.query("SELECT id FROM t")["rows"]} == set(acked)
        for name, sql in VIEWS.items():
            got = Counter(json.dumps(r) for r in db.view_rows(name, None)["rows"])
            want = Counter(json.dumps(r) for r in db.query(sql)["rows"])
            ok = ok and got == want
    finally:
        db.close()
    return rates, ok


def _duckdb_rate(path: Path, seconds: float) -> float:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k INTEGER, v INTEGER)")
    n, stop = 0, time.monotonic() + seconds
    began = time.monotonic()
    while time.monotonic() < stop:
        con.execute("BEGIN")
        con.execute(f"INSERT INTO t VALUES ({n}, {n % 10}, {n % 100})")
        con.execute("COMMIT")
        n += 1
    rate = n / (time.monotonic() - began)
    con.close()
    return rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,8")
    args = ap.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]
    results: dict[int, float] = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="diffsql-bench-") as tmp:
        proc, url = _start(Path(tmp) / "data")
        try:
            with httpx.Client(base_url=url, timeout=60.0) as http:
                setup = "CREATE TABLE t (id BIGINT PRIMARY KEY, k INTEGER, v INTEGER);" + "".join(
                    f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items()
                )
                r = http.post("/sql", json={"sql": setup})
                assert r.status_code == 200, r.text
            ids = itertools.count(1)
            acked: list[int] = []
            for n in counts:
                began = time.monotonic()
                writes, keys = _clients(url, n, args.seconds, ids)
                results[n] = writes / (time.monotonic() - began)
                acked += keys
                print(f"clients={n} writes={writes} writes_per_s={results[n]:.0f}", flush=True)
            ok = _check(url, acked)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        local, local_ok = _in_process(Path(tmp) / "local", counts, args.seconds)
        ok = ok and local_ok
        duck = _duckdb_rate(Path(tmp) / "duck.db", min(args.seconds, 3.0))
    print(f"duckdb single-row INSERT+COMMIT per s (one connection, no views): {duck:.0f}")
    rates = " ".join(f"http_writes_per_s_{n}={results[n]:.0f}" for n in counts)
    rates += "".join(f" in_process_writes_per_s_{n}={local[n]:.0f}" for n in counts)
    print(f"summary: {rates} duckdb_commits_per_s={duck:.0f} ok={str(ok).lower()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
