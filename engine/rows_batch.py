"""A batch of keyed rows at one time with one diff, indexed only when it is read.

`KeyedRowsBatch` is the batch `arrange_updates` builds from a keyed `RowsAt` (a hydration, a
bulk write), without building it: it keeps the rows, and answers `lookup`/`get_many` from a
sorted int64 column of the key when the key is one column of exact ints (a NumPy argsort: no
Python object per row), or else from the `key -> [(row, time, diff)]` dict, built on first use
exactly as `arrange_updates` builds it. A hydrating join probes such a batch with the keys of
the smaller side, so most rows of a large table are never touched by Python at all.

Built from a keyed `ColumnsAt` (engine.columns_at) it holds the Arrow table instead: the rows
are made only when something reads them all (the dict form), the sorted index comes from the
table's key columns, and probes convert only their hits' values, column by column
(`engine.sources.column_picker`); `settle` (at the end of a run) keeps it that way when the
key is indexed and every column has a picker, and otherwise makes the rows. Keys
of several exact-int columns are indexed as one int64 code (each column's offset from its low
bound times a stride).

Invariant: the batch denotes exactly `arrange_updates(RowsAt(rows, time, diff, key).updates(),
False, lower, upper, since)`: `updates`, `lookup` and `get_many` answer what that batch's dict
answers, with equal rows of a key summed into one entry. `records` counts the rows, which
overcounts only when the rows repeat (a multiset with duplicates); it is used for sizes.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from engine.lattice import Antichain, Time
from engine.rows_at import key_getter
from engine.sources import column_picker, column_values, rows_of
from engine.trace import Batch, Entry
from engine.unique import unique_ints

_INT = {int}
_TUPLE = {tuple}
_DICT = object()  # `_parts`: only the dict form can answer
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# Below this many rows the dict is cheaper to build than the sorted index.
SORTED_MIN_ROWS = 256
# Below this many keys `get_many` probes one key at a time.
VECTOR_MIN_KEYS = 16
# `ascending` looks at this many first codes before a pass over all of them.
ASCENDING_PROBE = 1024


def _summed(vals: list[Any], t: Time, r: int) -> list[Entry]:
    """Entries of one key: one per distinct row, equal rows summed (as consolidation does)."""
    if len(vals) == 1:
        return [(vals[0], t, r)]
    if len(set(vals)) == len(vals):
        return [(v, t, r) for v in vals]
    return [(v, t, c * r) for v, c in Counter(vals).items()]


def _int_list(values: list[Any]) -> np.ndarray | None:
    """A list of exact Python ints (not bools) as int64, or None."""
    if set(map(type, values)) != _INT:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return None


def ascending(codes: np.ndarray) -> bool:
    """Whether `codes` never decrease: a table loaded in key order (as most are, by their
    primary key) is indexed or grouped without a sort. Codes out of order in their first
    `ASCENDING_PROBE` answer without a pass over the rest."""
    head = codes[:ASCENDING_PROBE]
    return not (head[1:] < head[:-1]).any() and not (codes[1:] < codes[:-1]).any()


class AscendingChunks:
    """The sorted index of a key column that is one ascending int64 column without NULL
    held as several Arrow chunks: NumPy views of the chunks (no copy into one array, so the
    table and its index hold the keys once: 48 MB for 6M rows arranged by an id), searched
    as their concatenation would be. Invariant: `searchsorted(v, side)` equals
    `np.concatenate(chunks).searchsorted(v, side)`, for a scalar or an array of probes."""

    __slots__ = ("chunks", "starts", "lasts", "size")

    def __init__(self, chunks: list[np.ndarray]) -> None:
        kept = [c for c in chunks if len(c)]
        self.chunks = kept
        self.starts = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in kept], out=self.starts[1:])
        self.lasts = np.array([c[-1] for c in kept], dtype=np.int64)
        self.size = int(self.starts[-1])

    @staticmethod
    def of(chunks: list[np.ndarray]) -> AscendingChunks | None:
        """The index over `chunks` if their concatenation never decreases, else None."""
        kept = [c for c in chunks if len(c)]
        for i, c in enumerate(kept):
            if i and c[0] < kept[i - 1][-1] or not ascending(c):
                return None
        return AscendingChunks(kept)

    def __len__(self) -> int:
        return self.size

    def searchsorted(self, v: Any, side: str = "left") -> Any:
        # Every chunk before the one `lasts` points at lies wholly on v's left, every one
        # after it wholly on its right (the chunks ascend): only that chunk is searched.
        if not isinstance(v, np.ndarray):
            c = int(self.lasts.searchsorted(v, side))  # type: ignore[call-overload]
            if c == len(self.chunks):
                return self.size
            return int(self.starts[c]) + int(self.chunks[c].searchsorted(v, side))
        at = self.lasts.searchsorted(v, side)  # type: ignore[call-overload]
        out = np.full(len(v), self.size, dtype=np.int64)
        for c in unique_ints(at).tolist():
            if c == len(self.chunks):
                continue
            sel = at == c
            out[sel] = self.starts[c] + self.chunks[c].searchsorted(v[sel], side)
        return out

    def key_count(self) -> int:
        """The number of distinct values."""
        if not self.size:
            return 0
        changes = sum(int(np.count_nonzero(c[1:] != c[:-1])) for c in self.chunks)
        firsts = np.array([c[0] for c in self.chunks[1:]], dtype=np.int64)
        return 1 + changes + int(np.count_nonzero(self.lasts[:-1] != firsts))


class DenseCodes:
    """The sorted index of codes that fill at least as many values as their range holds (ids
    of a table that many rows refer to, a dictionary's codes): for each code of the range
    `[low, low + span)`, where its rows start in key order (`bounds`, span + 1 of them), in
    place of the n sorted codes (8 bytes a row). Invariant: `searchsorted(v, side)` equals
    `np.sort(codes).searchsorted(v, side)`, for a scalar or an array of probes."""

    __slots__ = ("low", "bounds")

    def __init__(self, low: int, bounds: np.ndarray) -> None:
        self.low = low
        self.bounds = bounds

    @staticmethod
    def of(codes: np.ndarray) -> DenseCodes | None:
        """The index of `codes` if their range is no wider than their number, else None."""
        if not len(codes):
            return None
        low, high = int(codes.min()), int(codes.max())
        span = high - low + 1
        if span > len(codes):
            return None
        bounds = np.zeros(span + 1, dtype=np.int64)
        np.cumsum(np.bincount(codes - low if low else codes, minlength=span), out=bounds[1:])
        return DenseCodes(low, bounds)

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def searchsorted(self, v: Any, side: str = "left") -> Any:
        # the codes below v (left) or not above it (right) are those of the codes before it
        # in the range (or before the one after it), clipped to the range's ends
        span = len(self.bounds) - 1
        shift = 1 if side == "right" else 0
        if not isinstance(v, np.ndarray):
            return int(self.bounds[min(max(v - self.low + shift, 0), span)])
        # clipped before the subtraction, which could wrap for a probe far outside
        at = np.clip(v, max(self.low - 1, _I64_MIN), min(self.low + span, _I64_MAX))
        at = at - self.low + shift
        return self.bounds[np.clip(at, 0, span)]

    def key_count(self) -> int:
        """The number of distinct codes."""
        return int(np.count_nonzero(np.diff(self.bounds)))


def _dictionary_codes(col: Any) -> tuple[np.ndarray, dict[Any, int]] | None:
    """A column's values as int64 codes, and the dict from each value (as `column_values`
    gives it) to its code, values equal by Python's rules sharing one (0.0 and -0.0, 1 and
    1.0 in a DECIMAL, ...), so a dict lookup answers as the dict form's; NULL is a value.
    None for a type Arrow cannot dictionary-encode or whose values are not hashable."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray)
                                   else col, null_encoding="encode")
        values = column_values(enc.dictionary)
        coder: dict[Any, int] = {}
        first = np.fromiter((coder.setdefault(v, i) for i, v in enumerate(values)),
                            dtype=np.int64, count=len(values))
    except (pa.ArrowException, TypeError):
        return None
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return (first[codes] if len(coder) < len(values) else codes), coder


