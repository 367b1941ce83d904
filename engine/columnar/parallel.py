"""Two cores for large compiled calls: a call split into halves by key range runs on both.

Invariant: a split call gives exactly what the unsplit call gives. The halves cover disjoint,
ordered key ranges and every key lies wholly in one of them, so their results concatenated in
order are the whole call's result.

The kernels that run here are compiled with `nogil=True`: while one half runs in a worker
thread, the other runs in the caller's, and neither holds the GIL. A split costs a thread
hand-off (tens of microseconds), so only calls over at least `MIN_KEYS` keys (reduce rounds) or
`MIN_SORTED` updates (radix consolidation) are split.

`DIFFSQL_KERNEL_THREADS=1` in the environment keeps every call on one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

import numpy as np

A = TypeVar("A")
B = TypeVar("B")

THREADS = max(1, min(2, int(os.environ.get("DIFFSQL_KERNEL_THREADS", os.cpu_count() or 1))))
# Below this many keys a call costs less than the hand-off to a second thread gains.
MIN_KEYS = 256
# Below this many updates a radix consolidate is not split (`kernels.consolidate`).
MIN_SORTED = 1 << 17

_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    # A forked child has none of the parent's threads: a pool it inherited would take work
    # and never run it.
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def start() -> None:
    """Start the worker thread now (as the kernels are compiled ahead), not in the first call
    that splits: starting it took about a millisecond of a small dataflow's hydration."""
    if THREADS >= 2:
        both(lambda: None, lambda: None)


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """`(first(), second())`, the second in a worker thread while the first runs here.

    Returns only when both have ended, also when one raises: the halves write into shared
    output columns, which must not still be written once the caller has moved on. Neither
    may call `both` itself (the one worker would wait on itself)."""
    global _pool
    if THREADS < 2:
        return first(), second()
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=THREADS - 1, thread_name_prefix="diffsql-kernel")
    later = _pool.submit(second)
    try:
        a = first()
    except BaseException:
        wait([later])
        raise
    return a, later.result()


def key_cut(keys: np.ndarray) -> int:
    """An index that splits sorted `keys` into two halves with no key on both sides; 0 when
    the call should not be split (too few keys, a single thread, or one key's updates fill
    the middle)."""
    n = keys.shape[0]
    if THREADS < 2 or n < MIN_KEYS:
        return 0
    middle = keys[n // 2]
    cut = int(np.searchsorted(keys, middle, "left"))
    if cut == 0:
        cut = int(np.searchsorted(keys, middle, "right"))
    return cut if 0 < cut < n else 0
