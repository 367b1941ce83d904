"""Rows kept as rows (`engine.rows_at`) and their lazily indexed batch (`engine.rows_batch`)
against the reference: the batch `trace.arrange_updates` builds from the same updates.

A `KeyedRowsBatch` answers `updates`, `lookup` and `get_many` from a sorted int64 key column
or from a dict built on first use; whichever serves, every answer must be the reference
batch's, for keys of every type (ints beyond int64, bools, floats equal to ints, NULLs,
strings), rows that repeat, and both signs of diff. The join kernel over such a batch must give
the join over the reference batch, and a dataflow fed in bulk must equal one fed row by row.
"""

from __future__ import annotations

import datetime
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from engine import Dataflow
from engine.kernels import join_batches
from engine.lattice import Antichain
from engine.rows_at import RowsAt, key_getter
from engine.rows_batch import (
    ASCENDING_PROBE,
    SORTED_MIN_ROWS,
    AscendingChunks,
    DenseCodes,
    KeyedRowsBatch,
    ascending,
    int_column,
)
from engine.trace import arrange_updates

INTS = [0, 1, -1, 7, 2**62, -(2**63), 2**63 - 1]
ODD = [None, True, False, 1.0, 2.5, "a", "", 2**63, -(2**63) - 1, 2**70]


def _value(rng: random.Random, ints_only: bool) -> object:
    if ints_only or rng.random() < 0.85:
        return rng.choice(INTS) if rng.random() < 0.1 else rng.randrange(-50, 50)
    return rng.choice(ODD)


def _entries(lst: list | None) -> Counter | None:
    return None if lst is None else Counter({(v, t): r for v, t, r in lst})


@pytest.mark.parametrize("seed", range(30))
def test_rows_batch_answers_as_the_reference_batch(seed: int) -> None:
    rng = random.Random(seed)
    arity = rng.randint(1, 3)
    key = tuple(rng.sample(range(arity), rng.randint(1, arity)))
    ints_only = rng.random() < 0.6
    n = rng.choice([3, SORTED_MIN_ROWS - 1, SORTED_MIN_ROWS, 700])
    rows = [tuple(_value(rng, ints_only) for _ in range(arity)) for _ in range(n)]
    rows += rng.sample(rows, min(len(rows), rng.randint(0, 20)))  # repeated rows
    t, diff = (3, 1), rng.choice([1, -1, 2])
    lower, upper, since = Antichain([(0, 0)]), Antichain([(4, 0)]), Antichain([(0, 0)])
    ref = arrange_updates(RowsAt(rows, t, diff, key).updates(), False, lower, upper, since)
    probes = [key_getter(key)(r) for r in rng.sample(rows, min(40, len(rows)))]
    probes += [tuple(_value(rng, False) for _ in key) for _ in range(40)]
    probes += [(x,) for x in (1.0, True, 2**64, -(2**64), None, "z")]

    # answered from the index (when it applies) before any dict exists ...
    fresh = KeyedRowsBatch(rows, key, t, diff, lower, upper, since)
    assert [_entries(e) for e in fresh.get_many(probes)] == \
        [_entries(ref.updates.get(k)) for k in probes]
    get = fresh.lookup()
    assert [_entries(get(k)) for k in probes] == [_entries(ref.updates.get(k)) for k in probes]
    assert fresh.key_count() == len(ref.updates)
    # ... and from the dict
    assert {k: _entries(v) for k, v in fresh.updates.items()} == \
        {k: _entries(v) for k, v in ref.updates.items()}
    assert [_entries(e) for e in fresh.get_many(probes)] == \
        [_entries(ref.updates.get(k)) for k in probes]
    assert fresh.records >= ref.records and fresh.approx_bytes() > 0
    moved = fresh.with_upper(Antichain([(9, 0)]), 5)
    assert moved.upper == Antichain([(9, 0)]) and moved.seq == 5
    assert {k: _entries(v) for k, v in moved.updates.items()} == \
        {k: _entries(v) for k, v in ref.updates.items()}


