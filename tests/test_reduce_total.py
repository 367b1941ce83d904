"""reduce_total (per-group incremental state over totally ordered times) against the general
reduce, the reference: seeded random update streams with many epochs, inserts, deletes,
updates, NULLs, duplicates, NaN and infinities, under different batchings of the same epochs;
and per-change work that does not grow with the group (an instrumentation counter)."""

from __future__ import annotations

import datetime
import decimal
import math
import random
from collections import Counter
from typing import Any

import pytest

from engine import Dataflow
from engine.canonical import canonical
from engine.operators.reduce_total import ReduceTotalOp
from planner.aggregate import (
    IncrementalAggregates,
    IncrementalTopK,
    TopKState,
    reduce_group,
    topk_rows,
)
from planner.errors import EvaluationError
from planner.ir import Agg, SortKey

# Rows: (g, a INTEGER, c DOUBLE, m DECIMAL(8,2), s VARCHAR)
G, A, C, M, S = range(5)

AGGS = (
    Agg("count_star", None, False, "BIGINT"),
    Agg("count", A, False, "BIGINT"),
    Agg("count", C, True, "BIGINT"),
    Agg("count", S, True, "BIGINT"),
    Agg("sum", A, False, "HUGEINT"),
    Agg("sum", A, True, "HUGEINT"),
    Agg("sum", C, False, "DOUBLE"),
    Agg("sum", M, False, "DECIMAL(38,2)"),
    Agg("avg", A, False, "DOUBLE"),
    Agg("avg", C, False, "DOUBLE"),
    Agg("avg", C, True, "DOUBLE"),
    Agg("avg", M, False, "DOUBLE"),
    Agg("min", A, False, "INTEGER"),
    Agg("max", A, False, "INTEGER"),
    Agg("min", C, False, "DOUBLE"),
    Agg("max", C, False, "DOUBLE"),
    Agg("min", M, False, "DECIMAL(8,2)"),
    Agg("max", S, False, "VARCHAR"),
    Agg("min", S, True, "VARCHAR"),
    Agg("var_pop", C, False, "DOUBLE"),
    Agg("var_samp", A, True, "DOUBLE"),
    Agg("stddev_samp", M, False, "DOUBLE"),
    Agg("stddev_pop", A, False, "DOUBLE"),
    Agg("covar_pop", A, False, "DOUBLE", arg2=C),
    Agg("covar_samp", A, False, "DOUBLE", arg2=M),
    Agg("corr", A, False, "DOUBLE", arg2=C),
)

FLOATS = [0.5, 1.25, -3.5, 0.1, 0.2, 1e16, -1e16, 3.0, 2.5, 1e-300]
NONFINITE = [math.inf, -math.inf, math.nan]
STRINGS = ["x", "y", "ab", "Ba", "q"]


def random_row(rng: random.Random, groups: int, nonfinite: bool) -> tuple[Any, ...]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.2 else v

    floats = FLOATS + NONFINITE if nonfinite and rng.random() < 0.3 else FLOATS
    return canonical((
        rng.randrange(groups),
        maybe(rng.randint(-3, 8)),
        maybe(rng.choice(floats)),
        maybe(decimal.Decimal(rng.randint(-500, 2000)) / 100),
        maybe(rng.choice(STRINGS)),
    ))


def random_stream(seed: int, epochs: int, groups: int = 4, nonfinite: bool = False,
                  initial: int = 0) -> list[list[tuple[tuple[Any, ...], int]]]:
    """Per epoch, the (row, diff) changes: inserts (often of duplicates), deletes and updates
    (a delete and an insert in the same epoch) of rows that exist, so counts stay positive;
    `initial` inserts in the first epoch (a group's first large batch is built in bulk)."""
    rng = random.Random(seed)
    live: Counter[tuple[Any, ...]] = Counter()
    out = []
    for e in range(epochs):
        changes: list[tuple[tuple[Any, ...], int]] = []
        for _ in range(initial if e == 0 else rng.randint(0, 6)):
            op = rng.random()
            rows = list(live.elements())
            if op < 0.45 or not rows:
                row = rng.choice(rows) if rows and rng.random() < 0.3 else random_row(
                    rng, groups, nonfinite)
                n = rng.choice([1, 1, 1, 2])
                live[row] += n
                changes.append((row, n))
            elif op < 0.75:
                row = rng.choice(rows)
                live[row] -= 1
                changes.append((row, -1))
            else:
                old = rng.choice(rows)
                new = canonical((old[G],) + random_row(rng, groups, nonfinite)[1:])
                live[old] -= 1
                live[new] += 1
                changes += [(old, -1), (new, 1)]
            live = +live
        out.append(changes)
    return out


def run_both(stream: list[list[tuple[tuple[Any, ...], int]]], fast: Any, reference: Any,
             chunks: list[int]) -> tuple[Any, Any, Any]:
    """Run `fast` (a reduce_total state factory) and `reference` (general reduce logic) on the
    same keyed stream, running the dataflow after each chunk of epochs."""
    df = Dataflow()
    handle, rows = df.new_input("rows")
    keyed = rows.map(lambda row: ((row[G],), row))
    fast_c = keyed.reduce_total(fast, "fast")
    op = fast_c.op
    fast_cap = fast_c.capture()
    ref_cap = keyed.reduce(reference, "reference").capture()
    epoch = 0
    for size in chunks:
        for changes in stream[epoch:epoch + size]:
            for row, d in changes:
                handle.update(row, d)
            epoch += 1
            handle.advance_to(epoch)
        df.run()
    assert epoch == len(stream)
    handle.close()
    df.run()
    return op, fast_cap, ref_cap


def accumulated(cap: Any, epoch: int) -> Counter[Any]:
    acc: Counter[Any] = Counter()
    for d, t, r in cap.updates:
        if t[0] <= epoch:
            acc[d] += r
    return +acc


def same_value(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y or math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-300)
    return x == y and type(x) is type(y)


def assert_same_rows(fast: Counter[Any], ref: Counter[Any], where: str) -> None:
    f = sorted(fast.items(), key=lambda kv: repr(kv[0][0]))
    r = sorted(ref.items(), key=lambda kv: repr(kv[0][0]))
    assert len(f) == len(r), (where, f, r)
    for (fd, fm), (rd, rm) in zip(f, r, strict=True):
        assert fm == rm, (where, fd, rd)
        assert fd[0] == rd[0], (where, fd, rd)
        assert len(fd[1]) == len(rd[1])
        for i, (x, y) in enumerate(zip(fd[1], rd[1], strict=True)):
            assert same_value(x, y), (where, i, fd, rd)


def reference_aggs(aggs: tuple[Agg, ...]) -> Any:
    return lambda key, vals: [(canonical(reduce_group(aggs, vals)), 1)]


def chunkings(rng: random.Random, n: int) -> list[list[int]]:
    random_chunks = []
    left = n
    while left:
        k = min(left, rng.randint(1, 7))
        random_chunks.append(k)
        left -= k
    return [[1] * n, [n], random_chunks]


