"""Bulk sources: files whose rows enter an input as one payload, read by the executor itself.

Invariant: reading a `FileSource` gives the same multiset of `(row, diff)` pairs on every
executor. A row is the tuple of the selected columns' values, cast to `types` when given, as
Python values (Arrow's `to_pylist` conversions: int, float, str, bool, Decimal, date,
datetime); the diff is the `diff_column`'s value (rows with diff 0 are dropped) or 1. Because the
executor reads the files (Spark on its workers, the in-process executor with pyarrow), a bulk
load never passes through the driver row by row.

Types are named in the SQL vocabulary that Spark's `cast` accepts and that `arrow_type` maps to
Arrow: bigint, integer, smallint, tinyint, double, float, string, boolean, date, timestamp
(without time zone), decimal(p,s). A CSV source without `types` is typed by each executor's own
inference, which can differ (NULL tokens, timestamps): pin `types` for identical rows
everywhere. `options` are passed to Spark's reader only.
"""

from __future__ import annotations

import decimal
import itertools
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.canonical import canonical_column

FORMATS = ("parquet", "csv")


@dataclass(frozen=True)
class FileSource:
    """Files in one format; `columns` selects (and orders) the row's fields (None: all).

    `unread` names selected columns that are not read: every row holds NULL there (for a
    reader that never looks at them, such as a view whose `columns_read` leaves them out)."""

    paths: tuple[str, ...]
    format: str = "parquet"
    columns: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    diff_column: str | None = None
    header: bool = True
    delimiter: str = ","
    options: dict[str, str] = field(default_factory=dict)
    unread: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError("format must be one of %s, got %r" % (FORMATS, self.format))
        if not self.paths:
            raise ValueError("a file source needs at least one path")
        if self.types is not None and (self.columns is None or len(self.types) != len(self.columns)):
            raise ValueError("types must name one type per selected column")
        if self.format == "csv" and not self.header and self.columns is None:
            raise ValueError("a CSV source without a header needs its column names")
        if self.unread and (self.columns is None or not self.unread <= set(self.columns)):
            raise ValueError("unread columns must be among the selected columns")

    def selected(self, available: list[str]) -> list[str]:
        """The row's columns given the files' columns (all but the diff column when `columns` is
        None); raises ValueError naming any selected or diff column the files lack."""
        names = list(self.columns) if self.columns is not None else [
            n for n in available if n != self.diff_column
        ]
        missing = [n for n in names + ([self.diff_column] if self.diff_column else [])
                   if n not in available]
        if missing:
            raise ValueError("columns %s are not in %s" % (missing, self.paths[0]))
        return names

    def file_columns(self) -> list[str] | None:
        """Without a header, the names of a CSV file's columns in order: `columns`, then the
        diff column."""
        if self.format != "csv" or self.header:
            return None
        return list(self.columns or ()) + ([self.diff_column] if self.diff_column else [])


