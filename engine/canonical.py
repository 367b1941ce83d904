"""Canonical data: values that are equal are one key.

The engine groups, consolidates and arranges data by Python equality and hashing. Python's float
NaN breaks both: ``nan != nan``, and since Python 3.10 each NaN object hashes by its identity,
so two NaN rows become two keys that never cancel (a NaN inserted and then deleted would stay
behind as +1 and -1). Invariant: every float NaN inside data that enters the engine (at an input
or from a bulk source) is the single object ``NAN``; because equality of tuples and dict lookups
try identity first, equal rows holding NaN are then one key. ``-0.0`` needs nothing: it equals
``0.0`` and hashes alike. Operators that compute new values (maps, reduces) must hand back
canonical data too; ``canonical`` is the function they use.
"""

from __future__ import annotations

import math
from operator import ne
from typing import Any

NAN: float = math.nan
NEEDS_CANONICAL = frozenset((float, tuple))  # the types canonical() looks into


def canonical(data: Any) -> Any:
    """`data` with every float NaN, also inside (nested) tuples, replaced by ``NAN``.

    Returns `data` itself when it holds no other NaN (no allocation in the common case)."""
    cls = data.__class__
    if cls is float:
        return NAN if data != data else data
    if cls is tuple:
        types = set(map(type, data))
        if NEEDS_CANONICAL.isdisjoint(types):
            return data  # the common row: no float or tuple inside (one C-level scan)
        if tuple not in types:
            # flat: no NaN if no value differs from itself (`operator.ne` is rich comparison
            # without the identity shortcut, so a NaN is unequal to itself), one C-level scan
            try:
                if not any(map(ne, data, data)):
                    return data
            except ArithmeticError:  # a signalling Decimal NaN: the per-value loop below
                pass
        for i, v in enumerate(data):
            c = canonical(v) if v.__class__ is tuple or v.__class__ is float else v
            if c is not v:
                return data[:i] + (c,) + tuple(canonical(x) for x in data[i + 1 :])
    return data


def canonical_column(values: list[Any]) -> list[Any]:
    """A column of values (Arrow's ``to_pylist``) with every NaN replaced by ``NAN``, in place."""
    try:
        if not any(map(ne, values, values)):
            return values  # no value differs from itself: no NaN (one C-level scan)
    except ArithmeticError:  # a signalling Decimal NaN: the per-value loop below
        pass
    for i, v in enumerate(values):
        if v.__class__ is float and v != v:
            values[i] = NAN
    return values