def test_the_sorted_index_serves_int_keys() -> None:
    rows = [(i % 97, i) for i in range(1000)]
    b = KeyedRowsBatch(rows, (0,), (1,), 1, Antichain([(0,)]), Antichain([(2,)]),
                       Antichain([(0,)]))
    assert b.get_many([(5,), (500,)])[1] is None
    assert b._dict is None and b._sorted is not False  # no dict was built to answer
    assert sorted(v for v, _, _ in b.lookup()((5,))) == [r for r in rows if r[0] == 5]
    # many single-key probes: past a limit the dict answers the rest, the same answers
    get = b.lookup()
    ref = arrange_updates(RowsAt(rows, (1,), 1, (0,)).updates(), False, b.lower, b.upper,
                          b.since)
    keys = [(k,) for k in range(-5, 300)]
    assert [_entries(get(k)) for k in keys] == [_entries(ref.updates.get(k)) for k in keys]
    assert b._dict is not None


@pytest.mark.parametrize("seed", range(12))
def test_a_batch_of_columns_answers_as_the_reference_batch(seed: int) -> None:
    """A batch holding an Arrow table (a hydration's columns): probes by an int key are
    answered from the table's key column and the hits' rows, the rows never all made;
    then every answer equals the reference batch of the same rows."""
    import pyarrow as pa

    from engine.sources import rows_of

    rng = random.Random(seed)
    n = rng.choice([SORTED_MIN_ROWS - 1, SORTED_MIN_ROWS, 3000])
    key_type = rng.choice([pa.int64(), pa.int32(), pa.string()])
    keys = [rng.randrange(-40, 40) for _ in range(n)]
    if seed % 2:
        keys.sort()  # in key order: the index is the column itself (rows_batch.ascending)
    table = pa.table([pa.array(keys if key_type != pa.string() else [str(k) for k in keys],
                               key_type),
                      pa.array([rng.choice([None, 1.5, "x"]) and rng.random() for _ in range(n)]),
                      pa.array([rng.randrange(5) for _ in range(n)], pa.int16())],
                     names=["k", "v", "w"])
    chunked = seed % 4 == 1 and n > 10  # several chunks, one of them empty: as DuckDB reads
    if chunked:
        table = pa.concat_tables([table.slice(0, 7), table.slice(7, 0), table.slice(7)])
    rows = list(rows_of(table, 3))
    key = (0,)
    t, diff = (3,), rng.choice([1, -1])
    lower, upper, since = Antichain([(0,)]), Antichain([(4,)]), Antichain([(0,)])
    ref = arrange_updates(RowsAt(rows, t, diff, key).updates(), False, lower, upper, since)
    probes = [(r[0],) for r in rng.sample(rows, 40)] + [(10**6,), (-3,)]
    b = KeyedRowsBatch(None, key, t, diff, lower, upper, since, table=table)
    assert b.records == n and b.approx_bytes() > 0
    assert [_entries(e) for e in b.get_many(probes)] == \
        [_entries(ref.updates.get(k)) for k in probes]
    assert [_entries(b.lookup()(k)) for k in probes[:5]] == \
        [_entries(ref.updates.get(k)) for k in probes[:5]]
    if key_type != pa.string() and n >= SORTED_MIN_ROWS:
        assert b._rows is None  # answered from the key column and the hits alone
        # an ascending int64 key of several chunks: the index is the chunks themselves
        assert isinstance(b._sorted, AscendingChunks) is (chunked and key_type == pa.int64())
        # keys out of order within a range no wider than their number: bounds per key
        assert isinstance(b._sorted, DenseCodes) is (seed % 2 == 0)
        assert b.key_count() == len(ref.updates)
    odd = [("7",), (2.0,), (True,), (None,)]  # equal to an int key by Python's rules, or not
    assert [_entries(e) for e in b.get_many(odd)] == [_entries(ref.updates.get(k)) for k in odd]
    assert {k: _entries(v) for k, v in b.updates.items()} == \
        {k: _entries(v) for k, v in ref.updates.items()}