_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def arrow_type(name: str) -> Any:
    """The Arrow type of a SQL type name (see the module docstring)."""
    import pyarrow as pa

    n = name.strip().lower()
    m = _DECIMAL.fullmatch(n)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    simple = {
        "bigint": pa.int64(),
        "integer": pa.int32(),
        "int": pa.int32(),
        "smallint": pa.int16(),
        "tinyint": pa.int8(),
        "double": pa.float64(),
        "float": pa.float32(),
        "string": pa.string(),
        "boolean": pa.bool_(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us"),
    }
    if n not in simple:
        raise ValueError("unsupported source type %r" % name)
    return simple[n]


def column_values(column: Any) -> list[Any]:
    """An Arrow column as canonical Python values: only a floating column can hold a NaN or a
    -0.0 (a column without a NaN (found by Arrow) or a zero is not walked in Python);
    integers, strings, dates and the like are canonical as Arrow converts them; nested values
    are walked."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_null(t):
        return [None] * len(column)  # an unread column (FileSource.unread)
    if pa.types.is_date32(t) or (pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None):
        # Arrow builds each date or datetime object slowly (about 1.5 us a value); NumPy's
        # datetime64 conversion gives the same objects (None for NULL) 15x faster
        return column.to_numpy(zero_copy_only=False).tolist()
    values = column.to_pylist()
    if pa.types.is_floating(t):
        if column.null_count == len(column) or (
                not pc.any(pc.is_nan(column)).as_py() and 0.0 not in values):
            return values
    elif not pa.types.is_nested(t):
        return values
    return canonical_column(values)


def decimal_unscaled(chunk: Any) -> np.ndarray | None:
    """A decimal128 array's unscaled values as int64 (NULLs as 0), read from its buffer: the
    low word of each 128-bit value, which is the value when the high word only extends its
    sign (always, at 18 digits or fewer); None otherwise."""
    import pyarrow.compute as pc

    n = len(chunk)
    words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[2 * chunk.offset:2 * (chunk.offset + n)]
    low, high = words[0::2], words[1::2]
    if not np.array_equal(high, low >> 63):
        return None
    if chunk.null_count:
        return np.where(pc.is_valid(chunk).to_numpy(zero_copy_only=False), low, 0)
    return low.copy()


def int_magnitude(ints: np.ndarray) -> int:
    """The largest absolute value of int64 `ints` (0 for none), exactly, as a Python int:
    NumPy's abs of -2**63 is -2**63 itself, so a bound from `np.abs(ints).max()` passes."""
    return max(-int(ints.min()), int(ints.max())) if len(ints) else 0


# Wide enough that `scaleb` never rounds an int64's digits, whatever the thread's context.
_DECIMALS = decimal.Context(prec=40)

# A pick of at most this many positions reads each value from its chunk (an Arrow scalar,
# ~2 us); a larger one gathers chunk by chunk, each chunk's form (`_whole_picker`) made when
# first picked from and kept.
SMALL_PICK = 32


def column_picker(column: Any) -> Callable[[np.ndarray], list[Any]] | None:
    """A function of row positions (an int64 array) giving those rows' values of an Arrow
    column, each exactly what `column_values` gives at that position, without converting the
    rest: integers, booleans, NaN-free doubles (a -0.0 as 0.0), dates and timestamps through
    NumPy (one gather and `tolist`), strings through Arrow's `take`. None for other types, and for a
    double column holding a NaN (its canonical NaN object is `column_values`' business).

    Made without a copy (a hydration settles every arranged table's columns, and most are
    only ever probed for a few rows by single-row writes): small picks read the chunks'
    scalars, whose `as_py` is `to_pylist`'s value; large ones gather from each chunk they
    touch, never copying the column into one array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_null(t):
        return lambda pos: [None] * len(pos)
    if pa.types.is_float64(t):
        if column.null_count < len(column) and pc.any(pc.is_nan(column)).as_py():
            return None
    elif not (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date32(t)
              or pa.types.is_string(t) or pa.types.is_large_string(t)
              or (pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None)
              or (pa.types.is_decimal128(t) and t.precision <= 18 and t.scale >= 0)):
        return None
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    starts = np.zeros(len(chunks), dtype=np.int64)
    np.cumsum([len(c) for c in chunks[:-1]], out=starts[1:])
    of_chunk: dict[int, Callable[[np.ndarray], list[Any]]] = {}

    def chunk_picker(c: int) -> Callable[[np.ndarray], list[Any]]:
        f = of_chunk.get(c)
        if f is None:
            f = of_chunk[c] = _whole_picker(chunks[c])
        return f

    def pick(pos: np.ndarray) -> list[Any]:
        if len(chunks) == 1:
            return chunk_picker(0)(pos)
        at = np.searchsorted(starts, pos, "right") - 1
        if len(pos) <= SMALL_PICK:
            firsts = starts.tolist()
            return [chunks[c][p - firsts[c]].as_py() for p, c in zip(pos.tolist(), at.tolist(),
                                                                      strict=True)]
        # the positions grouped by chunk (stable), each group gathered from its chunk
        order = np.argsort(at, kind="stable")
        by_chunk = at[order]
        out = np.empty(len(pos), dtype=object)
        for group in np.split(order, np.flatnonzero(by_chunk[1:] != by_chunk[:-1]) + 1):
            c = int(at[group[0]])
            out[group] = chunk_picker(c)(pos[group] - starts[c])
        return out.tolist()  # type: ignore[no-any-return]

    if pa.types.is_float64(t):
        # a -0.0 is 0.0, as `column_values` (`engine.canonical`) gives it
        return lambda pos: [0.0 if v == 0.0 else v for v in pick(pos)]
    return pick


def _whole_picker(column: Any) -> Callable[[np.ndarray], list[Any]]:
    """`column_picker` over one array (a chunk; a type it accepts), its values converted
    to NumPy (zero-copy for numbers without NULL) or taken by Arrow (strings)."""
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = col.type
    if pa.types.is_date32(t) and not col.null_count:
        days = col.view(pa.int32()).to_numpy()  # no copy: only the picked become dates
        return lambda pos: days[pos].astype("datetime64[D]").tolist()
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        stamps = col.to_numpy(zero_copy_only=False)  # datetime64, NaT for NULL: as column_values
        return lambda pos: stamps[pos].tolist()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return lambda pos: col.take(pa.array(pos, type=pa.int64())).to_pylist()
    if pa.types.is_decimal128(t):
        # the unscaled int64s (18 digits at most), each picked one made the Decimal Arrow
        # makes: its digits at exponent -scale
        unscaled = decimal_unscaled(col)
        assert unscaled is not None  # (column_picker takes 18 digits at most)
        valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else None
        scale = -t.scale

        def pick_decimals(pos: np.ndarray) -> list[Any]:
            got = [decimal.Decimal(x).scaleb(scale, _DECIMALS) for x in unscaled[pos].tolist()]
            if valid is not None:
                for i in np.flatnonzero(~valid[pos]).tolist():
                    got[i] = None
            return got

        return pick_decimals
    if not col.null_count:
        vals = col.to_numpy(zero_copy_only=False)
        return lambda pos: vals[pos].tolist()
    vals = col.fill_null(False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False)
    valid = col.is_valid().to_numpy(zero_copy_only=False)

    def pick(pos: np.ndarray) -> list[Any]:
        got = vals[pos].tolist()
        ok = valid[pos]
        if ok.all():
            return got
        return [v if k else None for v, k in zip(got, ok.tolist(), strict=True)]

    return pick


def rows_of(batch: Any, ncols: int) -> Iterator[tuple[Any, ...]]:
    """The first `ncols` columns of an Arrow record batch or table, as row tuples (with no
    columns, one empty tuple per row)."""
    if ncols == 0:
        return itertools.repeat((), batch.num_rows)
    cols = [column_values(batch.column(i)) for i in range(ncols)]
    if ncols == 1:
        return ((v,) for v in cols[0])
    return zip(*cols, strict=True)


def null_unread(table: Any, read: Collection[int]) -> Any:
    """Arrow table `table` with every column whose position is not in `read` replaced by
    NULLs of Arrow's null type (no buffers): the table an unread column (`FileSource.unread`)
    gives. `table` itself when every column is read."""
    import pyarrow as pa

    n = table.num_columns
    if all(i in read for i in range(n)):
        return table
    cols = [table.column(i) if i in read else pa.nulls(table.num_rows) for i in range(n)]
    return pa.table(cols, names=table.column_names)


def read_arrow(source: FileSource) -> Any:
    """The selected, typed columns (then the diff column, if any) as one Arrow table.

    Used by the in-process executor; Spark reads with its own readers (see `engine.executors.spark`)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    if source.format == "parquet":
        # File by file (`ParquetFile`, not the dataset layer: no partition columns from a
        # path, and no import of pandas on the first read), only the columns needed.
        files = [pq.ParquetFile(p) for p in source.paths]
        available = files[0].schema_arrow.names
        wanted = [n for n in source.selected(available) if n not in source.unread]
        if source.diff_column:
            wanted.append(source.diff_column)
        table = pa.concat_tables([f.read(columns=wanted) for f in files])
    else:
        parts = []
        for p in source.paths:
            read = pcsv.ReadOptions(column_names=source.file_columns())
            parse = pcsv.ParseOptions(delimiter=source.delimiter)
            convert = None
            if source.types is not None:
                # Pinned columns are parsed straight to their types, with Spark's CSV rule for
                # NULL (an empty field, quoted or not), so both executors read the same values.
                convert = pcsv.ConvertOptions(
                    column_types={c: arrow_type(t) for c, t in zip(source.columns or (),
                                                                   source.types, strict=True)},
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=True,
                )
            parts.append(pcsv.read_csv(p, read_options=read, parse_options=parse,
                                       convert_options=convert))
        table = pa.concat_tables(parts, promote_options="permissive")
    names = source.selected(table.column_names + sorted(source.unread))
    cols = []
    for i, n in enumerate(names):
        if n in source.unread:
            cols.append(pa.nulls(table.num_rows))  # of Arrow's null type: no buffers
            continue
        c = table.column(n)
        if source.types is not None:
            c = c.cast(arrow_type(source.types[i]))
        cols.append(c)
    if source.diff_column:
        cols.append(table.column(source.diff_column).cast(pa.int64()))
        names = names + ["__diff"]
    return pa.table(cols, names=names)


def updates_of(source: FileSource, time: Any) -> list[tuple[Any, Any, int]]:
    """The in-process reading: `(row, time, diff)` for every row with a non-zero diff."""
    table = read_arrow(source)
    if source.diff_column:
        n = table.num_columns - 1
        diffs = table.column(n).to_pylist()
        return [(row, time, d) for row, d in zip(rows_of(table, n), diffs, strict=True) if d]
    return [(row, time, 1) for row in rows_of(table, table.num_columns)]
