"""The columnar executor runs whole dataflows exactly as the reference (per-record) executor.

Each case below is an existing engine test, re-run with every dataflow on a fresh
`ColumnarExecutor`: the per-operator oracle suite against naive recomputation (root and 2-d
times, three schedules), the interesting-times cases, the reachability, connected-components
and doubly nested SCC dataflows against BFS / networkx, and trace compaction bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import test_engine_compaction as compaction
import test_engine_graphs as graphs
import test_engine_interesting_times as interesting
import test_engine_properties as properties

import engine.executors
from engine.executors.columnar import ColumnarExecutor


@pytest.fixture(autouse=True)
def columnar(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = ColumnarExecutor()
    monkeypatch.setattr(engine.executors, "default_executor", lambda: shared)


def test_the_fixture_selects_the_columnar_executor() -> None:
    from engine import Dataflow

    assert Dataflow().executor.name == "columnar"


@pytest.mark.parametrize("schedule", ["each", "once", "steps"])
@pytest.mark.parametrize("nested", [False, True], ids=["root", "2d"])
@pytest.mark.parametrize("case", properties.CASES, ids=[c.name for c in properties.CASES])
def test_operator_matches_naive(case: Any, nested: bool, schedule: str) -> None:
    properties.test_operator_matches_naive(case, nested, schedule)


CASES: list[tuple[str, Callable[..., None], list[Any]]] = [
    ("distinct_join_of_times", interesting.test_distinct_owes_correction_at_join_of_input_times, [True, False]),
    ("cancelling_inputs", interesting.test_cancelling_inputs_still_owe_retraction, [True, False]),
    ("join_output_later", interesting.test_join_output_later_than_both_inputs, [True, False]),
]


@pytest.mark.parametrize("run_each_epoch", [True, False])
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_interesting_times(name: str, run_each_epoch: bool) -> None:
    {c[0]: c[1] for c in CASES}[name](run_each_epoch)


def test_reachability_sliding_window_equals_bfs() -> None:
    graphs.test_reachability_sliding_window_changing_roots()


def test_connected_components_equal_networkx() -> None:
    graphs.test_connected_components_fig7_under_random_updates()


def test_scc_doubly_nested_equals_networkx() -> None:
    graphs.test_scc_fig8_doubly_nested_under_random_updates()


def test_scc_many_epochs_in_flight() -> None:
    graphs.test_scc_many_epochs_in_flight_equals_stepwise()


def test_reachability_loop_traces_stay_bounded() -> None:
    compaction.test_sliding_window_reachability_loop_traces_stay_bounded()


def test_join_distinct_traces_stay_bounded() -> None:
    compaction.test_sliding_window_join_distinct_traces_stay_bounded()


def test_count_and_join_with_signed_updates() -> None:
    properties.test_count_and_join_with_signed_updates()


def _accumulate_reference(batches: list[list[tuple[Any, int]]]) -> dict[Any, int]:
    acc: dict[Any, int] = {}
    for batch in batches:
        for row, diff in batch:
            acc[row] = acc.get(row, 0) + diff
    return {row: n for row, n in acc.items() if n}


@pytest.mark.parametrize("seed", range(6))
def test_columnar_accumulation_equals_reference(seed: int) -> None:
    """`accumulate` over random batches (ints, pairs, tuples; retractions to zero) equals a
    dict accumulation, after every batch, whatever the batch sizes."""
    import random

    rng = random.Random(seed)
    ex = ColumnarExecutor()
    rows: list[Any] = [rng.randrange(50) for _ in range(20)]
    rows += [(rng.randrange(9), rng.randrange(9)) for _ in range(20)]
    rows += [("s%d" % rng.randrange(5), rng.random() < 0.5) for _ in range(10)]
    acc = None
    batches: list[list[tuple[Any, int]]] = []
    for _ in range(40):
        batch = [(rng.choice(rows), rng.choice([-2, -1, 1, 1, 3]))
                 for _ in range(rng.choice([0, 1, 2, 7, 60]))]
        batches.append(batch)
        acc = ex.accumulate(acc, ex.from_updates([(r, (0,), d) for r, d in batch]))
        assert ex.accumulated(acc) == _accumulate_reference(batches)


@pytest.mark.parametrize("seed", range(3))
def test_columnar_capture_current_equals_per_record_capture(seed: int) -> None:
    """A capture that only accumulates (the columnar path) answers `current()` like the
    per-record capture of the same collection and like recomputation, after every run, also
    when runs leave epochs open (updates held back until their times are complete)."""
    import random
    from collections import Counter

    from engine import Dataflow
    from engine.executors.inprocess import InProcessExecutor

    rng = random.Random(seed)
    flows = []
    for ex in (ColumnarExecutor(), InProcessExecutor()):
        df = Dataflow(executor=ex)
        handle, xs = df.new_input("xs")
        pairs = xs.map(lambda x: (x % 7, x // 7))
        # the map passes updates at open epochs on (the capture holds them back); the distinct
        # sends only complete times
        caps = [pairs.capture(history=False, drain=False),
                pairs.distinct().capture(history=False, drain=False)]
        flows.append((df, handle, caps))
    assert all(c.op.columnar for c in flows[0][2])
    assert not any(c.op.columnar for c in flows[1][2])
    bag: Counter[int] = Counter()
    complete: Counter[int] = Counter()
    epoch = 0
    for _ in range(40):
        inserts = [rng.randrange(40) for _ in range(rng.randrange(6))]
        removes = [x for x in bag if rng.random() < 0.3]
        bag.update(inserts)
        bag.subtract(removes)
        bag = +bag
        close = rng.random() < 0.6
        for df, handle, _caps in flows:
            for x in inserts:
                handle.insert(x)
            for x in removes:
                handle.remove(x)
            if close:
                handle.advance_to(epoch + 1)
            df.run()
        if close:
            epoch += 1
            complete = Counter(bag)
        want_pairs = dict(Counter({(x % 7, x // 7): n for x, n in complete.items()}))
        want_distinct = {(x % 7, x // 7): 1 for x in complete}
        for caps in (flows[0][2], flows[1][2]):
            assert caps[0].current() == want_pairs
            assert caps[1].current() == want_distinct


@pytest.fixture
def split_rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every compiled reduce round of two or more keys split across two threads
    (`engine.columnar.parallel`); the list counts the splits made."""
    from engine.columnar import parallel

    splits: list[int] = []
    both = parallel.both

    def counted(first: Any, second: Any) -> Any:
        splits.append(1)
        return both(first, second)

    monkeypatch.setattr(parallel, "THREADS", 2)
    monkeypatch.setattr(parallel, "MIN_KEYS", 2)
    monkeypatch.setattr(parallel, "both", counted)
    return splits


