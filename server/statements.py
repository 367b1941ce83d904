"""The statements of a write, each applied inside the write's DuckDB transaction.

`apply` runs one statement of a write request against the `Write` (see `server.transaction`):
DDL (CREATE/DROP TABLE/VIEW) changes the write's provisional catalog and the store's catalog
tables; DML (INSERT/UPDATE/DELETE) runs in DuckDB with RETURNING, so the rows each statement
changed are captured as a delta of the table; COPY reads the file as Arrow (`server.bulkload`),
lets DuckDB cast and store the rows, logs them and writes the rows as stored to a Parquet file
that views are fed after COMMIT (`Write.loads`). A SELECT inside a write reads the state after
the statements before it.

Invariant: a statement changes only the write's transaction and the `Write`; an error in any of
them raises (with the statement's line and column) and the caller rolls everything back.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp

from engine.canonical import canonical
from planner.naming import FOLD
from server import bulkload
from server.catalog import (
    check_new_name,
    column_dicts,
    compile_statement,
    dependents,
    drop_targets,
    name_of,
    new_view_name,
    refuse_temporary,
)
from server.errors import (
    ApiError,
    Conflict,
    NotFound,
    SqlError,
    from_duckdb,
    undecodable_duckdb_error,
)
from server.hydration import post_contents
from server.queries import run_select, table_relation, view_relation
from server.sandbox import Relation, check_relations
from server.sqltext import Statement
from server.state import ServerState
from server.statistics import TableStatistics
from server.store import Store, TableRecord, ViewRecord, fetch_one, log_table
from server.transaction import Write, load_file
from server.values import normalize_type, quote_ident


def apply(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    """Apply write statement `s` (not a SELECT or EXPLAIN) to `w`; return its result."""
    handler = {
        "CREATE TABLE": create_table,
        "DROP TABLE": drop_table,
        "CREATE VIEW": create_view,
        "DROP VIEW": drop_view,
        "INSERT": dml,
        "UPDATE": dml,
        "DELETE": dml,
        "COPY": copy,
    }[s.kind]
    try:
        return handler(state, w, s)
    except ApiError as e:
        if e.line is None:
            e.line, e.column = s.line, s.column
        raise
    except duckdb.Error as e:
        raise from_duckdb(e, line=s.line, column=s.column, text=s.text) from None
    except UnicodeDecodeError as e:
        err = undecodable_duckdb_error(e)
        if err is None:
            raise
        raise from_duckdb(err, line=s.line, column=s.column) from None


# ---------------------------------------------------------------------- DDL


def create_table(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    ast = s.ast
    if ast.expression is not None:
        raise SqlError("CREATE TABLE ... AS SELECT is not supported", code="unsupported")
    if ast.args.get("replace"):
        raise SqlError("CREATE OR REPLACE TABLE is not supported", code="unsupported")
    refuse_temporary(ast, "TABLE", s)
    schema = ast.this
    if not isinstance(schema, exp.Schema):
        raise SqlError("CREATE TABLE needs a column list", code="syntax_error")
    name = name_of(schema.this, s)
    check_new_name(name, "table", s)
    if name in w.tables or name in w.views:
        if ast.args.get("exists") and name in w.tables:
            return {"statement": "CREATE TABLE", "name": name, "created": False}
        kind = "table" if name in w.tables else "view"
        raise Conflict(f"a {kind} named {name!r} already exists", code="already_exists")
    columns: list[dict[str, Any]] = []
    pk: list[str] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            cname = str(item.name).translate(FOLD)  # names are case-insensitive (ASCII): stored folded
            check_new_name(cname, "column", s)
            if any(c["name"] == cname for c in columns):
                raise SqlError(f"duplicate column {cname!r}", code="duplicate_column")
            kind = item.args.get("kind")
            if kind is None:
                raise SqlError(f"column {cname!r} needs a type", code="syntax_error")
            col = {"name": cname, "type": normalize_type(kind.sql("duckdb")), "nullable": True}
            for con in item.args.get("constraints") or []:
                ck = con.args.get("kind")
                if isinstance(ck, exp.NotNullColumnConstraint) and not ck.args.get(
                    "allow_null"
                ):
                    col["nullable"] = False
                elif isinstance(ck, exp.PrimaryKeyColumnConstraint):
                    if pk:
                        raise SqlError("more than one PRIMARY KEY", code="syntax_error")
                    pk.append(cname)
                else:
                    raise SqlError(
                        f"unsupported column constraint {con.sql('duckdb')!r}; "
                        "supported: NOT NULL, PRIMARY KEY",
                        code="unsupported",
                    )
            columns.append(col)
        elif isinstance(item, exp.PrimaryKey):
            if pk:
                raise SqlError("more than one PRIMARY KEY", code="syntax_error")
            pk = [str(e.name).translate(FOLD) for e in item.expressions]
        else:
            raise SqlError(
                f"unsupported table element {item.sql('duckdb')!r}", code="unsupported"
            )
    if not columns:
        raise SqlError("a table needs at least one column", code="syntax_error")
    by_folded = {c["name"].translate(FOLD): c for c in columns}
    for k in pk:
        if k.translate(FOLD) not in by_folded:
            raise SqlError(f"PRIMARY KEY column {k!r} is not a column", code="unknown_column")
        by_folded[k.translate(FOLD)]["nullable"] = False
    pk = [by_folded[k.translate(FOLD)]["name"] for k in pk]
    rec = TableRecord(name, w.next_table_id, columns, pk, w.ts)
    w.next_table_id += 1
    state.store.create_table(rec)
    w.tables[name] = rec
    return {"statement": "CREATE TABLE", "name": name, "created": True}


def drop_table(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    name = name_of(drop_targets(s)[0], s)
    if name not in w.tables:
        if name in w.views:
            raise SqlError(f"{name!r} is a view; use DROP VIEW", code="wrong_object_type")
        if s.ast.args.get("exists"):
            return {"statement": "DROP TABLE", "name": name, "dropped": False}
        raise SqlError(f"unknown table {name!r}", code="unknown_table")
    deps = dependents(w.views, name)
    if deps:
        raise Conflict(
            f"cannot drop table {name!r}: views {', '.join(deps)} depend on it",
            code="dependent_objects",
        )
    rec = w.tables.pop(name)
    state.store.drop_table(rec)
    # its change log is gone: the entries this write queued for it go too
    w.arrow_logs = [x for x in w.arrow_logs if x[0].table_id != rec.table_id]
    w.deltas.pop(name, None)
    w.loads.pop(name, None)
    w.load_counts.pop(name, None)
    w.unloads.pop(name, None)
    w.unload_counts.pop(name, None)
    w.written.discard(name)
    w.dropped_tables.append(name)
    return {"statement": "DROP TABLE", "name": name, "dropped": True}


def create_view(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    """Plan the view and record it; it is computed (hydrated) before COMMIT by
    `server.hydration.hydrate_new_views`."""
    name, exists = new_view_name(s, w.tables, w.views)
    if exists:
        return {"statement": "CREATE VIEW", "name": name, "created": False}
    stats = TableStatistics.of(state.store.conn, w.tables, state.distinct_cache)
    compiled = compile_statement(s, name, w.tables, w.views, state.settings.iteration_limit,
                                 stats)
    deps = [str(d).translate(FOLD) for d in compiled.dependencies]
    for d in deps:
        if d not in w.tables and d not in w.views:
            raise SqlError(f"unknown table or view {d!r}", code="unknown_table")
    rec = ViewRecord(name, w.next_seq, s.text, column_dicts(compiled.columns), deps, w.ts)
    w.next_seq += 1
    state.store.create_view(rec)
    w.views[name] = rec
    w.new_views[name] = compiled
    w.created_at[name] = (s.line, s.column)
    return {"statement": "CREATE VIEW", "name": name, "created": True}


def drop_view(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    name = name_of(drop_targets(s)[0], s)
    if name not in w.views:
        if name in w.tables:
            raise SqlError(f"{name!r} is a table; use DROP TABLE", code="wrong_object_type")
        if s.ast.args.get("exists"):
            return {"statement": "DROP VIEW", "name": name, "dropped": False}
        raise NotFound(f"unknown view {name!r}", code="unknown_view", status=400)
    deps = dependents(w.views, name)
    if deps:
        raise Conflict(
            f"cannot drop view {name!r}: views {', '.join(deps)} depend on it",
            code="dependent_objects",
        )
    del w.views[name]
    state.store.drop_view(name, w.ts)
    if name in w.new_views:
        del w.new_views[name]
    else:
        w.dropped_views.append(name)
    return {"statement": "DROP VIEW", "name": name, "dropped": True}


# ---------------------------------------------------------------------- DML


def dml(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    """INSERT, UPDATE or DELETE: run in DuckDB, the changed rows captured with RETURNING
    into the table's delta (an UPDATE also reads the old rows it matches first)."""
    target = None if s.plain is not None else _target(s.ast)
    name = _dml_table(w, s, target)
    con = state.store.conn
    if s.kind == "UPDATE":
        assert target is not None
        count = _update(state, w, s, name, target)
    else:
        sign = 1 if s.kind == "INSERT" else -1
        count, rows = _take_rows(state, w, name, con.execute(_returning_all(s)), sign)
        if rows is not None:
            _attach(state, w, name, rows, sign)
    w.written.add(name)
    return {"statement": s.kind, "rowcount": count}


