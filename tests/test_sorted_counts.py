"""planner.sorted_counts against the per-row state it stands in for.

A group's MIN/MAX state built from columns keeps its values in arrays (`SortedCounts`); the
same group built from rows keeps a dict and a `SortedList`. After the same random changes
(removing the extremes, reviving dead values, values that are not among the first ones,
values equal by Python's rules but of another class, NULLs, NaN) both states hold the same
value -> count map, the same sorted index and give the same MIN and MAX.
"""

from __future__ import annotations

import datetime
import math
import random
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import planner.aggregate_columns as aggregate_columns
import planner.sorted_counts as sorted_counts
from engine.sources import rows_of
from planner.aggregate import IncrementalAggregates, _value_key
from planner.aggregate_columns import build_states
from planner.ir import Agg
from planner.sorted_counts import SortedCounts

D0 = datetime.date(2020, 1, 1)
KINDS = ["int", "float", "date", "decimal"]
ATYPE = {"int": pa.int64(), "float": pa.float64(), "date": pa.date32(),
         "decimal": pa.decimal128(15, 2)}
VTYPE = {"int": "BIGINT", "float": "DOUBLE", "date": "DATE", "decimal": "DECIMAL(15,2)"}


def _cents(n: int) -> Decimal:
    """n hundredths, at exponent -2: a DECIMAL(15,2) value as DuckDB gives it."""
    return Decimal(n).scaleb(-2)


def _values(kind: str, rng: random.Random, n: int) -> list[Any]:
    if kind == "int":
        return [rng.randint(-30, 30) if rng.random() > 0.1 else None for _ in range(n)]
    if kind == "float":
        return [rng.choice([0.5, -1.25, 3.0, 1e300, -math.inf, 7.75]) if rng.random() > 0.1
                else None for _ in range(n)]
    if kind == "decimal":
        return [_cents(25 * rng.randint(-30, 30)) if rng.random() > 0.1 else None
                for _ in range(n)]
    return [D0 + datetime.timedelta(days=rng.randint(-40, 40)) if rng.random() > 0.1 else None
            for _ in range(n)]


def _other(kind: str, rng: random.Random) -> Any:
    """A value to change: mostly of the column's class, some equal by Python's rules only."""
    if kind == "int":
        return rng.choice([rng.randint(-40, 40), rng.randint(-40, 40), 3.0, None, 2 ** 70])
    if kind == "float":
        return rng.choice([0.5, -1.25, 3, 2.0, -0.0, 0.0, math.inf, math.nan, None, 7.75, 1e300])
    if kind == "decimal":
        # equal to a held value at another exponent or class (1.5 and 3 and 0.5 and -0.00
        # among 1.50, 3.00, 0.50, 0.00), or finer than the column's scale (0.255 is not 0.25)
        return rng.choice([_cents(25 * rng.randint(-40, 40)), _cents(25 * rng.randint(-40, 40)),
                           Decimal("1.5"), 3, 0.5, Decimal("-0.00"), Decimal("0.125"),
                           Decimal("0.255"), None])
    return rng.choice([D0 + datetime.timedelta(days=rng.randint(-50, 50)),
                       datetime.datetime(2020, 1, 1), None])


def _view(st: Any) -> Any:
    return ({a: sorted(((repr(k), c) for k, c in dict(v).items())) for a, v in
             st.values.items()},
            {a: [repr(e) for e in i] for a, i in st.index.items()},
            repr(st.output()[0]))


def _distinct_values(kind: str, rng: random.Random, n: int) -> list[Any]:
    """n values, no two equal (but NULLs): a group whose state keeps no counts array."""
    ints = rng.sample(range(-2000, 2000), n)
    vals: list[Any] = {"int": ints, "float": [i / 4 for i in ints],
                       "date": [D0 + datetime.timedelta(days=i) for i in ints],
                       "decimal": [_cents(i) for i in ints]}[kind]
    return [v if rng.random() > 0.1 else None for v in vals]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dead_list", [0, 5, 10_000])  # the tree at once, later, never