@pytest.mark.parametrize("seed", range(6))
def test_aggregates_equal_general_reduce(seed: int) -> None:
    stream = random_stream(seed, epochs=60, nonfinite=seed % 2 == 1,
                           initial=200 if seed % 3 == 0 else 0)
    rng = random.Random(seed)
    for chunks in chunkings(rng, len(stream)):
        op, fast, ref = run_both(stream, IncrementalAggregates(AGGS), reference_aggs(AGGS),
                                 chunks)
        for epoch in range(len(stream)):
            assert_same_rows(accumulated(fast, epoch), accumulated(ref, epoch),
                             f"seed {seed} chunks {chunks[:3]} epoch {epoch}")
        # Nothing emitted is left without cause: per time, each key's output changes at most
        # by one retraction and one insertion.
        per_time: Counter[Any] = Counter()
        for (key, _), t, _r in fast.updates:
            per_time[(key, t)] += 1
        assert max(per_time.values(), default=0) <= 2
        assert list(op.capabilities()) == []


def test_floats_sum_exactly_under_retraction() -> None:
    """Exact float sums: removing 1e16 leaves 0.5 + 0.25, not a rounding residue."""
    aggs = (Agg("sum", C, False, "DOUBLE"), Agg("avg", C, False, "DOUBLE"))
    stream = [[((0, None, 1e16, None, None), 1), ((0, None, 0.5, None, None), 1)],
              [((0, None, 0.25, None, None), 1)],
              [((0, None, 1e16, None, None), -1)]]
    _, fast, _ = run_both(stream, IncrementalAggregates(aggs), reference_aggs(aggs), [1, 1, 1])
    assert accumulated(fast, 2) == Counter({((0,), (0.75, 0.375)): 1})