def _search_as(idx: Any, whole: np.ndarray, probes: np.ndarray,
               rng: np.random.Generator) -> None:
    """`idx.searchsorted` equals the sorted array `whole`'s, probe by probe and for all the
    probes at once (shuffled), on either side."""
    for side in ("left", "right"):
        want = whole.searchsorted(probes, side)
        assert [idx.searchsorted(int(p), side) for p in probes] == want.tolist()
        shuffled = rng.permutation(probes)
        assert idx.searchsorted(shuffled, side).tolist() == \
            whole.searchsorted(shuffled, side).tolist()


@pytest.mark.parametrize("seed", range(20))
def test_ascending_chunks_search_as_their_concatenation(seed: int) -> None:
    """`AscendingChunks` answers `searchsorted` (one probe or an array of them, either side)
    and `key_count` as one array of the chunks would: equal keys across a chunk boundary,
    empty chunks, probes below, between and above every key; chunks out of order are no
    index (`of` is None)."""
    rng = np.random.default_rng(seed)
    whole = np.sort(rng.integers(-20, 20, int(rng.integers(1, 300))))
    cuts = np.sort(rng.integers(0, len(whole) + 1, int(rng.integers(0, 6))))
    chunks = np.split(whole, cuts)  # empty ones among them where cuts repeat or sit at an end
    idx = AscendingChunks.of(chunks)
    assert idx is not None and len(idx) == len(whole)
    probes = np.arange(-25, 26, dtype=np.int64)
    _search_as(idx, whole, probes, rng)
    assert idx.key_count() == len(np.unique(whole))
    if len([c for c in chunks if len(c)]) > 1 and whole[0] < whole[-1]:
        kept = [c for c in chunks if len(c)]
        swapped = [kept[-1]] + kept[:-1]
        assert AscendingChunks.of(swapped) is None or \
            np.all(np.diff(np.concatenate(swapped)) >= 0)


