"""`COPY <table> FROM '<path>' (...)`: which files a statement may read, and reading them.

Invariants:
- Like PostgreSQL's server-side COPY, only files under the import directory are read: a relative
  path resolves against it, and every path (after resolving symlinks and `..`) must lie inside
  it, or the statement fails with 403 `forbidden_path` before anything about the file (even
  whether it exists) is revealed.
- Files are read here, in the server, into Arrow tables without interpreting values: a Parquet
  file keeps its own types and a CSV file is read as text. DuckDB then casts the values to the
  table's column types (see `Store.insert_arrow`), so a COPY accepts exactly the values that
  the same casts in SQL accept. The rest follows DuckDB's own `COPY ... FROM`: columns map to
  the table's columns by position, HEADER defaults to false, and a CSV field equal to the NULL
  string (default: empty), quoted or not, is NULL.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp

from server.errors import ApiError, SqlError
from server.values import interval_text

FORMATS = ("parquet", "csv")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class CopySpec:
    """The options of one COPY FROM statement."""

    path: str
    format: str
    header: bool = False
    delimiter: str = ","
    null: str = ""


def _option_error(message: str) -> SqlError:
    return SqlError(message, code="bad_copy_option")


def _text(node: exp.Expression | None, option: str) -> str:
    """The value of an option given as a word (`parquet`) or a string literal (`'|'`)."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if isinstance(node, exp.Var | exp.Identifier | exp.Column):
        return str(node.name)
    raise _option_error(f"COPY option {option} needs a value")


def _flag(node: exp.Expression | None, option: str) -> bool:
    if node is None:  # `HEADER` alone means true, as in PostgreSQL
        return True
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    value = _text(node, option) if not isinstance(node, exp.Literal) else str(node.this)
    v = value.strip().lower()
    if v in ("true", "on", "1"):
        return True
    if v in ("false", "off", "0"):
        return False
    raise _option_error(f"COPY option {option} must be true or false, got {value!r}")