# The cases whose reduces are compiled rounds (distinct and count, inside loops too).
SPLIT_CASES = {
    "count", "count_keys", "distinct", "join_then_distinct", "reach_iterate", "reach_variable",
    "parity_mutual_recursion", "nested_iterate",
}


@pytest.mark.parametrize("nested", [False, True], ids=["root", "2d"])
@pytest.mark.parametrize(
    "case",
    [c for c in properties.CASES if c.name in SPLIT_CASES],
    ids=lambda c: c.name,
)
def test_split_rounds_match_naive(split_rounds: list[int], case: Any, nested: bool) -> None:
    properties.test_operator_matches_naive(case, nested, "each")
    assert split_rounds, "no reduce round was split"


@pytest.mark.parametrize("nested", [False, True], ids=["root", "2d"])
@pytest.mark.parametrize(
    "case",
    [c for c in properties.CASES if c.name in SPLIT_CASES],
    ids=lambda c: c.name,
)
def test_every_batch_a_trace_holds_is_a_run(monkeypatch: pytest.MonkeyPatch, case: Any, nested: bool) -> None:
    """Every batch inserted into a trace (arrangements and the compiled reduces' outputs,
    some of which skip the sort because they come out in order) is sorted by `(key, val,
    time)` with no equal triples and no zero diff: merges, lookups and compaction rely on it,
    and a batch that breaks it can still give the right answers (so the oracles above would
    not notice)."""
    import numpy as np

    from engine import trace as trace_module
    from engine.columnar import kernels as K
    from engine.columnar.layout import Run

    insert = trace_module.Trace.insert
    checked: list[int] = []

    def checked_insert(self: Any, batch: Any) -> Any:
        if isinstance(batch, Run) and batch.records:
            k, v, t, d = batch.keys, batch.vals, batch.times, batch.diffs
            assert K._sorted(k, v, t), batch
            same = (k[1:] == k[:-1]) & (v[1:] == v[:-1]) & (t[1:] == t[:-1])
            assert not same.any() and np.all(d != 0), batch
            checked.append(batch.records)
        return insert(self, batch)

    monkeypatch.setattr(trace_module.Trace, "insert", checked_insert)
    properties.test_operator_matches_naive(case, nested, "each")
    assert checked