def int_column(col: Any) -> np.ndarray | None:
    """An Arrow column of integers without NULL as int64 (what `_index` builds from exact
    Python ints), or None for any other column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_integer(col.type) or col.null_count:
        return None
    if pa.types.is_uint64(col.type) and len(col) and pc.max(col).as_py() >= 2 ** 63:
        return None
    return col.cast(pa.int64()).to_numpy()


class KeyedRowsBatch(Batch):
    """`rows` keyed by the columns `key`, every update at `time` with `diff` (see module)."""

    __slots__ = ("_rows", "table", "key", "time", "diff", "_dict", "_sorted", "_order",
                 "_radix", "_probes", "_pickers", "_coders")

    def __init__(self, rows: list[Any] | None, key: tuple[int, ...], time: Time, diff: int,
                 lower: Antichain, upper: Antichain, since: Antichain, seq: int = 0,
                 table: Any = None) -> None:
        # With `table` (an Arrow table: the batch of a keyed engine.columns_at payload) the
        # rows are made from it when first read; a half join may probe the table itself
        # (engine.columns_join) without them.
        self._rows = rows
        self.table = table
        self.key = key
        self.time = time
        self.diff = diff
        self.lower = lower
        self.upper = upper
        self.since = since
        self.seq = seq
        self.records = len(rows) if rows is not None else int(table.num_rows)
        self._dict: dict[Any, list[Entry]] | None = None
        # The sorted key column and the row order it came from; None until first wanted,
        # False when the key is not one column of int64-sized ints (then the dict serves).
        # With `_sorted` built, an `_order` of None is the identity (the rows in key order).
        self._sorted: Any = None
        self._order: Any = None
        # with several key columns: (low bound, span, stride) of each, for `_code`
        self._radix: list[tuple[int, int, int]] | None = None
        # Per key column of a table, None for a column of exact ints (indexed by value) or the
        # dict from each value to its code (any other column: `_dictionary_codes`); None for
        # all when every key column is of exact ints.
        self._coders: list[dict[Any, int] | None] | None = None
        # Single-key probes answered by the sorted index (each a few microseconds): past
        # `_probe_limit()` of them the dict (a fraction of a microsecond per row to build, then
        # a hash lookup per probe) is the cheaper way to answer the rest.
        self._probes = 0
        # Per column of `table`, a function of row positions giving those rows' values
        # (engine.sources.column_picker); None until first wanted, False when some column has
        # no picker (then hits are taken from the table and converted as rows).
        self._pickers: list[Callable[[np.ndarray], list[Any]]] | bool | None = None

    @property
    def rows(self) -> list[Any]:
        r = self._rows
        if r is None:
            r = self._rows = list(rows_of(self.table, self.table.num_columns))
        return r

    def settle(self) -> bool:
        """Make the batch ready for single updates' probes (see `Dataflow._settle`), so the
        first of them does not pay for an index: with a sorted key column and a picker for
        every column the rows stay columns, and each probe converts its hits only (a few
        microseconds: no Python object per row is ever made for the rows nobody reads); else
        the rows are made, with the dict when there is no sorted index, and the table is
        dropped. True if the representation changed."""
        if self.table is None or self._pickers:
            return False
        indexed = self._index()  # from the table's key column while there is one
        if indexed and self._rows is None and self._column_pickers():
            return False
        _ = self.rows
        self.table = None
        self._pickers = None
        if not indexed:
            _ = self.updates
        return True

    def _column_pickers(self) -> bool:
        """Make the table's column pickers if every column has one; True when they are there."""
        if self._pickers is None:
            pickers = [column_picker(c) for c in self.table.columns]
            self._pickers = False if any(p is None for p in pickers) else pickers
        return bool(self._pickers)

    # -- the dict form ---------------------------------------------------------------------------
    @property  # type: ignore[override]
    def updates(self) -> dict[Any, list[Entry]]:
        d = self._dict
        if d is None:
            d = self._dict = self._build_dict()
        return d

    def _build_dict(self) -> dict[Any, list[Entry]]:
        t, r = self.time, self.diff
        out: dict[Any, list[Any]] = {}
        get = out.get
        repeated: list[Any] = []
        if len(self.key) == 1:
            (i,) = self.key
            for row in self.rows:
                k = (row[i],)
                lst = get(k)
                if lst is None:
                    out[k] = [row]
                else:
                    if len(lst) == 1:
                        repeated.append(k)
                    lst.append(row)
        else:
            kf = key_getter(self.key)
            for row in self.rows:
                k = kf(row)
                lst = get(k)
                if lst is None:
                    out[k] = [row]
                else:
                    if len(lst) == 1:
                        repeated.append(k)
                    lst.append(row)
        entries: dict[Any, list[Entry]] = {k: [(vals[0], t, r)] for k, vals in out.items()}
        for k in repeated:
            entries[k] = _summed(out[k], t, r)
        return entries

    # -- the sorted index ------------------------------------------------------------------------
    def _index(self) -> bool:
        """Build the sorted key column if it applies; True when it is there. The key is one
        column of exact ints, or several whose value ranges fit one int64 code together
        (`_codes`: (k1 - lo1) * stride1 + ...), as a join on two int columns has."""
        s = self._sorted
        if s is None:
            s = self._sorted = False
            if self.records < SORTED_MIN_ROWS:
                return False
            if self._rows is None:
                # from the table's key columns, without making the rows: exact ints by value,
                # any other column by a dictionary code
                chunks = self._ascending_chunks()
                if chunks is not None:
                    self._radix = None
                    self._order = None  # the identity: no array of row numbers
                    s = self._sorted = chunks
                    return True
                cols, coders = [], []
                for k in self.key:
                    col = self.table.column(k)
                    ints = int_column(col)
                    coded = (ints, None) if ints is not None else _dictionary_codes(col)
                    if coded is None:
                        break
                    cols.append(coded[0])
                    coders.append(coded[1])
                else:
                    if any(c is not None for c in coders):
                        self._coders = coders
            else:
                cols = [_int_list(list(map(itemgetter(k), self.rows))) for k in self.key]
            if cols and len(cols) == len(self.key) and all(c is not None for c in cols):
                codes = self._encode(cols)  # type: ignore[arg-type]
                if codes is not None:
                    if ascending(codes):
                        order = None  # the identity: no array of row numbers
                        s = self._sorted = codes
                    else:
                        order = _key_order(codes)
                        if len(order) < 1 << 31:  # row numbers in half the bytes
                            order = order.astype(np.int32)
                        dense = DenseCodes.of(codes)
                        s = self._sorted = dense if dense is not None else codes[order]
                    self._order = order
        return s is not False

    def _ascending_chunks(self) -> AscendingChunks | None:
        """The index as views of the table's key column's chunks (`AscendingChunks`) when the
        key is one int64 column without NULL, of several chunks, in ascending order."""
        import pyarrow as pa

        if len(self.key) != 1:
            return None
        col = self.table.column(self.key[0])
        if col.num_chunks < 2 or col.type != pa.int64() or col.null_count:
            return None
        return AscendingChunks.of([c.to_numpy() for c in col.chunks])

    def _encode(self, cols: list[np.ndarray]) -> np.ndarray | None:
        """One int64 code per row for the key columns `cols` (the column itself for one),
        remembering each column's low bound and stride for probes; None when the ranges'
        product does not fit."""
        if len(cols) == 1:
            self._radix = None
            return cols[0]
        radix, total = [], 1
        for c in reversed(cols):
            lo = int(c.min()) if len(c) else 0
            span = (int(c.max()) - lo + 1) if len(c) else 1
            radix.append((lo, span, total))
            total *= span
            if total >= 1 << 62:
                return None
        radix.reverse()
        self._radix = radix
        codes = np.zeros(len(cols[0]), dtype=np.int64)
        for c, (lo, _, stride) in zip(cols, radix, strict=True):
            codes += (c - lo) * stride
        return codes

    def _code(self, k: Any) -> int | None:
        """A probe key's code, None when no row can have it (a part outside its column's
        range); the caller has checked it is a tuple of exact ints of the key's length."""
        if self._radix is None:
            k0 = k[0]
            return k0 if _I64_MIN <= k0 <= _I64_MAX else None
        code = 0
        for x, (lo, span, stride) in zip(k, self._radix, strict=True):
            if not 0 <= x - lo < span:
                return None
            code += (x - lo) * stride
        return code

    def _entries(self, lo: int, hi: int) -> list[Entry]:
        picked = self._pick(np.arange(lo, hi) if self._order is None else self._order[lo:hi])
        if hi - lo == 1:
            return [(picked[0], self.time, self.diff)]
        return _summed(picked, self.time, self.diff)

    def _pick(self, positions: np.ndarray) -> list[Any]:
        """The rows at `positions`: from the rows, or from the table's columns while they
        are not made (a probe after a hydration converts its hits only)."""
        if self._rows is not None:
            rows = self._rows
            return [rows[j] for j in positions.tolist()]
        if self._column_pickers():
            cols = [p(positions) for p in self._pickers]  # type: ignore[union-attr]
            if len(cols) == 1:
                return [(v,) for v in cols[0]]
            return list(zip(*cols, strict=True))
        import pyarrow as pa

        return list(rows_of(self.table.take(pa.array(positions, type=pa.int64())),
                            self.table.num_columns))

    def _probe(self, k: Any) -> list[Entry] | None:
        if self._dict is not None:
            return self._dict.get(k)
        self._probes += 1
        if self._probes > max(64, self.records >> 3):
            return self.updates.get(k)
        parts = self._parts(k)
        if parts is _DICT:
            return self.updates.get(k)
        if parts is None:
            return None
        code = self._code(parts)
        if code is None:
            return None
        s = self._sorted
        lo = int(s.searchsorted(code, "left"))
        hi = int(s.searchsorted(code, "right"))
        return self._entries(lo, hi) if hi > lo else None

    def _parts(self, k: Any) -> Any:
        """Probe key k as the index's ints: k itself when every key column is of exact ints,
        else with each dictionary-coded column's value replaced by its code; None when no row
        can have k (a value no dictionary holds: dict lookups are Python's ==, as the dict
        form's); `_DICT` when only the dict form can tell (a part of another type where an
        exact int is indexed may still equal it by Python's rules: 1.0 == 1)."""
        if k.__class__ is not tuple or len(k) != len(self.key):
            return _DICT
        coders = self._coders
        if coders is None:
            return k if set(map(type, k)) == _INT else _DICT
        out = []
        for x, coder in zip(k, coders, strict=True):
            if coder is None:
                if x.__class__ is not int:
                    return _DICT
                out.append(x)
                continue
            try:
                c = coder.get(x)
            except TypeError:  # unhashable: the dict form raises as it would
                return _DICT
            if c is None:
                return None
            out.append(c)
        return tuple(out)

    def lookup(self) -> Callable[[Any], list[Entry] | None]:
        if self._dict is not None or not self._index():
            return self.updates.get
        return self._probe

    def get_many(self, keys: list[Any]) -> list[list[Entry] | None]:
        # Probes of most of the rows: the dict is cheaper than entries built per hit (a
        # quarter of them or fewer is a vectorised search and entries for the hits only).
        if self._dict is not None or len(keys) << 2 > self.records or not self._index():
            return list(map(self.updates.get, keys))
        if len(keys) < VECTOR_MIN_KEYS:
            return list(map(self._probe, keys))
        if self._coders is None:
            if set(map(type, keys)) != _TUPLE or set(map(len, keys)) != {len(self.key)}:
                return list(map(self._probe, keys))
            coded = keys
        else:
            coded = list(map(self._parts, keys))
            if _DICT in coded:
                return list(map(self._probe, keys))
        # keys no row can have (a value no dictionary holds) are not searched
        searched = [i for i, c in enumerate(coded) if c is not None]
        parts = [[coded[i][j] for i in searched] for j in range(len(self.key))]
        if any(set(map(type, p)) - _INT for p in parts):
            return list(map(self._probe, keys))
        try:
            arrs = [np.array(p, dtype=np.int64) for p in parts]
        except OverflowError:
            return list(map(self._probe, keys))
        if self._radix is None:
            probe, valid = arrs[0], None
        else:
            probe = np.zeros(len(searched), dtype=np.int64)
            valid = np.ones(len(searched), dtype=bool)
            for a, (lo, span, stride) in zip(arrs, self._radix, strict=True):
                # compared, not subtracted first: a - lo may wrap for a far outside
                valid &= (a >= lo) & (a <= lo + span - 1)
                probe += np.where(valid, a - lo, 0) * stride
        s = self._sorted
        los = s.searchsorted(probe, "left")
        his = s.searchsorted(probe, "right")
        out: list[list[Entry] | None] = [None] * len(keys)
        found = his > los
        if valid is not None:
            found &= valid
        hit = np.flatnonzero(found)
        los, his = los[hit], his[hit]
        # the hits' rows in one gather: row numbers of every hit's range, back to back
        counts = his - los
        starts = np.repeat(los - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        at_sorted = starts + np.arange(int(counts.sum()))
        rows = self._pick(at_sorted if self._order is None else self._order[at_sorted])
        t, r = self.time, self.diff
        at = 0
        for h, n in zip(hit.tolist(), counts.tolist(), strict=True):
            p = searched[h]
            if n == 1:
                out[p] = [(rows[at], t, r)]
            else:
                out[p] = _summed(rows[at:at + n], t, r)
            at += n
        return out

    def key_count(self) -> int:
        if self._dict is None and self._index():
            s = self._sorted
            if isinstance(s, (AscendingChunks, DenseCodes)):
                return s.key_count()
            return int(np.count_nonzero(s[1:] != s[:-1])) + 1 if len(s) else 0
        return len(self.updates)

    def sample(self) -> tuple[Any, Entry]:
        if self._rows is None:  # one row, not all of them
            row = next(rows_of(self.table.slice(0, 1), self.table.num_columns))
        else:
            row = self._rows[0]
        return key_getter(self.key)(row), (row, self.time, self.diff)

    def with_upper(self, upper: Antichain, seq: int) -> Batch:
        b = KeyedRowsBatch(self._rows, self.key, self.time, self.diff, self.lower, upper,
                           self.since, seq, self.table)
        b._dict, b._sorted, b._order, b._radix = self._dict, self._sorted, self._order, \
            self._radix
        b._pickers, b._coders = self._pickers, self._coders
        return b

    def approx_bytes(self) -> int:
        """The rows (sampled), their list slots, and whichever index has been built (the
        Arrow table's buffers while the rows are not made)."""
        if not self.records:
            return 0
        if self._rows is None:
            total = int(self.table.nbytes)
            total += self._index_bytes()
            return total
        row = self.rows[0]
        per_row = 8 + sys.getsizeof(row) + sum(sys.getsizeof(x) for x in row)
        total = self.records * per_row
        total += self._index_bytes()
        if self._dict is not None:
            total += self.records * 72 + len(self._dict) * 150
        return total

    def _index_bytes(self) -> int:
        """The sorted index's arrays (the order of the rows, the sorted codes or their
        bounds; none for the table's own key column, `AscendingChunks`)."""
        s = self._sorted
        if s is None or s is False:
            return 0
        order = 0 if self._order is None else int(self._order.nbytes)
        if isinstance(s, AscendingChunks):
            return order if self.table is not None else order + 8 * self.records
        if isinstance(s, DenseCodes):
            return order + int(s.bounds.nbytes)
        return order + int(s.nbytes)

    def __repr__(self) -> str:
        return "KeyedRowsBatch(seq=%d, records=%d, lower=%s, upper=%s, key=%s)" % (
            self.seq, self.records, self.lower, self.upper, self.key)


def _key_order(codes: np.ndarray) -> np.ndarray:
    """A sorting permutation of a key index's codes (the order of equal keys is immaterial):
    by counting for dense ids in a process with numba loaded (`engine.counting_sort`), else
    NumPy's sort."""
    if "numba" in sys.modules:
        from engine.counting_sort import dense_order

        order = dense_order(codes)
        if order is not None:
            return order
    return np.argsort(codes)
