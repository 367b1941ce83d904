"""The durable store: one DuckDB database holding the catalog, table contents and the
retained change history.

Layout: user table `t` lives in `main."t"`; its change log in `diffsql."log_<table_id>"` with
columns (`__ts`, `__diff`, c0..cn-1) of the table's types; the catalog and clock in
`diffsql.tables`, `diffsql.views` and `diffsql.meta` (see migrations/). Invariant: after every
COMMIT, for every table, (contents at `history_since`) + (sum of its log) == contents now, and
the log holds every committed change with timestamp > `history_since`. That is what lets a
restart rebuild every view's history exactly. `diffsql.view_history` checkpoints the views'
history up to meta `checkpoint_ts`, so a restart replays only the log after it (the chunks are
pickled rows this server wrote itself; the file is trusted like the rest of the database).
The clock, the last committed timestamp, is the larger of meta `last_ts` and the largest `__ts`
in the change logs: a write that changes only rows is in a log at its timestamp, so it does not
also update `last_ts`. The entries of one timestamp need not be
consolidated (a bulk load logs the rows it inserted next to its request's other changes): only
their sum per row matters. Only the writer (which owns `conn`) mutates; a
reader uses its own `cursor()`.
"""

from __future__ import annotations

import datetime
import json
import logging
import pickle
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

import migrations
from engine.canonical import canonical
from server.values import quote_ident

log = logging.getLogger("diffsql.server")

Row = tuple[Any, ...]

# DATE and TIMESTAMP values reach the engine and the JSON encoder as Python dates, which hold
# finite values of years 1 to 9999 only: DuckDB hands 'infinity' over as 9999-12-31 and a later
# year as a string, so such a value would silently change on its way to a view. A CHECK
# constraint refuses it at the write instead (server.errors names it `value_out_of_range`).
_RANGE_CHECKED = {
    "DATE": ("DATE '0001-01-01'", "DATE '9999-12-31'"),
    "TIMESTAMP": ("TIMESTAMP '0001-01-01'", "TIMESTAMP '9999-12-31 23:59:59.999999'"),
}


def _range_check(name: str, type_: str) -> str:
    low, high = _RANGE_CHECKED[type_]
    col = quote_ident(name)
    return f"({col} IS NULL OR (isfinite({col}) AND {col} BETWEEN {low} AND {high}))"


@dataclass(frozen=True)
class TableRecord:
    name: str
    table_id: int
    columns: list[dict[str, Any]]  # {"name", "type", "nullable"}
    primary_key: list[str]
    created_ts: int


@dataclass(frozen=True)
class ViewRecord:
    name: str
    seq: int
    sql: str
    columns: list[dict[str, Any]]
    dependencies: list[str]
    created_ts: int


def log_table(table_id: int) -> str:
    return f"diffsql.{quote_ident(f'log_{table_id}')}"


# Applied to the durable connection once migrations have run: user statements (DML) execute on
# it, so it must not reach the file system (files, ATTACH, COPY), fetch or load extensions, see
# Python variables as tables (replacement scans), or have these settings changed back.
LOCKDOWN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET python_enable_replacements = false",
    "SET lock_configuration = true",  # last: nothing above can be undone afterwards
)


# The name under which the writer registers an Arrow table on its own connection for one
# statement (a bulk load); user statements may name only user tables, so they cannot reach it,
# and it is always read as `temp.<name>`, so a user table of the same name is never confused
# with it.
_SOURCE = "__diffsql_arrow"
_OTHER = "__diffsql_arrow_other"  # a second one (`same_rows`)
# The prefix of the meta registers holding when a view of a name was last dropped.
_DROPPED = "view_dropped:"


