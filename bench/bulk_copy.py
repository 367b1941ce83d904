"""COPY benchmark (issue 11, acceptance 4): a `--rows`-row (default 1,000,000) Parquet file
COPYed into a table that three views read, through a real `diffsql serve` process, against
DuckDB loading the same file into a table and computing the three views' SELECTs, in the
same run.

The views (created before the COPY, so the COPY maintains them): a GROUP BY with COUNT and
SUM, a filter and projection, and MIN/MAX over a computed key. After the COPY each view's
contents are checked against DuckDB over the server's own table (`/query`, an
order-insensitive fingerprint) and against the standalone DuckDB's answer. Then the same
file is COPYed a second time, into the table holding its rows (the views' states exist: each
absorbs the batch's groups), timed and checked the same way against DuckDB's second COPY of
the file and the three SELECTs over its 2M rows (printed; not in the summary). The last line is

    summary: rows=<n> copy_s=<x> duckdb_s=<x> ratio=<x> ok=<true|false>

where `copy_s` is the COPY request's wall time over a kept-alive connection (statement, change
log, every view maintained, acknowledged) and `duckdb_s` is DuckDB's load and three SELECTs (best of three).

    python bench/bulk_copy.py [--rows 1000000] [--executor inprocess] [--repo DIR] [--wide]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import duckdb
import httpx
from restart import REPO, Server, _check, _fingerprint

VIEWS = {
    "by_k": "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k",
    "small_k": "SELECT id, v FROM t WHERE k < 5",
    "buckets": "SELECT k % 10 AS b, max(v) AS top, min(id) AS first FROM t GROUP BY k % 10",
}
CHECK = {
    "by_k": (VIEWS["by_k"], "k::BIGINT, n::BIGINT, total::DOUBLE"),
    "small_k": (VIEWS["small_k"], "id::BIGINT, v::DOUBLE"),
    "buckets": (VIEWS["buckets"], "b::BIGINT, top::DOUBLE, first::BIGINT"),
}
# `--wide`: a filter and projection that keeps 90% of the rows in place of `small_k`, so the
# COPY's cost of a view with a big output (every output row published) shows
WIDE = "SELECT id, v FROM t WHERE k < 900"
SCHEMA = "id BIGINT, k INTEGER, v DOUBLE"


def make_file(path: Path, rows: int) -> None:
    con = duckdb.connect()
    con.execute(f"COPY (SELECT x::BIGINT AS id, (x % 1000)::INTEGER AS k, "
                f"((x * 7919) % 100003)::DOUBLE AS v FROM range({rows}) r(x)) "
                f"TO '{path}' (FORMAT parquet)")


def duckdb_time(path: Path, wide: bool = False, copies: int = 1
                ) -> tuple[float, dict[str, list[tuple]]]:
    """DuckDB's best time of three and its answers. With `wide`, each view's result is
    materialized as a table (as a materialized view would be: 900,000 rows fetched into
    Python would be most of its time) and its answer is its fingerprint, taken untimed.
    With `copies` > 1, the file is loaded `copies` - 1 times untimed first: the time is that
    of the last load and the SELECTs over the table then."""
    best, answers = float("inf"), {}
    for _ in range(3):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t ({SCHEMA})")
        for _ in range(copies - 1):
            con.execute(f"COPY t FROM '{path}' (FORMAT parquet)")
        t0 = time.perf_counter()
        con.execute(f"COPY t FROM '{path}' (FORMAT parquet)")
        if wide:
            for n, q in VIEWS.items():
                con.execute(f"CREATE TABLE answer_{n} AS {q}")
        else:
            answers = {n: con.execute(q).fetchall() for n, q in VIEWS.items()}
        best = min(best, time.perf_counter() - t0)
        if wide:
            answers = {n: con.execute(f"{_fingerprint(CHECK[n][1])} FROM answer_{n}").fetchall()
                       for n in VIEWS}
        con.close()
    return best, answers


def _same(server: Server, answers: dict[str, list[tuple]], wide: bool) -> bool:
    """Each view's contents equal the standalone DuckDB's answer."""
    ok = True
    for name, want in answers.items():
        got = server.query(f"{_fingerprint(CHECK[name][1])} FROM {name}" if wide
                           else f"SELECT * FROM {name}")
        if sorted(map(tuple, got)) != sorted(want):
            print(f"  MISMATCH {name}: {len(got)} rows vs DuckDB's {len(want)}")
            ok = False
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--executor", default="inprocess")
    ap.add_argument("--repo", type=Path, default=REPO, help="run the server from this checkout")
    ap.add_argument("--wide", action="store_true",
                    help="the filter and projection view keeps 900,000 of 1,000,000 rows")
    args = ap.parse_args()
    if args.wide:
        VIEWS["small_k"] = WIDE
        CHECK["small_k"] = (WIDE, CHECK["small_k"][1])
    with tempfile.TemporaryDirectory(prefix="diffsql-copy-") as d:
        tmp = Path(d)
        data = tmp / "data"
        (data / "import").mkdir(parents=True)
        path = data / "import" / "t.parquet"
        # DuckDB runs in a child process (forked before this one starts any DuckDB thread):
        # the memory its loads free is returned to the system by its allocator's threads for
        # a while afterwards, on the same two cores as the server's COPY if it ran here (which
        # then took 0.30-0.38 s instead of 0.26-0.27).
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as child:
            child.submit(make_file, path, args.rows).result()
            print(f"{args.rows:,} rows in {path.stat().st_size / 1e6:.1f} MB of Parquet")
            duck, answers = child.submit(duckdb_time, path, args.wide).result()
            duck2, answers2 = child.submit(duckdb_time, path, args.wide, 2).result()
        print(f"DuckDB: CREATE, COPY and the three SELECTs: {duck:.3f} s (best of 3)")
        print(f"DuckDB: a second COPY of the file and the three SELECTs: {duck2:.3f} s"
              " (best of 3)")
        server = Server(args.repo, data, ["--executor", args.executor, "--query-timeout", "600",
                                          "--write-timeout", "3600"])
        server.start()
        # One kept-alive client for the timed requests: a new httpx client (`httpx.post`)
        # makes an SSL context first, 25-60 ms on this machine, which the COPY's time would
        # count as the server's.
        client = httpx.Client(timeout=3600)
        try:
            server.sql(f"CREATE TABLE t ({SCHEMA})", client)
            for name, sql in VIEWS.items():
                server.sql(f"CREATE VIEW {name} AS {sql}", client)
            t0 = time.perf_counter()
            server.sql("COPY t FROM 't.parquet' (FORMAT parquet)", client)
            ours = time.perf_counter() - t0
            ok = _check(server, CHECK) and _same(server, answers, args.wide)
            # The same file again, into the table of 1M rows: the views' states absorb it
            t0 = time.perf_counter()
            server.sql("COPY t FROM 't.parquet' (FORMAT parquet)", client)
            ours2 = time.perf_counter() - t0
            ok = _check(server, CHECK) and _same(server, answers2, args.wide) and ok
        finally:
            client.close()
            server.stop()
    print(f"diffsql: COPY into t with its three views maintained: {ours:.3f} s "
          f"({ours / duck:.1f}x DuckDB)")
    print(f"diffsql: a second COPY of the file, into t holding its rows: {ours2:.3f} s "
          f"({ours2 / duck2:.1f}x DuckDB's)")
    print(f"summary: rows={args.rows} copy_s={ours:.3f} duckdb_s={duck:.3f} "
          f"ratio={ours / duck:.1f} ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