# The temporary table holding the rowids of the rows an UPDATE may change (`_update`).
_UPDATED = "__diffsql_updated"


def _update(state: ServerState, w: Write, s: Statement, name: str, target: exp.Table) -> int:
    """An UPDATE: its rows' old values out of the table's delta, their new values in; returns
    the rows updated.

    An UPDATE without a FROM whose WHERE is deterministic (no `random()`, no UUID, no
    TABLESAMPLE or USING SAMPLE) finds
    its old rows with its own WHERE, and takes its new ones from `RETURNING`. Any other
    finds the rows its FROM and WHERE match once, keeps their rowids (`_UPDATED`), and
    runs on those rows only (its WHERE and them), so a WHERE that is not
    deterministic (`random()`) cannot change rows other than those taken out. The new
    values are read back from the table by those rowids, not taken from `RETURNING`: when a
    row matches several rows of the FROM, DuckDB's `RETURNING` gives it once for each match,
    with each match's values, while the table keeps one of them. An UPDATE that assigns a
    primary key column moves its rows to new rowids (DuckDB deletes and inserts them), so
    its new values come from `RETURNING` (there DuckDB applies one match of a row that
    matches several, and returns it once), and it is refused unless it changed every row it
    matched."""
    ast = s.ast
    for e in ast.expressions:
        # `SET c = DEFAULT`: sqlglot reads the keyword as a column, which it renders quoted
        # ("DEFAULT", a column DuckDB does not find)
        v = e.expression if isinstance(e, exp.EQ) else None
        if isinstance(v, exp.Column) and not v.table and not v.this.quoted and \
                v.name.upper() == "DEFAULT":
            v.replace(exp.Var(this="DEFAULT"))
    con = state.store.conn
    alias = quote_ident(target.alias_or_name)
    table = f"main.{quote_ident(name)}"
    old_q = f"SELECT {alias}.rowid FROM {target.sql('duckdb')}"
    with_ = ast.args.get("with_") or ast.args.get("with")
    if with_ is not None:  # the FROM and WHERE may name its CTEs
        old_q = f"{with_.sql('duckdb')} {old_q}"
    frm = ast.args.get("from_") or ast.args.get("from")
    if frm is not None:
        old_q += f", {frm.this.sql('duckdb')}"
    where = ast.args.get("where")
    if where is not None:
        old_q += f" WHERE {where.this.sql('duckdb')}"
    if frm is None and all(p is None or p.find(exp.Rand, exp.Uuid, exp.TableSample) is None
                           for p in (where, with_)):
        # Each row matches once, and the WHERE gives the same rows twice: its old rows are
        # the rows it matches, its new ones what RETURNING gives, without keeping rowids
        _, old = _take_rows(state, w, name, con.execute(
            f"SELECT * FROM {table} WHERE rowid IN ({old_q})"), -1)
        count, new = _take_rows(state, w, name, con.execute(_returning_all(s)), 1)
        _attach_changes(state, w, name, old, new)
        return count
    # Made inside the transaction: a failed statement's rollback drops it with the rest
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_UPDATED} AS "
                f"SELECT DISTINCT rowid AS r FROM {table} WHERE rowid IN ({old_q})")
    matched = fetch_one(con, f"SELECT count(*) FROM temp.{_UPDATED}")[0]  # type: ignore[index]
    by_rowid = f"SELECT * FROM {table} WHERE rowid IN (SELECT r FROM temp.{_UPDATED})"
    _, old = _take_rows(state, w, name, con.execute(by_rowid), -1)
    only = exp.condition(f"{alias}.rowid IN (SELECT r FROM temp.{_UPDATED})")
    ast.set("where", exp.Where(this=exp.and_(where.this, only) if where is not None else only))
    try:
        keys = set(w.tables[name].primary_key)
        moves = any(e.this.name.translate(FOLD) in keys for e in ast.expressions
                    if isinstance(e, exp.EQ) and isinstance(e.this, exp.Column))
        if moves:
            count, new = _take_rows(state, w, name, con.execute(_returning_all(s)), 1)
            if count != matched:
                raise SqlError(
                    f"an UPDATE of the primary key of {name!r} must change every row its "
                    f"WHERE matches: it matched {matched} rows and changed {count} (a WHERE "
                    "that is not deterministic, such as random())", code="ambiguous_update",
                    line=s.line, column=s.column)
        else:
            count = min(matched, fetch_one(con, ast.sql("duckdb"))[0])  # type: ignore[index]
            _, new = _take_rows(state, w, name, con.execute(by_rowid), 1)
    finally:
        ast.set("where", where)
    con.execute(f"DROP TABLE temp.{_UPDATED}")
    _attach_changes(state, w, name, old, new)
    return count


