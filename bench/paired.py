"""Paired A/B of two engine settings in one process, on the reachability benchmark's workload.

This machine's speed drifts by a third between runs and within one, more than most single
changes to the engine move `bench/reachability.py`'s figures. Here two copies of the
reachability dataflow (columnar executor) take the same updates; each copy's `run` is timed
under its own setting, the order alternating, so a drift slows both. It prints each copy's
rate and the median of the per-update (or per-batch) time ratios B/A, and checks both copies'
reach sets against BFS at the end (exits non-zero on a mismatch). Comparing a setting with
itself gives a ratio of 1.00 within about 1%.

A setting is `;`-separated items, each an attribute of a module or of a class in one to set
before the copy runs (`engine.trace.FOLD_BATCHES=4`, the value evaluated as Python) or `reference-progress` (the copy's
scheduler uses the reference walk, `engine.progress.compute_reach`, instead of the path
summaries). Module attributes are set again before every run of each copy, so both copies
must read them at run time.

    python bench/paired.py reference-progress ""
    python bench/paired.py "engine.trace.FOLD_BATCHES=8" "engine.trace.FOLD_BATCHES=4" --batch 100 --rounds 30
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reachability as R  # noqa: E402

REFERENCE_PROGRESS = "reference-progress"


def parse(setting: str) -> list[tuple[Any, str, Any]]:
    """The attributes a setting sets: `(owner, name, value)`."""
    out = []
    for item in filter(None, (s.strip() for s in setting.split(";"))):
        if item == REFERENCE_PROGRESS:
            continue
        name, _, value = item.partition("=")
        path, _, attr = name.rpartition(".")
        owner = _resolve(path)
        if not hasattr(owner, attr):
            raise SystemExit("%s has no attribute %s" % (path, attr))
        out.append((owner, attr, eval(value)))  # noqa: S307 - the developer's own command line
    return out


def _resolve(path: str) -> Any:
    """The module, or an attribute of one (a class), that `path` names."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for p in parts[cut:]:
            obj = getattr(obj, p)
        return obj
    raise SystemExit("no module in %s" % path)


def apply(attrs: list[tuple[Any, str, Any]]) -> None:
    for module, attr, value in attrs:
        setattr(module, attr, value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="setting A")
    ap.add_argument("b", help="setting B")
    ap.add_argument("--config", choices=sorted(R.CONFIGS), default="b")
    ap.add_argument("--rounds", type=int, default=600, help="runs of each copy")
    ap.add_argument("--batch", type=int, default=1, help="updates per run, each its own epoch")
    ap.add_argument("--warm", type=int, default=None, help="runs left out of the figures")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warm = args.warm if args.warm is not None else min(100, args.rounds // 5)

    n_nodes, n_edges = R.CONFIGS[args.config]
    rng = random.Random(args.seed)
    src, dst = np.empty(n_edges, np.int64), np.empty(n_edges, np.int64)
    for i in range(n_edges):
        src[i], dst[i] = rng.randrange(n_nodes), rng.randrange(n_nodes)
    window = R.Window(src, dst)
    roots = rng.sample(range(n_nodes), 10)
    settings = [(s, parse(s)) for s in (args.a, args.b)]

    copies = []
    for text, attrs in settings:
        apply(attrs)
        df, edges_in, roots_in, cap = R.build("columnar")
        if REFERENCE_PROGRESS in text.split(";"):
            # no plan of path summaries: the scheduler falls back to the walk
            df._backward_plan, df._backward_version = None, len(df.ops)
        edges_in.send_columns(window.table())
        roots_in.insert_many(roots)
        edges_in.advance_to(1)
        roots_in.advance_to(1)
        df.run()
        copies.append((df, edges_in, roots_in, cap))

    times: list[list[float]] = [[], []]
    epoch = 1
    for k in range(args.rounds):
        for _ in range(args.batch):
            new = (rng.randrange(n_nodes), rng.randrange(n_nodes))
            old = window.slide(new)
            epoch += 1
            for _, edges_in, roots_in, _ in copies:
                edges_in.remove(old)
                edges_in.insert(new)
                edges_in.advance_to(epoch)
                roots_in.advance_to(epoch)
        for i in ((0, 1) if k % 2 else (1, 0)):
            apply(settings[i][1])
            t0 = time.perf_counter()
            copies[i][0].run()
            times[i].append(time.perf_counter() - t0)

    a, b = np.array(times[0][warm:]), np.array(times[1][warm:])
    for name, (text, _), t in (("A", settings[0], a), ("B", settings[1], b)):
        print("%s %-40s %8.1f updates/s  (median run %.2f ms)"
              % (name, text or "-", args.batch * len(t) / t.sum(), np.median(t) * 1e3))
    want = R.bfs(window.edges(), roots)
    ok = all(set(c[3].current()) == want and all(v == 1 for v in c[3].current().values())
             for c in copies)
    print("B/A time: median of the per-run ratios %.3f, ratio of the totals %.3f; checked against BFS: %s"
          % (float(np.median(b / a)), float(b.sum() / a.sum()), "OK" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
