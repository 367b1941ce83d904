"""The reference tactic: per-record twins of the compiled kernels, obviously correct and slow.

Each function takes and returns plain `(key, val, time_tuple, diff)` tuples and is written
straight from the definitions in `engine.lattice` and `engine.kernels` (the per-record kernels
the in-process executor has always run). Tests hold every compiled kernel in `kernels` to
identical output on random input; nothing else should call these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine import kernels as record_kernels
from engine.lattice import Antichain, Time, advance_by, join

Update = tuple[int, int, Time, int]


def consolidate(updates: Iterable[Update]) -> list[Update]:
    acc: dict[tuple[int, int, Time], int] = {}
    for k, v, t, d in updates:
        acc[(k, v, t)] = acc.get((k, v, t), 0) + d
    return sorted((k, v, t, d) for (k, v, t), d in acc.items() if d)


def merge(a: Iterable[Update], b: Iterable[Update], frontier: list[Time]) -> list[Update]:
    """Both runs, every time advanced by `frontier`, consolidated."""
    return consolidate((k, v, advance_by(t, frontier), d) for k, v, t, d in [*a, *b])


def join_pairs(new: list[Update], other: list[Update]) -> list[tuple[int, int, int, Time, int]]:
    """Every pair with equal keys as `(key, new_val, other_val, join(t1, t2), d1 * d2)`,
    consolidated over `(key, new_val, other_val, time)`."""
    by_key: dict[int, list[Update]] = {}
    for u in other:
        by_key.setdefault(u[0], []).append(u)
    acc: dict[tuple[int, int, int, Time], int] = {}
    for k, v1, t1, d1 in new:
        for _, v2, t2, d2 in by_key.get(k, ()):
            x = (k, v1, v2, join(t1, t2))
            acc[x] = acc.get(x, 0) + d1 * d2
    return sorted((k, a, b, t, d) for (k, a, b, t), d in acc.items() if d)


def reduce_round(
    seeds: dict[int, set[Time]],
    inputs: list[Update],
    outputs: list[Update],
    upper: Antichain,
    logic: Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]],
) -> tuple[list[Update], dict[int, set[Time]]]:
    """`engine.kernels.reduce_key` for every seeded key: corrections and deferred times."""
    ins: dict[int, list[tuple[Any, Time, int]]] = {}
    outs: dict[int, list[tuple[Any, Time, int]]] = {}
    for k, v, t, d in inputs:
        ins.setdefault(k, []).append((v, t, d))
    for k, v, t, d in outputs:
        outs.setdefault(k, []).append((v, t, d))
    corrections: list[Update] = []
    deferred: dict[int, set[Time]] = {}
    for k, s in seeds.items():
        emitted, later = record_kernels.reduce_key(k, ins.get(k, []), outs.get(k, []), s, upper, logic)
        corrections.extend((k, v, t, d) for v, t, d in emitted)
        if later:
            deferred[k] = later
    return consolidate(corrections), deferred