def _attach_changes(state: ServerState, w: Write, name: str, old: Any, new: Any) -> None:
    """`_attach` an UPDATE's old and new rows past the first `DML_ROWS` (`_take_rows`)."""
    if old is not None and new is not None and state.store.same_rows(old, new):
        old = new = None  # the rows past the first are as they were: no change
    for rows, sign in ((old, -1), (new, 1)):
        if rows is not None:
            _attach(state, w, name, rows, sign)


# A DML statement's changed rows past this many go as columns (`_take_rows`).
DML_ROWS = 4096
# `_take_rows` fetches the rows past DML_ROWS as Arrow from a DB-API result, which DuckDB
# warns makes an extra copy of them; its relation API, which would not, could run the
# statement a second time.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result",
                        category=UserWarning)


def _take_rows(state: ServerState, w: Write, name: str, result: Any, sign: int
               ) -> tuple[int, Any]:
    """Take the rows of a DML statement's `result` (inserted with `sign` 1, deleted with -1):
    the first `DML_ROWS` into the table's delta as Python rows (a write of a few rows pays
    for nothing else); the rest, where the executor is in this process and every column's
    type converts exactly through Arrow (`Store.exact_types`), fetched as one Arrow table,
    returned for `_attach` (no Python tuple per row), else into the delta too. Returns
    (rows taken, the Arrow table or None)."""
    delta = w.deltas[name]
    first = result.fetchmany(DML_ROWS)
    for r in first:
        delta[canonical(tuple(r))] += sign
    if len(first) < DML_ROWS:
        return len(first), None
    rec = w.tables[name]
    if state.settings.executor != "spark" and Store.exact_types(rec):
        rest = result.to_arrow_table()
        if not Store.exact_columns(rec, rest):
            # a DATE or TIMESTAMP outside years 1-9999, which the table's CHECK constraints
            # refuse: no stored row holds one
            raise SqlError(f"a row of {name!r} holds a date outside years 1-9999",
                           code="out_of_range")
        return len(first) + rest.num_rows, rest if rest.num_rows else None
    n = len(first)
    for r in result.fetchall():
        delta[canonical(tuple(r))] += sign
        n += 1
    return n, None