@pytest.mark.parametrize("distinct", [False, True])  # the group's values: repeated, or not
def test_sorted_counts_equals_the_per_row_state(kind: str, seed: int, dead_list: int,
                                                distinct: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregate_columns, "ARRAY_INDEX_MIN", 1)
    monkeypatch.setattr(sorted_counts, "DEAD_LIST_MAX", dead_list)
    rng = random.Random(seed)
    vals = (_distinct_values if distinct else _values)(kind, rng, 400)
    table = pa.table([pa.array([1] * len(vals)), pa.array(vals, ATYPE[kind])], names=["k", "v"])
    vtype = VTYPE[kind]
    plan = IncrementalAggregates((Agg("min", 1, False, vtype), Agg("max", 1, False, vtype),
                                  Agg("count_star", None, False, "BIGINT")))
    built = build_states(plan, table, (0,))
    assert built is not None
    got = built[(1,)]
    assert isinstance(got.values[1], SortedCounts)
    assert (got.values[1].counts is None) is distinct  # each value once: no counts array
    want = plan((1,))
    want.apply_vals(list(rows_of(table, 2)), 1)
    assert _view(got) == _view(want)
    held = [r for r in rows_of(table, 2)]
    for _ in range(300):
        if held and rng.random() < 0.55:
            # remove a held row: often the current extreme
            if rng.random() < 0.3:
                present = [r for r in held if r[1] is not None and r[1] == r[1]]
                if present:
                    ext = min(present, key=lambda r: _value_key(r[1])) if rng.random() < 0.5 \
                        else max(present, key=lambda r: _value_key(r[1]))
                    held.remove(ext)
                    change = [(ext, -1)]
                else:
                    change = [(held.pop(rng.randrange(len(held))), -1)]
            else:
                change = [(held.pop(rng.randrange(len(held))), -1)]
        else:
            row = (1, _other(kind, rng))
            held.append(row)
            change = [(row, 1)]
        got.apply(change)
        want.apply(change)
        assert _view(got) == _view(want), change


def test_distinct_equals_np_unique() -> None:
    """`aggregate_columns._distinct`, the distinct values and counts of a group's column,
    against np.unique (the reference): ints, dates as days, floats with -0.0, infinities
    and NaN, empty and one-value parts; same values (sign of zero included), counts, dtypes."""
    rng = np.random.default_rng(1)
    for t in range(3000):
        n = int(rng.integers(0, 50))
        kind = t % 3
        if kind == 0:
            a = rng.integers(-5, 5, n)
        elif kind == 1:
            a = rng.choice(np.array([0.0, -0.0, 1.5, np.inf, -np.inf, np.nan, 2.0]), n)
        else:
            a = rng.integers(0, 3, n).astype("datetime64[D]").astype(np.int64)
        want_v, want_c = np.unique(a, return_counts=True)
        frozen = t % 2 == 1  # a read-only part (an Arrow column's view) is copied, not sorted
        given = a.copy()
        if frozen:
            given.flags.writeable = False
        got_v, got_c = aggregate_columns._distinct(given)
        assert np.array_equal(got_v, want_v, equal_nan=kind == 1), a
        assert np.array_equal(np.signbit(got_v), np.signbit(want_v)), a
        if got_c is None:  # every value distinct
            assert (want_c == 1).all(), a
        else:
            assert np.array_equal(got_c, want_c) and got_c.dtype == want_c.dtype, a
        assert got_v.dtype == want_v.dtype
        if frozen or np.isnan(a).any():  # (a NaN: np.unique's own answer, on the part)
            assert np.array_equal(given, a, equal_nan=True)
        elif n:  # sorted in place: the same multiset; distinct values are the part itself
            assert np.array_equal(given, np.sort(a))
            assert (got_c is None) is (got_v is given)


