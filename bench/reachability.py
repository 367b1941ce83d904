"""The differential dataflow roadmap's reachability benchmark.

`reach(root, node)`: `(r, r)` for each of 10 random roots, plus `(r, d)` whenever `(r, n)` is in
reach and `(n, d)` is an edge; distinct pairs. The workload slides a window over the edges:
each update removes the oldest edge and adds a random new one, and is its own epoch. Updates are
submitted in batches of 1, 10 or 100 (every update still its own epoch, so every output keeps
its update's time).

Prints hydration time (ours and DuckDB's WITH RECURSIVE on the same data, same run), updates/s
and p50/p99 latency per batch size (closed loop: submit a batch, run, repeat), the open-loop rate
(`--open-loop`: submit every update, each its own epoch, then run once, as Pathway's pipelined
mode), DuckDB's full-recompute updates/s on the same sliding window in the same run, and peak
RSS; checks the maintained reach set against BFS on a sample of epochs (and exits non-zero on a
mismatch). DuckDB and the oracle run in forked children, and peak RSS in the summary is counted
from the engine's start (`EnginePeak`; the whole process's peak is printed too); the workload's
edges are two int64 arrays (`Window`), sent to the engine and to DuckDB as one Arrow table. The
last line is one machine-readable summary:

    summary: config=<a|b|custom> hydration_vs_duckdb=<x> b1_per_s=<n> b100_per_s=<n>
             open_loop_per_s=<n> duckdb_recompute_per_s=<n> peak_rss_mb=<n> ok=<true|false>

(on one line; a figure that was not measured in the run, such as `b100_per_s` without batch
size 100 in `--batches`, is printed as 0).

    python bench/reachability.py --config b            # N=1,000  M=2,000
    python bench/reachability.py --config b --updates 300 --open-loop
    python bench/reachability.py --config a --updates 200 --batches 1,100
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Dataflow  # noqa: E402
from engine.fields import Fields, JoinFields  # noqa: E402

CONFIGS = {"a": (1_000_000, 2_000_000), "b": (1_000, 2_000)}


def bfs(edges: list[tuple[int, int]], roots: list[int]) -> set[tuple[int, int]]:
    adj: dict[int, list[int]] = {}
    for s, d in edges:
        adj.setdefault(s, []).append(d)
    out: set[tuple[int, int]] = set()
    for r in roots:
        seen = {r}
        q = deque([r])
        while q:
            n = q.popleft()
            for m in adj.get(n, ()):
                if m not in seen:
                    seen.add(m)
                    q.append(m)
        out.update((r, x) for x in seen)
    return out


class Window:
    """The sliding window of edges, held as two int64 arrays (a Python tuple per edge would
    be hundreds of MB of the process's RSS at config a, counted with the engine's): slot
    `head` holds the oldest edge, and a slide overwrites it with the new one."""

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.src, self.dst, self.head = src, dst, 0

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def slide(self, new: tuple[int, int]) -> tuple[int, int]:
        """Replace the oldest edge with `new`; returns the oldest."""
        h = self.head
        old = (int(self.src[h]), int(self.dst[h]))
        self.src[h], self.dst[h] = new
        self.head = (h + 1) % len(self)
        return old

    def edges(self) -> list[tuple[int, int]]:
        return list(zip(self.src.tolist(), self.dst.tolist(), strict=True))

    def table(self) -> Any:
        """The edges as an Arrow table `(src, dst)`, oldest first: what DuckDB loads and the
        engine is sent (`InputHandle.send_columns`)."""
        import pyarrow as pa

        order = np.roll(np.arange(len(self)), -self.head)
        return pa.table({"src": pa.array(self.src[order]), "dst": pa.array(self.dst[order])})


REACH_SQL = (
    "WITH RECURSIVE reach(root, node) AS ("
    " SELECT r, r FROM roots UNION"
    " SELECT reach.root, edges.dst FROM reach JOIN edges ON reach.node = edges.src)"
    " SELECT count(*) FROM reach"
)


def duckdb_hydration(edges: Any, roots: list[int]) -> tuple[float, int, Any]:
    """DuckDB's time to compute the reach set once over the Arrow table `edges`; returns the
    connection for recompute runs."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    # `seq` gives the sliding window its "oldest edge" (DuckDB tables have no order).
    seq = pa.array(range(edges.num_rows), pa.int64())
    edges_tbl = edges.append_column("seq", seq)  # noqa: F841 - read by DuckDB by name
    roots_tbl = pa.table({"r": pa.array(roots, pa.int64())})  # noqa: F841
    con.execute("CREATE TABLE edges AS SELECT * FROM edges_tbl")
    con.execute("CREATE TABLE roots AS SELECT * FROM roots_tbl")
    t0 = time.perf_counter()
    n = con.execute(REACH_SQL).fetchone()[0]
    return time.perf_counter() - t0, n, con


