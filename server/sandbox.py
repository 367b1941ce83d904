"""Read-only queries: validating what a statement may touch, and running it in a sandbox.

Two independent walls, so a bug in one is not a hole:
1. `check_relations` walks the sqlglot AST and rejects anything but reading known relations:
   statements other than queries (COPY, ATTACH, PRAGMA, SET, INSTALL, LOAD, DML inside a query),
   qualified or unknown relation names, table functions (read_csv, glob, query, ...) and
   functions with side effects or access to the environment.
2. `run_query` executes the query in an in-memory DuckDB that holds *copies* of exactly the
   relations the query names (a table's rows streamed as Arrow as the query scans them, from
   the store's snapshot: `server.queries`), with external access disabled, the configuration
   locked (both set when the connection is made), and the query inside a READ ONLY
   transaction, under a time limit. Opening an in-memory DuckDB takes about 25 ms, so
   sandboxes are pooled: one serves one query at a time, through a connection of its own
   (`cursor()`, microseconds) that holds the query's relations as temporary views and its
   Arrow registrations, which end when that connection is closed after the query; relations
   of Python rows are tables of the sandbox (a READ ONLY transaction cannot write them, where
   it could write a temporary table), dropped after it. One whose query was interrupted, or
   that failed to clean up, is closed.
The durable database is never reachable from a user's query.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp

from planner.naming import FOLD
from server.errors import (
    Forbidden,
    SqlError,
    Timeout,
    duckdb_error,
    from_duckdb,
    undecodable_duckdb_error,
)
from server.values import interval_text, quote_ident

# Table-valued functions that only generate values (no I/O) may appear in FROM.
_SAFE_TABLE_FUNCTIONS = {"unnest", "range", "generate_series", "explode"}
_FORBIDDEN_FUNCTION_PREFIXES = ("read_", "pragma_", "duckdb_", "parquet_", "iceberg_", "delta_")
_FORBIDDEN_FUNCTIONS = {
    "glob",
    "query",
    "query_table",
    "sniff_csv",
    "getenv",
    "current_setting",
    "nextval",
    "currval",
    "setval",
    "checkpoint",
    "force_checkpoint",
    "load_extension",
    "install_extension",
    "sql_auto_complete",
    "json_execute_serialized_sql",
    "which_secret",
    "enable_profiling",
    "system",
}
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, n)
    for n in (
        "Command",
        "Pragma",
        "Set",
        "Copy",
        "Attach",
        "Detach",
        "Install",
        "Use",
        "Transaction",
        "Commit",
        "Rollback",
        "Create",
        "Drop",
        "Alter",
        "Insert",
        "Update",
        "Delete",
        "Merge",
        "LoadData",
        "Export",
    )
    if hasattr(exp, n)
)


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def _is_forbidden_function(name: str) -> bool:
    return name in _FORBIDDEN_FUNCTIONS or name.startswith(_FORBIDDEN_FUNCTION_PREFIXES)


def _with_of(node: exp.Expression) -> exp.With | None:
    w = node.args.get("with_") or node.args.get("with")
    return w if isinstance(w, exp.With) else None


def _cte_name(cte: exp.Expression) -> str:
    return str(cte.alias_or_name).translate(FOLD)


def visible_ctes(node: exp.Expression) -> set[str]:
    """Names of the CTEs that a relation reference at `node` can refer to: those of every
    WITH in an enclosing scope. Inside the body of the i-th CTE of a WITH, only the CTEs before
    it are visible (and itself too in a WITH RECURSIVE). A CTE defined anywhere else (a sibling
    subquery, a later CTE) is not, so a name it shadows still refers to a relation."""
    names: set[str] = set()
    child: exp.Expression = node
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            ctes = list(parent.expressions)
            idx = next((i for i, c in enumerate(ctes) if c is child), None)
            if idx is not None:
                upto = idx + 1 if parent.args.get("recursive") else idx
                names.update(_cte_name(c) for c in ctes[:upto])
        else:
            w = _with_of(parent)
            if w is not None and w is not child:
                names.update(_cte_name(c) for c in w.expressions)
        child, parent = parent, parent.parent
    return names


def check_relations(
    ast: exp.Expression,
    known: Iterable[str],
    *,
    root_allowed: tuple[type[exp.Expression], ...] = (),
    line: int | None = None,
    column: int | None = None,
) -> list[str]:
    """Validate `ast` and return the known relations it reads (lower-case, first use order).

    `root_allowed`: node types allowed at the root only (the DML statement being executed).
    """
    known_set = set(known)
    used: list[str] = []
    for node in ast.walk():
        if isinstance(node, _FORBIDDEN_NODES) and not (
            node is ast and isinstance(node, root_allowed)
        ):
            if node is ast:
                what = type(node).__name__.upper()
            else:
                what = f"a nested {type(node).__name__.upper()} statement"
            raise Forbidden(f"{what} is not allowed here", line=line, column=column)
        name = _function_name(node)
        if name and _is_forbidden_function(name):
            raise Forbidden(f"function {name}() is not allowed", line=line, column=column)
        if isinstance(node, exp.Table):
            target = node.this
            if not isinstance(target, exp.Identifier):
                fname = _function_name(target) if isinstance(target, exp.Expression) else ""
                if fname in _SAFE_TABLE_FUNCTIONS:
                    continue
                raise Forbidden(
                    f"table function {fname or target.sql()} is not allowed; "
                    "only tables and views can be read",
                    line=line,
                    column=column,
                )
            if node.args.get("db") or node.args.get("catalog"):
                raise Forbidden(
                    f"qualified name {node.sql()} is not allowed; refer to tables and views "
                    "by their plain names",
                    line=line,
                    column=column,
                )
            rel = str(target.name).translate(FOLD)
            if rel in visible_ctes(node):
                continue
            if rel not in known_set:
                raise SqlError(
                    f"unknown table or view {target.name!r}",
                    code="unknown_table",
                    line=line,
                    column=column,
                )
            if rel not in used:
                used.append(rel)
    return used


@dataclass(frozen=True)
class Relation:
    """A relation given to the sandbox: column (name, DuckDB type) pairs and its rows, as
    Python rows, or as Arrow (`rows` then empty): a table (`arrow`), or `stream`, which gives
    a new Arrow RecordBatchReader over the same rows at each call (the caller closes it)."""

    columns: Sequence[tuple[str, str]]
    rows: Sequence[tuple[Any, ...]]
    arrow: Any = None
    stream: Callable[[], Any] | None = None


# The name a relation's rows are held under in a sandbox, below the view named for it: the
# registered Arrow table, or a table of Python rows (user names never start with it:
# `load_relation` refuses them). That table is not a temporary one: in a READ ONLY
# transaction DuckDB still lets a query write to temporary tables.
_ARROW_PREFIX = "__diffsql_arrow_"


def load_relation(con: duckdb.DuckDBPyConnection, name: str, rel: Relation,
                  arrow: Any = None) -> None:
    """Make `name` in `con` a temporary view of `rel`'s rows (it ends with the connection).
    An Arrow relation is registered (also ending with the connection), not copied:
    `name` is a view over it that casts each column to its declared type (a no-op for the
    types whose Arrow form is exact, the only ones given as Arrow), so the query scans the
    Arrow buffers themselves (`arrow`, when given, is the Arrow table or reader to register
    for a streamed relation). Python rows fill a table in one statement (no per-row calls)."""
    if name.startswith(_ARROW_PREFIX):
        raise SqlError(f"relation names may not start with {_ARROW_PREFIX}",
                       code="unsupported")
    arrow = rel.arrow if arrow is None else arrow
    if arrow is not None:
        source = _ARROW_PREFIX + name
        con.register(source, arrow)
        casts = ", ".join(f"CAST(#{i + 1} AS {t}) AS {quote_ident(c)}"
                          for i, (c, t) in enumerate(rel.columns))
        con.execute(f"CREATE TEMP VIEW {quote_ident(name)} AS SELECT {casts} "
                    f"FROM {quote_ident(source)}")
        return
    source = quote_ident(_ARROW_PREFIX + name)
    cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in rel.columns)
    con.execute(f"CREATE TABLE {source} ({cols})")  # dropped by `_return_sandbox`
    con.execute(f"CREATE TEMP VIEW {quote_ident(name)} AS SELECT * FROM {source}")
    if not rel.rows:
        return
    params = [[row[i] for row in rel.rows] for i in range(len(rel.columns))]
    unnests = []
    for i, (_, t) in enumerate(rel.columns):
        if _SCALE_38.fullmatch(t):
            # DuckDB binds a list of Python decimals of scale 38 as DOUBLE[] (their digits
            # and scale make a width of 39): 0.08 would read back as 0.0800000000000000033...
            # Their text casts exactly.
            params[i] = [None if v is None else format(v, "f") for v in params[i]]
            unnests.append(f"UNNEST(${i + 1}::VARCHAR[]::{t}[])")
        else:
            unnests.append(f"UNNEST(${i + 1}::{t}[])")
    con.execute(f"INSERT INTO {source} SELECT {', '.join(unnests)}", params)


_SCALE_38 = re.compile(r"DECIMAL\(\s*\d+\s*,\s*38\s*\)", re.IGNORECASE)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


# DuckDB's infinite dates and timestamps in Arrow: the largest and smallest values of their
# storage integers but one (`date32` days in int32, a timestamp's units in int64).
_INFINITE = {32: 2**31 - 1, 64: 2**63 - 1}


def _python_rows(con: duckdb.DuckDBPyConnection, batches: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of Arrow `batches` as DuckDB's own Python conversion gives them, except an
    infinite DATE or TIMESTAMP: that conversion gives `date.max` / `date.min` (a real
    `9999-12-31` would print the same), which is the string `infinity` / `-infinity` here,
    as DuckDB prints it (and its `to_json`), also inside a LIST, STRUCT or MAP; a date past
    year 9999, which it gives as its text, stays that text."""
    if not batches:
        return []
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches(batches)
    rows = [tuple(r) for r in con.from_arrow(table).fetchall()]
    for j, field in enumerate(table.schema):
        column = table.column(j)
        if pa.types.is_interval(field.type):
            # DuckDB's conversion gives a timedelta, a month as 30 days: its text instead
            for i, v in enumerate(column.to_pylist()):
                if v is not None:
                    text = interval_text(v.months, v.days, v.nanoseconds // 1000)
                    rows[i] = (*rows[i][:j], text, *rows[i][j + 1:])
        elif _is_time(field.type):
            stored = _storage(column)
            top = _INFINITE[stored.type.bit_width]
            infinite = pc.or_(pc.equal(stored, top), pc.equal(stored, -top))
            if not pc.any(infinite).as_py():
                continue
            for i in pc.indices_nonzero(infinite).to_pylist():
                row = list(rows[i])
                row[j] = "infinity" if stored[i].as_py() > 0 else "-infinity"
                rows[i] = tuple(row)
        elif _holds_time(field.type) and any(_infinite_within(c) for c in column.chunks):
            # (rare: an infinity a query builds into a nested value) each row walked
            for i, row in enumerate(rows):
                if row[j] is not None:
                    rows[i] = (*row[:j], _readable(row[j], column[i]), *row[j + 1:])
    return rows


def _is_time(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_date32(t) or pa.types.is_timestamp(t))


def _holds_time(t: Any) -> bool:
    """Whether nested type `t` has a DATE or TIMESTAMP inside (lists, structs, maps)."""
    return _is_time(t) or any(_holds_time(t.field(i).type) for i in range(t.num_fields))


def _storage(times: Any) -> Any:
    """DATE or TIMESTAMP values as the integers Arrow stores (int32 days, int64 units)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(times, pa.int32() if pa.types.is_date32(times.type) else pa.int64())


def _infinite_within(a: Any) -> bool:
    """Whether any DATE or TIMESTAMP inside Arrow array `a` may be infinite (values under a
    NULL parent may count: `_readable` then finds none, which is only slower)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = a.type
    if _is_time(t):
        stored = _storage(a)
        top = _INFINITE[stored.type.bit_width]
        return bool(pc.any(pc.or_(pc.equal(stored, top), pc.equal(stored, -top))).as_py())
    if pa.types.is_map(t):
        return _infinite_within(a.keys) or _infinite_within(a.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _infinite_within(a.flatten())
    if pa.types.is_struct(t):
        return any(_infinite_within(a.field(i)) for i in range(t.num_fields))
    return False


def _readable(value: Any, scalar: Any) -> Any:
    """DuckDB's Python `value` of Arrow `scalar`, each infinite DATE or TIMESTAMP inside it
    (which that conversion gave as the last or first date) replaced by DuckDB's text."""
    import pyarrow as pa

    if value is None or not scalar.is_valid:
        return value
    t = scalar.type
    if _is_time(t):
        stored = _storage(scalar).as_py()
        if abs(stored) == _INFINITE[32 if pa.types.is_date32(t) else 64]:
            return "infinity" if stored > 0 else "-infinity"
        return value
    if pa.types.is_map(t):  # a dict of DuckDB's, its entries in the map's order
        return {_readable(k, e["key"]): _readable(v, e["value"])
                for (k, v), e in zip(value.items(), scalar.values, strict=True)}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        out = [_readable(v, s) for v, s in zip(value, scalar.values, strict=True)]
        return tuple(out) if isinstance(value, tuple) else out
    if pa.types.is_struct(t):
        return {k: _readable(v, scalar[k]) for k, v in value.items()}
    return value


def run_query(
    sql: str,
    relations: dict[str, Relation],
    *,
    timeout: float,
    memory_limit: str,
    max_rows: int,
    max_bytes: int | None = None,
    line: int | None = None,
    column: int | None = None,
) -> QueryResult:
    """Run one validated read-only query over copies of `relations`. The result is fetched in
    Arrow batches, counted in rows and bytes, and refused (`result_too_large`) as soon as it
    passes `max_rows` or `max_bytes`, before any of it becomes Python objects (which take
    several times the space): a huge result never grows the server.

    A streamed relation is scanned as the query reads it (the caller streams only what it
    judges safe: `server.queries.select_many`). DuckDB refuses to scan one stream twice (a
    subquery it plans twice): a query it refuses, having returned nothing, runs again over
    every relation read whole."""
    args = (sql, relations, timeout, memory_limit, max_rows, max_bytes, line, column)
    try:
        return _run_query(*args, whole=())
    except _Rescan:
        return _run_query(*args, whole=relations.keys())


def _with_context(con: duckdb.DuckDBPyConnection, sql: str, e: duckdb.Error) -> duckdb.Error:
    """The error `e` that binding `sql` as a relation raised, with DuckDB's context (the
    line and caret that locate it), which its relation API leaves out and `execute` gives:
    the statement is bound again by `execute`, which fails the same way before running
    anything (only an unknown name is bound again: an error of another kind could have come
    from more than binding). `e` itself where that gives no more."""
    if not isinstance(e, duckdb.BinderException | duckdb.CatalogException) or (
            "\nLINE " in str(e) or _RESCAN in str(e)):
        return e
    try:
        con.execute(sql)
    except duckdb.Error as again:
        if str(again).startswith(str(e)):
            return again
    return e


def _duckdb_batches(reader: Any) -> Iterator[Any]:
    """The batches of DuckDB's Arrow `reader` of a result, with an error DuckDB raises while
    producing one (an interrupt at the time limit, a cast that fails on a later row, a
    result too large for Arrow's string buffers) raised as the DuckDB error it is: Arrow
    hands it on as a plain `OSError`, which would reach the client as a 500."""
    import pyarrow as pa

    it = iter(reader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as e:  # (Arrow passes DuckDB's on as OSError)
            raise duckdb_error(str(e)) from None
        yield batch


class _Rescan(Exception):
    """The query's plan scans a streamed relation more than once."""


# DuckDB's message when a plan scans an Arrow stream a second time.
_RESCAN = "has already been consumed"
# DuckDB's message when a result's strings pass what one Arrow batch can hold (2 GiB): the
# result is far past any `max_bytes`, refused before that check could see the batch.
_ARROW_STRINGS = "maximum total string size"


def _run_query(sql: str, relations: dict[str, Relation], timeout: float, memory_limit: str,
               max_rows: int, max_bytes: int | None, line: int | None, column: int | None,
               *, whole: Collection[str]) -> QueryResult:
    sandbox = _take_sandbox(memory_limit)
    con = sandbox.cursor()  # the query's own connection: its copies end with it
    interrupted = threading.Event()
    readers: list[Any] = []
    streamed = False

    def interrupt() -> None:
        interrupted.set()
        con.interrupt()

    try:
        for name, rel in relations.items():
            arrow = None
            if rel.stream is not None:
                arrow = rel.stream()
                readers.append(arrow)
                if name in whole:
                    arrow = arrow.read_all()
                else:
                    streamed = True
            load_relation(con, name, rel, arrow)
        con.execute("BEGIN TRANSACTION READ ONLY")
        timer = threading.Timer(timeout, interrupt)
        timer.start()
        try:
            try:
                rel = con.sql(sql)
            except duckdb.Error as e:
                raise _with_context(con, sql, e) from None
            columns = list(rel.columns)
            batches = []
            nrows = nbytes = 0
            for batch in _duckdb_batches(rel.to_arrow_reader(1024)):
                batches.append(batch)
                nrows += batch.num_rows
                nbytes += batch.nbytes
                if nrows > max_rows:
                    raise SqlError(
                        f"the result has more than {max_rows} rows; add a LIMIT",
                        code="result_too_large",
                        line=line,
                        column=column,
                    )
                if max_bytes is not None and nbytes > max_bytes:
                    raise SqlError(
                        f"the result is larger than {max_bytes} bytes; select fewer rows or "
                        "columns, or aggregate",
                        code="result_too_large",
                        line=line,
                        column=column,
                    )
            rows = _python_rows(con, batches)
        except duckdb.InterruptException:
            raise Timeout(f"query exceeded the time limit of {timeout:g}s") from None
        except UnicodeDecodeError as e:
            err = undecodable_duckdb_error(e)
            if err is None:
                raise
            raise from_duckdb(err, line=line, column=column) from None
        except Exception as e:
            # The refusal comes from DuckDB (read through the result's Arrow stream, as the
            # DuckDB error `_duckdb_batches` makes of Arrow's), or from Arrow reading a
            # streamed relation.
            if streamed and _RESCAN in str(e):
                raise _Rescan from None
            if isinstance(e, duckdb.Error) and _ARROW_STRINGS in str(e):
                raise SqlError(
                    "the result is larger than one Arrow batch can hold; select fewer rows or "
                    "columns, or aggregate", code="result_too_large", line=line, column=column,
                ) from None
            if isinstance(e, duckdb.Error):
                raise from_duckdb(e, line=line, column=column, text=sql) from None
            raise
        finally:
            timer.cancel()
        return QueryResult(columns, rows)
    finally:
        _return_sandbox(sandbox, con, memory_limit, relations, reusable=not interrupted.is_set())
        for reader in readers:
            reader.close()  # ends the table's scan, so its cursor can scan again


# Idle sandboxes by memory limit, at most _MAX_IDLE each.
_idle: dict[str, list[duckdb.DuckDBPyConnection]] = {}
_idle_lock = threading.Lock()
_MAX_IDLE = 4


def _take_sandbox(memory_limit: str) -> duckdb.DuckDBPyConnection:
    with _idle_lock:
        pool = _idle.get(memory_limit)
        if pool:
            return pool.pop()
    return duckdb.connect(":memory:", config={
        "memory_limit": memory_limit,
        "threads": 1,
        # Arrow batches are only a bounded staging area: lossless conversion makes the values
        # read back from them exactly those a direct fetch gives (HUGEINT, UUID, ...).
        "arrow_lossless_conversion": True,
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "lock_configuration": True,  # nothing above can be changed from inside
    })


def _return_sandbox(sandbox: duckdb.DuckDBPyConnection, con: duckdb.DuckDBPyConnection,
                    memory_limit: str, relations: dict[str, Relation], reusable: bool) -> None:
    """Close the query's connection `con`, which ends its views and Arrow registrations, drop
    the tables of Python rows, and pool `sandbox` again; or close it too, when its query was
    interrupted or any of that failed. (Dropping each view and registration and then checking
    that the sandbox held no table or view took 1.5-2.5 ms of each query.)"""
    try:
        con.close()
        for name, rel in relations.items():
            if rel.arrow is None and rel.stream is None:
                sandbox.execute(f"DROP TABLE IF EXISTS {quote_ident(_ARROW_PREFIX + name)}")
    except duckdb.Error:
        reusable = False
    if reusable:
        with _idle_lock:
            pool = _idle.setdefault(memory_limit, [])
            if len(pool) < _MAX_IDLE:
                pool.append(sandbox)
                return
    sandbox.close()