@pytest.mark.parametrize("seed", range(6))
def test_topk_equals_general_reduce(seed: int) -> None:
    rng = random.Random(100 + seed)
    stream = random_stream(100 + seed, epochs=50, groups=3, nonfinite=seed % 2 == 1,
                           initial=200 if seed % 3 == 0 else 0)
    order = tuple(SortKey(col, rng.random() < 0.5, rng.random() < 0.5)
                  for col in rng.sample([A, C, M, S], rng.randint(1, 3)))
    limit = rng.choice([None, 1, 2, 3, 5])
    offset = rng.choice([0, 0, 1, 2])

    def reference(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return topk_rows(vals, order, limit, offset)

    for chunks in chunkings(rng, len(stream)):
        op, fast, ref = run_both(stream, IncrementalTopK(order, limit, offset), reference,
                                 chunks)
        for epoch in range(len(stream)):
            assert accumulated(fast, epoch) == accumulated(ref, epoch), (order, limit, offset)
        assert list(op.capabilities()) == []


def _stream(rng: random.Random, epochs: list[tuple[int, str]], ends: int, aimed: float,
            inserts: float = 0.25) -> list[list[tuple[tuple[Any, ...], int]]]:
    """Epochs of changes to rows in 2 groups whose first ORDER BY columns (A: ints with ties,
    C: floats with ties and -0.0) are numeric. An epoch is (size, mode): "insert" inserts;
    "top" takes out the best or the worst row by A or C (walking the window into the
    reserve); "mixed" inserts (`inserts` of the time), puts back a row taken out (a tenth), or
    takes out one of the `ends` best or worst by A or C (`aimed` of the time; else any row)."""
    floats = [x / 4 for x in range(-40, 40)] + [-0.0, 1e16, -1e16]

    def row() -> tuple[Any, ...]:
        return canonical((rng.randrange(2), rng.randint(-60, 60), rng.choice(floats),
                          None, rng.choice(STRINGS)))

    live: Counter[tuple[Any, ...]] = Counter()
    out: list[list[tuple[tuple[Any, ...], int]]] = []
    gone: list[tuple[Any, ...]] = []
    for size, mode in epochs:
        changes: list[tuple[tuple[Any, ...], int]] = []
        for _ in range(size):
            op = rng.random()
            rows = list(live)
            if mode == "top" and rows:
                col = rng.choice([A, C])
                pick = min if rng.random() < 0.5 else max
                r = pick(rows, key=lambda x: (x[col], repr(x)))
                n = -live[r]
                gone.append(r)
            elif mode == "insert" or op < inserts or not rows:
                r = row()
                n = rng.choice([1, 1, 2])
            elif op < inserts + 0.1 and gone:
                r, n = rng.choice(gone), 1  # put back a row taken out
            else:
                # take out one of the best or worst by A or C (the window's side or the far end)
                col = rng.choice([A, C])
                ranked = sorted(rows, key=lambda x: (x[col], repr(x)))
                r = rng.choice(ranked[:ends] + ranked[-ends:]) if rng.random() < aimed else \
                    rng.choice(rows)
                n = -live[r] if rng.random() < 0.7 else -1
                gone.append(r)
            live[r] += n
            changes.append((r, n))
            live = +live
        out.append(changes)
    return out


def _ranked_stream(seed: int, epochs: int, initial: int) -> list[list[tuple[tuple[Any, ...], int]]]:
    """A hydration of `initial` rows, then changes aimed at the top of the order (so the
    window eats into the reserve), below it, and rows taken out and put back."""
    rng = random.Random(seed)
    sizes = [(initial, "insert")] + [(rng.randint(1, 8), "mixed") for _ in range(epochs - 1)]
    return _stream(rng, sizes, ends=6, aimed=0.8)


def _numeric_topk(rng: random.Random) -> tuple[tuple[SortKey, ...], int, int, Any]:
    """A random ORDER BY whose first key is A or C (numeric), a LIMIT and an OFFSET, and the
    reference reduce for them."""
    first = SortKey(rng.choice([A, C]), rng.random() < 0.5, rng.random() < 0.5)
    order = (first,) + tuple(SortKey(col, rng.random() < 0.5, rng.random() < 0.5)
                             for col in rng.sample([C, S], rng.randint(0, 2)) if col != first.col)
    limit = rng.choice([1, 3, 5])
    offset = rng.choice([0, 0, 2])

    def reference(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return topk_rows(vals, order, limit, offset)

    return order, limit, offset, reference


def _equal_under_every_batching(rng: random.Random, stream: Any, order: Any, limit: int,
                                offset: int, reference: Any) -> None:
    """After every epoch, under every batching, the window equals the reference's."""
    for chunks in chunkings(rng, len(stream)):
        _, fast, ref = run_both(stream, IncrementalTopK(order, limit, offset), reference, chunks)
        for epoch in range(len(stream)):
            assert accumulated(fast, epoch) == accumulated(ref, epoch), (order, limit, offset)


@pytest.mark.parametrize("seed", range(8))
def test_topk_reserve_equals_general_reduce(seed: int) -> None:
    """A hydration large enough to index only the window's candidates (TopKState's reserve):
    after every epoch, under every batching, the window equals the reference's."""
    rng = random.Random(seed)
    stream = _ranked_stream(seed, epochs=80, initial=rng.choice([300, 1000]))
    order, limit, offset, reference = _numeric_topk(rng)

    # the hydration left most rows of each group in the reserve
    op, _, _ = run_both(stream[:1], IncrementalTopK(order, limit, offset), reference, [1])
    assert all(st.reserve_live > len(st.index) for st in op.states.values())
    _equal_under_every_batching(rng, stream, order, limit, offset, reference)


def _bulk_stream(seed: int, small: int, big: int) -> list[list[tuple[tuple[Any, ...], int]]]:
    """`small` epochs of a few inserted rows (indexed one by one, so no reserve), then `big`
    large batches of 40-300 changes (new rows far from the window wait in the reserve), each
    followed by single changes taking out the best or worst rows (a refill raises the bound
    the next batch compares with), then single mixed changes."""
    rng = random.Random(seed)
    sizes = [(rng.randint(20, 30), "insert") for _ in range(small)]
    for _ in range(big):
        sizes += [(rng.randint(40, 300), "mixed")] + [(1, "top")] * rng.randint(2, 12)
    return _stream(rng, sizes + [(1, "mixed")] * 40, ends=4, aimed=0.7, inserts=0.6)


@pytest.mark.parametrize("seed", range(10))
def test_topk_large_later_batches_equal_general_reduce(seed: int) -> None:
    """Large batches after the first (a bulk INSERT into a populated table) put the rows far
    from the window in the reserve: after every epoch, under every batching, the window
    equals the reference's, and the reserve was used."""
    rng = random.Random(seed)
    stream = _bulk_stream(seed, small=rng.choice([0, 25]), big=12)
    order, limit, offset, reference = _numeric_topk(rng)

    _equal_under_every_batching(rng, stream, order, limit, offset, reference)
    # the large batches did put rows in the reserve
    reserved = 0
    merge_reserve = TopKState._merge_reserve

    def counted(st: TopKState, rows: list[Any], vals: Any) -> None:
        nonlocal reserved
        reserved += len(rows)
        merge_reserve(st, rows, vals)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TopKState, "_merge_reserve", counted)
        run_both(stream, IncrementalTopK(order, limit, offset), reference, [len(stream)])
    assert reserved > 0


@pytest.mark.parametrize("desc", [False, True])
def test_topk_batch_after_a_refill_compares_with_the_raised_bound(desc: bool) -> None:
    """A large batch after the window walked into the reserve: rows better than the raised
    bound go to the index (not the reserve), so the window shows them."""
    order = (SortKey(0, desc=desc),)
    st = IncrementalTopK(order, 5, 0)(None)
    sign = -1 if desc else 1
    st.apply([((sign * v * 10, v), 1) for v in range(1000)])  # hydration: 5 indexed
    assert st.reserve_live > 900
    for v in range(5):  # the five best leave: the window takes the next five from the reserve
        st.apply([((sign * v * 10, v), -1)])
        st.output()
    # rows between the hydration's boundary (40) and the raised bound (90), and far ones
    batch = [((sign * v, -v), 1) for v in (41, 42, 43, 44)]
    batch += [((sign * (100_000 + v), -v), 1) for v in range(40)]
    st.apply(batch)
    got, _ = st.output()
    assert got == topk_rows(list(st.contents().items()), order, 5, 0)
    assert [r[0] * sign for r, _ in got] == [41, 42, 43, 44, 50]
    assert st.reserve_live > 900  # the far rows joined the reserve


@pytest.mark.parametrize("desc", [False, True])
def test_topk_decimal_reserve_keeps_its_scale(desc: bool) -> None:
    """DECIMAL first ORDER BY values rank by their unscaled ints at the values' one scale
    (`reserve_scale`): a hydration reserves the far rows, a later batch at that scale joins
    the reserve where far, and one whose Decimals have another exponent (equal values could
    hold other unscaled ints) is indexed instead; the window equals the reference after each."""
    from decimal import Decimal

    order = (SortKey(0, desc=desc),)
    sign = -1 if desc else 1
    st = IncrementalTopK(order, 5, 0)(None)
    st.apply([((Decimal(sign * v).scaleb(-2), v), 1) for v in range(1000)])
    assert st.reserve_scale == 2 and st.reserve_live > 900
    far = [((Decimal(sign * (50_000 + v)).scaleb(-2), -v), 1) for v in range(200)]
    st.apply(far)
    assert st.reserve_live > 1100  # far, at the reserve's scale: reserved
    got, _ = st.output()
    assert got == topk_rows(list(st.contents().items()), order, 5, 0)
    live = st.reserve_live
    other = [((Decimal(sign * (60_000 + v)).scaleb(-1), -v - 1000), 1) for v in range(200)]
    # better than every row held (below 0 ascending, above 0 descending)
    near = [((Decimal(-sign * (10 + v)).scaleb(-1), -v - 5000), 1) for v in range(3)]
    st.apply(other + near)
    assert st.reserve_live == live  # another exponent: every row indexed
    got, _ = st.output()
    assert got == topk_rows(list(st.contents().items()), order, 5, 0)
    assert {r[1] for r, _ in got[:3]} == {-5000, -5001, -5002}
    mixed = [((Decimal(sign * (70_000 + v)).scaleb(-2 + v % 2), -v - 9000), 1)
             for v in range(100)]
    live = st.reserve_live
    st.apply(mixed)
    assert st.reserve_live == live  # two exponents in the batch: indexed
    got, _ = st.output()
    assert got == topk_rows(list(st.contents().items()), order, 5, 0)


def test_topk_hydration_indexes_only_the_window() -> None:
    """100,000 rows in one group: the index holds the window's candidates, not the group;
    then every row is deleted from the top, and each change still costs O(k log n)."""
    k = 5
    topk = IncrementalTopK((SortKey(1, desc=True),), k, 0)
    df = Dataflow()
    handle, rows = df.new_input()
    op: ReduceTotalOp = rows.map(lambda r: ((r[0],), r)).reduce_total(topk).op
    n = 100_000
    handle.send(((0, v), 1) for v in range(n))
    handle.advance_to(1)
    df.run()
    st = op.states[(0,)]
    assert len(st.index) == k and st.reserve_live == n - k
    worst = 0
    for i in range(3 * k):
        before = op.records_touched
        handle.remove((0, n - 1 - i))
        handle.advance_to(2 + i)
        df.run()
        worst = max(worst, op.records_touched - before)
    assert worst <= 4 * math.log2(n) + 8 * k + 8, worst
    assert len(st.index) <= 4 * k


def test_single_raises_like_reference() -> None:
    aggs = (Agg("single", A, False, "INTEGER", "(SELECT a)"),)
    ok = [[((0, 5, None, None, None), 1), ((1, None, None, None, None), 1)]]
    _, fast, _ = run_both(ok, IncrementalAggregates(aggs), reference_aggs(aggs), [1])
    assert accumulated(fast, 0) == Counter({((0,), (5,)): 1, ((1,), (None,)): 1})
    two = [[((0, 5, None, None, None), 1), ((0, 6, None, None, None), 1)]]
    with pytest.raises(EvaluationError):
        run_both(two, IncrementalAggregates(aggs), reference_aggs(aggs), [1])


def test_sum_overflow_raises() -> None:
    aggs = (Agg("sum", A, False, "INTEGER"),)
    big = [[((0, 2 ** 30, None, None, None), 2)]]
    with pytest.raises(EvaluationError):
        run_both(big, IncrementalAggregates(aggs), lambda k, v: [], [1])


def test_decimal_sum_past_38_digits_raises() -> None:
    """SUM of a DECIMAL(38,10) past 38 digits raises, as DuckDB's "Overflow in SUM of
    DECIMAL" (the view held a 39-digit value, and /query over it answered 500); by the
    reduce's accumulators and by the reference."""
    import decimal

    from planner.aggregate import reduce_group

    aggs = (Agg("sum", A, False, "DECIMAL(38,10)"),)
    top = decimal.Decimal("9999999999999999999999999999.9999999999")
    big = [[((0, top, None, None, None), 1), ((0, decimal.Decimal(1), None, None, None), 1)]]
    with pytest.raises(EvaluationError):
        run_both(big, IncrementalAggregates(aggs), lambda k, v: [], [1])
    with pytest.raises(EvaluationError):
        reduce_group(aggs, big[0])
    assert reduce_group(aggs, big[0][:1]) == (top,)


def test_needs_totally_ordered_times() -> None:
    df = Dataflow(dims=2)
    _, rows = df.new_input()
    with pytest.raises(ValueError):
        rows.map(lambda r: (r, r)).reduce_total(IncrementalAggregates(AGGS[:1]))


def test_state_reported_and_released() -> None:
    df = Dataflow()
    handle, rows = df.new_input()
    rows.map(lambda r: ((r[G],), r)).reduce_total(IncrementalAggregates(AGGS), "agg")
    for i in range(100):
        handle.insert((i % 3, i, float(i), None, "x"))
    handle.advance_to(1)
    df.run()
    stats = {s["name"]: s for s in df.arrangement_stats()}
    assert stats["agg"]["records"] > 100
    for i in range(100):
        handle.remove((i % 3, i, float(i), None, "x"))
    handle.advance_to(2)
    df.run()
    stats = {s["name"]: s for s in df.arrangement_stats()}
    assert stats["agg"]["records"] == 0


# -- per-change work ----------------------------------------------------------------------------

def _touched_by_update(new_state: Any, n: int, old: tuple[Any, ...],
                       new: tuple[Any, ...]) -> tuple[int, list[Any]]:
    """Records touched by updating row `old` to `new` in a group of `n` rows (v = 0..n-1)."""
    df = Dataflow()
    handle, rows = df.new_input()
    out = rows.map(lambda r: ((r[0],), r)).reduce_total(new_state)
    op: ReduceTotalOp = out.op
    cap = out.capture()
    handle.send(((0, v), 1) for v in range(n))
    handle.advance_to(1)
    df.run()
    before = op.records_touched
    handle.update(old, -1)
    handle.update(new, 1)
    handle.advance_to(2)
    df.run()
    return op.records_touched - before, [u for u in cap.updates if u[1] == (1,)]


@pytest.mark.parametrize("func", ["sum", "count", "avg", "count_star"])
def test_abelian_work_is_constant(func: str) -> None:
    aggs = (Agg(func, None if func == "count_star" else 1, False, "HUGEINT"),)
    small, _ = _touched_by_update(IncrementalAggregates(aggs), 1_000, (0, 500), (0, 7))
    large, _ = _touched_by_update(IncrementalAggregates(aggs), 100_000, (0, 500), (0, 7))
    assert small == large <= 4


@pytest.mark.parametrize("func", ["min", "max"])
def test_min_max_work_is_logarithmic(func: str) -> None:
    aggs = (Agg(func, 1, False, "INTEGER"),)
    for n in (1_000, 100_000):
        # delete the current extreme: the next one comes from the index, not a scan
        extreme = 0 if func == "min" else n - 1
        touched, changes = _touched_by_update(IncrementalAggregates(aggs), n, (0, extreme),
                                              (0, n // 2))
        assert touched <= 4 * math.log2(n) + 8, (n, touched)
        assert len(changes) == 2


def test_topk_work_is_logarithmic_plus_k() -> None:
    k = 5
    for n in (1_000, 100_000):
        topk = IncrementalTopK((SortKey(1, desc=True),), k, 0)
        touched, changes = _touched_by_update(topk, n, (0, n - 1), (0, -1))
        assert touched <= 4 * math.log2(n) + 2 * k + 8, (n, touched)
        assert sorted((d[1], r) for d, _, r in changes) == [((0, n - 6), 1), ((0, n - 1), -1)]
        # a change below the window touches the index, and emits nothing
        touched, changes = _touched_by_update(IncrementalTopK((SortKey(1, desc=True),), k, 0),
                                              n, (0, 3), (0, -5))
        assert touched <= 4 * math.log2(n) + 2 * k + 8, (n, touched)
        assert changes == []


# -- through the planner: both lowerings equal DuckDB after every batch --------------------------

SQL_VIEWS = [
    "SELECT a, count(*), count(b), count(DISTINCT b), sum(c), avg(c), min(b), max(d), "
    "sum(DISTINCT a), avg(DISTINCT c) FROM t GROUP BY a",
    "SELECT b, var_pop(c), var_samp(a), stddev_samp(c), stddev_pop(a), covar_pop(a, c), "
    "covar_samp(c, a), corr(a, c) FROM t GROUP BY b",
    "SELECT a, sum(m), avg(m), min(m), max(s), count(DISTINCT s) FROM u GROUP BY a",
    "SELECT count(*), sum(a), max(c), min(d), min(flag), max(b) FROM t",
    "SELECT * FROM t ORDER BY c DESC NULLS LAST, id LIMIT 3",
    "SELECT id, b FROM t ORDER BY b NULLS FIRST, id DESC LIMIT 4 OFFSET 2",
    "SELECT a, id FROM u ORDER BY m DESC, id LIMIT 5",
]


@pytest.mark.parametrize("general", [False, True])
def test_sql_views_both_lowerings(general: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from planner_support import World, catalog, replay_against_duckdb

    from planner import compile_view

    if general:
        monkeypatch.setenv("DIFFSQL_GENERAL_REDUCE", "1")
    else:
        monkeypatch.delenv("DIFFSQL_GENERAL_REDUCE", raising=False)
    df = Dataflow()
    cat = catalog()
    sources = {name: df.new_input(name)[1] for name in ("t", "u", "e")}
    for sql in SQL_VIEWS:
        compile_view(sql, cat).build(df, sources)
    used = any(isinstance(op, ReduceTotalOp) for op in df.ops)
    assert used != general
    replay_against_duckdb(World(7 if general else 8), SQL_VIEWS, batches=21)


# -- bulk paths (a group's first batch of insertions) against the per-change reference --------

def _sum_state(acc: Any) -> tuple[Any, ...]:
    total = acc.total()
    return (acc.n, acc.n_float, acc.scaled, acc.pinf, acc.ninf, acc.nan, acc.exact,
            "nan" if isinstance(total, float) and math.isnan(total) else total)


def _random_float(rng: random.Random, lo: int, hi: int) -> float:
    return math.ldexp(rng.uniform(-1.0, 1.0), rng.randint(lo, hi))


@pytest.mark.parametrize("seed", range(40))
def test_exact_sum_add_ones_equals_add(seed: int) -> None:
    """`_ExactSum.add_ones` (one sum, a NumPy scaling of float columns) leaves the state that
    `add(v, 1)` per value leaves: ints, floats of narrow and of extreme ranges (subnormals,
    near DBL_MAX: one scale cannot hold both), infinities, NaN, -0.0, DECIMALs, mixtures."""
    from planner.aggregate import _ExactSum

    rng = random.Random(seed)
    n = rng.choice([0, 5, 63, 64, 200, 1000])
    kind = seed % 5
    if kind == 0:
        values: list[Any] = [rng.randint(-(2**70), 2**70) for _ in range(n)]
    elif kind == 1:
        values = [_random_float(rng, -30, 30) for _ in range(n)]
    elif kind == 2:
        values = [rng.choice([_random_float(rng, -1074, 1024), 5e-324, -0.0, 0.0,
                              1.7976931348623157e308, math.inf, -math.inf, math.nan])
                  for _ in range(n)]
    elif kind == 3:
        values = [rng.choice([_random_float(rng, -60, 60), math.inf, math.nan, -0.0])
                  for _ in range(n)]
    else:
        values = [rng.choice([rng.randint(-9, 9), _random_float(rng, -5, 5),
                              decimal.Decimal(rng.randint(-999, 999)) / 100]) for _ in range(n)]
    values = [canonical(v) for v in values]
    bulk, one = _ExactSum(), _ExactSum()
    if rng.random() < 0.5:  # a state that already holds something
        for acc in (bulk, one):
            acc.add(7, 1)
            acc.add(0.125, 1)
    bulk.add_ones(values)
    for v in values:
        one.add(v, 1)
    assert _sum_state(bulk) == _sum_state(one)


def _agg_state(st: Any) -> tuple[Any, ...]:
    accs = [list(a) if isinstance(a, list) else
            _sum_state(a) if hasattr(a, "scaled") else
            (a.n, a.nonfinite, a.sx, a.sy, a.sxx, a.syy, a.sxy) for a in st.accs]
    return (st.rows, {k: dict(v) for k, v in st.values.items()},
            {k: [repr(e) for e in v] for k, v in st.index.items()}, accs)


@pytest.mark.parametrize("seed", range(30))
def test_bulk_build_equals_incremental_apply(seed: int) -> None:
    """A group's first large batch of insertions (`AggregateState._build`: Counter maps, one
    sort of plain numbers, bulk sums) gives the state, output and later behaviour of the
    same rows applied in small batches by the per-change path."""
    rng = random.Random(seed)
    nonfinite = seed % 3 == 0
    rows = [random_row(rng, 1, nonfinite) for _ in range(rng.choice([40, 100, 400]))]
    if seed % 4 == 1:  # floats only from one narrow range: the NumPy sum, the sorted index
        rows = [r[:C] + (None if r[C] is None else _random_float(rng, -8, 8),) + r[C + 1:]
                for r in rows]
    rows = [canonical(r) for r in rows]
    plan = IncrementalAggregates(AGGS)
    bulk, small, vals = plan(None), plan(None), plan(None)
    bulk.apply([(r, 1) for r in rows])
    vals.apply_vals(rows, 1)  # the same rows given bare, with their one diff (engine.rows_at)
    for i in range(0, len(rows), 16):
        small.apply([(r, 1) for r in rows[i:i + 16]])
    assert _agg_state(bulk) == _agg_state(small) == _agg_state(vals)
    assert bulk.output() == small.output() == vals.output()
    later = [(rows[0], -1), (rows[-1], -1), (random_row(rng, 1, nonfinite), 1)]
    bulk.apply(later)
    small.apply(later)
    vals.apply_vals([rows[0], rows[-1]], -1)
    vals.apply_vals([later[2][0]], 1)
    assert _agg_state(bulk) == _agg_state(small) == _agg_state(vals)
    assert bulk.output() == small.output() == vals.output()


@pytest.mark.parametrize("seed", range(10))
def test_bulk_build_of_dates_equals_incremental_apply(seed: int) -> None:
    """MIN/MAX of a DATE column: the bulk build's sorted index (one sort of the dates, their
    midnights cached) is the per-change path's, entry for entry, before and after deletes."""
    rng = random.Random(seed)
    day0 = datetime.date(1992, 1, 1)
    rows = [canonical((0, None if rng.random() < 0.1 else day0 + datetime.timedelta(rng.randrange(400))))
            for _ in range(rng.choice([40, 300]))]
    plan = IncrementalAggregates((Agg("min", 1, False, "DATE"), Agg("max", 1, False, "DATE"),
                                  Agg("count", 1, True, "BIGINT")))
    bulk, small, vals = plan(None), plan(None), plan(None)
    bulk.apply([(r, 1) for r in rows])
    vals.apply_vals(rows, 1)
    for i in range(0, len(rows), 7):
        small.apply([(r, 1) for r in rows[i:i + 7]])
    assert _agg_state(bulk) == _agg_state(small) == _agg_state(vals)
    assert bulk.output() == small.output() == vals.output()
    gone = sorted(r for r in rows if r[1] is not None)[:3]  # the earliest dates leave
    for st in (bulk, small):
        st.apply([(r, -1) for r in gone])
    vals.apply_vals(gone, -1)
    assert _agg_state(bulk) == _agg_state(small) == _agg_state(vals)
    assert bulk.output() == small.output() == vals.output()


# Aggregates `build_columns` builds from columns (no DISTINCT, DECIMAL or statistics).
COLUMN_AGGS = (
    Agg("count_star", None, False, "BIGINT"),
    Agg("count", A, False, "BIGINT"),
    Agg("sum", A, False, "HUGEINT"),
    Agg("avg", C, False, "DOUBLE"),
    Agg("sum", C, False, "DOUBLE"),
    Agg("min", A, False, "INTEGER"),
    Agg("max", A, False, "INTEGER"),
    Agg("min", M, False, "DATE"),
    Agg("max", M, False, "DATE"),
    Agg("count", S, False, "BIGINT"),
)


def _columnable(stream: list[list[tuple[tuple[Any, ...], int]]], nulls: bool
                ) -> list[list[tuple[tuple[Any, ...], int]]]:
    """The stream with column M a DATE (Arrow takes no Decimal as is) and, without `nulls`,
    no NULL in A (a top-k built from columns ranks a first ORDER BY column without NULL)."""
    day0 = datetime.date(2000, 1, 1)

    def row(r: tuple[Any, ...]) -> tuple[Any, ...]:
        a = r[A] if nulls or r[A] is not None else 0
        m = None if r[M] is None else day0 + datetime.timedelta(int(r[M] * 100) % 400)
        return (r[G], a, r[C], m, r[S])

    return [[(row(r), d) for r, d in changes] for changes in stream]


@pytest.mark.parametrize("seed", range(8))
def test_first_rows_built_as_columns_equal_general_reduce(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reduce's first input of at least `ROWS_AS_COLUMNS` rows (lowered to 16 here), given
    as rows, is made columns (`engine.columns_at.keyed_columns_of`; duplicates as copies) and
    its states built by `build_columns`: at every epoch, under every batching, the output
    equals the general reduce's, for aggregates and for a top-k."""
    import engine.operators.reduce_total as rt

    monkeypatch.setattr(rt, "ROWS_AS_COLUMNS", 16)
    made: list[bool] = []
    real = rt.keyed_columns_of

    def spy(updates: Any) -> Any:
        out = real(updates)
        made.append(out is not None)
        return out

    monkeypatch.setattr(rt, "keyed_columns_of", spy)
    import planner.aggregate_columns as ac
    from tests.planner_support import record_declines

    built = record_declines(monkeypatch, ac, "build_groups")
    rng = random.Random(300 + seed)
    stream = random_stream(300 + seed, epochs=30, groups=3, nonfinite=seed % 2 == 1,
                           initial=300)
    order = (SortKey(A, rng.random() < 0.5, False), SortKey(S, False, True))
    limit = rng.choice([1, 2, 5])

    def topk_reference(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return topk_rows(vals, order, limit, 0)

    for fast_plan, reference, nulls in (
            (IncrementalAggregates(COLUMN_AGGS), reference_aggs(COLUMN_AGGS), True),
            (IncrementalTopK(order, limit, 0), topk_reference, False)):
        rows = _columnable(stream, nulls)
        for chunks in chunkings(rng, len(rows)):
            made.clear()
            built.clear()
            op, fast, ref = run_both(rows, fast_plan, reference, chunks)
            if chunks[0] == 1:  # the first epoch alone: its input went through columns
                assert made[:1] == [True]
                # and the aggregates' states were built from them (COUNT of the string
                # column too: only its validity is read)
                assert built[:1] == ([True] if nulls else [])
            for epoch in range(len(rows)):
                where = f"seed {seed} chunks {chunks[:3]} epoch {epoch}"
                if nulls:
                    assert_same_rows(accumulated(fast, epoch), accumulated(ref, epoch), where)
                else:  # the top-k's rows are the input's: equal exactly, several per key
                    assert accumulated(fast, epoch) == accumulated(ref, epoch), where
            assert list(op.capabilities()) == []


def test_rows_as_columns_decline_what_arrow_would_change() -> None:
    """`keyed_columns_of` declines rows it cannot carry as columns exactly: mixed types in a
    column, Decimals of two exponents (2.5 would come back 2.50), ints past int64, retractions, several times, a key that is not a
    projection of its row; and carries duplicates (diff 2) as copies."""
    from engine.columns_at import keyed_columns_of
    from engine.sources import rows_of

    t = (0,)
    ok = [(((1,), (1, "a", 2.5)), t, 1), (((2,), (2, "b", None)), t, 2)]
    got = keyed_columns_of(ok)
    assert got is not None and got.key == (0,) and got.diff == 1 and got.time == t
    assert list(rows_of(got.table, 3)) == [(1, "a", 2.5), (2, "b", None), (2, "b", None)]
    for bad in (
            [(((1,), (1, 2.5)), t, 1), (((2,), (2, 3)), t, 1)],  # float and int in a column
            [(((1,), (1, decimal.Decimal("2.5"))), t, 1),
             (((2,), (2, decimal.Decimal("2.50"))), t, 1)],
            [(((1,), (1, 2 ** 70)), t, 1)],
            [(((1,), (1, 2)), t, -1)],
            [(((1,), (1, 2)), t, 1), (((2,), (2, 2)), (1,), 1)],
            [(((1,), (1, 2)), t, 1), (((5,), (2, 2)), t, 1)],  # key not the row's column
            [(((1,), (1, 2)), t, 1), (((2,), (2, 2, 3)), t, 1)],
            [(((1,), (1, True)), t, 1), (((2,), (2, 1)), t, 1)]):
        assert keyed_columns_of(bad) is None, bad


def test_keyed_columns_split_by_sign() -> None:
    """`keyed_columns_split` gives the insertions and the retractions each as keyed columns,
    a row per copy; summed first (a row inserted and retracted cancels), or not."""
    from engine.columns_at import keyed_columns_split
    from engine.sources import rows_of

    t = (3,)

    def rows(part: Any) -> list[Any]:
        return None if part is None else (part.diff, part.key, part.time, sorted(
            rows_of(part.table, part.table.num_columns)))

    ups = [(((1,), (1, "a")), t, 2), (((2,), (2, "b")), t, -1), (((1,), (1, "a")), t, -1),
           (((3,), (3, "c")), t, -2), (((4,), (4, "d")), t, 1), (((4,), (4, "d")), t, -1)]
    ins, outs = keyed_columns_split(ups)
    assert rows(ins) == (1, (0,), t, [(1, "a")])
    assert rows(outs) == (-1, (0,), t, [(2, "b"), (3, "c"), (3, "c")])
    ins, outs = keyed_columns_split(ups, consolidate=False)
    assert rows(ins) == (1, (0,), t, [(1, "a"), (1, "a"), (4, "d")])
    assert rows(outs) == (-1, (0,), t, [(1, "a"), (2, "b"), (3, "c"), (3, "c"), (4, "d")])
    assert keyed_columns_split([(((1,), (1, "a")), t, 1), (((1,), (1, "a")), t, -1)]) is None
    assert rows(keyed_columns_split(ups[:1])[0]) == (1, (0,), t, [(1, "a"), (1, "a")])
    assert keyed_columns_split(ups[:1])[1] is None


def test_keyed_columns_split_decimals_round_trip() -> None:
    """Decimal columns go as Arrow decimals when they come back as the same Decimals, digit
    for digit (one exponent, at most 0; no -0.00), and decline otherwise: 1.5 among 1.50s,
    -0.00 (Arrow has no signed zero) and 1E+2 would come back equal but printed otherwise."""
    from decimal import Decimal as D

    from engine.columns_at import keyed_columns_split
    from engine.sources import rows_of

    t = (1,)

    def ups(vals: list[Any]) -> list[Any]:
        return [(((i,), (i, v)), t, 1) for i, v in enumerate(vals)]

    for good in ([D("1.50"), D("-12.30"), None, D("0.00")], [D("7")],
                 [D("123456789012345.67"), D("-0.01")]):
        ins, outs = keyed_columns_split(ups(good))
        assert outs is None
        back = [r[1] for r in rows_of(ins.table, ins.table.num_columns)]
        assert [repr(v) for v in back] == [repr(v) for v in good], good
    for bad in ([D("1.50"), D("1.5")], [D("-0.00"), D("1.00")], [D("1E+2")],
                [D("NaN")], [D("Infinity")], [D("1.50"), 2]):
        assert keyed_columns_split(ups(bad)) is None, bad


@pytest.mark.parametrize("seed", range(4))
def test_batches_over_many_built_groups_equal_general_reduce(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hydration of 40 groups built from columns, then epochs that each change many of
    them at once (their states made together, `BuiltGroups.states`, and their previous rows
    taken from the columns sent, `BuiltGroups.output_rows`): at every epoch, under every
    batching, the output equals the general reduce's."""
    import engine.operators.reduce_total as rt
    import planner.aggregate_columns as ac

    monkeypatch.setattr(rt, "ROWS_AS_COLUMNS", 16)
    taken: list[int] = []
    real = ac.BuiltGroups.output_rows

    def spy(self: Any, gs: list[int]) -> Any:
        out = real(self, gs)
        if out is not None:
            taken.append(len(out))
        return out

    monkeypatch.setattr(ac.BuiltGroups, "output_rows", spy)
    rng = random.Random(900 + seed)
    # a first epoch of 2,000 rows in 40 groups, then epochs that each delete 30 rows and
    # insert 30 (a large transaction: many groups changed at once)
    live: Counter[tuple[Any, ...]] = Counter(
        random_row(rng, 40, seed % 2 == 1) for _ in range(2000))
    stream = [list(live.items())]
    for _ in range(11):
        gone = rng.sample(sorted(live.elements(), key=repr), 30)
        new = [random_row(rng, 40, seed % 2 == 1) for _ in range(30)]
        live.subtract(gone)
        live.update(new)
        live = +live
        stream.append([(r, -1) for r in gone] + [(r, 1) for r in new])
    rows = _columnable(stream, True)
    for chunks in chunkings(rng, len(rows)):
        taken.clear()
        op, fast, ref = run_both(rows, IncrementalAggregates(COLUMN_AGGS),
                                 reference_aggs(COLUMN_AGGS), chunks)
        if chunks[0] == 1:  # hydrated alone: later batches took rows from the columns
            assert taken and max(taken) >= 10
        for epoch in range(len(rows)):
            assert_same_rows(accumulated(fast, epoch), accumulated(ref, epoch),
                             f"seed {seed} chunks {chunks[:3]} epoch {epoch}")


@pytest.mark.parametrize("seed", range(12))
def test_absorb_equals_apply(seed: int) -> None:
    """`AggregateState.absorb` of a state holding other rows (every aggregate kind: DISTINCT
    feeds, DECIMAL sums, statistics) gives the output and later behaviour of one state that
    applied both sets of rows; an empty state absorbing takes the other's output as is; and
    absorbing a state of rows held with sign -1 equals retracting them."""
    rng = random.Random(1200 + seed)
    nonfinite = seed % 2 == 1
    first = [random_row(rng, 1, nonfinite) for _ in range(rng.choice([0, 5, 60, 300]))]
    second = [random_row(rng, 1, nonfinite) for _ in range(rng.choice([1, 7, 80, 300]))]
    plan = IncrementalAggregates(AGGS)
    mine, theirs, whole = plan(None), plan(None), plan(None)
    if first:
        mine.apply([(r, 1) for r in first])
    theirs.apply([(r, 1) for r in second])
    expected_alone = theirs.output()
    whole.apply([(r, 1) for r in first + second])
    mine.absorb(theirs)
    if not first:
        assert mine.output() == expected_alone
    assert_same_rows(_keyed(mine), _keyed(whole),
                     f"seed {seed}")
    later = [(r, -1) for r in rng.sample(first + second, min(5, len(first + second)))]
    later.append((random_row(rng, 1, nonfinite), 1))
    mine.apply(later)
    whole.apply(later)
    assert_same_rows(_keyed(mine), _keyed(whole),
                     f"seed {seed} after later changes")
    # retractions: a state of some of the rows held, absorbed with sign -1
    held: Counter[tuple[Any, ...]] = Counter(first + second)
    for r, d in later:
        held[r] += d
    gone = rng.sample(sorted(held.elements(), key=repr), len(list(held.elements())) // 2)
    leaving = plan(None)
    leaving.apply([(r, 1) for r in gone])
    mine.absorb(leaving, -1)
    whole.apply([(r, -1) for r in gone])
    assert_same_rows(_keyed(mine), _keyed(whole), f"seed {seed} after retractions")
    assert mine.empty() == whole.empty()


def _keyed(st: Any) -> Counter[Any]:
    """A state's output as `assert_same_rows` reads it: (key, row) -> multiplicity."""
    return Counter({((0,), row): m for row, m in st.output()[0]})


def _arrow_rows(rows: list[tuple[Any, ...]]) -> Any:
    import pyarrow as pa

    types = [pa.int64(), pa.int64(), pa.float64(), pa.date32(), pa.string()]
    return pa.table([pa.array([r[i] for r in rows], type=types[i]) for i in range(5)],
                    names=["g", "a", "c", "m", "s"])


@pytest.mark.parametrize("seed", range(8))
def test_built_states_absorb_built_states(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """States built from columns (a hydration) absorbing states built from a later batch's
    columns, their MIN/MAX arrays merged (`SortedCounts.merged`, thresholds lowered to take
    it for every group), then retracting half the hydration's rows the same way, equal one
    state that applied every change, before and after later deletes of values."""
    import planner.aggregate as agg
    import planner.aggregate_columns as ac
    from planner.sorted_counts import SortedCounts

    monkeypatch.setattr(agg, "MERGE_ARRAYS", 2)
    monkeypatch.setattr(agg, "MERGE_ARRAYS_RATIO", 10_000)
    monkeypatch.setattr(ac, "ARRAY_INDEX_MIN", 4)  # the values of a group held in arrays
    merges: list[bool] = []
    real = SortedCounts.merged

    def spy(self: SortedCounts, other: SortedCounts, sign: int = 1) -> Any:
        out = real(self, other, sign)
        merges.append((sign, out is not None))
        return out

    monkeypatch.setattr(SortedCounts, "merged", spy)
    rng = random.Random(1300 + seed)
    stream = _columnable([[(random_row(rng, 3, seed % 2 == 1), 1) for _ in range(600)],
                          [(random_row(rng, 5, seed % 2 == 1), 1) for _ in range(400)]], True)
    hydration, batch = ([r for r, _ in changes] for changes in stream)
    if seed % 4 == 2:  # a batch of values the hydration has too (equal counts add up)
        batch = rng.sample(hydration, 300) + batch[:100]
    plan = IncrementalAggregates(COLUMN_AGGS)
    before = plan.build_columns(_arrow_rows(hydration), (G,))
    after = plan.build_columns(_arrow_rows(batch), (G,))
    assert before is not None and after is not None
    states = {k: before.state(i) for i, k in enumerate(before.keys)}
    every: dict[Any, Any] = {}
    for r in hydration:
        every.setdefault((r[G],), []).append((r, 1))
    # some values of the built arrays deleted before the batch comes (a changed count)
    early = [(r, -1) for r in rng.sample(hydration, 30)]
    for r, d in early:
        states[(r[G],)].apply([(r, d)])
        every[(r[G],)].append((r, d))
    for i, k in enumerate(after.keys):
        states.setdefault(k, plan(k)).absorb(after.state(i))
    assert (1, True) in merges
    for r in batch:
        every.setdefault((r[G],), []).append((r, 1))
    # half of the hydration's rows still held retracted by a state built from their columns
    held = Counter(hydration)
    held.subtract(r for r, _ in early)
    leaving = rng.sample(sorted(held.elements(), key=repr), len(hydration) // 2)
    gone = plan.build_columns(_arrow_rows(leaving), (G,))
    assert gone is not None
    for i, k in enumerate(gone.keys):
        states[k].absorb(gone.state(i), -1)
    assert (-1, True) in merges
    for r in leaving:
        every[(r[G],)].append((r, -1))

    def smallest(r: tuple[Any, ...]) -> tuple[Any, ...]:
        return (r[A] is None, r[A] if r[A] is not None else 0, r[M] is None, repr(r))

    for k, changes in every.items():
        whole = plan(k)
        whole.apply(changes)
        assert_same_rows(_keyed(states[k]), _keyed(whole), f"seed {seed} key {k}")
        live: Counter[tuple[Any, ...]] = Counter()
        for r, d in changes:
            live[r] += d
        rows = list(live.elements())
        # the smallest values go first (MIN follows each value's count), then every row
        for upto in (40, len(rows)):
            gone = [(r, -1) for r in sorted(rows, key=smallest)[:upto]]
            rows = sorted(rows, key=smallest)[upto:]
            states[k].apply(gone)
            whole.apply(gone)
            assert_same_rows(_keyed(states[k]), _keyed(whole),
                             f"seed {seed} key {k} after deleting {upto}")
        assert states[k].empty() and states[k].output() == ([], 0)


@pytest.mark.parametrize(("seed", "per_key"), [(0, 1), (1, 1), (2, 1), (3, 1), (4, 8)])
def test_later_insertions_as_columns_equal_general_reduce(
        seed: int, per_key: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a hydration, epochs that insert many rows at once (a COPY into a table with rows
    already: some into new groups, some copies of rows already there), delete many (whole
    groups among them) or update many reach the existing states as columns, each group's
    insertions and retractions built at once and absorbed (`ReduceTotalOp._absorb_columns`),
    between epochs of a few changes: at every epoch, under every batching, the output equals
    the general reduce's. With `ABSORB_ROWS_PER_KEY` above the batches' rows per key, they
    go by rows."""
    import engine.operators.reduce_total as rt
    from tests.db_support import record_absorbs

    monkeypatch.setattr(rt, "ROWS_AS_COLUMNS", 16)
    monkeypatch.setattr(rt, "ABSORB_ROWS_PER_KEY", per_key)
    absorbed = record_absorbs(monkeypatch)
    rng = random.Random(1400 + seed)
    live: Counter[tuple[Any, ...]] = Counter(
        random_row(rng, 20, seed % 2 == 1) for _ in range(1000))
    stream = [list(live.items())]
    for e in range(12):
        if e % 4 == 0:  # many insertions: new rows in 30 groups (10 new), and copies
            new = [random_row(rng, 30, seed % 2 == 1) for _ in range(150)]
            new += rng.sample(sorted(live, key=repr), 20)
            changes = [(r, 1) for r in new]
        elif e % 4 == 1:  # many deletions: 120 rows, some of whole groups
            others = [r for r in live.elements() if r[G] != e % 30]
            gone = rng.sample(sorted(others, key=repr), 100)
            gone += [r for r in live.elements() if r[G] == e % 30]
            changes = [(r, -1) for r in gone]
        elif e % 4 == 2:  # many updates: each row deleted and inserted changed
            old = rng.sample(sorted(live.elements(), key=repr), 60)
            changes = [(r, -1) for r in old] + [
                (canonical((r[G],) + random_row(rng, 30, seed % 2 == 1)[1:]), 1) for r in old]
        else:
            gone = rng.sample(sorted(live.elements(), key=repr), 10)
            changes = [(r, -1) for r in gone] + [
                (random_row(rng, 30, seed % 2 == 1), 1) for _ in range(5)]
        for r, d in changes:
            live[r] += d
        live = +live
        stream.append(changes)
    rows = _columnable(stream, True)
    for chunks in chunkings(rng, len(rows)):
        absorbed.clear()
        op, fast, ref = run_both(rows, IncrementalAggregates(COLUMN_AGGS),
                                 reference_aggs(COLUMN_AGGS), chunks)
        if per_key > 1:  # 5-6 rows a key: every batch went by rows
            assert absorbed == []
        elif chunks == [1] * len(rows):  # epoch by epoch: the large batches were absorbed
            inserted = sum(n for n in absorbed if n > 0)
            retracted = -sum(n for n in absorbed if n < 0)
            assert inserted == 3 * 170 + sum(
                sum(d for _, d in changes if d > 0) for changes in rows[3::4])
            assert retracted == sum(
                -sum(d for _, d in changes if d < 0) for changes in rows[2::4] + rows[3::4])
        for epoch in range(len(rows)):
            assert_same_rows(accumulated(fast, epoch), accumulated(ref, epoch),
                             f"seed {seed} chunks {chunks[:3]} epoch {epoch}")
        assert list(op.capabilities()) == []


def test_distinct_keys_of_keyed_columns() -> None:
    """`_distinct_keys` counts the keys of keyed columns across parts (one column, two, none)."""
    import pyarrow as pa

    from engine.columns_at import ColumnsAt
    from engine.operators.reduce_total import _distinct_keys

    t = (1,)
    a = pa.table({"k": [1, 2, 2, None], "j": ["x", "x", "y", "y"], "v": [1.0, 2.0, 3.0, 4.0]})
    b = pa.table({"k": [2, 5, None], "j": ["y", "z", "y"], "v": [0.0, 0.0, 0.0]})
    assert _distinct_keys([ColumnsAt(a, t, 1, (0,))]) == 3
    assert _distinct_keys([ColumnsAt(a, t, 1, (0,)), ColumnsAt(b, t, -1, (0,))]) == 4
    assert _distinct_keys([ColumnsAt(a, t, 1, (0, 1)), ColumnsAt(b, t, -1, (0, 1))]) == 5
    assert _distinct_keys([ColumnsAt(a, t, 1, ())]) == 1
    c = pa.table({"k": ["2", "7"], "j": ["y", "y"], "v": [0.0, 0.0]})  # another key type
    assert _distinct_keys([ColumnsAt(a, t, 1, (0,)), ColumnsAt(c, t, 1, (0,))]) == 5


@pytest.mark.parametrize("seed", range(6))
def test_topk_unconsolidated_changes_equal_general_reduce(seed: int) -> None:
    """A time's changes come unconsolidated when both inputs of a join change at once (a row
    retracted twice, then inserted): taken one by one, the second retraction was charged to
    the reserve, and a deleted row stayed in the window. Each change split into pieces that
    add up to it (a retraction beyond the row's count among them): after every epoch, under
    every batching, the window equals the reference's."""
    rng = random.Random(100 + seed)
    stream = _ranked_stream(seed, epochs=60, initial=rng.choice([300, 1000]))
    split = [stream[0]] + [
        [piece for row, d in epoch for piece in (
            [(row, d - 1), (row, -1), (row, 2)] if rng.random() < 0.5 else [(row, d)])]
        for epoch in stream[1:]]
    order, limit, offset, reference = _numeric_topk(rng)
    _equal_under_every_batching(rng, split, order, limit, offset, reference)