def parse_copy(ast: exp.Copy) -> CopySpec:
    """The file and options of a COPY FROM statement; `SqlError` for anything else."""
    files = list(ast.args.get("files") or [])
    if len(files) != 1 or not (isinstance(files[0], exp.Literal) and files[0].is_string):
        raise SqlError(
            "COPY FROM needs one file path as a string literal (for example "
            "COPY t FROM 'data.parquet'); reading from STDIN or a program is not supported",
            code="unsupported",
        )
    creds = ast.args.get("credentials")
    if creds is not None and any(v for v in creds.args.values()):
        raise SqlError("COPY credentials are not supported", code="unsupported")
    path = str(files[0].this)
    if not path.strip():
        raise SqlError("COPY FROM needs a non-empty file path", code="bad_copy_option")
    options: dict[str, exp.Expression | None] = {}
    for p in ast.args.get("params") or []:
        if not isinstance(p, exp.CopyParameter):
            raise _option_error(f"unsupported COPY option {p.sql('duckdb')!r}")
        name = str(p.name).upper()
        if name in ("DELIM", "SEP"):
            name = "DELIMITER"
        if name in options:
            raise _option_error(f"COPY option {name} is given twice")
        options[name] = p.args.get("expression")
    unknown = sorted(set(options) - {"FORMAT", "HEADER", "DELIMITER", "NULL"})
    if unknown:
        raise _option_error(
            f"unsupported COPY option {unknown[0]}; supported: FORMAT parquet|csv, "
            "and for csv HEADER, DELIMITER, NULL"
        )
    if "FORMAT" in options:
        fmt = _text(options["FORMAT"], "FORMAT").lower()
        if fmt not in FORMATS:
            raise _option_error(f"COPY FORMAT must be parquet or csv, got {fmt!r}")
    else:
        # DuckDB's rule: the file name tells Parquet; anything else is CSV.
        fmt = "parquet" if path.lower().endswith((".parquet", ".parq", ".pq")) else "csv"
    if fmt != "csv":
        extra = sorted(set(options) - {"FORMAT"})
        if extra:
            raise _option_error(f"COPY option {extra[0]} applies only to FORMAT csv")
        return CopySpec(path, fmt)
    header = _flag(options["HEADER"], "HEADER") if "HEADER" in options else False
    delimiter = ","
    if "DELIMITER" in options:
        delimiter = _text(options["DELIMITER"], "DELIMITER")
        if delimiter == "\\t":  # DuckDB spells a tab this way
            delimiter = "\t"
        if len(delimiter) != 1 or delimiter in ('"', "\n", "\r"):
            raise _option_error(
                f"COPY DELIMITER must be one character other than a quote or a newline, "
                f"got {delimiter!r}"
            )
    null = ""
    if "NULL" in options:
        null = _text(options["NULL"], "NULL")
    return CopySpec(path, fmt, header, delimiter, null)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_paths(root: Path, text: str) -> list[str]:
    """The files `text` names under the import directory `root` (already resolved), sorted.

    `text` may be a glob pattern (`*`, `?`, `[...]`, and `**` for any depth of directories)
    matching files.
    Raises 403 `forbidden_path` for anything outside `root` and 400 `file_not_found` /
    `not_a_file` for paths inside it that are missing or are not regular files."""
    base = str(root)
    if "\x00" in text:
        raise SqlError("a COPY path cannot contain a NUL character", code="bad_copy_option")
    joined = os.path.normpath(os.path.join(base, text))
    outside = ApiError(
        f"COPY may read only files under the server's import directory; {text!r} is outside it",
        code="forbidden_path",
        status=403,
    )
    if any(c in _GLOB_CHARS for c in text):
        if not _inside(joined, base):  # never list directories outside the import directory
            raise outside
        # The import directory's own path is literal, even if it contains glob characters.
        # As DuckDB's globs: `**` crosses any number of directories, and a pattern matches
        # files only (a directory it matches is not read)
        matches = sorted(m for m in glob.glob(
            os.path.join(glob.escape(base), os.path.relpath(joined, base)), recursive=True)
            if not os.path.isdir(m))
        if not matches:
            raise SqlError(f"no file matches {text!r} in the import directory",
                           code="file_not_found")
    else:
        matches = [joined]
    out = []
    for m in matches:
        real = os.path.realpath(m)
        if not _inside(real, base):  # checked before existence, so nothing leaks
            raise outside
        if not os.path.exists(real):
            raise SqlError(f"file {text!r} does not exist in the import directory",
                           code="file_not_found")
        if not os.path.isfile(real):
            raise SqlError(
                f"{os.path.relpath(real, base)!r} is not a file (to read the files of a "
                "directory, use a pattern such as 'dir/*.parquet')",
                code="not_a_file",
            )
        out.append(real)
    return out


def _file_error(path: str, root: Path, e: Exception) -> SqlError:
    name = os.path.relpath(path, root)
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return SqlError(f"cannot read {name!r}: {message}", code="invalid_file")


def _blank_lines(path: str) -> int | None:
    """The number of lines of a text file whose every line is empty, else None."""
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip(b"\r\n"):
                return None
            n += 1
    return n


def _leading_empty_lines(path: str) -> int:
    """The number of empty lines a text file starts with."""
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip(b"\r\n"):
                break
            n += 1
    return n


def _as_duckdb_reads(table: Any, schema: Any) -> Any:
    """A Parquet file's Arrow table with the columns DuckDB reads otherwise than pyarrow (and
    its Arrow scan does not take) converted: a float16 column to float32 (DuckDB's FLOAT), an
    INTERVAL (pyarrow's 12 raw bytes: months, days and milliseconds) to DuckDB's text of it."""
    import struct

    import pyarrow as pa
    import pyarrow.compute as pc

    intervals = {c.path for c in (schema.column(i) for i in range(len(schema)))
                 if str(c.logical_type) == "Interval"}
    for i, field in enumerate(table.schema):
        column = None
        if pa.types.is_float16(field.type):
            column = pc.cast(table.column(i), pa.float32())
        elif field.name in intervals and pa.types.is_fixed_size_binary(field.type):
            def text(b: bytes | None) -> str | None:
                if b is None:
                    return None
                months, days, millis = struct.unpack("<iii", b)
                return interval_text(months, days, millis * 1000)
            column = pa.array([text(b) for b in table.column(i).to_pylist()], pa.string())
        if column is not None:
            table = table.set_column(i, field.name, column)
    return table


