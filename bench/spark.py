"""The Spark executor against the in-process executor, in the same run, on the same data.

Invariant: every number printed comes with checks: both executors' results must be identical,
and equal to an independent computation (NumPy group sums for the aggregate, breadth-first
search for reachability); the script exits non-zero on any mismatch, so a fast wrong answer
never looks good.

Data is generated with NumPy into Parquet files and enters each dataflow through the bulk-load
path (`InputHandle.load` of an `engine.sources.FileSource`): Spark reads the files on its
workers, the in-process executor with pyarrow. Nothing is sent row by row from the driver
except the single-change epochs.

Two workloads:
1. A join-and-aggregate view: `facts(id, cust, amount)` (`--rows`, default 10M) joined with
   `dims(cust, region)`, summed per region. Hydration; then two epochs with a single change
   (the latency floor per epoch); then one epoch with a batch of `--batch` updates (default 1M:
   half deletions, half insertions, one Parquet file with a diff column).
2. Reachability from 10 roots over a random graph (`--nodes`/`--edges`, default 1M/2M):
   hydration, then `--updates` single-update epochs (remove one edge, add one), p50 per epoch.

    python bench/spark.py --quick                 # 200k rows, 20k batch, N=10k/M=20k: minutes
    python bench/spark.py                         # the full sizes: about an hour on 2 cores
    python bench/spark.py --rows 1000000 --batch 100000 --nodes 20000 --edges 40000

`--local-rows` sets the executor's driver fast path (0: every payload through Spark).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Dataflow  # noqa: E402
from engine.sources import FileSource  # noqa: E402


def timed(f: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def say(msg: str) -> None:
    print(msg, flush=True)


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def write_parquet(path: str, **cols: Any) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(cols), path, row_group_size=1 << 20)
    return path


def join_agg(df: Dataflow) -> tuple[Any, Any, Any]:
    fh, facts = df.new_input("facts")
    dh, dims = df.new_input("dims")
    totals = (
        facts.map(lambda r: (r[1], r[2]))
        .join_map(dims, lambda cust, amount, region: (region, amount))
        .sum()
    )
    return fh, dh, totals.capture(history=False)


def reach(df: Dataflow) -> tuple[Any, Any, Any]:
    eh, edges = df.new_input("edges")
    rh, roots = df.new_input("roots")

    def body(r: Any) -> Any:
        e = edges.enter(r.scope)
        return r.map(lambda p: (p[1], p[0])).join_map(e, lambda n, root, d: (root, d)).concat(
            r
        ).distinct()

    out = roots.map(lambda x: (x, x)).iterate(body)
    # Reached nodes per root: ten output rows, so capturing them measures the dataflow.
    return eh, rh, out.map(lambda p: p[0]).count().capture(history=False)


def run_epoch(df: Dataflow, handles: list[Any], epoch: int) -> float:
    for h in handles:
        h.advance_to(epoch)
    t, _ = timed(df.run)
    return t


def bench_join_agg(args: argparse.Namespace, executors: dict[str, Any], tmp: str) -> bool:
    import numpy as np

    rng = np.random.default_rng(1)
    customers = max(args.rows // 100, 10)
    ids = np.arange(args.rows, dtype=np.int64)
    cust = rng.integers(0, customers, args.rows, dtype=np.int64)
    amount = rng.integers(0, 1000, args.rows, dtype=np.int64)
    facts = write_parquet(os.path.join(tmp, "facts.parquet"), id=ids, cust=cust, amount=amount)
    cs = np.arange(customers, dtype=np.int64)
    dims = write_parquet(os.path.join(tmp, "dims.parquet"), cust=cs,
                         region=np.array(["r%d" % (c % 50) for c in range(customers)]))
    # The big batch: the first batch/2 facts change amount (a deletion and an insertion each).
    h = args.batch // 2
    batch = write_parquet(
        os.path.join(tmp, "batch.parquet"),
        id=np.concatenate([ids[:h], ids[:h]]),
        cust=np.concatenate([cust[:h], cust[:h]]),
        amount=np.concatenate([amount[:h], amount[:h] + 1]),
        diff=np.concatenate([-np.ones(h, np.int64), np.ones(h, np.int64)]),
    )
    # The oracle: per-region sums after everything, by NumPy.
    final = amount.copy()
    final[:h] += 1
    final = np.append(final, [5, 5])
    fcust = np.append(cust, [0, 1])
    sums = np.bincount(fcust % 50, weights=final, minlength=50).astype(np.int64)
    expected = {(("r%d" % r), int(sums[r])): 1 for r in range(50) if sums[r]}
    say("join-and-aggregate: %d facts, %d customers, batch of %d updates" % (args.rows, customers,
                                                                            2 * h))
    ok = True
    results = {}
    for name, ex in executors.items():
        df = Dataflow(executor=ex)
        fh, dh, cap = join_agg(df)
        jobs0 = getattr(ex, "jobs", 0)
        fh.load(FileSource((facts,), columns=("id", "cust", "amount")))
        dh.load(FileSource((dims,), columns=("cust", "region")))
        hyd = run_epoch(df, [fh, dh], 1)
        fh.send([((args.rows + 1, 0, 5), 1)])
        floor = [run_epoch(df, [fh, dh], 2)]
        fh.send([((args.rows + 2, 1, 5), 1)])
        floor.append(run_epoch(df, [fh, dh], 3))
        fh.load(FileSource((batch,), columns=("id", "cust", "amount"), diff_column="diff"))
        big = run_epoch(df, [fh, dh], 4)
        results[name] = {(k, v): n for (k, v), n in cap.current().items()}
        match = results[name] == expected
        ok &= match
        say(
            "  %-9s hydration %8.2f s   one-change epoch %6.2f / %6.2f s   %d-update epoch %8.2f s"
            "   spark round trips %s   peak RSS %.1f GB   equals NumPy: %s"
            % (name, hyd, floor[0], floor[1], 2 * h, big,
               getattr(ex, "jobs", 0) - jobs0 if hasattr(ex, "jobs") else "-", rss_gb(), match)
        )
        df.release()
        del df, fh, dh, cap
        gc.collect()
    same = len({repr(sorted(r.items())) for r in results.values()}) == 1
    say("  results identical: %s (%d regions)" % (same, len(next(iter(results.values())))))
    return ok and same


def bfs_counts(src: Any, dst: Any, nodes: int, roots: list[int]) -> dict[int, int]:
    import numpy as np

    order = np.argsort(src, kind="stable")
    s, d = src[order], dst[order]
    starts = np.searchsorted(s, np.arange(nodes + 1))
    out = {}
    for r in roots:
        seen = np.zeros(nodes, dtype=bool)
        seen[r] = True
        q = deque([r])
        while q:
            n = q.popleft()
            for m in d[starts[n]:starts[n + 1]].tolist():
                if not seen[m]:
                    seen[m] = True
                    q.append(m)
        out[r] = int(seen.sum())
    return out


def bench_reach(args: argparse.Namespace, executors: dict[str, Any], tmp: str) -> bool:
    import numpy as np

    rng = np.random.default_rng(2)
    src = rng.integers(0, args.nodes, args.edges, dtype=np.int64)
    dst = rng.integers(0, args.nodes, args.edges, dtype=np.int64)
    roots = [int(x) for x in rng.choice(args.nodes, 10, replace=False)]
    edges = write_parquet(os.path.join(tmp, "edges.parquet"), src=src, dst=dst)
    changes = []
    for i in range(args.updates):
        new = (int(rng.integers(args.nodes)), int(rng.integers(args.nodes)))
        changes.append(((int(src[i]), int(dst[i])), new))
    fs, fd = src.copy(), dst.copy()
    for i, (_, new) in enumerate(changes):
        fs[i], fd[i] = new
    t_bfs, expected = timed(lambda: bfs_counts(fs, fd, args.nodes, roots))
    say("reachability: N=%d M=%d, 10 roots, %d single-update epochs (BFS oracle %.1f s, %d pairs)"
        % (args.nodes, args.edges, args.updates, t_bfs, sum(expected.values())))
    ok = True
    results = {}
    for name, ex in executors.items():
        df = Dataflow(executor=ex)
        eh, rh, cap = reach(df)
        eh.load(FileSource((edges,), columns=("src", "dst")))
        rh.send([(r, 1) for r in roots])
        hyd = run_epoch(df, [eh, rh], 1)
        lat = []
        for i, (old, new) in enumerate(changes):
            eh.send([(old, -1), (new, 1)])
            lat.append(run_epoch(df, [eh, rh], 2 + i))
        results[name] = {k: v for (k, v), n in cap.current().items() for _ in range(n)}
        match = results[name] == expected
        ok &= match
        p50 = statistics.median(lat) if lat else float("nan")
        say("  %-9s hydration %8.2f s   per-update epoch p50 %6.2f s  max %6.2f s   pairs %d"
            "   peak RSS %.1f GB   equals BFS: %s"
            % (name, hyd, p50, max(lat) if lat else float("nan"), sum(results[name].values()),
               rss_gb(), match))
        df.release()
        del df, eh, rh, cap
        gc.collect()
    same = len({repr(sorted(r.items())) for r in results.values()}) == 1
    say("  results identical: %s" % same)
    return ok and same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--batch", type=int, default=1_000_000)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--edges", type=int, default=2_000_000)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="200k rows, 20k batch, N=10k M=20k")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--spark-memory", default="8g", help="the Spark driver's heap (local mode)")
    p.add_argument("--local-rows", type=int, default=0)
    p.add_argument("--skip", choices=["join", "reach"], default=None)
    p.add_argument("--only", choices=["inprocess", "spark"], default=None)
    args = p.parse_args()
    if args.quick:
        args.rows, args.batch, args.nodes, args.edges = 200_000, 20_000, 10_000, 20_000
        args.updates = min(args.updates, 3)
    from engine.executors.inprocess import InProcessExecutor
    from engine.executors.spark import SparkExecutor

    executors: dict[str, Any] = {}
    if args.only != "spark":
        executors["inprocess"] = InProcessExecutor()
    spark = None
    if args.only != "inprocess":
        t, spark = timed(lambda: SparkExecutor(
            args.master, local_rows=args.local_rows,
            conf={"spark.driver.memory": args.spark_memory}))
        say("Spark session start: %.1f s (master %s, local_rows %d)" % (t, args.master,
                                                                       args.local_rows))
        executors["spark"] = spark
    ok = True
    with tempfile.TemporaryDirectory(prefix="diffsql-bench-") as tmp:
        if args.skip != "join":
            ok &= bench_join_agg(args, executors, tmp)
        if args.skip != "reach":
            ok &= bench_reach(args, executors, tmp)
    if spark is not None:
        spark.close()
    say("all checks passed" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
