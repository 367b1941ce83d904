"""Single-row UPDATE cost of aggregate and top-k views, general reduce vs reduce_total (#11).

Table ``t (id INTEGER, g INTEGER, v DOUBLE)`` with ``--groups`` groups, at each of ``--sizes``
rows; two views built in-process (engine + planner, as bench/joins.py):

- ``agg``: ``SELECT g, sum(v), count(*), avg(v), min(v), max(v) FROM t GROUP BY g``
- ``topk``: ``SELECT * FROM t ORDER BY v DESC LIMIT 5``

For each view and size, both lowerings run in the same process on the same data: "before",
the general reduce (``DIFFSQL_GENERAL_REDUCE=1``: every change re-reads its whole group), and
"after", reduce_total (per-group incremental state). Each single-row UPDATE (a retraction and
an insertion in one epoch, half of them moving the current maximum, so MIN/MAX and the top-k
window change) is timed until the view is updated; we report the median. In the same run DuckDB
applies the same UPDATEs and recomputes each view (best of 3), and both views are checked
against DuckDB's answer (floats to 1e-9 relative). The last line is

    summary: sizes=<n,...> agg_update_ms=<after at each size> topk_update_ms=<...> ok=<bool>

    python bench/aggregates.py [--sizes 10000,100000,1000000] [--updates 20] [--before-updates 3]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402
from support import same  # noqa: E402

from engine import Dataflow  # noqa: E402
from planner import Catalog, Column, TableSchema, compile_view  # noqa: E402

VIEWS = {
    "agg": "SELECT g, sum(v), count(*), avg(v), min(v), max(v) FROM t GROUP BY g",
    "topk": "SELECT * FROM t ORDER BY v DESC LIMIT 5",
}
CATALOG = Catalog(tables={"t": TableSchema("t", [Column("id", "INTEGER"), Column("g", "INTEGER"),
                                                 Column("v", "DOUBLE")])})


def build(sql: str, general: bool, rows: list[tuple[Any, ...]]) -> tuple[Any, Any, Any, float]:
    """The view over `rows`, lowered with the general reduce or reduce_total; returns the
    dataflow, the table's input handle, the capture and the hydration time."""
    if general:
        os.environ["DIFFSQL_GENERAL_REDUCE"] = "1"
    else:
        os.environ.pop("DIFFSQL_GENERAL_REDUCE", None)
    t0 = time.perf_counter()
    df = Dataflow()
    handle, source = df.new_input("t")
    cap = compile_view(sql, CATALOG).build(df, {"t": source}).capture(history=False, drain=False)
    handle.send([(r, 1) for r in rows])
    handle.advance_to(1)
    df.run()
    os.environ.pop("DIFFSQL_GENERAL_REDUCE", None)
    return df, handle, cap, time.perf_counter() - t0


def updates_for(rng: random.Random, rows: list[tuple[Any, ...]], k: int) -> list[tuple[int, float]]:
    """`k` (id, new v): even ones move the row holding the maximum v to a random low value
    (the maximum and the top-k window must change), odd ones a random row to a random value."""
    vs = {r[0]: r[2] for r in rows}
    out = []
    for i in range(k):
        if i % 2 == 0:
            rid = max(vs, key=vs.__getitem__)
            new = rng.random() * 0.001
        else:
            rid = rng.randrange(len(rows))
            new = rng.random()
        vs[rid] = new
        out.append((rid, new))
    return out


def run_updates(df: Any, handle: Any, rows: list[tuple[Any, ...]],
                ups: list[tuple[int, float]]) -> list[float]:
    current = {r[0]: r for r in rows}
    times = []
    epoch = handle.epoch
    for rid, v in ups:
        old = current[rid]
        new = (old[0], old[1], v)
        current[rid] = new
        t0 = time.perf_counter()
        handle.update(old, -1)
        handle.update(new, 1)
        epoch += 1
        handle.advance_to(epoch)
        df.run()
        times.append(time.perf_counter() - t0)
    return times


def best_of(n: int, f: Any) -> float:
    best = math.inf
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--before-updates", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    ok = True
    after_ms: dict[str, list[float]] = {"agg": [], "topk": []}
    print(f"{'view':5} {'rows':>8} | {'hydrate before':>14} {'after':>8} | "
          f"{'update before ms':>16} {'after ms':>9} {'speedup':>8} | {'duckdb recompute ms':>19}")
    for n in sizes:
        con = duckdb.connect()
        con.execute("SELECT setseed(0.5)")
        con.execute(f"CREATE TABLE t AS SELECT i::INTEGER AS id, (i % {args.groups})::INTEGER AS g,"
                    f" random() AS v FROM range({n}) r(i)")
        rows = con.execute("SELECT id, g, v FROM t ORDER BY id").fetchall()
        rng = random.Random(args.seed)
        ups = updates_for(rng, rows, args.updates)
        for rid, v in ups:
            con.execute("UPDATE t SET v = ? WHERE id = ?", [v, rid])
        # DuckDB 2.0.0 answers `ORDER BY v DESC LIMIT 5` wrongly over an in-memory table after
        # these UPDATEs (rows that only `max(v)` still sees are left out) until a CHECKPOINT.
        con.execute("CHECKPOINT")
        for name, sql in VIEWS.items():
            want = Counter(con.execute(sql).fetchall())
            duck = best_of(3, lambda sql=sql, con=con: con.execute(sql).fetchall())
            results = {}
            for general in (True, False):
                df, handle, cap, hydrate = build(sql, general, rows)
                k = args.before_updates if general else args.updates
                times = run_updates(df, handle, rows, ups[:k])
                if k < len(ups):  # the remaining UPDATEs in one epoch: end at DuckDB's state
                    current = {r[0]: r for r in rows}
                    for rid, v in ups[:k]:
                        current[rid] = (rid, current[rid][1], v)
                    for rid, v in ups[k:]:
                        handle.update(current[rid], -1)
                        current[rid] = (rid, current[rid][1], v)
                        handle.update(current[rid], 1)
                    handle.advance_to(handle.epoch + 1)
                    df.run()
                match = same(Counter(cap.current()), want)
                ok = ok and match
                results[general] = (hydrate, statistics.median(times) * 1000, match)
            (hb, ub, mb), (ha, ua, ma) = results[True], results[False]
            after_ms[name].append(ua)
            print(f"{name:5} {n:>8} | {hb:>13.2f}s {ha:>7.2f}s | {ub:>16.2f} {ua:>9.3f} "
                  f"{ub / ua:>7.0f}x | {duck * 1000:>19.2f}   match={mb and ma}", flush=True)
        con.close()
    print(f"summary: sizes={','.join(map(str, sizes))} "
          f"agg_update_ms={','.join(f'{x:.3f}' for x in after_ms['agg'])} "
          f"topk_update_ms={','.join(f'{x:.3f}' for x in after_ms['topk'])} "
          f"ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