def read_file(spec: CopySpec, path: str, root: Path) -> Any:
    """One file as an Arrow table, its columns named f0..fn-1 (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if spec.format == "parquet":
            # One file, as DuckDB's COPY reads it: no partition columns from the path, and
            # no dataset layer (whose first use imports pandas: half a second). INT96
            # timestamps (Spark's, Hive's) read at microseconds, as DuckDB reads them: read at
            # pyarrow's default nanoseconds, a year outside 1677-2262 wraps to a wrong one.
            parquet = pq.ParquetFile(path, coerce_int96_timestamp_unit="us")
            table = _as_duckdb_reads(parquet.read(), parquet.schema)
        elif os.path.getsize(path) == 0:
            table = pa.table({})
        elif (blank := _blank_lines(path)) is not None:
            # only empty lines: DuckDB reads one NULL per line (after the header line) into
            # a one-column table when an empty field is its NULL (the default), else no row;
            # it refuses a wider table (pyarrow refuses the file)
            rows = max(0, blank - spec.header) if spec.null == "" else 0
            table = pa.table({"f0": pa.nulls(rows, pa.string())})
        else:
            table = _read_csv(spec, path)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise _file_error(path, root, e) from None
    return table.rename_columns([f"f{i}" for i in range(table.num_columns)])


# pyarrow reads a CSV file in blocks, and a row must fit in one (with newlines in values
# allowed, a row cannot be found across blocks): its default of 1 MiB refused any longer row
# with an error naming blocks. Blocks grow until the longest row fits; a row longer than the
# last is refused with that limit named (DuckDB's own reader stops at 2 MB lines).
_CSV_BLOCKS = (1 << 20, 1 << 24, 1 << 28)
_ROW_TOO_LONG = ("straddl", "cannot infer number of columns")


def _read_csv(spec: CopySpec, path: str) -> Any:
    """A CSV file (not empty, not only empty lines) as an Arrow table of text columns."""
    import pyarrow as pa

    size = os.path.getsize(path)
    for block in _CSV_BLOCKS:
        try:
            return _read_csv_in_blocks(spec, path, min(block, size + 1))
        except pa.ArrowInvalid as e:
            if block >= size + 1 or not any(m in str(e) for m in _ROW_TOO_LONG):
                raise
    raise ValueError(f"a row is longer than {_CSV_BLOCKS[-1]} bytes, the longest COPY reads")


def _read_csv_in_blocks(spec: CopySpec, path: str, block: int) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    read = pcsv.ReadOptions(autogenerate_column_names=True, block_size=block)
    parse = pcsv.ParseOptions(delimiter=spec.delimiter, newlines_in_values=True)
    # Every field is read as text, so that DuckDB alone decides what a value means; the
    # number of columns comes from the first row.
    with pcsv.open_csv(path, read_options=read, parse_options=parse) as reader:
        ncols = len(reader.schema)
    skip = 0
    if ncols == 1:
        # an empty line of a one-column file is a row holding NULL, as DuckDB reads it (of a
        # wider file, a line to skip), but for the empty lines it starts with
        parse = pcsv.ParseOptions(delimiter=spec.delimiter, newlines_in_values=True,
                                  ignore_empty_lines=False)
        skip = _leading_empty_lines(path)
    convert = pcsv.ConvertOptions(
        column_types={f"f{i}": pa.string() for i in range(ncols)},
        strings_can_be_null=True,
        null_values=[spec.null],
        quoted_strings_can_be_null=True,  # DuckDB's allow_quoted_nulls
    )
    table = pcsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    table = table.slice(skip)
    return table.slice(1) if spec.header else table