def _fresh(kind: str, rng: random.Random) -> Any:
    """A value of the column's class that no `_values` value equals (an overlay entry)."""
    x = rng.randint(100, 160)
    return {"int": x, "float": x + 0.125, "date": D0 + datetime.timedelta(days=x),
            "decimal": _cents(100 * x + 13)}[kind]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("odd", [False, True])
def test_absorb_merges_as_the_per_row_state(kind: str, seed: int, odd: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A state held in arrays, with an overlay of values added since (of the column's class,
    or, `odd`, some only equal by Python's rules, NaN, past int64), absorbing a batch built
    from columns and then retracting a built sample of its rows (`AggregateState.absorb`,
    arrays merged by `SortedCounts.merged` where the overlay converts), holds what the per-row
    state holds after the same rows."""
    import planner.aggregate as aggregate

    monkeypatch.setattr(aggregate_columns, "ARRAY_INDEX_MIN", 1)
    monkeypatch.setattr(aggregate, "MERGE_ARRAYS", 1)
    monkeypatch.setattr(aggregate, "MERGE_ARRAYS_RATIO", 10 ** 6)
    merges: list[bool] = []
    real = SortedCounts.merged

    def spy(self: SortedCounts, other: SortedCounts, sign: int = 1) -> Any:
        out = real(self, other, sign)
        merges.append(out is not None)
        return out

    monkeypatch.setattr(SortedCounts, "merged", spy)
    rng = random.Random(700 + seed)
    atype, vtype = ATYPE[kind], VTYPE[kind]
    plan = IncrementalAggregates((Agg("min", 1, False, vtype), Agg("max", 1, False, vtype),
                                  Agg("count_star", None, False, "BIGINT")))

    def built(vals: list[Any]) -> Any:
        table = pa.table([pa.array([1] * len(vals)), pa.array(vals, atype)], names=["k", "v"])
        states = build_states(plan, table, (0,))
        return None if states is None else states[(1,)], list(rows_of(table, 2))

    got, held = built(_values(kind, rng, 300))
    want = plan((1,))
    want.apply_vals(held, 1)
    for _ in range(60):  # an overlay: values not among the built ones, and some deletions
        if rng.random() < 0.3:
            change = [(held.pop(rng.randrange(len(held))), -1)]
        else:
            row = (1, _other(kind, rng) if odd else _fresh(kind, rng))
            held.append(row)
            change = [(row, 1)]
        got.apply(change)
        want.apply(change)
    assert _view(got) == _view(want)
    batch, rows = built(_values(kind, rng, 200))
    got.absorb(batch, 1)
    want.apply_vals(rows, 1)
    held += rows
    assert _view(got) == _view(want)
    leaving = rng.sample(held, 150)
    plain = [r for r in leaving if r[1] is None or r[1].__class__ is {
        "int": int, "float": float, "date": datetime.date, "decimal": Decimal}[kind] and (
            kind != "decimal" or (r[1].as_tuple().exponent == -2 and r[1] != 0))]
    gone, rows = built([r[1] for r in plain]) if len(plain) == len(leaving) and (
        kind != "int" or all(r[1] is None or -2 ** 63 <= r[1] < 2 ** 63 for r in plain)) \
        else (None, leaving)
    if gone is not None:  # as a batch's columns would give them
        got.absorb(gone, -1)
    else:  # values the columns would not carry as they are (NaN, -0.0, 3 among floats)
        rows = leaving
        got.apply([(r, -1) for r in rows])
    want.apply([(r, -1) for r in rows])
    assert _view(got) == _view(want)
    if not odd:
        assert merges and all(merges)  # every overlay converted: the arrays merged


def test_merged_declines_overlays_of_another_class() -> None:
    """`SortedCounts.merged` leaves to the per-value path an overlay value that the base's
    array would change: a float among ints (7.5, or 3.0 that would become 3), an int among
    floats, a datetime among dates, a NaN, an int past int64; of the class, it merges."""
    cases = {
        "int": (np.array([1, 2], dtype=np.int64), [7.5, 3.0, 2 ** 70], 9),
        "float": (np.array([0.5, 2.0]), [5, math.nan], 9.25),
        "date": (np.array([10, 20], dtype=np.int32), [datetime.datetime(2020, 1, 1)],
                 D0 + datetime.timedelta(days=3)),
        # equal values at another exponent or of another class, and -0.00 (the array's 0
        # would make it 0.00); at the scale, it merges
        "decimal": (np.array([150, 200], dtype=np.int64),
                    [Decimal("7.5"), 3, 0.25, Decimal("-0.00"), Decimal("0.125"),
                     Decimal("1.505")],
                    _cents(925)),
    }
    for kind, (base, odd, fine) in cases.items():
        scale = 2 if kind == "decimal" else 0
        batch = SortedCounts(base.copy(), np.array([2, 1], dtype=np.int64), kind, 0, scale)
        for v in odd:
            sc = SortedCounts(base, None, kind, 0, scale)
            sc[v] = 1
            assert sc.merged(batch) is None, (kind, v)
        sc = SortedCounts(base, None, kind, 1, scale)
        sc[fine] = 2
        merged = sc.merged(batch)
        assert merged is not None and not merged.extra
        assert dict(zip(merged, (merged[v] for v in merged), strict=True)) == {
            None: 1, **{sc._value(i): 3 - i for i in range(2)}, fine: 2}
        assert merged.index.first()[3] == min(sc._value(0), fine)
    # decimals at another scale: the same unscaled ints are other values
    cents = np.array([150, 200], dtype=np.int64)
    assert SortedCounts(cents, None, "decimal", 0, 2).merged(
        SortedCounts(cents, None, "decimal", 0, 3)) is None


@pytest.mark.parametrize("kind", ["int", "float", "decimal"])  # (no date equals a datetime)
def test_a_dead_base_value_comes_back_as_inserted(kind: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A base value whose every copy was deleted, then a value equal to it inserted that
    prints otherwise (1.0 for 1, -0.0 for 0.0, 1.0 or -0.00 for 1.00 and 0.00): the per-row
    dict keys it by the object inserted, and so does the state in
    arrays (its overlay), until it is deleted and the base's own form comes back."""
    monkeypatch.setattr(aggregate_columns, "ARRAY_INDEX_MIN", 1)
    base = {"int": [0, 1, 2, 3], "float": [0.0, 1.0, 2.5, 3.0],
            "date": [D0 + datetime.timedelta(days=i) for i in range(4)],
            "decimal": [_cents(i * 100) for i in range(4)]}[kind]
    other = {"int": [1.0, 0.0], "float": [-0.0, 1],
             "decimal": [Decimal("1.0"), Decimal("-0.00")]}[kind]
    vals = [v for v in base for _ in range(100)]  # each value 100 times
    table = pa.table([pa.array([1] * len(vals)), pa.array(vals, ATYPE[kind])], names=["k", "v"])
    plan = IncrementalAggregates((Agg("min", 1, False, VTYPE[kind]),
                                  Agg("max", 1, False, VTYPE[kind]),
                                  Agg("count_star", None, False, "BIGINT")))
    built = build_states(plan, table, (0,))
    assert built is not None
    got = built[(1,)]
    assert isinstance(got.values[1], SortedCounts)
    want = plan((1,))
    want.apply_vals(list(rows_of(table, 2)), 1)
    for o in other:
        equal = next(b for b in base if b == o)
        gone = [((1, equal), -1)] * 100
        # the other form first counted with the base value present (one key: the base's),
        # the last copy deleted by it and inserted by it again in one change (now its own
        # key); then the base value deleted and inserted in both forms
        for change in ([((1, o), 1)], gone, [((1, o), -1), ((1, o), 1)], [((1, o), -1)],
                       [((1, equal), 1)], [gone[0]], [((1, o), 1)], [((1, equal), 1)],
                       [((1, o), -1)], [((1, equal), -1)], [((1, equal), 1)]):
            got.apply(change)
            want.apply(change)
            assert _view(got) == _view(want), (o, change)
