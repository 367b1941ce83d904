"""Per-key logic for the specialised reductions: count, distinct, threshold, sum, min, max, top-k.

Each takes `(key, [(val, count), ...])` (values sorted, counts non-zero) and returns the
output `[(out_val, multiplicity)]`. They are pure, so any executor can run them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.order import sort_key


def count(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    n = sum(r for _, r in vals)
    return [(n, 1)] if n else []


def distinct(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [((), 1)] if sum(r for _, r in vals) > 0 else []


# Reductions that depend only on the key's total count expose it, so kernels can skip
# accumulating per value.
count.counting = lambda n: [(n, 1)]  # type: ignore[attr-defined]
distinct.counting = lambda n: [((), 1)] if n > 0 else []  # type: ignore[attr-defined]


def threshold(f: Callable[[int], int]) -> Callable[[Any, list[tuple[Any, int]]], list[tuple[Any, int]]]:
    def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        m = f(sum(r for _, r in vals))
        return [((), m)] if m else []

    def counting(n: int) -> list[tuple[Any, int]]:
        m = f(n)
        return [((), m)] if m else []

    logic.counting = counting  # type: ignore[attr-defined]
    return logic


def sum_values(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(sum(v * r for v, r in vals), 1)]


def minimum(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    for v, r in vals:
        if r > 0:
            return [(v, 1)]
    return []


def maximum(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    for v, r in reversed(vals):
        if r > 0:
            return [(v, 1)]
    return []


def top_k(
    k: int, offset: int = 0, order: Callable[[Any], Any] | None = None
) -> Callable[[Any, list[tuple[Any, int]]], list[tuple[Any, int]]]:
    def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        items = [(v, r) for v, r in vals if r > 0]
        if order is not None:
            items.sort(key=lambda vr: (order(vr[0]), sort_key(vr[0])))
        out: list[tuple[Any, int]] = []
        pos = 0
        for v, r in items:
            lo, hi = max(pos, offset), min(pos + r, offset + k)
            if hi > lo:
                out.append((v, hi - lo))
            pos += r
            if pos >= offset + k:
                break
        return out

    return logic
