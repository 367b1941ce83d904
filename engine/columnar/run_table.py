"""A run table: many runs passed to a compiled kernel as one int64 array of their addresses.

Row `j` describes run `j`: the addresses of its four columns (keys, vals, times, diffs; each
C-contiguous int64), its record count, and the address and length in words of a key filter
(`kernels.key_filter`; length 0: none). Kernels view each column in place (`column`, `run`,
`key_filter`), reading the runs' own memory, never a copy.

Invariant: a table is only read while the runs (and filters) it was built from are alive; the
caller holds them for the length of the kernel call, and no kernel returns a view of a
table's column (every array a kernel returns is its own allocation).

Why not a tuple of runs: numba unboxes each array of a tuple argument on every call, about
180 ns an array on this machine. A reduce round over two spines of 16 runs with their filters
passed 160 arrays: 33 us of dispatch a call (measured with a kernel that returns at once),
which was about half of a batch-1 loop round's whole reduce call. A table is one array, and
one compiled signature serves every spine length (tuples needed one per padded length).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any, Protocol

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

I64 = np.int64
U64 = np.uint64
KEYS, VALS, TIMES, DIFFS, RECORDS, FILTER, FILTER_WORDS = range(7)
COLUMNS = 7


@intrinsic
def _pointer(typingctx: Any, address: Any) -> Any:
    """The int64 `address` as a `void *` (what `numba.carray` views)."""
    sig = types.voidptr(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return sig, codegen


@numba.njit(cache=True, inline="always")
def column(table, j, c):  # type: ignore[no-untyped-def]
    """Column `c` (KEYS, VALS, TIMES or DIFFS) of run `j`, in place."""
    return numba.carray(_pointer(table[j, c]), table[j, RECORDS], I64)


@numba.njit(cache=True, inline="always")
def run(table, j):  # type: ignore[no-untyped-def]
    """Run `j` as `(keys, vals, times, diffs)`, in place."""
    return column(table, j, KEYS), column(table, j, VALS), column(table, j, TIMES), column(table, j, DIFFS)


@numba.njit(cache=True, inline="always")
def key_filter(table, j):  # type: ignore[no-untyped-def]
    """Run `j`'s key filter, in place (empty: the run has none)."""
    return numba.carray(_pointer(table[j, FILTER]), table[j, FILTER_WORDS], U64)


_KINDS = {I64: "i", U64: "u"}


def _check(a: np.ndarray, dtype: Any) -> None:
    # Kind and width, not `a.dtype == dtype`: an equality test of dtypes costs more than the
    # addresses (and arrays made by compiled code need not hold NumPy's own dtype instance).
    if a.dtype.kind != _KINDS[dtype] or a.itemsize != 8 or not a.flags.c_contiguous:
        raise ValueError(f"a run table's column must be C-contiguous {np.dtype(dtype)}, not {a.dtype}"
                         f"{'' if a.flags.c_contiguous else ' (strided)'}")


@numba.njit(cache=True)
def _addresses(k, v, t, d):  # type: ignore[no-untyped-def]
    return k.ctypes.data, v.ctypes.data, t.ctypes.data, d.ctypes.data, k.shape[0], 0, 0


@numba.njit(cache=True)
def _address(f):  # type: ignore[no-untyped-def]
    return f.ctypes.data


def address_row(columns: Sequence[np.ndarray]) -> tuple[int, ...]:
    """A run's row of a table, from its four columns: their addresses, the record count, and
    no key filter. The addresses are read in a compiled call: NumPy's `__array_interface__`
    builds a dict per array, and four of them cost ten times as much."""
    for a in columns:
        _check(a, I64)
    return _addresses(*columns)  # type: ignore[no-any-return]


class Addressed(Protocol):
    """A run that keeps its `address_row` (`layout.Run`: computed once, runs never change)."""

    def address_row(self) -> tuple[int, ...]: ...


def table(runs: Sequence[tuple[np.ndarray, ...] | Addressed],
          filters: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The table of `runs` (each a tuple of its four columns, or a run that keeps its address
    row), with a key filter per run where `filters` gives one (an empty filter: none).

    Built from the rows in one `np.fromiter` (a loop round builds several tables, and a
    Python loop over the rows' fields cost twice as much)."""
    # (a class test, not `isinstance`: this runs for every run of every table)
    rows = [address_row(r) if r.__class__ is tuple else r.address_row() for r in runs]  # type: ignore[union-attr]
    out = np.fromiter(chain.from_iterable(rows), I64, COLUMNS * len(rows)).reshape(len(rows), COLUMNS)
    if filters is not None:
        for j, f in enumerate(filters):
            if f.shape[0]:
                _check(f, U64)
                out[j, FILTER] = _address(f)
                out[j, FILTER_WORDS] = f.shape[0]
    return out
