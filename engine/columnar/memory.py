"""How the columnar data plane asks the OS for memory: NumPy's huge-page advice is off,
glibc's malloc keeps one arena, and large blocks it frees stay in the process for reuse.

Invariant: once an executor (`executors.inprocess`, which every executor imports) or
`columnar.kernels` is imported, each calling `advise_hugepages(HUGEPAGE)`, NumPy does not
`madvise(MADV_HUGEPAGE)` new arrays, unless `DIFFSQL_NUMPY_HUGEPAGE=1` is set in the
environment, which keeps NumPy's default; and once the planner (`planner`, which compiles SQL
views) is imported, glibc's malloc serves large blocks from its heap and keeps up to
`KEEP_FREED` bytes freed at its top, and Arrow allocates from glibc's malloc too (its system
pool), unless `DIFFSQL_MALLOC_KEEP=0` is set (or `ARROW_DEFAULT_MEMORY_POOL` names Arrow's
pool).

Why: NumPy advises the kernel to back every array of 4 MB or more with transparent huge pages.
Where huge pages are scarce or fragmented (this project's 2-core virtual machines) the first
touch of such an array waits for the kernel to compact memory: a radix consolidation of three
million updates took 0.45-0.55 s with the advice and 0.17-0.21 s without it, and the
reachability benchmark's config a hydration 8.1 s against 5.7-6.0 s; the in-process
executor's SQL views (`bench/views.py --sf 0.2 --skip-http`) hydrated in 2.86 s against 2.13 s.
The engine allocates its runs, merge outputs and sort scratch fresh for every large call, so it
pays that first touch often. Without the advice, pages come 4 KB at a time, each fault cheap.

glibc gives each thread that allocates its own malloc arena, and memory freed inside an arena
stays in the process. The kernels' second thread (`columnar.parallel`) frees columns of tens of
MB that the other allocated and back: with one arena (`M_ARENA_MAX` 1, set by
`one_malloc_arena`), config a hydration peaked at 1.75-1.86 GB (once 2.09) against 1.93-1.97
GB, in the same time (5.9-6.3 s).

glibc serves every block of 128 KB-32 MB or more (its mmap threshold) with a fresh `mmap` and
gives it back to the OS on `free`, so the next array of that size faults every page in again;
on these virtual machines a first touch costs 1.5-5 us a 4 KB page (hydrating Q1 over 6M
lineitem rows made 108,000 faults and spent 0.45 s of its 1.0 s in the kernel). With
`keep_freed_memory` large blocks come from the heap, whose freed top is kept up to `KEEP_FREED`
bytes: `bench/views.py`'s six views at sf 1 hydrated, three times in alternation in one sitting,
in 3.22 / 3.15 / 3.35 s against 3.79 / 3.40 / 3.49 s, with 20-28% fewer page faults. The cost:
up to `KEEP_FREED` bytes of freed memory stay resident; the peak is unchanged (a block is
reused, not added). It is the planner that sets it, on import, not the engine: the
reachability loop's many small kernel calls ran at batch 100 slower with it in 6 of 7
alternating pairs (about 5% on average; `np.zeros` of reused heap memory is a memset, of a
fresh mapping free). `DIFFSQL_MALLOC_KEEP=0` keeps glibc's default.

Arrow's compute kernels (the vectorised scalar expressions and aggregates over a hydration's
columns) allocate from Arrow's default pool, mimalloc in the PyArrow wheels, which takes fresh
memory from the OS for each view's transient columns and whose fresh pages this kernel fills
as large folios, each zeroed whole on its first touch: Q1's hydration at sf 1 spent 0.6 s of
its 1.0 s in the kernel, most of it zeroing folios under Arrow's Multiply and Subtract. With
`arrow_system_pool` they come from glibc's heap, whose freed memory `keep_freed_memory` keeps:
Q1 0.98-1.04 s -> 0.62 s the first time, the six views at sf 1 (in a process of their own,
alternating) 2.38 / 2.08 s -> 1.86 / 1.78 s, peak RSS 1,968-1,970 -> 1,845-1,867 MB. Inside
`bench/views.py --sf 1` (twenty alternating runs) the hydration totals moved within that
benchmark's noise (2.1-4.4 s either way), peak RSS 1,920-2,077 -> 1,893-1,975 MB.

All four are process-wide state (`numpy._core.multiarray._set_madvise_hugepage`, the
setting NumPy documents under "Madvise Hugepage on Linux"; glibc's `mallopt`; Arrow's
`set_memory_pool`), set at import: NumPy's advice by either module, the single arena by the
columnar kernels only, before their second thread starts, and the freed-memory and Arrow pool
settings by the planner.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

HUGEPAGE = os.environ.get("DIFFSQL_NUMPY_HUGEPAGE") == "1"
KEEP = os.environ.get("DIFFSQL_MALLOC_KEEP") != "0"
KEEP_FREED = 512 << 20
# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8


def advise_hugepages(on: bool) -> bool:
    """Set NumPy's huge-page advice; returns the previous setting (False where NumPy has no
    such setting)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # an older NumPy
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return False
    return bool(_set_madvise_hugepage(on))


def _mallopt() -> Any:
    """glibc's `mallopt`, or None where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None


def one_malloc_arena() -> bool:
    """Ask glibc's malloc for a single arena; False where the C library is not glibc."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, 1))


def keep_freed_memory(on: bool) -> bool:
    """With `on`, serve large blocks from the heap (no `mmap` per block) and keep up to
    `KEEP_FREED` bytes freed at its top; False where that is not done (off, or not glibc)."""
    mallopt = _mallopt()
    if not on or mallopt is None:
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, KEEP_FREED)) and bool(mallopt(_M_MMAP_MAX, 0))


def arrow_system_pool(on: bool) -> bool:
    """With `on`, make Arrow's system pool (glibc's malloc) its default memory pool, unless
    `ARROW_DEFAULT_MEMORY_POOL` in the environment chose a pool; whether it was set."""
    if not on or os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True