def test_split_rounds_reachability_and_scc(split_rounds: list[int]) -> None:
    graphs.test_reachability_sliding_window_changing_roots()
    graphs.test_scc_many_epochs_in_flight_equals_stepwise()
    assert split_rounds, "no reduce round was split"


def test_split_rounds_work_in_a_forked_child(split_rounds: list[int]) -> None:
    """A process forked after a split (the benchmarks' oracles, a server's workers) splits
    again: it must not hand work to the parent's pool thread, which it does not have."""
    import os
    import signal

    from engine.columnar import parallel

    graphs.test_reachability_sliding_window_changing_roots()
    assert split_rounds and parallel._pool is not None
    pid = os.fork()
    if pid == 0:
        code = 1
        signal.alarm(30)  # a child waiting on a thread it lacks hangs: end it instead
        try:
            before = len(split_rounds)
            graphs.test_reachability_sliding_window_changing_roots()
            code = 0 if len(split_rounds) > before else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_both_waits_for_the_second_half_when_the_first_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """The halves share output columns: `both` returns (or raises) only once both ended."""
    import threading
    import time

    from engine.columnar import parallel

    monkeypatch.setattr(parallel, "THREADS", 2)
    ended = threading.Event()

    def slow() -> int:
        time.sleep(0.2)
        ended.set()
        return 2

    def fails() -> int:
        raise ValueError("first half")

    with pytest.raises(ValueError):
        parallel.both(fails, slow)
    assert ended.is_set()
    assert parallel.both(lambda: 1, slow) == (1, 2)


@pytest.mark.parametrize("seed", range(6))
def test_split_of_many_payloads_equals_the_reference(seed: int) -> None:
    """`ColumnarExecutor.split` of several payloads (each whole on one side of the frontier,
    as a loop's arrangement mostly sees them, or mixed) gives the reference executor's sides."""
    import random
    from collections import Counter

    from engine.executors.inprocess import InProcessExecutor
    from engine.lattice import Antichain

    rng = random.Random(seed)
    ex, ref = ColumnarExecutor(), InProcessExecutor()
    frontier = Antichain([(3, 2), (2, 5)])
    beyond, before = [(3, 2), (3, 7), (2, 5), (4, 0)], [(3, 1), (2, 4), (1, 9), (0, 0)]
    for _ in range(20):
        payloads = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(["ready", "rest", "mixed"])
            times = {"ready": before, "rest": beyond, "mixed": before + beyond}[kind]
            payloads.append([((rng.randrange(5), rng.randrange(5)), rng.choice(times),
                              rng.choice([1, -1, 2])) for _ in range(rng.randint(1, 6))])
        got = ex.split([ex.from_updates(p) for p in payloads], frontier)
        want = ref.split([list(p) for p in payloads], frontier)
        for g, w in zip(got, want, strict=True):
            assert Counter(ex.collect(g) if len(g) else []) == Counter(w), payloads


def test_key_filters_only_for_runs_a_round_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reduce round of n keys searches a run through its key filter when the run holds at
    least SEARCH_MIN records and SEARCH_SPARSE per key; with no such run there is no filter
    list at all (its run tables skip the filters)."""
    import numpy as np

    from engine.columnar import kernels as K
    from engine.columnar.layout import Run
    from engine.executors.columnar import _key_filters

    monkeypatch.setattr(K, "SEARCH_MIN", 64)
    monkeypatch.setattr(K, "SEARCH_SPARSE", 8)

    def run(n: int) -> Run:
        k = np.arange(n, dtype=np.int64)
        z = np.zeros(n, np.int64)
        return Run.from_arrays(k, z, z, z + 1, 1)

    small, mid, big = run(40), run(70), run(300)
    assert _key_filters([small, small], 1) is None
    assert _key_filters([], 1) is None
    got = _key_filters([big, mid, small], 1)
    assert got is not None
    assert got[0] is big.key_filter() and got[1] is mid.key_filter() and not got[2].shape[0]
    # 20 keys: a run is searched through a filter from 160 records on
    got = _key_filters([big, mid, small], 20)
    assert got is not None and got[0] is big.key_filter() and not got[1].shape[0]
    assert _key_filters([mid, small], 20) is None