def _attach(state: ServerState, w: Write, name: str, rows: Any, sign: int) -> None:
    """Queue the Arrow table `rows` of table `name`'s changed rows for its change log with diff
    `sign` (`Write.arrow_logs`: DuckDB appends them in one statement just before COMMIT), and
    hand them to the views as columns (`Write.loads`, or `Write.unloads` for deletions)."""
    w.arrow_logs.append((w.tables[name], w.ts, rows, sign))
    if sign > 0:
        w.loads[name].append(rows)
        w.load_counts[name] += rows.num_rows
    else:
        w.unloads[name].append(rows)
        w.unload_counts[name] += rows.num_rows


def _target(ast: exp.Expression) -> exp.Expression:
    """The table a DML statement names (without an INSERT's column list)."""
    return ast.this.this if isinstance(ast.this, exp.Schema) else ast.this


def _dml_table(w: Write, s: Statement, target: exp.Expression | None) -> str:
    """The table a DML statement writes, after the checks every DML statement passes before it
    runs (a table, not a view; no RETURNING or upsert of its own; only the relations and
    functions the sandbox allows). `target` is None for a plain INSERT (`s.plain`)."""
    name = s.plain.table.translate(FOLD) if s.plain is not None else name_of(target, s)
    if name in w.views:
        raise SqlError(f"{name!r} is a view; views are read-only", code="read_only_view")
    if name not in w.tables:
        raise SqlError(f"unknown table {name!r}", code="unknown_table")
    if s.plain is not None:
        # literals into a plain name: no RETURNING, no upsert, no relation or function read
        return name
    ast = s.ast
    if ast.args.get("returning"):
        raise SqlError("RETURNING is not supported", code="unsupported")
    if isinstance(ast, exp.Insert):
        conflict = ast.args.get("conflict")
        # INSERT OR IGNORE is ON CONFLICT DO NOTHING: its RETURNING gives the rows inserted
        alternative = str(ast.args.get("alternative") or "").upper()
        if alternative not in ("", "IGNORE") or (
            conflict is not None
            and not conflict.args.get("doing_nothing")
            and "NOTHING" not in conflict.sql("duckdb").upper()
        ):
            raise SqlError(
                "INSERT OR REPLACE / ON CONFLICT DO UPDATE is not supported; "
                "use UPDATE, or ON CONFLICT DO NOTHING (INSERT OR IGNORE)",
                code="unsupported",
            )
    used = check_relations(
        ast,
        list(w.tables) + list(w.views),
        root_allowed=(type(ast),),
        line=s.line,
        column=s.column,
    )
    read_views = [u for u in used if u in w.views]
    if read_views:
        raise SqlError(
            f"reading views ({', '.join(read_views)}) inside {s.kind} is not supported; "
            "read the view in a separate request",
            code="unsupported",
        )
    return name


