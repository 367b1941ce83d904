"""Incremental (fueled) merging: a large merge is spread over later steps.

With a small merge threshold, merges are in progress between steps; every read in the meantime
must still see the trace's exact contents, so the maintained output equals recomputation after
every epoch.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from engine import Dataflow
from engine import trace as trace_module


def _dataflow(monkeypatch: pytest.MonkeyPatch, executor: str) -> Dataflow:
    """A dataflow on `executor`: "inprocess", "columnar", or "columnar-two-cores" (every
    fueled merge step of more than one key range split across two threads, in slices of at
    most 64 records)."""
    if executor == "inprocess":
        return Dataflow()
    from engine.columnar import parallel
    from engine.executors import columnar

    # Its tail folding would keep a spine this small to one or two batches.
    monkeypatch.setattr(columnar.ColumnarExecutor, "fold_records", 8)
    if executor == "columnar-two-cores":
        monkeypatch.setattr(parallel, "THREADS", 2)
        monkeypatch.setattr(parallel, "MIN_SORTED", 4)
        monkeypatch.setattr(columnar, "SLICE", 64)
    return Dataflow(executor=columnar.ColumnarExecutor())


EXECUTORS = ["inprocess", "columnar", "columnar-two-cores"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("fuel", [0, 1])
def test_reads_are_exact_while_merges_are_in_progress(
    monkeypatch: pytest.MonkeyPatch, fuel: int, executor: str
) -> None:
    # fuel 0: a merge advances only when a later merge forces it to finish.
    monkeypatch.setattr(trace_module, "LARGE_MERGE", 64)
    monkeypatch.setattr(trace_module, "FUEL_PER_RECORD", fuel)
    monkeypatch.setattr(trace_module, "MERGE_CHUNK", 4)
    df = _dataflow(monkeypatch, executor)
    handle, nums = df.new_input("nums")
    by_key = nums.map(lambda x: (x % 97, x))
    sums = by_key.reduce(lambda k, vs: [(sum(v * r for v, r in vs), 1)]).capture()
    pairs = by_key.join(by_key).map(lambda kv: kv[0]).count().capture()
    rng = random.Random(5)
    live: dict[int, int] = {}
    seen_in_progress = False
    for epoch in range(150):
        for _ in range(15):
            x = rng.randrange(400)
            if live.get(x) and rng.random() < 0.5:
                handle.remove(x)
                live[x] -= 1
            else:
                handle.insert(x)
                live[x] = live.get(x, 0) + 1
        handle.advance_to(epoch + 1)
        df.run()
        seen_in_progress |= any(t.merging is not None for t in df.traces)
        want_sum: dict[int, int] = {}
        want_cnt: dict[int, int] = {}
        for x, n in live.items():
            if n:
                want_sum[x % 97] = want_sum.get(x % 97, 0) + x * n
                want_cnt[x % 97] = want_cnt.get(x % 97, 0) + n
        assert {k: v for (k, v) in sums.current()} == want_sum, epoch
        assert {k: n for (k, n) in pairs.current()} == {
            k: c * c for k, c in want_cnt.items() if c
        }, epoch
    assert seen_in_progress, "the test must exercise merges left in progress between steps"


def _balanced(trace: trace_module.Trace) -> bool:
    """Every adjacent pair of batches newer than the merge in progress is geometric (the newer
    holds less than a `ratio`-th of the older) unless both are below `fold`, and at most FOLD_BATCHES
    batches below `fold` end the spine (its small tail). Pairs up to the merge in progress wait
    for it: one merge is fueled at a time, and `_settle` looks at them when it completes."""
    spine, busy = trace.spine, trace.merging
    first = 0
    if busy is not None:
        first = next(i for i, b in enumerate(spine) if b is busy[1])
    for older, newer in zip(spine[first:], spine[first + 1 :], strict=False):
        if older.records < trace.fold and newer.records < trace.fold:
            continue
        if trace.ratio * newer.records >= older.records:
            return False
    tail = 0
    for b in reversed(spine):
        if b.records >= trace.fold or (busy is not None and (b is busy[0] or b is busy[1])):
            break
        tail += 1
    return tail <= trace_module.FOLD_BATCHES


@pytest.mark.parametrize("executor", EXECUTORS)
def test_spine_stays_geometric_after_fueled_merges(monkeypatch: pytest.MonkeyPatch, executor: str) -> None:
    """A fueled merge finishes after newer batches arrived behind it; its result, as large as
    its predecessor, is merged too, so a lookup visits O(log n) batches. Without that, a spine
    kept runs of similar sizes (twelve at the reachability benchmark's config a)."""
    monkeypatch.setattr(trace_module, "LARGE_MERGE", 64)
    monkeypatch.setattr(trace_module, "FUEL_PER_RECORD", 1)
    monkeypatch.setattr(trace_module, "MERGE_CHUNK", 4)
    df = _dataflow(monkeypatch, executor)
    handle, nums = df.new_input("nums")
    counts = nums.map(lambda x: x % 50).count().capture()
    rng = random.Random(11)
    live: dict[int, int] = {}
    completed_behind = False
    for epoch in range(120):
        # Bursts of different sizes, so that large merges start and finish behind small ones.
        for _ in range(rng.choice([2, 5, 40, 200])):
            x = rng.randrange(5000)
            handle.insert(x)
            live[x % 50] = live.get(x % 50, 0) + 1
        handle.advance_to(epoch + 1)
        busy_before = [t.merging for t in df.traces]
        df.run()
        for t, before in zip(df.traces, busy_before, strict=True):
            assert _balanced(t), (epoch, t.name, [b.records for b in t.spine])
            completed_behind |= before is not None and t.merging is not before and len(t.spine) > 2
        assert {k: n for (k, n) in counts.current()} == live, epoch
    assert completed_behind, "the test must see fueled merges finish with batches behind them"


def test_small_batches_wait_in_the_tail_and_merge_at_once() -> None:
    """One-record epochs on the columnar executor (fold 1024): the small batches gather in the
    spine's tail, never more than FOLD_BATCHES of them, and merge into one; the count stays
    exact after every epoch."""
    from engine.executors.columnar import ColumnarExecutor

    df = Dataflow(executor=ColumnarExecutor())
    handle, nums = df.new_input("nums")
    counts = nums.map(lambda x: x % 7).count().capture()
    rng = random.Random(5)
    live: dict[int, int] = {}
    longest = 0
    folded = False
    held: list[int] = []
    for epoch in range(60):
        if held and rng.random() < 0.3:
            x = held.pop(rng.randrange(len(held)))
            handle.remove(x)
            live[x % 7] -= 1
        else:
            x = rng.randrange(100)
            held.append(x)
            handle.insert(x)
            live[x % 7] = live.get(x % 7, 0) + 1
        handle.advance_to(epoch + 1)
        before = {t.name: len(t.spine) for t in df.traces}
        df.run()
        for t in df.traces:
            assert _balanced(t), (epoch, t.name, [b.records for b in t.spine])
            longest = max(longest, len(t.spine))
            folded |= len(t.spine) < before[t.name]
        assert {k: n for (k, n) in counts.current()} == {k: n for k, n in live.items() if n}, epoch
    assert longest == trace_module.FOLD_BATCHES, "the tail must fill up before it merges"
    assert folded


def test_the_small_tail_merges_each_record_a_few_times() -> None:
    """A trace fed one small batch per epoch (a loop round's) with the columnar executor: the
    tail's merges leave its older batches out while they are more than twice the newer ones
    together, so each record is merged a few times (about log2 of `fold` over the batch
    size), not again with every FOLD_BATCHES new batches until the tail reaches `fold`. The
    trace still holds every update inserted."""
    from engine.columnar.layout import Run
    from engine.executors.columnar import ColumnarExecutor
    from engine.lattice import Antichain

    ex = ColumnarExecutor()
    merged = 0
    merge_many = ex.merge_many

    def counted(runs: list, frontier: Antichain) -> Run:
        nonlocal merged
        merged += sum(r.records for r in runs)
        return merge_many(runs, frontier)

    trace = trace_module.Trace("t", 1, ex.merge, None, fold=ex.fold_records, merge_many=counted)
    rng = random.Random(3)
    inserted = []
    for epoch in range(400):
        ups = [(rng.randrange(10**6), 1, (epoch,), 1) for _ in range(3)]
        inserted += ups
        trace.insert(Run.from_updates(ups, 1, lower=Antichain([(epoch,)]),
                                      upper=Antichain([(epoch + 1,)])))
        trace.maintain()
        assert _balanced(trace), (epoch, [b.records for b in trace.spine])
    # (times are advanced by the trace's frontier as they merge: compare the rest)
    held = sorted((k, v, d) for b in trace.spine for k, v, _, d in b.updates())
    assert held == sorted((k, v, d) for k, v, _, d in inserted)
    # Each record merged at most 5 times on average (4.3 now; 19.5 before the rule: the tail's
    # first batch merged again with every eight new batches of three records).
    assert merged <= 5 * len(inserted), merged / len(inserted)


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_fuel_pays_only_for_the_merge_in_progress(monkeypatch: pytest.MonkeyPatch, executor: str) -> None:
    """A load earns fuel for each of its records. Kept while no merge runs, it paid for every
    later fueled merge whole in the step that started it (a merge of a million records inside
    a single-row update at the reachability benchmark's config a). Unspent fuel is dropped
    when no merge is in progress, so a merge that small batches start advances by what they
    earn, over several steps; the trace still holds every update inserted."""
    from engine.columnar.layout import Run
    from engine.executors.columnar import ColumnarExecutor
    from engine.lattice import Antichain

    monkeypatch.setattr(trace_module, "LARGE_MERGE", 64)
    monkeypatch.setattr(trace_module, "MERGE_CHUNK", 4)
    monkeypatch.setattr(trace_module, "FUEL_PER_RECORD", 1)
    if executor == "columnar":
        monkeypatch.setattr(ColumnarExecutor, "fold_records", 8)
        trace = trace_module.Trace.of_executor("t", 1, ColumnarExecutor())

        def batch(ups: list, epoch: int) -> Any:
            return Run.from_updates(ups, 1, lower=Antichain([(epoch,)]), upper=Antichain([(epoch + 1,)]))
    else:
        trace = trace_module.Trace("t", 1)

        def batch(ups: list, epoch: int) -> Any:
            by_key: dict = {}
            for k, v, t, d in ups:
                by_key.setdefault(k, []).append((v, t, d))
            return trace_module.Batch({k: trace_module.consolidate_entries(es) for k, es in by_key.items()},
                                      Antichain([(epoch,)]), Antichain([(epoch + 1,)]), Antichain([(0,)]))
    rng = random.Random(7)
    inserted = [(rng.randrange(10**6), 1, (0,), 1) for _ in range(5000)]
    trace.insert(batch(inserted, 0))
    trace.maintain()
    spread = 0
    for epoch in range(1, 300):
        ups = [(rng.randrange(10**6), 1, (epoch,), 1) for _ in range(rng.choice([1, 3, 20]))]
        inserted += ups
        trace.insert(batch(ups, epoch))
        trace.maintain()
        assert trace.merging is not None or trace.fuel == 0, epoch
        spread += trace.merging is not None
    assert spread > 0, "a merge started by small batches must take more than one step"
    held: Counter = Counter()
    for b in trace.spine:
        for k, v, _, d in (b.updates() if executor == "columnar" else
                           [(k, v, t, d) for k, es in b.updates.items() for v, t, d in es]):
            held[k, v] += d
    assert held == Counter((k, v) for k, v, _, _ in inserted)