def fetch_one(conn: Any, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
    """The one row (or None) of a query that returns at most one, read to the end of its
    result: DuckDB 2 refuses a relation (`conn.sql`) on a connection whose last `execute`
    result was not read to its end (`fetchone` leaves it open)."""
    rows = conn.execute(sql, params).fetchall() if params else conn.execute(sql).fetchall()
    return rows[0] if rows else None


def arrow_of(relation: Any) -> Any:
    """A DuckDB relation's rows as an Arrow table (the method's name changed in DuckDB 1.4)."""
    fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return fetch()


def _already_typed(rec: TableRecord, data: Any, where: dict[str, int], cast: Any) -> Any:
    """`data`'s columns as the table `insert_arrow` would get from DuckDB's casts (the
    relation `cast`), without the casts, when every column of `rec` comes from a column of
    `data` whose Arrow type is already exactly the one its cast gives (a Parquet file written
    with the table's types): each cast is then the identity, and making its copy of a large
    load cost about a fifth of the INSERT itself. None otherwise (a CSV file's text columns,
    a column list that leaves some columns NULL: then the casts' schema is not even asked)."""
    import pyarrow as pa

    names = [c["name"] for c in rec.columns]
    if any(n not in where for n in names):
        return None
    cols = [data.column(where[n]) for n in names]
    if all(pa.types.is_string(c.type) or pa.types.is_large_string(c.type) for c in cols) and \
            not all(c["type"].strip().upper() == "VARCHAR" for c in rec.columns):
        return None  # text for typed columns (a CSV file): the casts run
    typed = arrow_of(cast.limit(0)).schema
    if any(not col.type.equals(f.type) for col, f in zip(cols, typed, strict=True)):
        return None
    # Fields as Arrow makes them (nullable): a column's NULLs meet the table's NOT NULL in
    # the INSERT, as they would after a cast.
    return pa.table(cols, names=names)


def read_columns(conn: duckdb.DuckDBPyConnection, rec: TableRecord,
                 read: Collection[int] | None = None, where: str | None = None) -> Any:
    """The contents of user table `rec` as an Arrow table whose rows
    (`engine.sources.rows_of`) are exactly `Store.read_table`'s, or None when a column's type
    converts differently through Arrow (HUGEINT, INTERVAL, UUID, nested types...) or a DATE or
    TIMESTAMP holds a value outside Python's range (a table from before the range checks):
    then read the rows. With `read` (column positions: a view's `columns_read`), only those
    columns are read and the others are NULL (`engine.sources.null_unread`). With `where` (a
    SQL condition on the table's columns, `server.scan_filters`), only the rows it accepts.
    The server hydrates views from it; bench/views.py too, over its own connection."""
    if not all(ARROW_EXACT.fullmatch(c["type"]) for c in rec.columns):
        return None
    names = [c["name"] for c in rec.columns]
    source = f"main.{quote_ident(rec.name)}" + ("" if where is None else f" WHERE {where}")
    if read is None or len(set(read)) == len(names):
        table = arrow_of(conn.sql(f"SELECT * FROM {source}"))
    else:
        import pyarrow as pa

        # DuckDB scans only the columns read; the others are NULL of Arrow's null type
        # (no buffers), placed where they belong
        picked = [i for i in range(len(names)) if i in read]
        if picked:
            got = arrow_of(conn.sql(
                f"SELECT {', '.join(quote_ident(names[i]) for i in picked)} FROM {source}"))
            n = got.num_rows
        else:  # a view that reads none of its columns (count(*)): only how many rows
            got, n = None, fetch_one(conn, f"SELECT count(*) FROM {source}")[0]  # type: ignore[index]
        at = {i: got.column(k) for k, i in enumerate(picked)} if got is not None else {}
        table = pa.table([at[i] if i in at else pa.nulls(n) for i in range(len(names))],
                         names=names)
    return table if Store.exact_columns(rec, table) else None


def lock_down(conn: duckdb.DuckDBPyConnection) -> None:
    for statement in LOCKDOWN:
        conn.execute(statement)


# DuckDB column types whose Python values are never a tuple and never hold a float
# (apart from DOUBLE and FLOAT themselves): a table of these types has canonical rows once it
# has no NaN.
FLAT_TYPE = re.compile(r"BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|"
                        r"UINTEGER|UBIGINT|UHUGEINT|DOUBLE|FLOAT|VARCHAR|DATE|TIME|TIMESTAMP|"
                        r"DECIMAL\(\d+,\d+\)|INTERVAL|BLOB|UUID")


# Column types whose values Arrow converts to exactly the Python values DuckDB's `fetchall`
# gives (tests/test_special_values.py compares the two on every special value); DATE and
# TIMESTAMP only within Python's range (`_PYTHON_RANGE`, which the range checks keep them in).
# The same types survive DuckDB -> Arrow -> DuckDB exactly, so `/query` hands them to its
# sandbox as Arrow (`queries.table_relation`); the others (HUGEINT, INTERVAL, UUID, nested
# types...) are read as Python rows.
ARROW_EXACT = re.compile(r"BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|"
                          r"UINTEGER|UBIGINT|DOUBLE|FLOAT|REAL|VARCHAR|DATE|TIMESTAMP|"
                          r"DECIMAL\(\d+,\d+\)")
_EPOCH = datetime.datetime(1970, 1, 1)
_PYTHON_RANGE = {  # in Arrow's integer units: days (date32) and microseconds (timestamp[us])
    "DATE": ((datetime.datetime.min - _EPOCH).days, (datetime.datetime.max - _EPOCH).days),
    "TIMESTAMP": ((datetime.datetime.min - _EPOCH) // datetime.timedelta(microseconds=1),
                  (datetime.datetime.max - _EPOCH) // datetime.timedelta(microseconds=1)),
}


# From this many changes a log append goes as Arrow columns (`_append_log_columns`).
ARROW_LOG_ROWS = 256


def _arrow_type(name: str) -> Any:
    def make() -> Any:
        import pyarrow as pa

        return getattr(pa, name)() if name != "timestamp" else pa.timestamp("us")
    return make


# Column types whose Python values (as the store returns them) an Arrow array of this type
# holds exactly, for the change log's bulk append.
_LOG_ARROW = {
    "BIGINT": _arrow_type("int64"), "INTEGER": _arrow_type("int64"),
    "SMALLINT": _arrow_type("int64"), "TINYINT": _arrow_type("int64"),
    "DOUBLE": _arrow_type("float64"), "BOOLEAN": _arrow_type("bool_"),
    "VARCHAR": _arrow_type("string"), "DATE": _arrow_type("date32"),
    "TIMESTAMP": _arrow_type("timestamp"),
}


def exact_arrow(types: Sequence[str], columns: Sequence[list[Any]]) -> list[Any] | None:
    """Python values, column by column, as Arrow arrays that hold them exactly (`_LOG_ARROW`:
    each built with its type, no inference), for DuckDB to cast back to `types`; None for
    any other type or a value Arrow refuses."""
    import pyarrow as pa

    kinds = [_LOG_ARROW.get(t) for t in types]
    if any(k is None for k in kinds):
        return None
    try:
        return [pa.array(col, k()) for col, k in zip(columns, kinds, strict=True)]  # type: ignore[misc]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _table_defs(rec: TableRecord) -> str:
    """The column and key definitions of a user table, with the range checks above."""
    defs = []
    for c in rec.columns:
        d = f"{quote_ident(c['name'])} {c['type']}"
        if not c["nullable"]:
            d += " NOT NULL"
        if c["type"] in _RANGE_CHECKED:
            d += " CHECK " + _range_check(c["name"], c["type"])
        defs.append(d)
    if rec.primary_key:
        defs.append("PRIMARY KEY (" + ", ".join(quote_ident(k) for k in rec.primary_key) + ")")
    return ", ".join(defs)


class Store:
    """Owns the DuckDB connection of the durable database."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = duckdb.connect(path)
        migrations.migrate(self.conn)
        self.add_range_checks()
        lock_down(self.conn)

    def add_range_checks(self) -> list[str]:
        """Give the range checks to DATE and TIMESTAMP columns of tables created before them
        (DuckDB cannot add a constraint to a table: each such table is rebuilt, in one
        transaction). A table already holding a value out of range keeps it, unchecked, with
        a warning: refusing to start would lose availability, changing the value would lose
        it. Returns the names of the tables rebuilt."""
        checked = {
            (table, column) for table, columns, expr in self.conn.execute(
                "SELECT table_name, constraint_column_names, expression FROM duckdb_constraints() "
                "WHERE schema_name = 'main' AND constraint_type = 'CHECK'").fetchall()
            if "isfinite(" in (expr or "") for column in columns}
        rebuilt = []
        for rec in self.load_tables():
            missing = [c["name"] for c in rec.columns
                       if c["type"] in _RANGE_CHECKED and (rec.name, c["name"]) not in checked]
            if not missing:
                continue
            name, tmp = quote_ident(rec.name), quote_ident(f"__diffsql_rebuild_{rec.table_id}")
            try:
                self.conn.execute("BEGIN TRANSACTION")
                self.conn.execute(f"CREATE TABLE main.{tmp} ({_table_defs(rec)})")
                self.conn.execute(f"INSERT INTO main.{tmp} SELECT * FROM main.{name}")
                self.conn.execute(f"DROP TABLE main.{name}")
                self.conn.execute(f"ALTER TABLE main.{tmp} RENAME TO {name}")
                self.conn.execute("COMMIT")
                rebuilt.append(rec.name)
            except duckdb.Error as e:
                self.conn.execute("ROLLBACK")
                log.warning("table %s keeps %s without the range check: %s",
                            rec.name, ", ".join(missing), e)
        return rebuilt

    def close(self) -> None:
        try:
            if self.path != ":memory:":
                self.conn.execute("CHECKPOINT")
        finally:
            self.conn.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.conn.cursor()

    # -- transactions (writer only) -----------------------------------------------------------

    def begin(self) -> None:
        self.conn.execute("BEGIN TRANSACTION")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except duckdb.Error:
            pass  # no transaction open (e.g. COMMIT itself failed and aborted it)
        self._unregister()  # drop our reference to a failed bulk load's rows

    # -- meta ---------------------------------------------------------------------------------

    def get_meta(self, key: str) -> int:
        row = fetch_one(self.conn, "SELECT value FROM diffsql.meta WHERE key = ?", [key])
        if row is None:
            raise KeyError(key)
        return int(row[0])

    def last_logged_ts(self, tables: Iterable[TableRecord]) -> int:
        """The largest timestamp in the change logs of `tables` (0 if they are empty). A write
        that only changes rows does not store the clock: its rows in a log carry it
        (`server.writes.advance_clock`), so the clock is the larger of this and `last_ts`."""
        parts = [f"SELECT max(__ts) AS m FROM {log_table(rec.table_id)}" for rec in tables]
        if not parts:
            return 0
        row = fetch_one(self.conn, f"SELECT max(m) FROM ({' UNION ALL '.join(parts)})")
        return int(row[0]) if row and row[0] is not None else 0

    def dropped_views(self) -> dict[str, int]:
        """Each name a view was dropped under, to the timestamp it was last dropped at: a
        feed resuming from before it read an earlier view of that name."""
        rows = self.conn.execute("SELECT key, value FROM diffsql.meta WHERE starts_with(key, ?)",
                                 [_DROPPED]).fetchall()
        return {k[len(_DROPPED):]: int(v) for k, v in rows}

    def set_meta(self, key: str, value: int) -> None:
        self.conn.execute("UPDATE diffsql.meta SET value = ? WHERE key = ?", [value, key])

    # -- catalog ------------------------------------------------------------------------------

    def load_tables(self) -> list[TableRecord]:
        rows = self.conn.execute(
            "SELECT name, table_id, columns, primary_key, created_ts FROM diffsql.tables "
            "ORDER BY table_id"
        ).fetchall()
        return [TableRecord(r[0], r[1], json.loads(r[2]), json.loads(r[3]), r[4]) for r in rows]

    def load_views(self) -> list[ViewRecord]:
        rows = self.conn.execute(
            "SELECT name, seq, sql, columns, dependencies, created_ts FROM diffsql.views "
            "ORDER BY seq"
        ).fetchall()
        return [
            ViewRecord(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5]) for r in rows
        ]

    def create_table(self, rec: TableRecord) -> None:
        """Create the user table, its change log and its catalog row (inside a transaction)."""
        self.conn.execute(f"CREATE TABLE main.{quote_ident(rec.name)} ({_table_defs(rec)})")
        log_cols = ", ".join(f"c{i} {c['type']}" for i, c in enumerate(rec.columns))
        self.conn.execute(
            f"CREATE TABLE {log_table(rec.table_id)} (__ts BIGINT NOT NULL, "
            f"__diff BIGINT NOT NULL, {log_cols})"
        )
        self.conn.execute(
            "INSERT INTO diffsql.tables VALUES (?, ?, ?, ?, ?)",
            [
                rec.name,
                rec.table_id,
                json.dumps(rec.columns),
                json.dumps(rec.primary_key),
                rec.created_ts,
            ],
        )

    def drop_table(self, rec: TableRecord) -> None:
        self.conn.execute(f"DROP TABLE main.{quote_ident(rec.name)}")
        self.conn.execute(f"DROP TABLE {log_table(rec.table_id)}")
        self.conn.execute("DELETE FROM diffsql.tables WHERE name = ?", [rec.name])

    def create_view(self, rec: ViewRecord) -> None:
        self.conn.execute(
            "INSERT INTO diffsql.views VALUES (?, ?, ?, ?, ?, ?)",
            [
                rec.name,
                rec.seq,
                rec.sql,
                json.dumps(rec.columns),
                json.dumps(rec.dependencies),
                rec.created_ts,
            ],
        )

    def set_view_columns(self, name: str, columns: list[dict[str, Any]]) -> None:
        """Store view `name`'s columns anew (their names as the planner gives them now)."""
        self.conn.execute("UPDATE diffsql.views SET columns = ? WHERE name = ?",
                          [json.dumps(columns), name])

    def drop_view(self, name: str, ts: int) -> None:
        """Drop view `name`'s records at timestamp `ts`, remembering `ts` (`dropped_views`)."""
        self.conn.execute(
            "INSERT OR REPLACE INTO diffsql.meta VALUES (?, ?)", [_DROPPED + name, ts])
        self.conn.execute(
            "DELETE FROM diffsql.view_history WHERE seq IN "
            "(SELECT seq FROM diffsql.views WHERE name = ?)",
            [name],
        )
        self.conn.execute("DELETE FROM diffsql.views WHERE name = ?", [name])

    # -- view history checkpoints --------------------------------------------------------------

    def write_checkpoint(
        self, through_ts: int, chunks: Sequence[tuple[int, int, int, list[Any]]]
    ) -> None:
        """Record history chunks `(seq, from_ts, base_ts, batches)` through `through_ts` and
        make `through_ts` the checkpoint, in one transaction of its own (writer only, between
        writes)."""
        self.begin()
        try:
            for seq, from_ts, base_ts, batches in chunks:
                self.conn.execute(
                    "INSERT INTO diffsql.view_history VALUES (?, ?, ?, ?, ?)",
                    [seq, from_ts, through_ts, base_ts, pickle.dumps(batches, protocol=5)],
                )
            self.set_meta("checkpoint_ts", through_ts)
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def read_checkpoint(self, through_ts: int) -> dict[int, tuple[int, list[Any]]]:
        """Per view seq with a chunk through `through_ts` (it was running then): its base_ts
        then, and every checkpointed history batch after that base, in timestamp order."""
        rows = self.conn.execute(
            "SELECT seq, through_ts, base_ts, data FROM diffsql.view_history "
            "WHERE seq IN (SELECT seq FROM diffsql.view_history WHERE through_ts = ?) "
            "ORDER BY seq, through_ts",
            [through_ts],
        ).fetchall()
        by_seq: dict[int, list[tuple[int, int, bytes]]] = {}
        for seq, through, base, data in rows:
            by_seq.setdefault(seq, []).append((through, base, data))
        out: dict[int, tuple[int, list[Any]]] = {}
        for seq, chunks in by_seq.items():
            base = chunks[-1][1]
            # Unpickled NaNs are new objects: make rows canonical again (engine.canonical).
            batches = [
                (t, [(canonical(row), diff) for row, diff in b])
                for _, _, data in chunks
                for t, b in pickle.loads(data)
                if t > base
            ]
            out[seq] = (base, batches)
        return out

    def count_rows(self, name: str) -> int:
        row = fetch_one(self.conn, f"SELECT count(*) FROM main.{quote_ident(name)}")
        return int(row[0]) if row else 0

    # -- contents and change log ----------------------------------------------------------------

    @staticmethod
    def read_table(con: duckdb.DuckDBPyConnection, name: str) -> list[Row]:
        # Canonical rows (one NaN object): rows are counted and compared as keys.
        table = f"main.{quote_ident(name)}"
        cur = con.execute(f"SELECT * FROM {table}")
        types = [(col[0], str(col[1])) for col in cur.description]
        rows: list[Row] = cur.fetchall()
        if any(not FLAT_TYPE.fullmatch(t) for _, t in types):
            return [canonical(tuple(r)) for r in rows]  # nested values: looked into row by row
        floats = [c for c, t in types if t in ("DOUBLE", "FLOAT")]
        if floats:
            # No row is looked at unless DuckDB finds a NaN or a -0.0 (the same transaction,
            # so the same contents): a table free of both has its rows canonical as fetched.
            nan = " OR ".join(f"isnan({quote_ident(c)}) OR ({quote_ident(c)} = 0 AND "
                              f"signbit({quote_ident(c)}))" for c in floats)
            found = fetch_one(con, f"SELECT count(*) FROM {table} WHERE {nan}")
            if found and found[0]:
                return [canonical(r) for r in rows]
        return rows

    def append_log(self, rec: TableRecord, ts: int, changes: Sequence[tuple[Row, int]]) -> None:
        self.append_log_at(rec, [(ts, changes)])

    def append_log_at(
        self, rec: TableRecord, batches: Sequence[tuple[int, Sequence[tuple[Row, int]]]]
    ) -> None:
        """Append (row, diff) changes at several timestamps to `rec`'s log in one statement
        (a group commit's writes)."""
        changes = [c for _, b in batches for c in b]
        if not changes:
            return
        types = [c["type"] for c in rec.columns]
        if len(changes) == 1:
            # One row (a single-row write): typed parameters bind in about two thirds of the
            # time of one-element lists, and cast each value to its column type the same way.
            (ts, _), ((row, diff),) = batches[0], changes
            casts = ", ".join(f"${i + 3}::{t}" for i, t in enumerate(types))
            self.conn.execute(
                f"INSERT INTO {log_table(rec.table_id)} VALUES ($1::BIGINT, $2::BIGINT, {casts})",
                [ts, diff, *row],
            )
            return
        stamps = [ts for ts, b in batches for _ in b]
        if len(changes) >= ARROW_LOG_ROWS and self._append_log_columns(rec, stamps, changes):
            return
        params: list[list[Any]] = [stamps, [d for _, d in changes]]
        params += [[row[i] for row, _ in changes] for i in range(len(types))]
        unnests = ["UNNEST($1::BIGINT[])", "UNNEST($2::BIGINT[])"] + [
            f"UNNEST(${i + 3}::{t}[])" for i, t in enumerate(types)
        ]
        self.conn.execute(
            f"INSERT INTO {log_table(rec.table_id)} SELECT {', '.join(unnests)}", params
        )

    def _append_log_columns(self, rec: TableRecord, stamps: list[int],
                            changes: Sequence[tuple[Row, int]]) -> bool:
        """`append_log_at`'s many rows as Arrow columns, each built with its column's exact
        Arrow type (no inference) and cast by DuckDB as the parameter path casts: for column
        types whose Python values Arrow holds exactly (`_LOG_ARROW`). False, having written
        nothing, for any other type or a value Arrow refuses (then the parameter path)."""
        import pyarrow as pa

        values = exact_arrow([c["type"] for c in rec.columns],
                             [[row[i] for row, _ in changes] for i in range(len(rec.columns))])
        if values is None:
            return False
        cols = [pa.array(stamps, pa.int64()), pa.array([d for _, d in changes], pa.int64())]
        cols += values
        names = [f"c{i}" for i in range(len(cols))]
        casts = ", ".join(f"CAST(c{i + 2} AS {c['type']})" for i, c in enumerate(rec.columns))
        self.conn.register(_SOURCE, pa.table(cols, names=names))
        try:
            self.conn.execute(
                f"INSERT INTO {log_table(rec.table_id)} SELECT c0, c1, {casts} "
                f"FROM temp.{_SOURCE}"
            )
        finally:
            self._unregister()
        return True

    def insert_arrow(self, rec: TableRecord, data: Any, columns: Sequence[str]) -> Any:
        """Insert the rows of Arrow table `data` into `rec`: its columns, by position, go to
        the table columns `columns`, cast by DuckDB to their types (the other columns are
        NULL). Returns the inserted rows as DuckDB stores them: an Arrow table with every column
        of the table, typed as the table's columns are (so the engine reads back the values an
        INSERT would give). DuckDB errors (casts, constraints) propagate."""
        where = {c: i for i, c in enumerate(columns)}
        select = []
        for c in rec.columns:
            src = quote_ident(c["name"]) if c["name"] in where else "NULL"
            select.append(f"CAST({src} AS {c['type']}) AS {quote_ident(c['name'])}")
        # each source column named as the column it loads, which DuckDB's cast errors name
        data = data.rename_columns(list(columns))
        self.conn.register(_SOURCE, data)
        try:
            cast = self.conn.sql(f"SELECT {', '.join(select)} FROM temp.{_SOURCE}")
            typed = _already_typed(rec, data, where, cast)
            if typed is None:
                typed = arrow_of(cast)
        finally:
            self._unregister()
        self.conn.register(_SOURCE, typed)
        try:
            self.conn.execute(
                f"INSERT INTO main.{quote_ident(rec.name)} SELECT * FROM temp.{_SOURCE}"
            )
        finally:
            self._unregister()
        return typed

    def append_log_arrow(self, rec: TableRecord, ts: int, rows: Any, diff: int = 1) -> None:
        """Log every row of Arrow table `rows` (typed as the table's rows: `insert_arrow`'s,
        a DML statement's RETURNING) with `diff` at `ts`, without passing them through Python
        one by one."""
        self.conn.register(_SOURCE, rows)
        try:
            self.conn.execute(
                f"INSERT INTO {log_table(rec.table_id)} SELECT {int(ts)}, {int(diff)}, * "
                f"FROM temp.{_SOURCE}"
            )
        finally:
            self._unregister()

    def same_rows(self, a: Any, b: Any) -> bool:
        """Whether Arrow tables `a` and `b` (rows of one table) hold the same rows as
        multisets, by DuckDB's equality (a NaN equals a NaN, -0.0 equals 0.0, as the rows'
        Python keys do)."""
        if a.num_rows != b.num_rows:
            return False
        self.conn.register(_SOURCE, a)
        self.conn.register(_OTHER, b)
        try:
            (row,) = self.conn.execute(
                f"SELECT count(*) FROM (SELECT * FROM temp.{_SOURCE} EXCEPT ALL "
                f"SELECT * FROM temp.{_OTHER})").fetchall()
        finally:
            self._unregister()
            try:
                self.conn.unregister(_OTHER)
            except duckdb.Error:
                pass
        return bool(row[0] == 0)

    def _unregister(self) -> None:
        try:
            self.conn.unregister(_SOURCE)
        except duckdb.Error:
            pass  # the transaction failed: `rollback` unregisters it

    def read_columns(self, rec: TableRecord, read: Collection[int] | None = None,
                     where: str | None = None) -> Any:
        """`read_columns` of this store's connection."""
        return read_columns(self.conn, rec, read, where)

    @staticmethod
    def exact_types(rec: TableRecord) -> bool:
        """Whether every column of `rec` has a type whose values Arrow converts as DuckDB
        gives them as Python values (`exact_columns` checks a table's values besides)."""
        return all(ARROW_EXACT.fullmatch(c["type"]) for c in rec.columns)

    @staticmethod
    def exact_columns(rec: TableRecord, table: Any) -> bool:
        """Whether the rows of Arrow table `table`, rows of `rec` as DuckDB gives them as Arrow
        (`read_arrow`, `insert_arrow`), are exactly the rows DuckDB gives as Python values:
        every column of a type Arrow converts alike, every DATE and TIMESTAMP within Python's
        range."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not Store.exact_types(rec):
            return False
        for c, col in zip(rec.columns, table.columns, strict=True):
            bounds = _PYTHON_RANGE.get(c["type"])
            if bounds is not None and col.null_count < len(col):
                if pa.types.is_timestamp(col.type) and (col.type.unit != "us" or col.type.tz):
                    return False
                mm = pc.min_max(col.cast(pa.int32() if pa.types.is_date32(col.type)
                                         else pa.int64()))
                if mm["min"].as_py() < bounds[0] or mm["max"].as_py() > bounds[1]:
                    return False
        return True

    def read_arrow(self, name: str) -> Any:
        """The contents of user table `name` as an Arrow table (the engine's bulk path)."""
        return arrow_of(self.conn.sql(f"SELECT * FROM main.{quote_ident(name)}"))

    def read_log(self, rec: TableRecord, after_ts: int) -> list[tuple[int, Row, int]]:
        """Changes of `rec` with timestamp > `after_ts`, in timestamp order."""
        rows = self.conn.execute(
            f"SELECT * FROM {log_table(rec.table_id)} WHERE __ts > ? ORDER BY __ts", [after_ts]
        ).fetchall()
        return [(r[0], canonical(tuple(r[2:])), r[1]) for r in rows]

    def trim_logs(self, tables: Iterable[TableRecord], horizon: int) -> None:
        """Forget changes at or before `horizon` (inside the writer's transaction)."""
        for rec in tables:
            self.conn.execute(f"DELETE FROM {log_table(rec.table_id)} WHERE __ts <= ?", [horizon])
        # Checkpointed view history at or before the horizon is forgotten with it.
        self.conn.execute("DELETE FROM diffsql.view_history WHERE through_ts <= ?", [horizon])
        self.set_meta("history_since", horizon)
