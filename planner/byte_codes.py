"""Group codes of a string column whose every value is 1 or 2 bytes long, in two compiled
passes over its Arrow buffers.

A GROUP BY on flags and status codes (TPC-H's l_returnflag, l_linestatus) over millions of
rows codes each row by its value's bytes read as a number below 256**width. Invariant:
`byte_codes(col)` returns exactly what `planner.aggregate_columns._fixed_width_codes_reference`
returns for the same column (the same codes, the same distinct values in byte order, None for
the same columns); tests/test_columns_kernels.py compares the two on seeded random columns.

Why compiled: the NumPy version makes four temporaries of the column's length (the offsets'
differences, the values widened to intp for `bincount`, their dense codes, then the copy into
the result), about 170 MB for 6M rows, where this writes only the result. On this project's
virtual machines memory the process has not touched recently costs a page fault of several
microseconds a page. A key column after others is coded straight onto their codes
(`byte_codes_onto`), so it adds no column at all. Measured hydrating TPC-H Q1 over 6M lineitem
rows (GROUP BY two such flags) as a process's first view, three times in alternation: 84-87
thousand page faults against 107-108 thousand, 0.47-0.95 s against 0.89-1.65 s (most of the
remaining faults are DuckDB's Arrow export), and coding a column with the memory warm 11-15 ms
against 24-30 ms. In `bench/views.py` Q1 took 1.48-1.54 s against 1.76-2.13 s, but the six
views together were unchanged within noise: the views after Q1 had reused the memory its
temporaries freed, and now touch it first.
Loaded only for large columns (`aggregate_columns.COMPILED_FLOAT_SUMS` rows, as the other
compiled hydration kernels).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from planner.aggregate_columns import byte_values


@numba.njit(cache=True, inline="always")
def _number(data, a, width):  # type: ignore[no-untyped-def]
    """The value starting at byte `a` as a number: its bytes, big-endian."""
    v = np.int64(data[a])
    if width == 2:
        v = (v << 8) | np.int64(data[a + 1])
    return v


@numba.njit(cache=True, nogil=True)
def _count(offsets, data, width, counts):  # type: ignore[no-untyped-def]
    """Add one to `counts[v]` for each value `v` of the chunk (its number); False, with
    `counts` partly updated, when a value is not `width` bytes long."""
    for i in range(offsets.shape[0] - 1):
        a = offsets[i]
        if offsets[i + 1] - a != width:
            return False
        counts[_number(data, a, width)] += 1
    return True


@numba.njit(cache=True, nogil=True)
def _fill(offsets, data, width, dense, out, at):  # type: ignore[no-untyped-def]
    """`out[at + i]`: the dense code of the chunk's value i. Only written: `_fill_onto` with
    `size` 0 would read each fresh page first, and a read then a write of an untouched page
    are two faults (measured: 23,400 against 13,600 for Q1's first flag)."""
    for i in range(offsets.shape[0] - 1):
        out[at + i] = dense[_number(data, offsets[i], width)]


@numba.njit(cache=True, nogil=True)
def _fill_onto(offsets, data, width, dense, out, at, size):  # type: ignore[no-untyped-def]
    """`out[at + i] = out[at + i] * size +` the dense code of the chunk's value i."""
    for i in range(offsets.shape[0] - 1):
        out[at + i] = out[at + i] * size + dense[_number(data, offsets[i], width)]


def _buffers(chunk: Any, offset_type: Any) -> tuple[np.ndarray, np.ndarray]:
    """A string chunk's offsets (of its own rows) and its whole data buffer, as NumPy views."""
    _, offsets_buf, data_buf = chunk.buffers()
    size = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=len(chunk) + 1,
                            offset=chunk.offset * size)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else \
        np.zeros(0, np.uint8)
    return offsets, data


def _counted(col: Any) -> tuple[int, list[tuple[np.ndarray, np.ndarray]], list[Any],
                                np.ndarray] | None:
    """The first pass: the values' width, each chunk's buffers, the distinct values in byte
    order and each value's dense code by its number; None for a column `byte_codes` refuses."""
    import pyarrow as pa

    t = col.type
    if col.null_count or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None
    offset_type = np.int64 if pa.types.is_large_string(t) else np.int32
    chunks = [c for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]) if len(c)]
    if not chunks:
        return None
    parts = [_buffers(c, offset_type) for c in chunks]
    width = int(parts[0][0][1] - parts[0][0][0])
    if width not in (1, 2):
        return None
    counts = np.zeros(256 ** width, dtype=np.int64)
    for offsets, data in parts:
        if not _count(offsets, data, width, counts):
            return None
    decoded = byte_values(counts, width)
    if decoded is None:
        return None
    return width, parts, *decoded


def byte_codes(col: Any) -> tuple[np.ndarray, list[Any]] | None:
    """Each row's index into the column's distinct values (int64) and those values in byte
    order (their code points' order), for a string column without NULL whose values are all 1
    or all 2 bytes long; None for any other column."""
    counted = _counted(col)
    if counted is None:
        return None
    width, parts, values, dense = counted
    codes = np.empty(len(col), dtype=np.int64)
    at = 0
    for offsets, data in parts:
        _fill(offsets, data, width, dense, codes, at)
        at += offsets.shape[0] - 1
    return codes, values


def byte_codes_onto(col: Any, prefix: np.ndarray, radix: int) -> list[Any] | None:
    """`byte_codes(col)` combined by mixed radix with the codes of the key columns before it:
    each `prefix[i]` (below `radix`, an int64 array of the caller's own) becomes
    `prefix[i] * len(values) + code[i]`, in place, and the distinct values are returned. None,
    with `prefix` unchanged, for a column `byte_codes` refuses or when the combined codes
    would reach 2**62. (No column of the codes alone: on a large table it is the column's
    length in fresh pages.)"""
    counted = _counted(col)
    if counted is None or len(prefix) != len(col):
        return None
    width, parts, values, dense = counted
    size = max(len(values), 1)
    if radix * size >= 2 ** 62:
        return None
    at = 0
    for offsets, data in parts:
        _fill_onto(offsets, data, width, dense, prefix, at, size)
        at += offsets.shape[0] - 1
    return values
