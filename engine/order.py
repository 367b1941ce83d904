"""A total order over the values the engine holds, for sorting keys and values.

Python cannot compare `None` with `int` or `str` with `int`, so values are ranked by kind first
and by value within a kind. Numbers (bool, int, float, Decimal) share one rank and compare by
value; NaN sorts after every other number. Tuples compare element by element with the same rule.
The order is deterministic across processes (nothing here depends on hashing).
"""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any


def sort_key(v: Any) -> tuple:
    if v is None:
        return (0,)
    if isinstance(v, bool | int | decimal.Decimal):
        return (1, 0, v)
    if isinstance(v, float):
        if math.isnan(v):
            return (1, 1, 0)
        return (1, 0, v)
    if isinstance(v, str):
        return (2, v)
    if isinstance(v, bytes):
        return (3, v)
    if isinstance(v, datetime.datetime):
        return (4, v.isoformat())
    if isinstance(v, datetime.date):
        return (4, v.isoformat())
    if isinstance(v, tuple):
        return (5, tuple(sort_key(x) for x in v))
    return (9, type(v).__name__, repr(v))
