"""How the columnar data plane asks the OS for memory: NumPy's huge-page advice is off.

Invariant: once `columnar.kernels` is imported (it calls `advise_hugepages(HUGEPAGE)`), NumPy
does not `madvise(MADV_HUGEPAGE)` new arrays, unless `DIFFSQL_NUMPY_HUGEPAGE=1` is set in the
environment, which keeps NumPy's default.

Why: NumPy advises the kernel to back every array of 4 MB or more with transparent huge pages.
Where huge pages are scarce or fragmented (this project's 2-core virtual machines) the first
touch of such an array waits for the kernel to compact memory: a radix consolidation of three
million updates took 0.45-0.55 s with the advice and 0.17-0.21 s without it, and the
reachability benchmark's config a hydration 8.1 s against 5.7-6.0 s. The columnar engine
allocates its runs, merge outputs and sort scratch fresh for every large call, so it pays that
first touch often. Without the advice, pages come 4 KB at a time, each fault cheap.

This is process-wide NumPy state (`numpy._core.multiarray._set_madvise_hugepage`, the setting
NumPy documents under "Madvise Hugepage on Linux"), set when the columnar kernels are imported.
"""

from __future__ import annotations

import os

HUGEPAGE = os.environ.get("DIFFSQL_NUMPY_HUGEPAGE") == "1"


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
