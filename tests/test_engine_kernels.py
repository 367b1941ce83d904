"""The compiled columnar kernels equal the reference tactic on seeded random updates.

Every test draws updates at random 1-, 2- and 3-coordinate times, cuts them into random
batchings, and requires the compiled kernel (`engine.columnar.kernels`) to produce exactly what
the per-record reference (`engine.columnar.reference`, which calls the engine's own per-record
`reduce_key` for reduce) produces. A final oracle checks the reduce's accumulated output against
the logic applied to the accumulated input at every time.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from engine import reducers
from engine.columnar import kernels as K
from engine.columnar import parallel
from engine.columnar import reference as R
from engine.columnar import run_table as RT
from engine.columnar import times as T
from engine.columnar.layout import Run
from engine.lattice import Antichain, less_equal

SEEDS = range(12)
DIMS = [1, 2, 3]
# Spines longer than the 16 runs a tuple of runs was once padded to (any length is one table).
MANY_RUNS = 20


def rand_time(rng: random.Random, dims: int, hi: int = 3) -> tuple[int, ...]:
    return tuple(rng.randint(0, hi) for _ in range(dims))


def rand_updates(rng: random.Random, n: int, dims: int, keys: int = 5, vals: int = 4) -> list:
    return [
        (rng.randrange(keys), rng.randrange(vals), rand_time(rng, dims), rng.choice([-2, -1, 1, 1, 2]))
        for _ in range(n)
    ]


def rand_frontier(rng: random.Random, dims: int) -> list[tuple[int, ...]]:
    return Antichain(rand_time(rng, dims) for _ in range(rng.randint(0, 3))).elements


def arrays(run: Run) -> K.Arrays:
    return (run.keys, run.vals, run.times, run.diffs)


def split(rng: random.Random, ups: list, parts: int) -> list[list]:
    cuts = sorted(rng.randint(0, len(ups)) for _ in range(parts - 1))
    out, prev = [], 0
    for c in [*cuts, len(ups)]:
        out.append(ups[prev:c])
        prev = c
    return out


# -- packed times ---------------------------------------------------------------------------
@pytest.mark.parametrize("dims", DIMS)
def test_packed_times_respect_the_lattice(dims: int) -> None:
    from engine import lattice

    rng = random.Random(dims)
    bits = T.field_bits(dims)
    for _ in range(300):
        s, t = rand_time(rng, dims, 9), rand_time(rng, dims, 9)
        ps, pt = T.pack(s), T.pack(t)
        assert T.unpack(ps, dims) == s
        assert T.le(ps, pt, dims, bits) == lattice.less_equal(s, t)
        if lattice.less_equal(s, t):
            assert ps <= pt  # the integer order is a linear extension of the product order
        assert T.unpack(T.join(ps, pt, dims, bits), dims) == lattice.join(s, t)
        assert T.unpack(T.meet(ps, pt, dims, bits), dims) == lattice.meet(s, t)
        f = rand_frontier(rng, dims)
        pf = T.pack_frontier(f, dims)
        assert T.unpack(T.advance(ps, pf, dims, bits), dims) == lattice.advance_by(s, f)
        if f:
            assert T.join(ps, T.floor(pf, dims, bits), dims, bits) == T.advance(ps, pf, dims, bits)
        assert T.beyond(ps, pf, dims, bits) == Antichain(f).less_equal(s)


def test_packing_refuses_coordinates_that_do_not_fit() -> None:
    with pytest.raises(OverflowError):
        T.pack((1 << 31, 0))
    with pytest.raises(OverflowError):
        T.pack((-1,))


# -- consolidate ----------------------------------------------------------------------------
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_consolidate_equals_reference(dims: int, seed: int) -> None:
    rng = random.Random(seed * 10 + dims)
    ups = rand_updates(rng, rng.randint(0, 60), dims)
    assert sorted(Run.from_updates(ups, dims).updates()) == R.consolidate(ups)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("seed", range(12))
def test_large_consolidate_equals_reference(seed: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of at least `RADIX_MIN` updates take the radix path. Keys, vals and times span
    the whole int64 range; or a few hundred keys (groups above the insertion sort's 32); or
    two keys; or thousands of keys with few vals and times (small groups with ties). Unsorted,
    sorted, and sorted but for one update, with diffs that cancel. With two threads every
    radix sort is split in two by its first digit's buckets (`engine.columnar.parallel`)."""
    monkeypatch.setattr(parallel, "THREADS", threads)
    monkeypatch.setattr(parallel, "MIN_SORTED", K.RADIX_MIN)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(K.RADIX_MIN, 2 * K.RADIX_MIN))
    full = (-(2**63), 2**63 - 1)
    keys, vals, times = [(full, full, (0, 2**62)), ((-3, 300), (-3, 300), (0, 4)),
                         ((0, 1), (0, 5), (0, 9)), ((0, 3000), (0, 2), (0, 3))][seed % 4]
    k = rng.integers(*keys, n, endpoint=True)
    v = rng.integers(*vals, n, endpoint=True)
    t = rng.integers(*times, n, endpoint=True)
    d = rng.integers(-2, 3, n)
    if seed >= 4:
        order = np.lexsort((t, v, k))
        k, v, t = k[order], v[order], t[order]
        if seed >= 8:
            k[n // 2], k[n // 2 + 1] = k[n // 2 + 1], k[n // 2]
    want = R.consolidate(zip(k.tolist(), v.tolist(), t.tolist(), d.tolist(), strict=True))
    got = K.consolidate(k, v, t, d)
    assert list(zip(*(c.tolist() for c in got), strict=True)) == want


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("constant", ["vals", "times", "diffs", "vals,times", "vals,times,diffs", "keys"])
def test_large_consolidate_with_constant_columns(constant: str, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column holding one value shares its sort buffer with its scratch (every move writes
    that value): still exactly the reference, on one core or two."""
    monkeypatch.setattr(parallel, "THREADS", threads)
    monkeypatch.setattr(parallel, "MIN_SORTED", K.RADIX_MIN)
    rng = np.random.default_rng(len(constant) + threads)
    n = int(rng.integers(K.RADIX_MIN, 2 * K.RADIX_MIN))
    cols = {
        "keys": rng.integers(0, 3000, n), "vals": rng.integers(0, 3, n),
        "times": rng.integers(0, 4, n), "diffs": rng.integers(-2, 3, n),
    }
    for name in constant.split(","):
        cols[name] = np.full(n, 1 if name == "diffs" else 7, np.int64)
    k, v, t, d = cols["keys"], cols["vals"], cols["times"], cols["diffs"]
    want = R.consolidate(zip(k.tolist(), v.tolist(), t.tolist(), d.tolist(), strict=True))
    got = K.consolidate(k, v, t, d)
    assert list(zip(*(c.tolist() for c in got), strict=True)) == want


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("seed", range(16))
def test_word_consolidate_equals_reference(seed: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches whose spans fit one word take `word_sort` (a spy counts it) and equal the
    reference: negative values, diffs that cancel to zero, constant columns, spans that need
    exactly 63 bits together, and sizes on both sides of `WORD_MIN` and `RADIX_MIN`. A batch one
    bit too wide is left to the radix sort, with the same result. With two threads every
    batch is sorted in halves and its merge unpacked in two parts (runs of equal triples
    across both halves, and across the cut, when few triples repeat)."""
    from engine.columnar import word_sort

    monkeypatch.setattr(parallel, "THREADS", threads)
    monkeypatch.setattr(parallel, "MIN_SORTED", K.WORD_MIN)

    taken = []
    real = word_sort.consolidate_words

    def spy(*cols: np.ndarray) -> object:
        got = real(*cols)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(word_sort, "consolidate_words", spy)
    rng = np.random.default_rng(seed)
    n = int(rng.choice([K.WORD_MIN, 1000, K.RADIX_MIN + 5, 3 * K.RADIX_MIN]))
    # (key, val, time, diff) spans as bit widths; the last two cases are 63 and 64 bits.
    widths = [(20, 0, 0, 2), (10, 8, 4, 3), (40, 1, 20, 2), (2, 2, 2, 2), (33, 15, 13, 2),
              (34, 15, 13, 2)][seed % 6]
    lows = [int(rng.integers(-(2**40), 2**40)) for _ in range(3)] + [-1]
    cols = []
    for w, lo in zip(widths, lows, strict=True):
        if w == 0:
            cols.append(np.full(n, lo, np.int64))
            continue
        c = rng.integers(0, 1 << (w - 1), n, dtype=np.int64) + lo
        c[0], c[-1] = lo, lo + (1 << w) - 1  # the span is exactly w bits
        cols.append(c)
    k, v, t, d = cols
    if seed >= 12:
        # few distinct triples: many equal ones, whose diffs sum to zero for some
        pick = rng.integers(0, 40, n)
        k, v, t = k[pick], v[pick], t[pick]
    want = R.consolidate(zip(k.tolist(), v.tolist(), t.tolist(), d.tolist(), strict=True))
    got = K.consolidate(k, v, t, d)
    assert list(zip(*(c.tolist() for c in got), strict=True)) == want
    # Too wide for a word, one thread: the times by rank, when few enough and that fits.
    n_times = np.unique(t).shape[0]
    ranked = (threads == 1 and n_times <= word_sort.RANKED_TIMES
              and widths[0] + widths[1] + widths[3] + (n_times - 1).bit_length() <= 63)
    assert taken == [sum(widths) <= 63 or ranked]


@pytest.mark.parametrize("seed", range(8))
def test_ranked_times_consolidate_equals_reference(seed: int) -> None:
    """A batch too wide for a word, whose few distinct times are ranked (`time_ranks`), equals
    the reference: pair-id keys of 40 bits and times of 32 bits of which a hundred are
    distinct, as a loop round with many epochs in flight makes. One distinct time more than
    `RANKED_TIMES` is left to the other sorts, with the same result."""
    from engine.columnar import word_sort

    rng = np.random.default_rng(seed)
    n = int(rng.choice([K.WORD_MIN, 2000, K.RADIX_MIN + 5]))
    n_times = [1, 2, 100, word_sort.RANKED_TIMES, word_sort.RANKED_TIMES + 1][seed % 5]
    n = max(n, n_times)
    times = rng.choice(rng.integers(0, 1 << 32, 4 * n_times), n_times, replace=False)
    t = times[np.arange(n) % n_times]
    rng.shuffle(t)
    k = rng.integers(0, 1 << 40, n) if seed % 2 else rng.integers(0, 1 << 40, 30)[rng.integers(0, 30, n)]
    k[0] = 0
    k[-1] = (1 << 40) - 1
    v = np.full(n, 7, np.int64)
    d = rng.choice(np.array([-1, 1], np.int64), n)
    ranks, distinct = word_sort.time_ranks(t, word_sort.RANKED_TIMES)
    if n_times <= word_sort.RANKED_TIMES:
        assert distinct.tolist() == sorted(set(t.tolist()))
        assert (distinct[ranks] == t).all()
    else:
        assert distinct.shape[0] == 0 and ranks.shape[0] == 0
    words = word_sort.consolidate_words(k, v, t, d)
    assert (words is not None) == (n_times <= word_sort.RANKED_TIMES)
    want = R.consolidate(zip(k.tolist(), v.tolist(), t.tolist(), d.tolist(), strict=True))
    for got in (K.consolidate(k, v, t, d), K._consolidate(k, v, t, d)):
        assert list(zip(*(c.tolist() for c in got), strict=True)) == want


# -- merge with advance_by compaction ----------------------------------------------------------
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_merge_with_compaction_equals_reference(dims: int, seed: int) -> None:
    rng = random.Random(1000 + seed * 10 + dims)
    ups = rand_updates(rng, rng.randint(0, 120), dims)
    parts = split(rng, ups, rng.randint(1, 6))
    runs = [Run.from_updates(p, dims) for p in parts]
    refs = [R.consolidate(p) for p in parts]
    # Merge adjacent runs in a random order under a frontier that only moves forward.
    frontier = Antichain([(0,) * dims])
    while len(runs) > 1:
        frontier = frontier.join(Antichain(rand_frontier(rng, dims))) if rng.random() < 0.5 else frontier
        i = rng.randrange(len(runs) - 1)
        pf = T.pack_frontier(frontier.elements, dims)
        merged = Run(*K.merge(arrays(runs[i]), arrays(runs[i + 1]), pf, dims), dims)
        ref = R.merge(refs[i], refs[i + 1], frontier.elements)
        assert sorted(merged.updates()) == ref
        runs[i : i + 2] = [merged]
        refs[i : i + 2] = [ref]
    # The accumulation at every time beyond the frontier is what the raw updates give.
    for t in itertools.product(range(5), repeat=dims):
        if frontier.less_equal(t):
            got, want = {}, {}
            for k, v, s, d in refs[0]:
                if less_equal(s, t):
                    got[(k, v)] = got.get((k, v), 0) + d
            for k, v, s, d in ups:
                if less_equal(s, t):
                    want[(k, v)] = want.get((k, v), 0) + d
            assert {x: d for x, d in got.items() if d} == {x: d for x, d in want.items() if d}


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_merge_many_equals_reference(dims: int, seed: int) -> None:
    """A trace's small tail merged in one call equals the reference merge of all its runs."""
    rng = random.Random(1500 + seed * 10 + dims)
    ups = rand_updates(rng, rng.randint(0, 150), dims)
    parts = split(rng, ups, rng.randint(1, 12))
    frontier = rand_frontier(rng, dims)
    runs = [arrays(Run.from_updates(p, dims)) for p in parts]
    merged = Run(*K.merge_many(runs, T.pack_frontier(frontier, dims), dims), dims)
    assert sorted(merged.updates()) == R.merge(ups, [], frontier)


def test_merge_under_an_epoch_frontier_needs_no_resort() -> None:
    # `{(e, 0)}` keeps runs sorted (epoch in the low bits), so compaction cancels in one pass.
    dims = 2
    a = Run.from_updates([(1, 0, (0, 1), 1), (1, 0, (2, 1), 1)], dims)
    b = Run.from_updates([(1, 0, (1, 1), -1)], dims)
    pf = T.pack_frontier([(3, 0)], dims)
    at, _ = K._advance_all(a.times, pf, dims, T.field_bits(dims))
    assert K._sorted(a.keys, a.vals, at)
    merged = Run(*K.merge(arrays(a), arrays(b), pf, dims), dims)
    assert merged.updates() == [(1, 0, (3, 1), 1)]


# -- join -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_join_against_sorted_runs_equals_reference(dims: int, seed: int) -> None:
    rng = random.Random(2000 + seed * 10 + dims)
    new = R.consolidate(rand_updates(rng, rng.randint(0, 40), dims, keys=8))
    other = rand_updates(rng, rng.randint(0, 150), dims, keys=8)
    parts = split(rng, other, rng.randint(1, 5))
    nrun = Run.from_updates(new, dims)
    got: list = []
    for p in parts:
        orun = Run.from_updates(p, dims)
        ni, oi, t, d = K.join(arrays(nrun), arrays(orun), dims)
        for a, b, tt, dd in zip(ni.tolist(), oi.tolist(), t.tolist(), d.tolist(), strict=True):
            got.append((int(nrun.keys[a]), (int(nrun.vals[a]), int(orun.vals[b])), T.unpack(tt, dims), dd))
    want = R.join_pairs(new, other)
    assert R.consolidate(got) == [(k, (a, b), t, d) for k, a, b, t, d in want]


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_fused_join_over_many_runs_equals_reference(dims: int, seed: int) -> None:
    """`join_fused` against 1 to MANY_RUNS runs in one call (a run table of any length): the
    pairs of the reference, run by run as `join` finds them one run at a time."""
    rng = random.Random(2500 + seed * 10 + dims)
    new = R.consolidate(rand_updates(rng, rng.randint(0, 40), dims, keys=8))
    other = rand_updates(rng, rng.randint(0, 200), dims, keys=8)
    parts = split(rng, other, rng.randint(1, MANY_RUNS))
    nrun = Run.from_updates(new, dims)
    oruns = [Run.from_updates(p, dims) for p in parts]
    k, nv, ov, t, d = K.join_fused(arrays(nrun), [arrays(o) for o in oruns], dims)
    got = [(a, (b, c), T.unpack(tt, dims), dd) for a, b, c, tt, dd in
           zip(k.tolist(), nv.tolist(), ov.tolist(), t.tolist(), d.tolist(), strict=True)]
    want = R.join_pairs(new, other)
    assert R.consolidate(got) == [(k, (a, b), t, d) for k, a, b, t, d in want]
    one_by_one = []
    for o in oruns:
        ni, oi, tt, dd = K.join(arrays(nrun), arrays(o), dims)
        one_by_one += list(zip(nrun.keys[ni].tolist(), nrun.vals[ni].tolist(), o.vals[oi].tolist(),
                               tt.tolist(), dd.tolist(), strict=True))
    assert list(zip(k.tolist(), nv.tolist(), ov.tolist(), t.tolist(), d.tolist(), strict=True)) == one_by_one


def test_join_gallops_over_a_large_run() -> None:
    dims = 1
    big = Run.from_arrays(
        np.arange(0, 200_000, 2, dtype=np.int64),
        np.zeros(100_000, np.int64),
        np.zeros(100_000, np.int64),
        np.ones(100_000, np.int64),
        dims,
    )
    small = Run.from_updates([(4, 7, (1,), 1), (5, 7, (1,), 1), (199_998, 8, (2,), -1)], dims)
    ni, oi, t, d = K.join(arrays(small), arrays(big), dims)
    assert big.keys[oi].tolist() == [4, 199_998]
    assert t.tolist() == [1, 2] and d.tolist() == [1, -1]


# -- reduce (distinct, count, threshold) --------------------------------------------------
UNIT = 0  # the id the tests give the unit value `()` that distinct and threshold output


def thr(n: int) -> int:
    # Negative totals give output too (the kernel must not assume non-negative counts). f(0) is
    # 0: the engine's count-only shortcut treats a zero total as an absent key.
    return min(n, 2) if n > 0 else -1 if n < 0 else 0


CASES = {
    "distinct": (reducers.distinct, K.distinct_logic(UNIT)),
    "count": (reducers.count, K.count_logic),
    "threshold": (reducers.threshold(thr), None),
}


def counting_logic(name: str) -> K.Counting:
    if name == "threshold":
        return K.threshold_logic(UNIT, thr)
    return CASES[name][1]


def to_ids(ups: list) -> list:
    return [(k, UNIT if v == () else v, t, d) for k, v, t, d in ups]


def columnar_round(
    seeds: dict[int, set], inputs: list[Run], outputs: list[Run], upper: Antichain, name: str, dims: int
) -> tuple[list, dict[int, set]]:
    """One reduce round through the compiled path: gather CSR histories, run the kernel."""
    qkeys = np.array(sorted(seeds), dtype=np.int64)
    in_off, ins = K.gather(qkeys, [arrays(r) for r in inputs])
    out_off, outs = K.gather(qkeys, [arrays(r) for r in outputs])
    seed_off = np.zeros(len(qkeys) + 1, np.int64)
    seed_t = []
    for i, k in enumerate(qkeys.tolist()):
        seed_t.extend(T.pack(t, dims) for t in seeds[k])
        seed_off[i + 1] = len(seed_t)
    (ck, cv, ct, cd), d_off, d_t = K.reduce_counting(
        in_off, ins, out_off, outs, seed_off, np.array(seed_t, np.int64),
        T.pack_frontier(upper.elements, dims), counting_logic(name), dims,
    )
    corr = R.consolidate(
        (int(qkeys[k]), v, T.unpack(t, dims), d)
        for k, v, t, d in zip(ck.tolist(), cv.tolist(), ct.tolist(), cd.tolist(), strict=True)
    )
    deferred: dict[int, set] = {}
    for i, k in enumerate(qkeys.tolist()):
        ts = {T.unpack(t, dims) for t in d_t[d_off[i] : d_off[i + 1]].tolist()}
        if ts:
            deferred[k] = ts
    return corr, deferred


def rand_uppers(rng: random.Random, dims: int, rounds: int) -> list[Antichain]:
    """A chain of frontiers that only move forward, ending closed (nothing beyond it)."""
    ups, cur = [], Antichain([(0,) * dims])
    for _ in range(rounds - 1):
        cur = cur.join(Antichain(rand_frontier(rng, dims)) if rng.random() < 0.8 else cur)
        if not cur.elements:
            cur = Antichain([(4,) * dims])
        ups.append(cur)
    ups.append(Antichain())
    return ups


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_reduce_rounds_equal_reference(name: str, dims: int, seed: int) -> None:
    rng = random.Random(3000 + seed * 10 + dims)
    logic = CASES[name][0]
    ups = rand_updates(rng, rng.randint(1, 50), dims, keys=4, vals=3)
    uppers = rand_uppers(rng, dims, rng.randint(1, 5))
    # Each update goes to the first round whose upper it is not beyond (batches tile time).
    rounds: list[list] = [[] for _ in uppers]
    for u in ups:
        for i, up in enumerate(uppers):
            if not up.less_equal(u[2]):
                rounds[i].append(u)
                break
    ref_in: list = []
    ref_out: list = []
    ref_pending: dict[int, set] = {}
    col_in: list[Run] = []
    col_out: list[Run] = []
    col_pending: dict[int, set] = {}
    for batch, upper in zip(rounds, uppers, strict=True):
        # Random batchings: the round's updates arrive as several runs.
        for part in split(rng, batch, rng.randint(1, 3)):
            if part:
                col_in.append(Run.from_updates(part, dims))
        ref_in.extend(batch)

        def seeds_of(
            pending: dict[int, set], batch: list = batch, upper: Antichain = upper
        ) -> tuple[dict[int, set], dict[int, set]]:
            seeds: dict[int, set] = {}
            for k, _, t, _ in batch:
                seeds.setdefault(k, set()).add(t)
            left: dict[int, set] = {}
            for k, ts in pending.items():
                ready = {t for t in ts if not upper.less_equal(t)}
                if ready:
                    seeds.setdefault(k, set()).update(ready)
                if ts - ready:
                    left[k] = ts - ready
            return seeds, left

        seeds, left = seeds_of(ref_pending)
        ref_raw, ref_def = R.reduce_round(seeds, ref_in, ref_out, upper, logic)
        ref_corr = sorted(to_ids(ref_raw))
        cseeds, cleft = seeds_of(col_pending)
        assert cseeds == seeds
        col_corr, col_def = columnar_round(cseeds, col_in, col_out, upper, name, dims)
        assert col_corr == ref_corr
        assert col_def == ref_def
        ref_out.extend(ref_raw)
        if col_corr:
            col_out.append(Run.from_updates(col_corr, dims))
        for k, ts in ref_def.items():
            left.setdefault(k, set()).update(ts)
        for k, ts in col_def.items():
            cleft.setdefault(k, set()).update(ts)
        ref_pending, col_pending = left, cleft
    # Oracle: the output accumulated at every time is the logic of the input accumulated there.
    for t in itertools.product(range(6), repeat=dims):
        for key in range(4):
            acc: dict = {}
            for k, v, s, d in ups:
                if k == key and less_equal(s, t):
                    acc[v] = acc.get(v, 0) + d
            vals = sorted((v, r) for v, r in acc.items() if r)
            want = {UNIT if v == () else v: m for v, m in logic(key, vals) if m} if vals else {}
            got: dict = {}
            for k, v, s, d in to_ids(ref_out):
                if k == key and less_equal(s, t):
                    got[v] = got.get(v, 0) + d
            assert {v: m for v, m in got.items() if m} == want


@pytest.mark.parametrize("dims", DIMS)
def test_reduce_single_time_fast_path(dims: int) -> None:
    # One key, one new time after every stored time: the kernel's fast path.
    t0, t1 = (0,) * dims, (1,) * dims
    inputs = [Run.from_updates([(7, 1, t0, 1), (7, 2, t1, 1)], dims)]
    outputs = [Run.from_updates([(7, 1, t0, 1)], dims)]
    corr, deferred = columnar_round({7: {t1}}, inputs, outputs, Antichain([(2,) * dims]), "count", dims)
    assert corr == [(7, 1, t1, -1), (7, 2, t1, 1)] and deferred == {}


def test_runs_round_trip_through_arrow() -> None:
    rng = random.Random(5)
    run = Run.from_updates(rand_updates(rng, 50, 2), 2)
    rb = run.to_arrow()
    assert rb.num_rows == run.records
    back = Run.from_arrow(rb)
    assert back.dims == 2 and back.updates() == run.updates()


# -- pending times: their antichain, and the compiled reduce round -------------------------------
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_split_beyond_partitions_at_the_frontier(dims: int, seed: int) -> None:
    """The updates not beyond the frontier and those beyond, each in input order, and the
    antichain of the latter: what the mask of `beyond_all` and `minimal_times` give."""
    rng = random.Random(3000 + seed * 10 + dims)
    ups = rand_updates(rng, rng.choice([0, 1, 5, 60]), dims)
    data = np.array([k * 10 + v for k, v, _, _ in ups], np.int64)
    times = np.array([T.pack(t, dims) for _, _, t, _ in ups], np.int64)
    diffs = np.array([d for *_, d in ups], np.int64)
    frontier = T.pack_frontier(rand_frontier(rng, dims), dims)
    bits = T.field_bits(dims)
    nb, ready, rest, mins = K.split_beyond(data, times, diffs, frontier, dims, bits)
    mask = K.beyond_all(times, frontier, dims, bits)
    assert nb == int(mask.sum()) == K.count_beyond(times, frontier, dims, bits)
    assert [c.tolist() for c in ready] == [c[~mask].tolist() for c in (data, times, diffs)]
    assert [c.tolist() for c in rest] == [c[mask].tolist() for c in (data, times, diffs)]
    assert mins.tolist() == (K.minimal_times(times[mask], dims, bits).tolist() if nb else [])


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_minimal_times_is_the_antichain(dims: int, seed: int) -> None:
    rng = random.Random(seed)
    hi = rng.choice([5, 60])  # 60: antichains of dozens, as with many epochs in flight
    ts = [rand_time(rng, dims, hi=hi) for _ in range(rng.randint(1, 40 if hi == 5 else 400))]
    packed = np.array([T.pack(t, dims) for t in ts], np.int64)
    got = {T.unpack(p, dims) for p in K.minimal_times(packed, dims, T.field_bits(dims)).tolist()}
    assert got == set(Antichain(ts).elements)


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_compiled_round_equals_counting_round(dims: int, seed: int) -> None:
    """`reduce_compiled` (distinct, count evaluated inside the kernel, with `seed_csr` and
    `gather_runs`) gives exactly what `reduce_counting` over `gather` gives."""
    rng = random.Random(seed)
    inputs = [
        Run.from_updates([(k, v, t, d) for k, v, t, d in rand_updates(rng, rng.randint(0, 30), dims)], dims)
        for _ in range(rng.randint(1, 3))
    ]
    outputs = [
        Run.from_updates([(k, 1, t, d) for k, _, t, d in rand_updates(rng, rng.randint(0, 10), dims)], dims)
        for _ in range(rng.randint(0, 2))
    ]
    seeds = rand_updates(rng, rng.randint(1, 12), dims)
    keys = np.array([k for k, _, _, _ in seeds], np.int64)
    times = np.array([T.pack(t, dims) for _, _, t, _ in seeds], np.int64)
    upper = T.pack_frontier(rand_frontier(rng, dims), dims)
    q, so, st = K.seed_csr(keys, times)
    k2, t2 = K.dedup_pairs(keys, times)
    q_ref, starts = np.unique(k2, return_index=True)
    assert q.tolist() == q_ref.tolist() and st.tolist() == t2.tolist()
    in_off, ins = K.gather_runs(q, [arrays(r) for r in inputs])
    out_off, outs = K.gather_runs(q, [arrays(r) for r in outputs])
    ref_in_off, ref_ins = K.gather(q, [arrays(r) for r in inputs])
    assert in_off.tolist() == ref_in_off.tolist()
    assert all(a.tolist() == b.tolist() for a, b in zip(ins, ref_ins, strict=True))
    for mode, logic in ((K.DISTINCT, K.distinct_logic(1)), (K.COUNT, K.count_logic)):
        (ck, cv, ct, cd), dk, dt = K.reduce_compiled(q, in_off, ins, out_off, outs, so, st, upper, mode, 1, dims)
        (rk, rv, rt, rd), d_off, d_t = K.reduce_counting(in_off, ins, out_off, outs, so, st, upper, logic, dims)
        assert ck.tolist() == q[rk].tolist()
        assert (cv.tolist(), ct.tolist(), cd.tolist()) == (rv.tolist(), rt.tolist(), rd.tolist())
        assert dk.tolist() == np.repeat(q, np.diff(d_off)).tolist() and dt.tolist() == d_t.tolist()


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_gather_grows_past_its_first_capacity(seed: int) -> None:
    """Few query keys with thousands of updates each: the gather buffers (sized at a few
    updates per key and run) must grow, resuming mid-key, and still give exactly `gather`."""
    rng = random.Random(seed)
    heavy = [3, 11]
    runs = []
    for _ in range(3):
        ups = [(rng.choice(heavy), rng.randint(0, 10**6), (rng.randint(0, 9),), 1)
               for _ in range(rng.randint(900, 1500))]
        ups += [(rng.randint(0, 20), rng.randint(0, 5), (0,), -1) for _ in range(200)]
        runs.append(arrays(Run.from_updates(ups, 1)))
    q = np.array(sorted(heavy + [rng.randint(21, 30)]), np.int64)
    ref_off, ref = K.gather(q, runs)
    assert ref_off[-1] > 2 * 1024  # beyond the first capacity
    for off, cols in (K.gather_runs(q, runs), (lambda o, *c: (o, c))(*K._gather_tuple(q, RT.table(runs)))):
        assert off.tolist() == ref_off.tolist()
        assert [c.tolist() for c in cols] == [c.tolist() for c in ref]


@pytest.mark.parametrize("seed", range(6))
def test_lockstep_lower_bounds_equal_searchsorted(seed: int) -> None:
    """Every group size remainder, duplicate and absent keys, keys below and above the run,
    and the empty run."""
    rng = np.random.default_rng(seed)
    m = int(rng.choice([0, 1, 2, 33, 1000, 70_000]))
    rk = np.sort(rng.integers(0, 5000, m)).astype(np.int64)
    q = np.sort(rng.integers(-10, 5010, int(rng.integers(1, 3 * K.SEARCH_GROUP + 7)))).astype(np.int64)
    out = K._lower_bounds(rk, q, np.empty(q.shape[0], np.int64))
    assert out.tolist() == np.searchsorted(rk, q, "left").tolist()


@pytest.mark.parametrize("n", [0, 1, 3, 64, 5000, 200_000])
def test_key_filter_passes_every_key_it_holds_and_few_others(n: int) -> None:
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(-(1 << 62), 1 << 62, n)).astype(np.int64)
    keys = np.repeat(keys, rng.integers(1, 4, n))  # several records per key
    f = K.key_filter(keys)
    assert f.shape[0] & (f.shape[0] - 1) == 0  # a power of two words
    assert K._may_hold(keys, f).tolist() == list(range(keys.shape[0]))
    absent = np.setdiff1d(rng.integers(-(1 << 62), 1 << 62, 20_000), keys)
    passed = K._may_hold(absent, f).shape[0]
    assert passed <= (0.03 * absent.shape[0] if n >= 64 else absent.shape[0])


def _large_runs(rng: random.Random, dims: int) -> list[K.Arrays]:
    """Runs past SEARCH_MIN records (searched in lockstep) next to small ones (merged), with a
    few heavy keys that outgrow the first gather buffers."""
    runs = []
    for size in (K.SEARCH_MIN + 5000, 300, K.SEARCH_MIN * 2):
        ks = np.array([rng.choice([7, 500, 9000]) if rng.random() < 0.02 else rng.randrange(20_000)
                       for _ in range(size)], np.int64)
        ts = np.array([T.pack(rand_time(rng, dims), dims) for _ in range(64)], np.int64)
        runs.append(arrays(Run.from_arrays(
            ks, np.array([rng.randrange(50) for _ in range(size)], np.int64),
            ts[np.array([rng.randrange(64) for _ in range(size)])],
            np.array([rng.choice([-1, 1, 2]) for _ in range(size)], np.int64), dims)))
    return runs


@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("n_keys", [0, 2, 40, 600])
def test_searched_gather_and_join_equal_the_merged_ones(dims: int, seed: int, n_keys: int) -> None:
    """In runs large enough for `_lower_bounds`, gathering histories and joining find exactly
    what the per-run paths (`gather`, `join`) find: for fewer query keys than a lockstep
    group (a batch-1 loop round's) as for many."""
    rng = random.Random(seed)
    runs = _large_runs(rng, dims)
    q = np.array(sorted({7, 500, 9000, *(rng.randrange(-5, 20_010) for _ in range(n_keys))}), np.int64)
    assert K._searched(runs[2][0].shape[0], q.shape[0])
    assert (q.shape[0] < K.SEARCH_GROUP) == (n_keys < 20)
    ref_off, ref = K.gather(q, runs)
    unfiltered = [K.NO_FILTER] * len(runs)
    filtered = [K.key_filter(r[0]) if r[0].shape[0] >= K.SEARCH_MIN else K.NO_FILTER for r in runs]
    for filters in (unfiltered, filtered):
        off, *cols = K._gather_tuple(q, RT.table(runs, filters))
        assert off.tolist() == ref_off.tolist()
        assert [c.tolist() for c in cols] == [c.tolist() for c in ref]
    new = arrays(Run.from_arrays(np.repeat(q, 2), np.arange(2 * q.shape[0], dtype=np.int64) % 3,
                                 np.full(2 * q.shape[0], T.pack((1,) * dims, dims), np.int64),
                                 np.ones(2 * q.shape[0], np.int64), dims))
    got = K.join_fused(new, runs, dims)
    want: list = [[] for _ in range(5)]
    for o in runs:
        ni, oi, t, d = K.join(new, o, dims)
        for col, part in zip(want, (new[0][ni], new[1][ni], o[1][oi], t, d), strict=True):
            col.extend(part.tolist())
    assert [c.tolist() for c in got] == want


def rand_spines(rng: random.Random, dims: int) -> tuple[list[Run], list[Run]]:
    """A reduce's input spine (1 to MANY_RUNS runs) and output spine (0 to MANY_RUNS runs,
    values 1) of random updates."""
    inputs = [
        Run.from_updates(rand_updates(rng, rng.randint(0, 30), dims), dims)
        for _ in range(rng.randint(1, MANY_RUNS))
    ]
    outputs = [
        Run.from_updates([(k, 1, t, d) for k, _, t, d in rand_updates(rng, rng.randint(0, 10), dims)], dims)
        for _ in range(rng.randint(0, MANY_RUNS))
    ]
    return inputs, outputs


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_fused_round_equals_its_steps(dims: int, seed: int) -> None:
    """`reduce_fused` (one call, each spine one run table) gives exactly what its steps
    give one call at a time: `seed_csr`, `gather_runs` on each side, `reduce_compiled`, and
    the deferred pairs united with those left pending."""
    rng = random.Random(seed * 7 + dims)
    inputs, outputs = rand_spines(rng, dims)
    seeds = rand_updates(rng, rng.randint(1, 12), dims)
    keys, times = K.dedup_pairs(
        np.array([k for k, _, _, _ in seeds], np.int64),
        np.array([T.pack(t, dims) for _, _, t, _ in seeds], np.int64),
    )
    left = rand_updates(rng, rng.randint(0, 6), dims, keys=9)
    left_k, left_t = K.dedup_pairs(
        np.array([k for k, _, _, _ in left], np.int64),
        np.array([T.pack(rand_time(rng, dims, 6), dims) for _ in left], np.int64),
    )
    upper = T.pack_frontier(rand_frontier(rng, dims), dims)
    for mode in (K.DISTINCT, K.COUNT):
        corr, pk, pt = K.reduce_fused(
            keys, times, [arrays(r) for r in inputs], [arrays(r) for r in outputs],
            left_k, left_t, upper, mode, 1, dims,
        )
        q, so, st = K.seed_csr(keys, times)
        in_off, ins = K.gather_runs(q, [arrays(r) for r in inputs])
        out_off, outs = K.gather_runs(q, [arrays(r) for r in outputs])
        want, dk, dt = K.reduce_compiled(q, in_off, ins, out_off, outs, so, st, upper, mode, 1, dims)
        wk, wt = K.union_pairs([(left_k, left_t), (dk, dt)])
        assert [c.tolist() for c in corr] == [c.tolist() for c in want]
        assert (pk.tolist(), pt.tolist()) == (wk.tolist(), wt.tolist())


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", range(6))
def test_distinct_round_equals_the_general_closure(dims: int, seed: int, large: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A distinct's round by `_distinct_round` (forced: `SIMPLE_MIN` and `SIMPLE_SHARE` 0)
    equals the general path's (`SIMPLE_SHARE` above 1): keys whose one seed follows all of their history (their
    correction summed from the runs), keys with several seeds or a history time not `<=` the
    seed (gathered), outputs of a value other than the unit, in small random spines and in
    runs large enough to be searched in lockstep, with and without key filters; the
    corrections a run (keys in order) where the outputs are a distinct's own."""
    rng = random.Random(seed * 13 + dims)
    if large:
        inputs = _large_runs(rng, dims)
        outputs = [arrays(Run.from_updates(
            [(k, 1, t, d) for k, _, t, d in rand_updates(rng, 400, dims, keys=20_000)], dims))]
        universe = 20_000
    else:
        ins, outs = rand_spines(rng, dims)
        inputs, outputs = [arrays(r) for r in ins], [arrays(r) for r in outs]
        universe = 5
    if seed % 3 == 2 and outputs:
        # an output of a value other than the unit: that key takes the general path
        k0, v0, t0, d0 = outputs[0]
        if k0.shape[0]:
            v0 = v0.copy()
            v0[0] = 2
            outputs[0] = (k0, v0, t0, d0)
    top = T.pack((5,) * dims, dims)  # after every stored time (rand_time stays below 4)
    pairs = [(rng.randrange(universe), top if rng.random() < 0.6 else T.pack(rand_time(rng, dims), dims))
             for _ in range(rng.randint(1, 40 if large else 12))]
    keys, times = K.dedup_pairs(np.array([k for k, _ in pairs], np.int64),
                                np.array([t for _, t in pairs], np.int64))
    left_k, left_t = K.dedup_pairs(np.array([1, 3], np.int64), np.array([top, top], np.int64))
    upper = T.pack_frontier(rand_frontier(rng, dims), dims)
    for filtered in (False, True):
        filters = None
        if filtered:
            filters = [K.key_filter(r[0]) if r[0].shape[0] else K.NO_FILTER for r in inputs]
        got = []
        monkeypatch.setattr(K, "SIMPLE_MIN", 0)
        for share in (0.0, 2.0):
            monkeypatch.setattr(K, "SIMPLE_SHARE", share)
            got.append(K.reduce_fused(keys, times, inputs, outputs, left_k, left_t, upper,
                                      K.DISTINCT, 1, dims, filters, None))
        (corr, pk, pt), (want, wk, wt) = got
        assert [c.tolist() for c in corr] == [c.tolist() for c in want]
        assert (pk.tolist(), pt.tolist()) == (wk.tolist(), wt.tolist())
        if seed % 3 != 2:  # a distinct's own outputs are all the unit, its corrections a run
            run = Run.from_arrays(*corr, dims)
            assert [c.tolist() for c in arrays(run)] == [c.tolist() for c in corr]


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_whole_round_equals_its_steps(dims: int, seed: int) -> None:
    """`reduce_whole` (the pending pairs split at `upper` and the seeds united inside the
    call) gives what the executor's steps give: the pending pairs not beyond `upper` united
    with a new run's keys and times, `reduce_fused` with the rest, and the minimal pending
    times. A distinct's corrections are a run already (sorted, consolidated), which the
    executor relies on."""
    rng = random.Random(seed * 11 + dims)
    inputs, outputs = rand_spines(rng, dims)
    new = Run.from_updates(rand_updates(rng, rng.randint(0, 12), dims), dims)
    pend = rand_updates(rng, rng.randint(0, 10), dims, keys=9)
    pend_k, pend_t = K.dedup_pairs(
        np.array([k for k, _, _, _ in pend], np.int64),
        np.array([T.pack(rand_time(rng, dims, 6), dims) for _ in pend], np.int64),
    )
    upper = T.pack_frontier(rand_frontier(rng, dims), dims)
    bits = T.field_bits(dims)
    for mode in (K.DISTINCT, K.COUNT):
        ins, outs = [arrays(r) for r in inputs], [arrays(r) for r in outputs]
        corr, pk, pt, mins = K.reduce_whole(
            [new], pend_k, pend_t, ins, outs, upper, mode, 1, dims,
            [K.NO_FILTER] * len(ins), [K.NO_FILTER] * len(outs),
        )
        later = K.beyond_all(pend_t, upper, dims, bits)
        keys, times = K.union_pairs([(new.keys, new.times), (pend_k[~later], pend_t[~later])])
        if keys.shape[0]:
            want, wk, wt = K.reduce_fused(keys, times, ins, outs, pend_k[later], pend_t[later], upper, mode, 1, dims)
        else:
            z = np.zeros(0, np.int64)
            want, wk, wt = (z, z, z, z), pend_k[later], pend_t[later]
        assert [c.tolist() for c in corr] == [c.tolist() for c in want]
        assert (pk.tolist(), pt.tolist()) == (wk.tolist(), wt.tolist())
        assert mins.tolist() == K.minimal_times(wt, dims, bits).tolist()
        if mode == K.DISTINCT:
            run = Run.from_arrays(*corr, dims)
            assert [c.tolist() for c in arrays(run)] == [c.tolist() for c in corr]


@pytest.mark.parametrize("seed", SEEDS)
def test_dedup_pairs_is_the_sorted_set_of_pairs(seed: int) -> None:
    """Both paths (keys already grouped in order, and any order) give the sorted distinct
    pairs."""
    rng = random.Random(seed)
    n = rng.randint(0, 60)
    # Half the pairs share key 0: groups both below and above the insertion-sort bound.
    keys = [rng.randint(-3, 8) if rng.random() < 0.5 else 0 for _ in range(n)]
    times = [rng.randint(0, 40) for _ in range(n)]
    for ks in (keys, sorted(keys)):
        k, t = K.dedup_pairs(np.array(ks, np.int64), np.array(times, np.int64))
        assert list(zip(k.tolist(), t.tolist(), strict=True)) == sorted(set(zip(ks, times, strict=True)))


@pytest.mark.parametrize("seed", SEEDS)
def test_union_pairs_is_the_sorted_set_of_all_pairs(seed: int) -> None:
    """`union_pairs` (grouped dedup per part, then merges; or one dedup of many parts) equals
    the sorted set of every part's pairs."""
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.choice([0, 1, 2, 3, 6])):
        n = rng.randint(0, 20)
        ks = [rng.randint(0, 6) for _ in range(n)]
        if rng.random() < 0.7:
            ks.sort()  # a run's keys are in order
        parts.append((np.array(ks, np.int64), np.array([rng.randint(0, 4) for _ in range(n)], np.int64)))
    k, t = K.union_pairs(parts)
    want = sorted({(a, b) for ks, ts in parts for a, b in zip(ks.tolist(), ts.tolist(), strict=True)})
    assert list(zip(k.tolist(), t.tolist(), strict=True)) == want
    if parts and sum(p[0].shape[0] for p in parts):
        a, b = parts[0], parts[-1]
        da, db = K.dedup_pairs(*a), K.dedup_pairs(*b)
        mk, mt = K.merge_pairs(da[0], da[1], db[0], db[1])
        assert list(zip(mk.tolist(), mt.tolist(), strict=True)) == sorted(
            set(zip(da[0].tolist(), da[1].tolist(), strict=True)) | set(zip(db[0].tolist(), db[1].tolist(), strict=True)))


