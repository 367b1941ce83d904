"""Loading, ahead of the first view over a large table, what hydrating it loads on first use.

Without it the first such view a process hydrates pays about a second and a half once (more
than many views' whole hydration): numba and the compiled kernels from their on-disk cache
(`planner.float_sums`, `engine.counting_sort`, `planner.byte_codes`), the columnar build
modules, the pandas module that pyarrow imports at its first conversion of Python values,
and pyarrow's compute functions, set up at their first call. The server starts
`preload_in_background()` after a write that bulk-loads at least `PRELOAD_ROWS` rows (a
table that large is hydrated with the compiled kernels), so the CREATE VIEW that usually
follows finds them loaded; a small database never loads numba (about 125 MB). A benchmark
of hydration runs `preload()` first, as such a server has. Invariant: it changes no state a
result depends on: it imports modules and runs each kernel on a tiny input.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from planner.aggregate_columns import COMPILED_FLOAT_SUMS

# A bulk load of this many rows starts the preload: a float SUM over a column this long is
# summed by the compiled kernel.
PRELOAD_ROWS = COMPILED_FLOAT_SUMS

_started = False
_lock = threading.Lock()


def warm_arrow() -> None:
    """pyarrow's own one-time set-up, which the first request that converts values or
    computes over columns (a query's result, a COPY, a view's hydration) pays otherwise:
    the import of pandas (when installed) at its first conversion of values, 0.3 s and
    about 50 MB, its compute functions' registry at their first call, and the CSV and
    Parquet readers' modules. A server runs it as it starts (`server.recovery`), before it
    reports ready."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv  # noqa: F401 - COPY's readers
    import pyarrow.parquet  # noqa: F401

    pa.array([0])  # pyarrow imports pandas at its first conversion of Python values
    pc.subtract(pa.scalar(1.0), pa.array([0.0]))


def preload() -> None:
    """Import and load the hydration's lazily loaded modules and kernels."""
    import pyarrow as pa

    import planner.topk_columns  # noqa: F401 - a top-k reduce's columnar build, imported lazily

    warm_arrow()
    from engine.counting_sort import counting_bounds, counting_order, counting_scatter
    from planner.byte_codes import byte_codes, byte_codes_onto
    from planner.float_sums import group_sums, group_sums_by_code
    from planner.group_parts import sort_parts

    # A GROUP BY's 1- or 2-byte string keys (flags, statuses), read from Arrow's buffers:
    # one version per offsets' width (string, large_string)
    for kind in (pa.string(), pa.large_string()):
        byte_codes(pa.array(["a", "b"], kind))
        byte_codes_onto(pa.array(["a", "b"], kind), np.zeros(2, np.int64), 1)
    # MIN/MAX states made together (`BuiltGroups.states`): ints and days, and doubles
    for dtype in (np.int64, np.float64):
        sort_parts(np.zeros(2, dtype), np.array([0, 2], np.int64), np.zeros(1, np.int64))

    # Each kernel for writable arrays and for read-only ones (NumPy views of Arrow buffers, as
    # a hydration mostly passes): numba compiles, or loads, one version per kind.
    # A sum's values are Arrow's or our own, its group codes and starts our own (or, taken
    # whole from a column, Arrow's), its validity either: each mix is a version.
    for writable, ours in ((True, True), (False, False), (False, True)):
        vals, starts, codes = np.array([0.5, 0.25]), np.zeros(1, np.int64), np.zeros(2, np.int64)
        valid = np.ones(2, np.bool_)  # a column with NULLs
        for a in (vals, valid):
            a.flags.writeable = writable
        for a in (starts, codes):
            a.flags.writeable = ours
        # not integers: both compiled passes (`_counts`, then `_terms`) load, in both forms
        for v in (None, valid):
            group_sums(vals, v, starts)
            group_sums_by_code(vals, v, codes, 1)
        if ours != writable:
            continue  # the kernels below were loaded for both forms already
        counting_order(codes, 1)
        # a GROUP BY's scatter (planner.aggregate_columns): its codes are its own array, the
        # chunks (doubles, dates as int32 days, ints, validity) mostly Arrow's
        own = np.zeros(2, np.int64)
        bounds = counting_bounds(own, 1)[0]
        for chunk, dtype in ((vals, np.float64), (own.astype(np.int32), np.int64),
                             (own.copy(), np.int64), (own == 0, np.bool_)):
            chunk.flags.writeable = writable
            counting_scatter(own, bounds, [chunk], dtype)


def preload_in_background() -> None:
    """Run `preload` once per process, in a daemon thread (the first call starts it)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_preload, name="diffsql-preload", daemon=True).start()


def _preload() -> None:
    try:
        preload()
    except Exception:  # noqa: BLE001 - a warm-up only: the hydration that needs it loads it
        logging.getLogger("diffsql.server").debug("preload failed", exc_info=True)