@pytest.mark.parametrize("seed", range(20))
def test_dense_codes_search_as_the_sorted_codes(seed: int) -> None:
    """`DenseCodes` answers `searchsorted` (one probe or an array, either side, probes below,
    inside and above the range, at int64's ends) and `key_count` as the sorted codes would;
    codes spread wider than their number are no index (`of` is None)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    low = int(rng.choice([-(2**63), -7, 0, 2**63 - 1 - n]))
    codes = (low + rng.integers(0, n, n)).astype(np.int64)  # span at most n, with gaps
    idx = DenseCodes.of(codes)
    assert idx is not None and len(idx) == n
    whole = np.sort(codes)
    edge = [-(2**63), 2**63 - 1, low, int(whole[-1]), int(whole[-1]) + 1 if whole[-1] < 2**63 - 1
            else 2**63 - 1]
    probes = np.array(sorted(set(edge + [int(x) for x in whole[::7]] + [low - 1 if low > -(2**63)
                                                                        else low])),
                      dtype=np.int64)
    _search_as(idx, whole, probes, rng)
    assert idx.key_count() == len(np.unique(codes))
    assert DenseCodes.of(np.array([0, n + 1] + [0] * (n - 1), dtype=np.int64)) is None


def test_ascending_equals_a_comparison_of_neighbours() -> None:
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, ASCENDING_PROBE, ASCENDING_PROBE + 1, 4000):
        for codes in (rng.integers(0, 4, n), np.sort(rng.integers(-9, 9, n)),
                      np.arange(n)[::-1].copy()):
            assert ascending(codes) == all(a <= b for a, b in zip(codes[:-1], codes[1:], strict=True))
            if n > 2:
                late = np.sort(codes)
                late[-1] = late[0] - 1  # in order but for the last
                assert not ascending(late)


def _typed_columns(rng: random.Random, n: int, nan: bool, wide: bool) -> Any:
    """A table of n rows: an int key, then a column of each type a picker serves (with
    NULLs, extremes, -0.0, infinities, DECIMALs of 18 digits at most), a NaN when `nan`, a
    DECIMAL of 38 digits when `wide`."""
    import datetime as dt
    import decimal as dec

    import pyarrow as pa

    def some(values: list[Any], nulls: bool = True) -> list[Any]:
        return [None if nulls and rng.random() < 0.2 else rng.choice(values) for _ in range(n)]

    floats = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), 1e308, 5e-324]
    cols = {
        "k": pa.array([rng.randrange(-30, 30) for _ in range(n)], pa.int64()),
        "i": pa.array(some([0, -1, 2**62, -(2**63)]), pa.int64()),
        "i32": pa.array(some([1, -7, 2**31 - 1], nulls=False), pa.int32()),
        "u": pa.array(some([0, 2**64 - 1, 2**63]), pa.uint64()),
        "b": pa.array(some([True, False]), pa.bool_()),
        "f": pa.array(some(floats + ([float("nan")] if nan else [])), pa.float64()),
        "d": pa.array(some([dt.date(1, 1, 1), dt.date(1995, 3, 15), dt.date(9999, 12, 31)]),
                      pa.date32()),
        "d0": pa.array(some([dt.date(1, 1, 1), dt.date(2024, 2, 29)], nulls=False), pa.date32()),
        "ts": pa.array(some([dt.datetime(1970, 1, 1), dt.datetime(2026, 11, 26, 1, 2, 3, 4)]),
                       pa.timestamp("us")),
        "s": pa.array(some(["", "a", "é", "x" * 40])),
        "m": pa.array(some([dec.Decimal("1.10"), dec.Decimal("-0.01"), dec.Decimal("0.00"),
                            dec.Decimal("-9999999999999999.99")]), pa.decimal128(18, 2)),
        "m0": pa.array(some([dec.Decimal("7"), dec.Decimal("-12")], nulls=False),
                       pa.decimal128(4, 0)),
    }
    if wide:
        cols["w"] = pa.array(some([dec.Decimal("1.10"), dec.Decimal("-0.01")]),
                             pa.decimal128(38, 2))
    return pa.table(list(cols.values()), names=list(cols))


@pytest.mark.parametrize("seed", range(40))
def test_settled_columns_answer_as_the_reference_batch(seed: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After `settle` a batch of columns whose every column has a picker keeps them: probes
    convert their hits only, and every answer equals the reference batch of the same rows
    (each picker equals `column_values` at the positions it picks: a DECIMAL's Decimals
    digit for digit). A column without a picker (a DECIMAL of more than 18 digits, a double
    holding a NaN) makes the rows at `settle`, as before."""
    import numpy as np

    from engine.sources import column_picker, column_values, rows_of

    rng = random.Random(seed)
    n = rng.choice([SORTED_MIN_ROWS, 2000])
    nan, wide = rng.random() < 0.25, rng.random() < 0.25
    if seed % 2:  # key indexes of dense ints sorted by counting (engine.counting_sort)
        import engine.counting_sort

        monkeypatch.setattr(engine.counting_sort, "DENSE_MIN", 1)
    table = _typed_columns(rng, n, nan, wide)
    # in three chunks, two of them slices whose arrays start at an offset
    import pyarrow as pa

    third = n // 3
    chunked = pa.concat_tables([table.slice(0, third), table.slice(third, third),
                                table.slice(2 * third)])
    for col in chunked.columns:
        pick = column_picker(col)
        if pick is None:
            continue
        pos = np.array([rng.randrange(n) for _ in range(50)] + [0, n - 1], dtype=np.int64)
        whole = column_values(col)
        # a few positions (read from the chunks' scalars), then many (the whole column made
        # one array), then a few again (from that array)
        for part in (pos[-5:], pos, pos[:3]):
            assert [repr(v) for v in pick(part)] == [repr(whole[j]) for j in part.tolist()]
    rows = list(rows_of(table, table.num_columns))
    t, diff = (2,), rng.choice([1, -1, 3])
    lower, upper, since = Antichain([(0,)]), Antichain([(3,)]), Antichain([(0,)])
    # keys of exact ints (indexed by value), of any other type (by dictionary codes: NULLs,
    # strings, dates, booleans, floats with -0.0), and of both
    names = table.column_names
    key = rng.choice([("k",), ("s",), ("d",), ("b",), ("f",), ("i",), ("k", "s"), ("s", "d"),
                      ("u",), ("ts",), ("m",)])
    key = tuple(names.index(c) for c in key)
    ref = arrange_updates(RowsAt(rows, t, diff, key).updates(), False, lower, upper, since)
    b = KeyedRowsBatch(None, key, t, diff, lower, upper, since, table=table)
    changed = b.settle()
    lazy = not nan and not wide
    assert changed is not lazy and (b._rows is None) is lazy
    # fewer single probes than the batch answers before building its dict (64): keys of rows,
    # and values equal to some by Python's rules or of other types
    probes = [key_getter(key)(r) for r in rng.sample(rows, 30)]
    odd = [None, 0, 1, 1.0, -0.0, True, "a", "", datetime.date(1995, 3, 15), 2 ** 64 - 1]
    # (a column of exact ints is probed with ints here: any other value takes the dict form,
    # which makes the rows; test_rows_batch_answers_as_the_reference_batch probes those)
    exact = [int_column(table.column(c)) is not None for c in key]
    probes += [tuple(rng.choice([0, 1, 2 ** 64 - 1] if e else odd) for e in exact)
               for _ in range(17)]
    get = b.lookup()
    assert [_entries(get(k)) for k in probes] == [_entries(ref.updates.get(k)) for k in probes]
    few = probes[::5]
    assert [_entries(e) for e in b.get_many(few)] == [_entries(ref.updates.get(k)) for k in few]
    assert (b._rows is None) is lazy  # the probes made no rows
    many = probes[:20] + probes[-3:]  # searched as one vector (past VECTOR_MIN_KEYS)
    assert [_entries(e) for e in b.get_many(many)] == [_entries(ref.updates.get(k)) for k in many]
    assert b.settle() is False  # settled once
    assert {k: _entries(v) for k, v in b.updates.items()} == \
        {k: _entries(v) for k, v in ref.updates.items()}