@pytest.mark.parametrize("module", ["engine.columnar.kernels", "engine.executors.inprocess"])
@pytest.mark.parametrize("env, advised", [(None, False), ("1", True)])
def test_kernels_turn_numpy_hugepage_advice_off(env: str | None, advised: bool, module: str) -> None:
    """Importing the kernels or an executor turns NumPy's huge-page advice off
    (`columnar.memory`), unless `DIFFSQL_NUMPY_HUGEPAGE=1` keeps NumPy's default (on, on
    Linux)."""
    import os
    import subprocess
    import sys

    probe = (
        "import numpy._core.multiarray as m; m._set_madvise_hugepage(True); "
        "import %s; print(m._set_madvise_hugepage(False))" % module
    )
    environ = {k: v for k, v in os.environ.items() if k != "DIFFSQL_NUMPY_HUGEPAGE"}
    if env is not None:
        environ["DIFFSQL_NUMPY_HUGEPAGE"] = env
    out = subprocess.run([sys.executable, "-c", probe], env=environ, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == str(advised)


@pytest.mark.parametrize("env, kept", [(None, True), ("0", False)])
def test_planner_keeps_freed_large_blocks(env: str | None, kept: bool) -> None:
    """Once the planner is imported, a 64 MB array freed and allocated again reuses its pages
    (`columnar.memory.keep_freed_memory`: no page faulted in a second time), unless
    `DIFFSQL_MALLOC_KEEP=0` keeps glibc's default (a fresh `mmap`, every page faulted again).
    Under another C library the setting does not exist, and `keep_freed_memory` says so."""
    import os
    import platform
    import subprocess
    import sys

    from engine.columnar.memory import keep_freed_memory

    if platform.system() != "Linux" or not platform.libc_ver()[0] == "glibc":
        assert keep_freed_memory(True) is False
        return
    probe = (
        "import resource, numpy as np, planner\n"
        "def faults():\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "a = np.ones(8 << 20); del a\n"  # 64 MB: above glibc's largest mmap threshold
        "f0 = faults(); b = np.ones(8 << 20); print(faults() - f0)\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "DIFFSQL_MALLOC_KEEP"}
    if env is not None:
        environ["DIFFSQL_MALLOC_KEEP"] = env
    out = subprocess.run([sys.executable, "-c", probe], env=environ, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pages = (64 << 20) // 4096
    faulted = int(out.stdout.strip())
    assert (faulted < pages // 10) if kept else (faulted > pages // 2), faulted


@pytest.mark.parametrize("env, backend", [({}, "system"), ({"DIFFSQL_MALLOC_KEEP": "0"}, None),
                                          ({"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, None)])
def test_planner_makes_arrow_allocate_from_malloc(env: dict[str, str], backend: str | None) -> None:
    """Once the planner is imported, Arrow's compute kernels allocate from its system pool
    (glibc's malloc, whose freed blocks `keep_freed_memory` keeps: `columnar.memory
    .arrow_system_pool`), unless `DIFFSQL_MALLOC_KEEP=0` or `ARROW_DEFAULT_MEMORY_POOL` keeps
    Arrow's own choice (mimalloc, or the pool it names)."""
    import os
    import subprocess
    import sys

    probe = (
        "import pyarrow as pa, pyarrow.compute as pc\n"
        "before = pa.default_memory_pool().backend_name\n"
        "import planner\n"
        "system = pa.system_memory_pool().bytes_allocated()\n"
        "x = pc.multiply(pa.array(range(1 << 16), pa.float64()), 2.0)\n"
        "grew = pa.system_memory_pool().bytes_allocated() - system >= 8 << 16\n"
        "print(before, pa.default_memory_pool().backend_name, grew)\n"
    )
    environ = {k: v for k, v in os.environ.items()
               if k not in ("DIFFSQL_MALLOC_KEEP", "ARROW_DEFAULT_MEMORY_POOL")}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", probe], env=environ, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before, after, grew = out.stdout.split()
    if backend is None:
        assert after == before and before != "system", out.stdout
    else:
        assert (after, grew) == (backend, "True"), out.stdout


def test_run_table_views_the_runs_in_place() -> None:
    """A run table's rows are its runs' own columns (a kernel reads them, never a copy), with
    the key filter where one is given; a run whose column is not C-contiguous (a strided
    view) copies it once so that its row describes it; a column of another dtype is refused."""
    rng = np.random.default_rng(7)
    keys = np.sort(rng.integers(0, 50, 2 * 300)).astype(np.int64)
    strided = Run(keys[::2], keys[::2] % 7, np.zeros(300, np.int64), np.ones(300, np.int64), 1)
    plain = Run.from_arrays(keys, keys % 3, np.zeros(600, np.int64), np.ones(600, np.int64), 1)
    f = K.key_filter(plain.keys)
    table = RT.table([strided, arrays(plain)], [K.NO_FILTER, f])
    assert table.shape == (2, RT.COLUMNS)
    assert strided.keys.flags.c_contiguous and strided.address_row() == tuple(table[0])
    assert strided.address_row() is strided.address_row()  # computed once
    assert table[1, RT.KEYS] == plain.keys.__array_interface__["data"][0]
    assert (table[0, RT.FILTER_WORDS], table[1, RT.FILTER_WORDS]) == (0, f.shape[0])
    # Read through the table: the gather over both runs equals `gather` over their columns.
    q = np.array([3, 10, 49, 77], np.int64)
    off, *cols = K._gather_tuple(q, table)
    ref_off, ref = K.gather(q, [arrays(strided), arrays(plain)])
    assert off.tolist() == ref_off.tolist()
    assert [c.tolist() for c in cols] == [c.tolist() for c in ref]
    with pytest.raises(ValueError, match="C-contiguous int64"):
        RT.table([(keys.astype(np.int32),) * 4])


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_round_seeds_equal_the_steps_they_replace(dims: int, seed: int) -> None:
    """`round_seeds` over 0 to 3 new runs (keys repeated within and across runs, as a batch's
    values make them) and the pending pairs gives the pending pairs not beyond `upper` united
    with the runs' pairs (`union_pairs`), and those beyond it left pending."""
    rng = random.Random(seed * 13 + dims)
    new = [Run.from_updates(rand_updates(rng, rng.randint(0, 15), dims, keys=6), dims)
           for _ in range(rng.randint(0, 3))]
    pend = rand_updates(rng, rng.randint(0, 10), dims, keys=9)
    pend_k, pend_t = K.dedup_pairs(
        np.array([k for k, _, _, _ in pend], np.int64),
        np.array([T.pack(rand_time(rng, dims, 6), dims) for _ in pend], np.int64),
    )
    upper = T.pack_frontier(rand_frontier(rng, dims), dims)
    keys, times, left_k, left_t = K.round_seeds(new, pend_k, pend_t, upper, dims)
    later = K.beyond_all(pend_t, upper, dims, T.field_bits(dims))
    wk, wt = K.union_pairs([(r.keys, r.times) for r in new] + [(pend_k[~later], pend_t[~later])])
    assert (keys.tolist(), times.tolist()) == (wk.tolist(), wt.tolist())
    assert (left_k.tolist(), left_t.tolist()) == (pend_k[later].tolist(), pend_t[later].tolist())
    want = sorted({(k, T.pack(t, dims)) for r in new for k, _, t, _ in r.updates()}
                  | {(k, t) for k, t in zip(pend_k[~later].tolist(), pend_t[~later].tolist(), strict=True)})
    assert list(zip(keys.tolist(), times.tolist(), strict=True)) == want


@pytest.mark.parametrize("seed", range(40))
def test_first_counting_round_equals_the_general_round(seed: int) -> None:
    """A reduce's first round with count-only logic (`first_counting_round`: one batch that is
    the whole input, no output yet) equals the general round over the same batch, handed as
    another object so that the general path runs: signed diffs (totals of zero and below),
    keys at one time and at several, 1-D and 2-D times, and an upper that defers some joins
    of a key's times."""
    from engine.executors.inprocess import InProcessExecutor
    from engine.trace import Batch, arrange_updates

    rng = random.Random(seed)
    dims = 1 + seed % 2
    if dims == 1:
        upper = Antichain([(3,)])
        region = [(t,) for t in range(3)]
    else:
        # (1, 2) and (3, 0): the join of (0, 2) and (1, 0) is beyond, so it waits
        upper = Antichain([(1, 2), (3, 0)])
        region = [t for t in itertools.product(range(3), range(3))
                  if not upper.less_equal(t)]
    times = rng.sample(region, rng.randint(1, min(4, len(region))))
    updates = [((rng.randrange(6), rng.randrange(3)), rng.choice(times),
                rng.choice([-2, -1, 1, 1, 2])) for _ in range(rng.randint(1, 40))]
    zero = Antichain([(0,) * dims])
    batch = arrange_updates(updates, False, zero, upper, zero)
    ex = InProcessExecutor()
    for logic in (reducers.count, reducers.distinct, reducers.threshold(lambda n: n - 1)):
        fast, fast_left = ex.reduce_round([batch], {}, [batch], [], zero, upper, logic, dims)
        other = Batch(batch.updates, batch.lower, batch.upper, batch.since)
        slow, slow_left = ex.reduce_round([batch], {}, [other], [], zero, upper, logic, dims)
        got = {} if fast is None else fast.updates
        want = {} if slow is None else slow.updates
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
        assert fast_left == slow_left


@pytest.mark.parametrize("seed", range(6))
def test_unique_ints_equals_numpy_unique(seed: int) -> None:
    """`engine.unique.unique_ints` (a sort and a comparison of neighbours) equals
    `np.unique` on int arrays: empty, one value, repeats, wide and narrow ranges, negative
    values, several dtypes; and leaves its argument as it was."""
    from engine.unique import unique_ints

    rng = np.random.default_rng(seed)
    for dtype in (np.int64, np.int32, np.uint16, np.int8):
        info = np.iinfo(dtype)
        for n in (0, 1, 2, 7, 1000):
            for lo, hi in ((info.min, info.max), (0, 3), (-5, 5)):
                lo, hi = max(lo, info.min), min(hi, info.max)
                x = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
                before = x.copy()
                got = unique_ints(x)
                want = np.unique(x)
                assert got.dtype == want.dtype
                assert np.array_equal(got, want)
                assert np.array_equal(x, before)