def _returning_all(s: Statement) -> str:
    """The statement's DuckDB text with `RETURNING *` (it has no RETURNING of its own).

    An `INSERT ... VALUES` is the request's own text with the clause appended on a new line
    (after any trailing `--` comment): DuckDB parses what the user wrote, and a single-row
    write does not pay for rendering the tree again (about a tenth of its time). Anything else
    is rendered from the tree, the clause set on the statement for the rendering only, not on
    a copy: a deep copy of the tree cost more than the rest of a single-row INSERT's planning."""
    if s.plain is not None:
        return f"{s.text.rstrip()}\nRETURNING *"
    ast = s.ast
    if isinstance(ast, exp.Insert) and isinstance(ast.expression, exp.Values) and not (
            ast.args.get("with_") or ast.args.get("with") or ast.args.get("conflict")):
        return f"{s.text.rstrip()}\nRETURNING *"
    ast.set("returning", exp.Returning(expressions=[exp.Star()]))
    try:
        return ast.sql("duckdb")
    finally:
        ast.set("returning", None)



# ---------------------------------------------------------------------- combined INSERTs

# The most rows one combined INSERT carries: one DuckDB vector, so its VALUES are scanned as
# one chunk and its RETURNING rows come back as that chunk, in the order of the VALUES.
COMBINED_ROWS = 2048
# Nodes that would make a VALUES list read the database (or fail only when combined): a
# request holding one is never combined, so it sees exactly the requests before it.
_NOT_LITERAL = (exp.Select, exp.Subquery, exp.Table, exp.Column, exp.Placeholder,
                exp.Parameter, exp.Star)


@dataclass(frozen=True)
class Combinable:
    """A single-statement `INSERT INTO target VALUES ...` request, ready to be combined with
    others into the same target: the target as rendered, its rows as rendered, how many."""

    target: str
    values: str
    rows: int