@pytest.mark.parametrize("seed", range(12))
def test_join_over_rows_batches_equals_join_over_reference(seed: int) -> None:
    rng = random.Random(seed)
    lower, upper, since = Antichain([(0,)]), Antichain([(2,)]), Antichain([(0,)])

    def side(n: int) -> tuple[KeyedRowsBatch, object]:
        rows = [(rng.randrange(60) if rng.random() < 0.95 else rng.choice(ODD), rng.random())
                for _ in range(n)]
        b = KeyedRowsBatch(rows, (0,), (1,), rng.choice([1, -1]), lower, upper, since)
        return b, arrange_updates(RowsAt(rows, (1,), b.diff, (0,)).updates(), False, lower,
                                  upper, since)

    big, big_ref = side(rng.choice([300, 1200]))
    small, small_ref = side(rng.choice([5, 40, 300]))

    def f(k: object, a: object, b: object) -> object:
        return (k, a, b)

    for new_is_left in (True, False):
        for new, other, new_ref, other_ref in ((big, small, big_ref, small_ref),
                                               (small, big, small_ref, big_ref)):
            got: list = []
            want: list = []
            join_batches(new, [other], f, new_is_left, got)
            join_batches(new_ref, [other_ref], f, new_is_left, want)
            assert Counter({(d, t): r for d, t, r in got}) == \
                Counter({(d, t): r for d, t, r in want})
            assert Counter(got) == Counter(want)


def keyed(row: tuple) -> tuple:
    return ((row[0],), row)


