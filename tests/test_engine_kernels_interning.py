"""Row interning: equal rows share one stable id, integers are their own id, ids are retired."""

from __future__ import annotations

import decimal
import random

import numpy as np
import pytest

from engine.columnar.interning import INTERNED_BASE, RowInterner


def test_integers_encode_directly_and_other_rows_are_interned() -> None:
    it = RowInterner()
    assert it.encode(5) == 5 and it.encode(-3) == -3
    a = it.encode(("x", 1))
    assert a >= INTERNED_BASE
    assert it.encode(("x", 1)) == a
    assert it.encode("x") != a
    assert it.decode(a) == ("x", 1) and it.decode(5) == 5
    assert len(it) == 2


def test_rows_equal_to_an_integer_keep_their_type() -> None:
    """`True == 1 == 1.0 == Decimal(1)` in Python, but they are different SQL values: each
    decodes as exactly what was encoded."""
    it = RowInterner()
    for row in (2.0, True, decimal.Decimal(3), (True, 5), (1.0, 2), ((1, True), "q")):
        assert it.encode(row) >= INTERNED_BASE
        back = it.decode(it.encode(row))
        assert back == row and repr(back) == repr(row)
    assert it.encode(True) != it.encode(1) and it.encode((1.0, 2)) != it.encode((1, 2))
    assert it.encode(2.5) >= INTERNED_BASE
    assert it.encode(1 << 70) >= INTERNED_BASE  # outside the direct range: interned
    assert it.decode(it.encode(1 << 70)) == 1 << 70


def test_random_rows_round_trip_and_equal_rows_get_equal_ids() -> None:
    rng = random.Random(3)
    pool = [None, "a", "b", (1, "a"), (1, None), 3.5, b"z", (), ((1, 2), "q"), (2, 3), (True, 3)]
    pool += [(1 << 31, 0), (-1, 2), (2.0, 3), (2.5, 3)] + list(range(-5, 5))
    it = RowInterner()
    rows = [rng.choice(pool) for _ in range(500)]
    ids = it.encode_many(rows)
    assert it.decode_many(ids) == rows
    assert ids.tolist() == [it.encode(r) for r in rows]
    pairs = [r for r in rows if type(r) is tuple and len(r) == 2 and all(type(x) is int for x in r)]
    assert it.encode_many(pairs).tolist() == [it.encode(r) for r in pairs]
    assert [repr(r) for r in it.decode_many(ids)] == [repr(r) for r in rows]
    for r, i in zip(rows, ids.tolist(), strict=True):
        for r2, i2 in zip(rows[:50], ids[:50].tolist(), strict=True):
            assert (repr(r) == repr(r2)) == (i == i2)


def test_ids_are_stable_while_retained_and_retired_after_release() -> None:
    it = RowInterner()
    a, b = it.encode("a"), it.encode("b")
    it.retain(np.array([a, a, b, 7]), np.array([1, 2, 1, 1]))
    it.release(np.array([a]), np.array([2]))
    assert it.encode("a") == a  # still referenced once
    it.release(np.array([a, b]))
    assert len(it) == 0
    with pytest.raises(KeyError):
        it.decode(a)
    c = it.encode("c")
    assert c in (a, b)  # a retired id is reused
    assert it.decode(c) == "c"
    with pytest.raises(ValueError):
        it.release(np.array([c]))


def test_pairs_of_small_integers_are_packed_not_interned() -> None:
    it = RowInterner()
    ids = it.encode_many([(1, 2), (3, 4), (True, 5)])
    assert len(it) == 1 and (ids[:2] < INTERNED_BASE).all() and ids[2] >= INTERNED_BASE
    assert [repr(r) for r in it.decode_many(ids)] == ["(1, 2)", "(3, 4)", "(True, 5)"]
    assert it.encode((1.0, 2)) != ids[0]  # equal in Python, but a DOUBLE is not an INTEGER
    assert it.encode((1, 2.5)) >= INTERNED_BASE and it.encode((-1, 2)) >= INTERNED_BASE