def combinable(stmts: list[Statement]) -> Combinable | None:
    """`Combinable` for a request that is one plain `INSERT ... VALUES` of rows that read
    nothing (literals, casts, arithmetic, functions of them); None for anything else."""
    if len(stmts) != 1 or stmts[0].kind != "INSERT":
        return None
    plain = stmts[0].plain
    if plain is not None:
        # plain literals (`sqltext.plain_insert`): the rows as the user wrote them, which
        # DuckDB reads as it reads the request alone (`_returning_all` runs that text too)
        return Combinable(plain.table, plain.values, plain.rows) if (
            plain.rows <= COMBINED_ROWS) else None
    ast = stmts[0].ast
    values = ast.expression
    if not isinstance(ast, exp.Insert) or not isinstance(values, exp.Values):
        return None
    if any(v for k, v in ast.args.items() if k not in ("this", "expression")):
        return None  # WITH, ON CONFLICT, BY NAME, OR REPLACE, DEFAULT VALUES, ...
    rows = values.expressions
    if not rows or len(rows) > COMBINED_ROWS or values.find(*_NOT_LITERAL) is not None:
        return None
    return Combinable(ast.this.sql("duckdb"), ", ".join(r.sql("duckdb") for r in rows),
                      len(rows))


def insert_combined(
    state: ServerState, ws: list[Write], stmts: list[Statement], parts: list[Combinable]
) -> list[dict[str, Any]]:
    """Run combinable INSERT requests into one target (`parts`, at most `COMBINED_ROWS` rows
    in all) as one DuckDB statement, request k's rows credited to its own write `ws[k]`.

    Equivalent to running them one after another: their VALUES read nothing, so no request
    sees another's rows, and the statement fails (raising, for the caller to run them one by
    one) exactly when one of them would (a cast, a NOT NULL, a duplicate key, also between
    two of them). The statement's checks are each request's own (`_dml_table`)."""
    names = {_dml_table(w, s, None if s.plain is not None else _target(s.ast))
             for w, s in zip(ws, stmts, strict=True)}
    (name,) = names  # one target text names one table
    text = f"INSERT INTO {parts[0].target} VALUES {', '.join(p.values for p in parts)}\nRETURNING *"
    # The rows are logged in the same statement: the change log is written from the rows the
    # INSERT returns (a data-modifying WITH), each at its request's timestamp, and the log's
    # own RETURNING gives them back after the timestamp and diff. One DuckDB statement
    # instead of two (the second cost a single-row write about 1.5 ms, a group of eight 3 ms).
    stamps = [int(w.ts) for w, p in zip(ws, parts, strict=True) for _ in range(p.rows)]
    if len(parts) == 1:
        stamp = str(stamps[0])
    else:
        # Row i of the statement's VALUES is request k's: its timestamp is the i-th of
        # `stamps` (`COMBINED_ROWS`: the rows flow in the order of the VALUES, one chunk).
        stamp = f"[{', '.join(map(str, stamps))}][row_number() OVER ()]"
    log = log_table(ws[0].tables[name].table_id)
    text = (f"WITH __diffsql_rows AS ({text})\nINSERT INTO {log} "
            f"SELECT {stamp}, 1, * FROM __diffsql_rows RETURNING *")
    try:
        logged = state.store.conn.execute(text).fetchall()
    except duckdb.Error as e:
        raise from_duckdb(e) from None
    rows = [r[2:] for r in logged]
    if len(parts) == 1:
        # Every row returned is the request's, and the statement may have committed by
        # itself (`writes._try_group`): nothing here may fail it after the fact.
        counts = [len(rows)]
    else:
        # In a transaction (requests combined never run alone): on a failure here the
        # caller rolls back and runs them one by one.
        if [r[0] for r in logged] != stamps:
            raise RuntimeError(f"a combined INSERT of {len(stamps)} rows returned {len(rows)}"
                               " rows, or returned them out of the order of its VALUES")
        counts = [p.rows for p in parts]
    for w in ws:
        w.logged.add(name)
    results = []
    at = 0
    for w, n in zip(ws, counts, strict=True):
        delta = w.deltas[name]
        for r in rows[at : at + n]:
            delta[canonical(tuple(r))] += 1
        at += n
        w.written.add(name)
        results.append({"statement": "INSERT", "rowcount": n})
    return results

# ---------------------------------------------------------------------- COPY