# the form over plain rows (as planner.mfp_kernel generates it): rows keyed by column 0
keyed.over_rows = lambda rows: rows  # type: ignore[attr-defined]
keyed.row_keys = (0,)  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(6))
def test_bulk_rows_and_single_updates_give_the_same_join(seed: int) -> None:
    """The same epochs of inserts and deletes, sent with `insert_many` (rows kept as rows,
    indexed batches) and one update at a time (the list path), give the same output."""
    rng = random.Random(seed)
    epochs = []
    live: dict[str, list] = {"a": [], "b": []}
    for e in range(6):
        batch = {}
        for name in live:
            # some epochs only insert or only delete (each a single payload of rows)
            ins = [(rng.randrange(300), rng.randrange(5))
                   for _ in range(rng.choice([10, 600]) if e % 3 != 2 else 0)]
            dels = rng.sample(live[name], min(len(live[name]), rng.randint(0, 50)
                                              if e % 3 == 0 else 0 if e % 3 == 1 else 400))
            for r in dels:
                live[name].remove(r)
            live[name] += ins
            batch[name] = (ins, dels)
        epochs.append(batch)

    def run(bulk: bool) -> list[Counter]:
        df = Dataflow()
        ha, a = df.new_input("a")
        hb, b = df.new_input("b")
        joined = a.map(keyed).join(b.map(keyed))
        cap = joined.capture()
        out = []
        for e, batch in enumerate(epochs):
            for h, name in ((ha, "a"), (hb, "b")):
                ins, dels = batch[name]
                if bulk:
                    h.insert_many(ins)
                    h.insert_many(dels, -1)
                else:
                    for r in ins:
                        h.insert(r)
                    for r in dels:
                        h.remove(r)
                h.advance_to(e + 1)
            df.run()
            out.append(Counter({d: r for d, r in cap.current().items() if r}))
        return out

    assert run(True) == run(False)


@pytest.mark.parametrize("seed", range(4))
def test_send_of_many_pairs_equals_send_of_each(seed: int) -> None:
    """`InputHandle.send` of many canonical `(row, diff)` pairs goes as rows per diff (the
    executor keeps them as rows); the result equals sending the pairs one at a time."""
    from engine.operators.input import BULK_ROWS

    rng = random.Random(seed)
    epochs = []
    live: list = []
    for _ in range(3):
        ins = [(rng.randrange(40), rng.randrange(3)) for _ in range(rng.choice([BULK_ROWS, 500]))]
        dels = rng.sample(live, min(len(live), rng.randint(0, 120)))
        for r in dels:
            live.remove(r)
        live += ins
        pairs = [(r, 1) for r in ins] + [(r, -1) for r in dels]
        rng.shuffle(pairs)
        epochs.append(pairs)

    def run(bulk: bool) -> list[Counter]:
        df = Dataflow()
        h, a = df.new_input("a")
        cap = a.map(keyed).join(a.map(keyed)).capture()
        out = []
        for e, pairs in enumerate(epochs):
            if bulk:
                h.send(pairs, canonical_data=True)
            else:
                for p in pairs:
                    h.send([p], canonical_data=True)
            h.advance_to(e + 1)
            df.run()
            out.append(Counter({d: r for d, r in cap.current().items() if r}))
        return out

    assert run(True) == run(False)


class _Sum:
    """A key's state for reduce_total: the sum of its values' second column, and the count."""

    def __init__(self, key: object) -> None:
        self.n = 0
        self.total = 0

    def apply(self, changes: list) -> int:
        for row, d in changes:
            self.n += d
            self.total += row[1] * d
        return len(changes)

    def output(self) -> tuple[list, int]:
        return ([((self.n, self.total), 1)] if self.n else []), 1

    def empty(self) -> bool:
        return self.n == 0

    def size(self) -> int:
        return 1


class _SumVals(_Sum):
    def apply_vals(self, rows: list, diff: int) -> int:
        self.n += diff * len(rows)
        self.total += diff * sum(r[1] for r in rows)
        return len(rows)


@pytest.mark.parametrize("state", [_Sum, _SumVals])
@pytest.mark.parametrize("seed", range(4))
def test_reduce_total_of_bulk_rows_equals_single_updates(seed: int, state: type) -> None:
    """reduce_total fed keyed rows at one time (each key's bare rows with their one diff,
    to `apply_vals` when the state has it) equals the same updates sent one at a time."""
    rng = random.Random(seed)
    epochs = []
    live: list = []
    for e in range(4):
        # epochs of only inserts and of only deletes: each a single payload of rows
        ins = [(rng.randrange(30), rng.randrange(-5, 9))
               for _ in range(rng.choice([20, 700]) if e % 2 == 0 else 0)]
        dels = rng.sample(live, min(len(live), rng.randint(100, 300))) if e % 2 else []
        for r in dels:
            live.remove(r)
        live += ins
        epochs.append((ins, dels))

    def run(bulk: bool) -> list[Counter]:
        df = Dataflow()
        h, a = df.new_input("a")
        cap = a.map(keyed).reduce_total(state, "sum").capture()
        out = []
        for e, (ins, dels) in enumerate(epochs):
            if bulk:
                h.insert_many(ins)
                h.insert_many(dels, -1)
            else:
                for r in ins:
                    h.insert(r)
                for r in dels:
                    h.remove(r)
            h.advance_to(e + 1)
            df.run()
            out.append(Counter({d: r for d, r in cap.current().items() if r}))
        return out

    assert run(True) == run(False)


