"""The Spark executor against the in-process executor, in the same run, on the same data.

Invariant: every number printed comes with a check that both executors produced identical
results (the script exits non-zero on a mismatch), so a fast wrong answer never looks good.

Three workloads:
1. Hydration of a join-and-aggregate view: `facts(id, cust, amount)` (`--rows`, default 10M)
   joined with `dims(cust, region)` and summed per region; then one epoch with a single change
   (the latency floor per epoch) and one epoch with a batch of `--batch` updates (default 1M).
2. Reachability from 10 roots over a random graph (`--nodes`/`--edges`, default 1M/2M):
   hydration, then `--updates` single-update epochs (remove one edge, add one), p50 per epoch.

    python bench/spark.py --quick                 # 200k rows, 20k batch, N=10k/M=20k: minutes
    python bench/spark.py                         # the full sizes: hours on 2 cores
    python bench/spark.py --rows 1000000 --batch 1000000 --nodes 100000 --edges 200000

`--local-rows` sets the executor's driver fast path (0: every payload through Spark).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Dataflow  # noqa: E402


def timed(f: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


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
    return eh, rh, out.count().capture(history=False)


def run_epoch(df: Dataflow, handles: list[Any], epoch: int) -> float:
    for h in handles:
        h.advance_to(epoch)
    t, _ = timed(df.run)
    return t


def bench_join_agg(args: argparse.Namespace, executors: dict[str, Any]) -> bool:
    rng = random.Random(1)
    customers = max(args.rows // 100, 10)
    facts = [(i, rng.randrange(customers), rng.randrange(1000)) for i in range(args.rows)]
    dims = [(c, "r%d" % (c % 50)) for c in range(customers)]
    batch: list[tuple[Any, int]] = []
    for i in range(args.batch // 2):
        old = facts[i]
        batch.append((old, -1))
        batch.append(((old[0], old[1], old[2] + 1), 1))
    results = {}
    print("join-and-aggregate: %d facts, %d customers, batch %d" % (args.rows, customers,
                                                                     len(batch)))
    for name, ex in executors.items():
        df = Dataflow(executor=ex)
        fh, dh, cap = join_agg(df)
        jobs0 = getattr(ex, "jobs", 0)
        fh.send([(r, 1) for r in facts])
        dh.send([(d, 1) for d in dims])
        hyd = run_epoch(df, [fh, dh], 1)
        fh.send([((args.rows + 1, 0, 5), 1)])
        floor = [run_epoch(df, [fh, dh], 2)]
        fh.send([((args.rows + 2, 1, 5), 1)])
        floor.append(run_epoch(df, [fh, dh], 3))
        fh.send(batch)
        big = run_epoch(df, [fh, dh], 4)
        results[name] = cap.current()
        print(
            "  %-9s hydration %8.2f s   one-change epoch %6.2f / %6.2f s   %d-update epoch %8.2f s"
            "   spark round trips %s"
            % (name, hyd, floor[0], floor[1], len(batch), big,
               getattr(ex, "jobs", 0) - jobs0 if hasattr(ex, "jobs") else "-")
        )
    same = len({repr(sorted(r.items())) for r in results.values()}) == 1
    print("  results identical: %s (%d regions)" % (same, len(next(iter(results.values())))))
    return same


def bench_reach(args: argparse.Namespace, executors: dict[str, Any]) -> bool:
    rng = random.Random(2)
    edges = [(rng.randrange(args.nodes), rng.randrange(args.nodes)) for _ in range(args.edges)]
    roots = rng.sample(range(args.nodes), 10)
    print("reachability: N=%d M=%d, 10 roots, %d single-update epochs" % (args.nodes, args.edges,
                                                                          args.updates))
    changes = []
    for i in range(args.updates):
        changes.append((edges[i], (rng.randrange(args.nodes), rng.randrange(args.nodes))))
    results = {}
    for name, ex in executors.items():
        df = Dataflow(executor=ex)
        eh, rh, cap = reach(df)
        eh.send([(e, 1) for e in edges])
        rh.send([(r, 1) for r in roots])
        hyd = run_epoch(df, [eh, rh], 1)
        lat = []
        for i, (old, new) in enumerate(changes):
            eh.send([(old, -1), (new, 1)])
            lat.append(run_epoch(df, [eh, rh], 2 + i))
        results[name] = cap.current()
        p50 = statistics.median(lat) if lat else float("nan")
        print("  %-9s hydration %8.2f s   per-update epoch p50 %6.2f s  max %6.2f s   pairs %d"
              % (name, hyd, p50, max(lat) if lat else float("nan"),
                 sum(n for (_, n) in results[name])))
    same = len({repr(sorted(r.items())) for r in results.values()}) == 1
    print("  results identical: %s" % same)
    return same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--batch", type=int, default=1_000_000)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--edges", type=int, default=2_000_000)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="200k rows, 20k batch, N=10k M=20k")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--local-rows", type=int, default=0)
    p.add_argument("--skip", choices=["join", "reach"], default=None)
    args = p.parse_args()
    if args.quick:
        args.rows, args.batch, args.nodes, args.edges = 200_000, 20_000, 10_000, 20_000
        args.updates = min(args.updates, 3)
    from engine.executor import InProcessExecutor
    from engine.spark_executor import SparkExecutor

    t, spark = timed(lambda: SparkExecutor(args.master, local_rows=args.local_rows))
    print("Spark session start: %.1f s (master %s, local_rows %d)" % (t, args.master,
                                                                     args.local_rows))
    executors = {"inprocess": InProcessExecutor(), "spark": spark}
    ok = True
    if args.skip != "join":
        ok &= bench_join_agg(args, executors)
    if args.skip != "reach":
        ok &= bench_reach(args, executors)
    spark.close()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