def copy(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    """COPY <table> [(columns)] FROM '<path>' [(options)]: a bulk load. The rows go from the
    file (as Arrow) into DuckDB and, just before COMMIT, its change log; views are fed the
    rows as stored, as columns (a Parquet file of them for Spark, or where a type does not
    convert exactly through Arrow), while the COMMIT runs (`server.committer`); so the rows
    of a load never pass through this process one by one."""
    ast = s.ast
    if not ast.args.get("kind"):
        raise SqlError(
            "COPY ... TO is not supported: the server writes no files; read a view with "
            "GET /views/{name}/rows or query with POST /query",
            code="unsupported",
        )
    target = ast.this
    listed: list[str] | None = None
    if isinstance(target, exp.Schema):
        listed = [str(e.name).translate(FOLD) for e in target.expressions]
        target = target.this
    name = name_of(target, s)
    if name in w.views:
        raise SqlError(f"{name!r} is a view; views are read-only", code="read_only_view")
    if name not in w.tables:
        raise SqlError(f"unknown table {name!r}", code="unknown_table")
    spec = bulkload.parse_copy(ast)
    if state.import_root is None:
        raise ApiError(
            "COPY FROM is disabled: the server has no import directory (it keeps no data "
            "directory); start it with --import-dir",
            code="import_disabled",
            status=403,
        )
    master = state.settings.spark_master or "local"
    if state.settings.executor == "spark" and state.own_loads and not master.startswith("local"):
        # Load files would sit on this host's disk, where the cluster's workers cannot read
        # them after COMMIT: refuse before anything is applied.
        raise ApiError(
            "COPY FROM on a Spark cluster needs a data directory the workers share (the "
            "server keeps none: it runs with --memory)",
            code="import_disabled",
            status=403,
        )
    rec = w.tables[name]
    names = [c["name"] for c in rec.columns]
    columns = listed if listed is not None else names
    for c in columns:
        if c not in names:
            raise SqlError(f"table {name!r} has no column {c!r}", code="unknown_column")
    if len(set(columns)) != len(columns):
        raise SqlError("a column is named twice in the COPY column list",
                       code="duplicate_column")
    stored = []
    for path in bulkload.resolve_paths(state.import_root, spec.path):
        data = bulkload.read_file(spec, path, state.import_root)
        shown = os.path.relpath(path, state.import_root)
        if data.num_columns == 0 and data.num_rows == 0:
            continue  # an empty CSV file
        if data.num_columns != len(columns):
            raise SqlError(
                f"{shown!r} has {data.num_columns} columns but COPY into {name!r} expects "
                f"{len(columns)} ({', '.join(columns)}); columns match by position",
                code="column_count_mismatch",
            )
        if data.num_rows == 0:
            continue
        try:
            stored.append(state.store.insert_arrow(rec, data, columns))
        except duckdb.Error as e:
            err = from_duckdb(e, line=s.line, column=s.column)
            err.message = f"COPY {name} from {shown!r}: {err.message}"
            raise err from None
    count = sum(t.num_rows for t in stored)
    if count:
        import pyarrow as pa

        rows = pa.concat_tables(stored) if len(stored) > 1 else stored[0]
        w.arrow_logs.append((rec, w.ts, rows, 1))
        if state.settings.executor != "spark" and Store.exact_columns(rec, rows):
            w.loads[name].append(rows)  # views in this process read the columns themselves
        else:
            w.loads[name].append(load_file(state, w, rec, rows))
        w.load_counts[name] += count
        w.written.add(name)
    return {"statement": "COPY", "rowcount": count}


# ---------------------------------------------------------------------- SELECT


def select_in_write(state: ServerState, w: Write, s: Statement) -> dict[str, Any]:
    """A SELECT of a write request, over the state after the statements before it (inside
    the transaction: an error in it rolls back the whole request)."""
    used = check_relations(s.ast, list(w.tables) + list(w.views), line=s.line, column=s.column)
    rels: dict[str, Relation] = {}
    for u in used:
        if u in w.tables:
            cols = [(c["name"], c["type"]) for c in w.tables[u].columns]
            # as Arrow where the types allow, as /query reads it (Python rows are canonical:
            # they lost a -0.0's sign and a NaN's)
            rels[u] = table_relation(state.store.conn, u, cols)
        else:
            rels[u] = view_relation(w.views[u].columns, post_contents(state, w, u, w.trial).items())
    return run_select(state, s, rels)
