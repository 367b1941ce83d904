"""Canonical data: values that are equal are one key.

The engine groups, consolidates and arranges data by Python equality and hashing. Python's float
NaN breaks both: ``nan != nan``, and since Python 3.10 each NaN object hashes by its identity,
so two NaN rows become two keys that never cancel (a NaN inserted and then deleted would stay
behind as +1 and -1). ``-0.0`` breaks the other way: it equals ``0.0`` and hashes alike, so two
rows that differ only there are one key, held as whichever came first, and a function that
tells them apart (text, 1/x) would add one row's value and retract the other's (a view kept
'-0.0' after both rows were deleted). Invariant: every float NaN inside data that enters the
engine (at an input or from a bulk source) is the single object ``NAN``, and every float zero
is ``0.0``; because equality of tuples and dict lookups try identity first, equal rows holding
NaN are then one key. Operators that compute new values (maps, reduces) must hand back
canonical data too; ``canonical`` is the function they use.
"""

from __future__ import annotations

import math
from operator import ne
from typing import Any

NAN: float = math.nan
NEEDS_CANONICAL = frozenset((float, tuple))  # the types canonical() looks into


def _float(v: float) -> float:
    """A float as canonical: ``NAN`` for a NaN, ``0.0`` for ``-0.0``, else itself."""
    if v != v:
        return NAN
    if v == 0.0 and math.copysign(1.0, v) < 0.0:
        return 0.0
    return v


def canonical(data: Any) -> Any:
    """`data` with every float NaN, also inside (nested) tuples, replaced by ``NAN``, and
    every ``-0.0`` by ``0.0``.

    Returns `data` itself when it holds no other NaN or -0.0 (no allocation in the common
    case)."""
    cls = data.__class__
    if cls is float:
        return _float(data)
    if cls is tuple:
        types = set(map(type, data))
        if NEEDS_CANONICAL.isdisjoint(types):
            return data  # the common row: no float or tuple inside (one C-level scan)
        if tuple not in types:
            # flat: no NaN if no value differs from itself (`operator.ne` is rich comparison
            # without the identity shortcut, so a NaN is unequal to itself), and no -0.0 if
            # nothing equals a zero; two C-level scans
            try:
                if not any(map(ne, data, data)) and 0.0 not in data:
                    return data
            except ArithmeticError:  # a signalling Decimal NaN: the per-value loop below
                pass
        for i, v in enumerate(data):
            c = canonical(v) if v.__class__ is tuple or v.__class__ is float else v
            if c is not v:
                return data[:i] + (c,) + tuple(canonical(x) for x in data[i + 1 :])
    return data


def canonical_column(values: list[Any]) -> list[Any]:
    """A column of values (Arrow's ``to_pylist``) with every NaN replaced by ``NAN`` and every
    ``-0.0`` by ``0.0``, in place."""
    try:
        if not any(map(ne, values, values)) and 0.0 not in values:
            return values  # no value differs from itself or equals a zero (C-level scans)
    except ArithmeticError:  # a signalling Decimal NaN: the per-value loop below
        pass
    for i, v in enumerate(values):
        if v.__class__ is float:
            values[i] = _float(v)
    return values