def duckdb_recompute(
    con: Any, edges: Window, new_edges: list[tuple[int, int]], roots: list[int]
) -> tuple[float, bool]:
    """DuckDB applying each slide (delete the oldest edge, insert the new one) and recomputing the
    whole reach set after every one: updates/s, and whether its last answer matched BFS."""
    n_edges = len(edges)
    t0 = time.perf_counter()
    got = 0
    for i, (s, d) in enumerate(new_edges):
        con.execute("DELETE FROM edges WHERE seq = ?", [i])
        con.execute("INSERT INTO edges VALUES (?, ?, ?)", [s, d, n_edges + i])
        got = con.execute(REACH_SQL).fetchone()[0]
    elapsed = time.perf_counter() - t0
    window = edges.edges()[len(new_edges) :] + list(new_edges)  # the window is oldest first
    return len(new_edges) / elapsed, got == len(bfs(window, roots))


def build(executor: str) -> tuple[Dataflow, object, object, object]:
    if executor == "columnar":
        from engine.executors.columnar import ColumnarExecutor

        df = Dataflow(executor=ColumnarExecutor())
    else:
        df = Dataflow()
    edges_in, edges = df.new_input("edges")
    roots_in, roots = df.new_input("roots")
    edges_by_src = edges

    # The projections are `engine.fields` callables: plain Python functions to the in-process
    # executor, moved ids (no Python call per update) to the columnar one.
    def body(reach):  # type: ignore[no-untyped-def]
        e = edges_by_src.enter(reach.scope)
        # (root, node) -> (node, root), joined with edges (node, dst) on node -> (root, dst)
        step = reach.map(Fields(1, 0)).join_map(e, JoinFields("left", "right"))
        return step.concat(reach).distinct()

    reach = roots.map(lambda r: (r, r)).iterate(body)
    cap = reach.capture(history=False, drain=False)
    return df, edges_in, roots_in, cap


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (the peak where it is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return peak_rss_mb()


class EnginePeak:
    """Peak RSS from the moment the engine starts (the workload's data it holds counted, any
    peak before it, such as building that data, not).

    Linux resets the high-water mark (`VmHWM`, and `ru_maxrss` with it) when "5" is written to
    /proc/self/clear_refs; the peak before the reset is kept as part of the whole process's.
    Where the reset is refused, both figures are the whole process's peak."""

    def __init__(self) -> None:
        self.before = peak_rss_mb()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.resets = True
        except OSError:
            self.resets = False

    def mb(self) -> float:
        return _status_mb("VmHWM:") if self.resets else peak_rss_mb()

    def process_mb(self) -> float:
        return max(self.before, self.mb())


def in_child(compute: Callable[[], Any]) -> Any:
    """`compute()` run in a forked child, its (picklable) result sent back through a pipe;
    run here where fork is missing."""
    if not hasattr(os, "fork"):
        return compute()
    import pickle

    sys.stdout.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 2
        try:
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(compute(), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not data:
        raise RuntimeError("the child computing %s failed" % getattr(compute, "__name__", compute))
    return pickle.loads(data)


def oracle_agrees(check: Callable[[], bool]) -> bool:
    """Run `check` (an oracle comparison) in a forked child where possible: the BFS sets and
    the decoded contents it builds (millions of Python objects at config a) then never touch
    this process's memory, so peak RSS is the engine's and stays comparable across runs."""
    if not hasattr(os, "fork"):
        return check()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if check() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="b")
    ap.add_argument("--updates", type=int, default=1000, help="updates per batch size")
    ap.add_argument("--batches", default="1,10,100")
    ap.add_argument("--checks", type=int, default=5, help="epochs checked against BFS per batch size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--sustained",
        type=int,
        default=0,
        help="after the batch runs, this many more single updates; compares p99 early and late",
    )
    ap.add_argument("--nodes", type=int, default=None, help="override the config's N")
    ap.add_argument("--edges", type=int, default=None, help="override the config's M")
    ap.add_argument(
        "--open-loop",
        action="store_true",
        help="also submit --updates updates, each its own epoch, and only then run",
    )
    ap.add_argument(
        "--duckdb-updates",
        type=int,
        default=None,
        help="slides DuckDB recomputes to measure its rate (default: min(--updates, 300))",
    )
    ap.add_argument(
        "--executor",
        choices=["inprocess", "columnar"],
        default="inprocess",
        help="the engine's executor: per-record (the reference) or columnar runs with compiled kernels",
    )
    args = ap.parse_args()

    custom = args.nodes is not None or args.edges is not None
    n_nodes, n_edges = CONFIGS[args.config]
    n_nodes = args.nodes or n_nodes
    n_edges = args.edges or n_edges
    rng = random.Random(args.seed)
    src, dst = np.empty(n_edges, np.int64), np.empty(n_edges, np.int64)
    for i in range(n_edges):
        src[i], dst[i] = rng.randrange(n_nodes), rng.randrange(n_nodes)
    window = Window(src, dst)
    roots = rng.sample(range(n_nodes), 10)
    print("config %s: N=%d M=%d roots=10 executor=%s" % (args.config, n_nodes, n_edges, args.executor))

    table = window.table()
    # DuckDB's full recompute on the same workload shape (its own random new edges, drawn from a
    # separate generator so that the engine's workload is the same with or without it).
    n_duck = args.duckdb_updates if args.duckdb_updates is not None else min(args.updates, 300)

    def duckdb_figures() -> tuple[float, int, float, bool]:
        duck_s, duck_n, con = duckdb_hydration(table, roots)
        rate, agrees = 0.0, True
        if n_duck > 0:
            drng = random.Random(args.seed + 1)
            new = [(drng.randrange(n_nodes), drng.randrange(n_nodes)) for _ in range(n_duck)]
            rate, agrees = duckdb_recompute(con, window, new, roots)
        con.close()
        return duck_s, duck_n, rate, agrees

    # DuckDB runs in a forked child: the memory its allocator keeps after closing is never this
    # process's, so the engine's peak RSS below is the engine's (and the workload's data).
    duck_s, duck_n, duck_rate, duck_ok = in_child(duckdb_figures)
    print("duckdb   hydration: %.3f s (reach %d pairs)" % (duck_s, duck_n))
    if n_duck > 0:
        print("duckdb   full recompute after each update: %.3g updates/s (%d updates)" % (duck_rate, n_duck))
    if not duck_ok:
        print("MISMATCH: DuckDB's recomputed reach differs from BFS")
    engine_peak = EnginePeak()
    print("process RSS before the engine starts: %.0f MB (the workload's edge list and Arrow table)"
          % _status_mb("VmRSS:"))

    def matches_bfs() -> bool:
        """The maintained reach set equals BFS over the current window."""

        def check() -> bool:
            cur = cap.current()
            return set(cur) == bfs(window.edges(), roots) and all(v == 1 for v in cur.values())

        return oracle_agrees(check)

    df, edges_in, roots_in, cap = build(args.executor)
    t0 = time.perf_counter()
    edges_in.send_columns(table)
    roots_in.insert_many(roots)
    edges_in.advance_to(1)
    roots_in.advance_to(1)
    df.run()
    hyd = time.perf_counter() - t0

    def hydrated() -> bool:
        got = cap.current()
        n_got = len(got)
        print("diffsql  hydration: %.3f s (reach %d pairs)  ratio to duckdb %.1fx" % (hyd, n_got, hyd / duck_s))
        if n_got != duck_n or any(v != 1 for v in got.values()):
            print("MISMATCH: hydration reach differs from DuckDB (%d vs %d)" % (n_got, duck_n))
            return False
        return True

    ok = oracle_agrees(hydrated) and duck_ok

    epoch = 1

    def slide(epoch: int) -> int:
        """One update in its own epoch: remove the oldest edge, add a random one."""
        new = (rng.randrange(n_nodes), rng.randrange(n_nodes))
        edges_in.remove(window.slide(new))
        edges_in.insert(new)
        edges_in.advance_to(epoch + 1)
        roots_in.advance_to(epoch + 1)
        return epoch + 1

    # Scheduling overhead: a round (one `step`) with nothing to do, and the rounds one update
    # takes through the loop.
    reps = 200
    t1 = time.perf_counter()
    for _ in range(reps):
        df.step()
    idle_us = (time.perf_counter() - t1) / reps * 1e6
    steps0 = df.steps
    t1 = time.perf_counter()
    epoch = slide(epoch)
    df.run()
    one = time.perf_counter() - t1
    n_rounds = df.steps - steps0
    print(
        "scheduling: idle round %.0f us; one update took %d rounds, %.2f ms (%.0f us per round)"
        % (idle_us, n_rounds, one * 1000, one / max(1, n_rounds) * 1e6)
    )

    rates: dict[int, float] = {}
    for bsize in [int(b) for b in args.batches.split(",") if b]:
        lat: list[float] = []
        n_done = 0
        rounds = max(1, args.updates // bsize)
        check_every = max(1, rounds // max(1, args.checks))
        checking = 0.0
        t_start = time.perf_counter()
        for rnd in range(rounds):
            t1 = time.perf_counter()
            for _ in range(bsize):
                epoch = slide(epoch)
            df.run()
            lat.append(time.perf_counter() - t1)
            n_done += bsize
            if rnd % check_every == check_every - 1:
                t_check = time.perf_counter()
                if not matches_bfs():
                    print("MISMATCH against BFS at epoch %d" % (epoch - 1))
                    ok = False
                # The BFS oracle is not the engine's time (at config a it takes seconds).
                checking += time.perf_counter() - t_check
        elapsed = time.perf_counter() - t_start - checking
        rates[bsize] = n_done / elapsed
        lat_ms = sorted(x * 1000 for x in lat)
        p50 = statistics.median(lat_ms)
        p99 = lat_ms[min(len(lat_ms) - 1, int(0.99 * len(lat_ms)))]
        print(
            "batch %4d: %8.1f updates/s   latency per batch p50 %.2f ms  p99 %.2f ms  (%d updates)"
            % (bsize, n_done / elapsed, p50, p99, n_done)
        )
    open_rate = 0.0
    if args.open_loop and args.updates > 0:
        t1 = time.perf_counter()
        for _ in range(args.updates):
            epoch = slide(epoch)
        df.run()
        open_rate = args.updates / (time.perf_counter() - t1)
        print("open loop: %8.1f updates/s  (%d updates, each its own epoch, submitted before running)" % (open_rate, args.updates))
        if not matches_bfs():
            print("MISMATCH against BFS after the open-loop run")
            ok = False
    if args.sustained:
        lat = []
        for i in range(args.sustained):
            t1 = time.perf_counter()
            epoch = slide(epoch)
            df.run()
            lat.append((time.perf_counter() - t1) * 1000)
            if i in (999, args.sustained - 1):
                recs = sum(s["records"] for s in df.arrangement_stats())
                print("  after %d sustained updates: trace records %d, RSS %.0f MB" % (i + 1, recs, _status_mb("VmRSS:")))
        k = min(1000, len(lat) // 2)
        early, late = sorted(lat[:k]), sorted(lat[-k:])
        p99e, p99l = early[int(0.99 * (k - 1))], late[int(0.99 * (k - 1))]
        print(
            "sustained %d single updates: p99 first %d %.1f ms, last %d %.1f ms (ratio %.2f)"
            % (len(lat), k, p99e, k, p99l, p99l / p99e)
        )
        if not matches_bfs():
            print("MISMATCH against BFS after the sustained run")
            ok = False
    stats = df.arrangement_stats()
    recs = sum(s["records"] for s in stats)
    nbytes = sum(s["bytes"] for s in stats)
    print(
        "trace records held: %d in %d traces, %.1f bytes per held update (arrangement_stats)"
        % (recs, len(stats), nbytes / max(1, recs))
    )
    engine_mb = engine_peak.mb()
    print(
        "peak RSS: %.0f MB from the engine's start (%s; DuckDB and the oracle run in forked"
        " children); %.0f MB for the whole process"
        % (engine_mb, "earlier peaks excluded" if engine_peak.resets else "earlier peaks included",
           engine_peak.process_mb())
    )
    print("results checked against BFS and DuckDB: %s" % ("OK" if ok else "FAILED"))
    print(
        "summary: config=%s hydration_vs_duckdb=%.2f b1_per_s=%.1f b100_per_s=%.1f open_loop_per_s=%.1f"
        " duckdb_recompute_per_s=%.3g peak_rss_mb=%.0f ok=%s"
        % (
            "custom" if custom else args.config,
            hyd / duck_s,
            rates.get(1, 0.0),
            rates.get(100, 0.0),
            open_rate,
            duck_rate,
            engine_mb,
            "true" if ok else "false",
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
