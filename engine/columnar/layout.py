"""The columnar batch: a consolidated run of updates as four int64 arrays.

A `Run` holds `keys`, `vals`, `times` (packed, see `times`) and `diffs`, all int64 and of equal
length, sorted by `(key, val, time)` and consolidated: no `(key, val, time)` appears twice and
no diff is zero. Keys and values are row ids (see `interning`): integer rows are their own id,
any other row is interned. A batch adds the description `(lower, upper, since)` of
`engine.trace.Batch`: every time is beyond `lower` and not beyond `upper`, and accumulating at
any time beyond `since` gives the true accumulation (times not beyond `since` may be advanced).

A lookup by key is a binary (or galloping) search over `keys`; nothing per update is a Python
object, so a trace of n updates costs 32 bytes per update plus O(1) per run.

Batches convert to and from Arrow record batches (`to_arrow` / `from_arrow`) without a copy of
the columns, so an executor that moves Arrow (Spark) can share the layout; times travel as the
packed int64 with `dims` in the schema metadata.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from engine.columnar import kernels, run_table
from engine.columnar.times import pack_many, unpack_many
from engine.lattice import Antichain, Time

_COPYING = threading.Lock()


class Run:
    """A sorted, consolidated run of `(key, val, time, diff)` updates (see the module docstring)."""

    __slots__ = ("keys", "vals", "times", "diffs", "dims", "lower", "upper", "since", "seq", "records",
                 "_filter", "_row")

    def __init__(
        self,
        keys: np.ndarray,
        vals: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
        dims: int,
        lower: Antichain | None = None,
        upper: Antichain | None = None,
        since: Antichain | None = None,
        seq: int = 0,
    ) -> None:
        self.keys = keys
        self.vals = vals
        self.times = times
        self.diffs = diffs
        self.dims = dims
        self.lower = lower if lower is not None else Antichain([(0,) * dims])
        self.upper = upper if upper is not None else Antichain()
        self.since = since if since is not None else Antichain([(0,) * dims])
        self.seq = seq
        # Read on every scheduling decision (spine balance, joins, sends): an attribute, not a
        # property over the array.
        self.records = int(keys.shape[0])
        self._filter: np.ndarray | None = None
        self._row: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return self.records

    def key_filter(self) -> np.ndarray:
        """The run's key filter (`kernels.key_filter`), built on first use: runs never change,
        and only large runs searched for a few keys are asked for one."""
        if self._filter is None:
            self._filter = kernels.key_filter(self.keys)
        return self._filter

    def address_row(self) -> tuple[int, ...]:
        """The run's row of a kernel's run table (`run_table.address_row`), computed on first
        use: a loop round passes the same runs to several kernels, and the addresses cost
        about a microsecond a column to read. A column that is not C-contiguous int64 (a view
        of an Arrow buffer may be read-only, never strided) is copied once to be one."""
        if self._row is None:
            cols = (self.keys, self.vals, self.times, self.diffs)
            if all(c.dtype == np.int64 and c.flags.c_contiguous for c in cols):
                self._row = run_table.address_row(cols)
            else:
                # The two halves of a reduce round build their tables on two threads: a copy
                # made by one and replaced by the other's would be freed under the first
                # one's kernel. One copy, under the lock, and the row with it.
                with _COPYING:
                    if self._row is None:
                        for name in ("keys", "vals", "times", "diffs"):
                            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.int64))
                        self._row = run_table.address_row((self.keys, self.vals, self.times, self.diffs))
        return self._row

    @classmethod
    def empty(cls, dims: int) -> Run:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, dims)

    @classmethod
    def from_arrays(
        cls,
        keys: np.ndarray,
        vals: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
        dims: int,
        **desc: Any,
    ) -> Run:
        """Sort and consolidate arbitrary int64 arrays into a run."""
        k, v, t, d = kernels.consolidate(
            np.ascontiguousarray(keys, dtype=np.int64),
            np.ascontiguousarray(vals, dtype=np.int64),
            np.ascontiguousarray(times, dtype=np.int64),
            np.ascontiguousarray(diffs, dtype=np.int64),
        )
        return cls(k, v, t, d, dims, **desc)

    @classmethod
    def from_updates(
        cls, updates: Iterable[tuple[int, int, Sequence[int], int]], dims: int, **desc: Any
    ) -> Run:
        """From `(key_id, val_id, time_tuple, diff)` updates (ids already encoded)."""
        ups = list(updates)
        keys = np.fromiter((u[0] for u in ups), dtype=np.int64, count=len(ups))
        vals = np.fromiter((u[1] for u in ups), dtype=np.int64, count=len(ups))
        times = pack_many((u[2] for u in ups), dims)
        diffs = np.fromiter((u[3] for u in ups), dtype=np.int64, count=len(ups))
        return cls.from_arrays(keys, vals, times, diffs, dims, **desc)

    def updates(self) -> list[tuple[int, int, Time, int]]:
        """The run as `(key_id, val_id, time_tuple, diff)` tuples (for tests and decoding)."""
        ts = unpack_many(self.times, self.dims)
        return list(zip(self.keys.tolist(), self.vals.tolist(), ts, self.diffs.tolist(), strict=True))

    def with_upper(self, upper: Antichain, seq: int) -> Run:
        """The same updates with a description extended to `upper` (absorbing an empty batch)."""
        run = Run(self.keys, self.vals, self.times, self.diffs, self.dims, self.lower, upper, self.since, seq)
        # The same columns: what is derived from them carries over (a loop round's empty
        # batches extend their predecessor's description every round).
        run._filter, run._row = self._filter, self._row
        return run

    def approx_bytes(self) -> int:
        return self.nbytes()

    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.vals.nbytes + self.times.nbytes + self.diffs.nbytes)

    # -- Arrow ---------------------------------------------------------------------------------
    def to_arrow(self) -> Any:
        """A `pyarrow.RecordBatch` over the same memory (no copy of the columns)."""
        import pyarrow as pa

        schema = pa.schema(
            [("key", pa.int64()), ("val", pa.int64()), ("time", pa.int64()), ("diff", pa.int64())],
            metadata={b"dims": str(self.dims).encode()},
        )
        cols = [pa.array(a, type=pa.int64()) for a in (self.keys, self.vals, self.times, self.diffs)]
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    @classmethod
    def from_arrow(cls, rb: Any, **desc: Any) -> Run:
        """A run from a record batch made by `to_arrow` (or any with those four int64 columns).

        The columns are consolidated again unless the batch says it is already a run."""
        meta = rb.schema.metadata or {}
        dims = int(meta.get(b"dims", b"1"))
        cols = [rb.column(n).to_numpy(zero_copy_only=False) for n in ("key", "val", "time", "diff")]
        return cls.from_arrays(*cols, dims, **desc)

    def __repr__(self) -> str:
        return "Run(records=%d, dims=%d, lower=%s, upper=%s)" % (
            self.records,
            self.dims,
            self.lower,
            self.upper,
        )