@pytest.mark.parametrize("seed", range(6))
def test_rows_by_key_equals_reference(seed: int) -> None:
    """The NumPy grouping of a one-column int key gives the reference's groups: the same rows
    in the same order, keys in order of first appearance; other keys take the reference."""
    from engine.rows_at import GROUP_SORT_MIN_ROWS, rows_by_key, rows_by_key_reference

    rng = random.Random(seed)
    n = rng.choice([10, GROUP_SORT_MIN_ROWS, 3 * GROUP_SORT_MIN_ROWS])
    spread = rng.choice([1, 7, 1000, 1 << 62])
    rows = [(rng.randrange(-spread, spread), i, rng.choice("ab")) for i in range(n)]
    if seed == 4:
        rows[n // 2] = (True, -1, "a")  # a bool is not an int key here
    if seed == 5:
        rows[n // 3] = (1 << 70, -1, "a")  # beyond int64
    for key in ((0,), (0, 2), (2,)):
        got, want = rows_by_key(rows, key), rows_by_key_reference(rows, key)
        assert list(got.items()) == list(want.items())


@pytest.mark.parametrize("seed", range(6))
def test_the_sorted_index_serves_keys_of_several_int_columns(seed: int) -> None:
    """Two or three int key columns coded as one int64: answers equal the reference's, probes
    outside a column's range (also where subtracting its low bound would wrap) miss, and no
    dict is built."""
    rng = random.Random(seed)
    width = rng.choice([2, 3])
    base = rng.choice([0, 2**63 - 200, -(2**63)])
    rows = [tuple(base + rng.randrange(40) if c == 0 else rng.randrange(-20, 20)
                  for c in range(width)) + ("v",) for _ in range(2000)]
    key = tuple(range(width))
    lower, upper, since = Antichain([(0,)]), Antichain([(4,)]), Antichain([(0,)])
    ref = arrange_updates(RowsAt(rows, (1,), 1, key).updates(), False, lower, upper, since)
    b = KeyedRowsBatch(rows, key, (1,), 1, lower, upper, since)
    probes = [r[:width] for r in rng.sample(rows, 60)]
    probes += [(min(max(base + rng.randrange(-3, 43), -(2**63)), 2**63 - 1),)
               + tuple(rng.randrange(-25, 25) for _ in range(width - 1)) for _ in range(60)]
    probes += [(-(2**63),) + (0,) * (width - 1), (2**63 - 1,) + (0,) * (width - 1)]
    # just past each column's range, next to real keys (a code must not spill into a
    # neighbouring key's)
    for c in range(width):
        lo, hi = min(r[c] for r in rows), max(r[c] for r in rows)
        for r in rng.sample(rows, 5):
            probes += [r[:c] + (hi + 1,) + r[c + 1:width], r[:c] + (lo - 1,) + r[c + 1:width]]
    assert [_entries(e) for e in b.get_many(probes)] == \
        [_entries(ref.updates.get(k)) for k in probes]
    get = b.lookup()
    one_by_one = probes[:4] + probes[-60:]  # (past 64 single probes the dict answers)
    assert [_entries(get(k)) for k in one_by_one] == \
        [_entries(ref.updates.get(k)) for k in one_by_one]
    if len(probes) << 2 <= len(rows):  # (more probes than that: the dict is cheaper)
        assert b._dict is None and b._sorted is not False
    assert b.key_count() == len(ref.updates)
