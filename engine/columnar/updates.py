"""A collection's updates in flight between operators, as three int64 columns.

`UpdateColumns` is the columnar executor's payload: `data` (row ids, see `interning`), `times`
(packed, see `times`) and `diffs`, of equal length, in no particular order and not necessarily
consolidated, plus `dims`, the number of coordinates of every time. It is immutable: every
operation builds a new one, so the same payload can be queued at several operators.

Changing times (entering, leaving or going around a loop) is arithmetic on the packed column
(`retime`), so an update crosses scopes without becoming a Python tuple; a coordinate that does
not fit the new packing raises `OverflowError` like `times.pack`, never wraps.
"""

from __future__ import annotations

import numba
import numpy as np

from engine.columnar import times as T

I64 = np.int64


class UpdateColumns:
    """`(data, time, diff)` updates as columns (see the module docstring)."""

    __slots__ = ("data", "times", "diffs", "dims", "minimal")

    def __init__(self, data: np.ndarray, times: np.ndarray, diffs: np.ndarray, dims: int,
                 minimal: np.ndarray | None = None) -> None:
        self.data = data
        self.times = times
        self.diffs = diffs
        self.dims = dims
        # The minimal elements of `times` (packed), where whoever made the columns knew them.
        self.minimal = minimal

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def take(self, index: np.ndarray) -> UpdateColumns:
        """The updates at `index` (an index array or a boolean mask)."""
        return UpdateColumns(self.data[index], self.times[index], self.diffs[index], self.dims)

    def negate(self) -> UpdateColumns:
        return UpdateColumns(self.data, self.times, -self.diffs, self.dims)

    @staticmethod
    def concat(parts: list[UpdateColumns], dims: int) -> UpdateColumns:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            z = np.zeros(0, I64)
            return UpdateColumns(z, z, z, dims)
        return UpdateColumns(
            np.concatenate([p.data for p in parts]),
            np.concatenate([p.times for p in parts]),
            np.concatenate([p.diffs for p in parts]),
            dims,
        )

    def __repr__(self) -> str:
        return "UpdateColumns(%d updates, dims=%d)" % (len(self), self.dims)


@numba.njit(cache=True)
def _retime(times, dims, new_dims, inc):  # type: ignore[no-untyped-def]
    """Unpack with `dims` fields, keep the first `min(dims, new_dims)` (new ones are 0), add
    `inc` to the last, repack with `new_dims` fields. Returns (packed, ok)."""
    bits = 63 // dims
    nbits = 63 // new_dims
    mask = (np.int64(1) << bits) - 1
    # One coordinate takes all 63 bits: every non-negative int64 fits (and 1 << 63 would wrap).
    limit = (np.int64(1) << nbits) if nbits < 63 else np.int64(0x7FFFFFFFFFFFFFFF)
    out = np.empty_like(times)
    keep = min(dims, new_dims)
    for i in range(times.shape[0]):
        p = times[i]
        r = np.int64(0)
        for j in range(new_dims):
            c = (p >> (bits * j)) & mask if j < keep else np.int64(0)
            if j == new_dims - 1:
                c += inc
            if c >= limit:
                return out, False
            r |= c << (nbits * j)
        out[i] = r
    return out, True


def retime(u: UpdateColumns, new_dims: int, inc: int = 0) -> UpdateColumns:
    """`u` with every time cut or extended to `new_dims` coordinates (new ones 0) and `inc` added
    to the innermost coordinate: `enter` is `(dims + 1, 0)`, `leave` `(dims - 1, 0)`, the
    feedback edge `(dims, 1)`."""
    T.field_bits(new_dims)
    if u.dims == new_dims and inc == 0:
        return u
    times, ok = _retime(u.times, u.dims, new_dims, inc)
    if not ok:
        raise OverflowError(
            "a time coordinate does not fit in %d bits after moving to %d coordinates"
            % (T.field_bits(new_dims), new_dims)
        )
    return UpdateColumns(u.data, times, u.diffs, new_dims)


def warm_up() -> None:
    """Load (or compile) `_retime` once, so no timed call pays for it (as `kernels.warm_up`)."""
    _retime(np.zeros(1, np.int64), 1, 2, 0)
