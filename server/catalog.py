"""The catalog: table and view records, the names they may have, and their plans.

Invariants: a name names at most one table or view; names are stored lower-case, contain no
NUL byte and are at most `MAX_NAME_LENGTH` characters; a view's record names every relation it
reads (`dependencies`), each of which exists and was created before it (lower `seq`), so
a table or view that another view reads cannot be dropped. The planner sees the catalog only
through `planner_catalog`, built from the records; every plan error becomes a `SqlError` with
the statement's line and column (`compile_statement`).

This module also answers the metadata reads (`GET /tables`, `GET /views`, EXPLAIN of a view),
which read the records under the state lock.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from sqlglot import exp

from planner.naming import FOLD
from server.errors import ApiError, Conflict, Forbidden, NotFound, SqlError
from server.sqltext import Statement
from server.state import ServerState
from server.store import TableRecord, ViewRecord
from server.views import MaintainedView

# The longest table, view or column name accepted (in characters), as in PostgreSQL's
# NAMEDATALEN spirit but generous: a view's name must fit in a URL path.
MAX_NAME_LENGTH = 255


def planner() -> Any:
    """The planner package, imported on first use (it is heavy, and the engine never needs it)."""
    import planner

    return planner


def column_dicts(columns: Any) -> list[dict[str, Any]]:
    """A view's columns as stored: name, type (None if the planner does not know) and
    nullability, from the planner's column objects (or dicts, or bare names)."""
    out = []
    for c in columns:
        if isinstance(c, str):
            out.append({"name": c, "type": None, "nullable": True})
        elif isinstance(c, dict):
            out.append(
                {"name": c["name"], "type": c.get("type"), "nullable": c.get("nullable", True)}
            )
        else:
            out.append(
                {
                    "name": str(c.name),
                    "type": getattr(c, "type", None),
                    "nullable": bool(getattr(c, "nullable", True)),
                }
            )
    return out


def infer_type(values: list[Any]) -> str:
    """A DuckDB type for a column of untyped values (the first non-NULL value decides)."""
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            return "BOOLEAN"
        if isinstance(v, int):
            return "BIGINT"
        if isinstance(v, float):
            return "DOUBLE"
        if isinstance(v, decimal.Decimal):
            return "DECIMAL(38,10)"
        if isinstance(v, datetime.datetime):
            return "TIMESTAMP"
        if isinstance(v, datetime.date):
            return "DATE"
        return "VARCHAR"
    return "VARCHAR"


def planner_catalog(
    tables: dict[str, TableRecord], views: dict[str, ViewRecord], statistics: Any = None
) -> Any:
    """The planner's view of the catalog records (and of the tables' contents, through
    `server.statistics.TableStatistics`, when given: it orders joins)."""
    p = planner()

    def cols(cs: list[dict[str, Any]]) -> list[Any]:
        return [p.Column(c["name"], c["type"] or "VARCHAR", c["nullable"]) for c in cs]

    return p.Catalog(
        tables={
            n: p.TableSchema(n, cols(t.columns), primary_key=list(t.primary_key))
            for n, t in tables.items()
        },
        views={n: p.ViewDef(n, v.sql, cols(v.columns)) for n, v in views.items()},
        statistics=statistics,
    )


def record(view: MaintainedView) -> ViewRecord:
    """The catalog record of a maintained view."""
    return ViewRecord(
        view.name, view.seq, view.sql, view.columns, view.dependencies, view.created_ts
    )


# ---------------------------------------------------------------------- names


def name_of(table: exp.Expression, s: Statement) -> str:
    """The (lower-case) name a statement gives a table or view; qualified names are refused."""
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise SqlError("expected a table name", line=s.line, column=s.column)
    if table.args.get("db") or table.args.get("catalog"):
        raise Forbidden(
            f"qualified name {table.sql()} is not allowed", line=s.line, column=s.column
        )
    return str(table.name).translate(FOLD)


# The prefix of the names of the server's own tables in the store.
RESERVED_PREFIX = "__diffsql"


def check_new_name(name: str, what: str, s: Statement) -> None:
    """Refuse a name for a new table, view or column that could not be used safely: one
    with a NUL byte (cut short by C strings and refused in URLs), a table or view name with
    a `/` (its URLs, `/views/{name}/rows`, could not name it: the path is split at an
    escaped `%2F` too), or longer than `MAX_NAME_LENGTH` characters (too long to address in
    a URL)."""
    if "\x00" in name:
        raise SqlError(
            f"{what} names cannot contain NUL bytes", code="invalid_name",
            line=s.line, column=s.column,
        )
    if "/" in name and what != "column":
        raise SqlError(
            f"{what} names cannot contain '/': a {what} is named in URL paths "
            f"(/{what}s/{{name}})", code="invalid_name", line=s.line, column=s.column,
        )
    if len(name) > MAX_NAME_LENGTH:
        raise SqlError(
            f"{what} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}",
            code="name_too_long", line=s.line, column=s.column,
        )
    if what != "column" and name.startswith(RESERVED_PREFIX):
        # the server's own temporary tables in the store (an UPDATE's rowids, `/query`'s
        # relations) are named so: a user table of that name would be confused with them
        raise SqlError(
            f"{what} names starting with {RESERVED_PREFIX!r} are reserved for the server",
            code="invalid_name", line=s.line, column=s.column,
        )
    if what == "column" and name == "rowid":
        # DuckDB's row id, by which an UPDATE finds the rows it changed: a column of that
        # name would hide it, and the UPDATE would take other rows for them
        raise SqlError(
            "a column cannot be named rowid: it is DuckDB's row id, which the server reads",
            code="invalid_name", line=s.line, column=s.column,
        )


def refuse_temporary(ast: exp.Expression, what: str, s: Statement) -> None:
    """Every table and view is durable: a TEMP one is refused rather than silently made
    durable."""
    props = ast.args.get("properties")
    if props is not None and any(
        isinstance(p, exp.TemporaryProperty) for p in props.expressions
    ):
        raise SqlError(
            f"CREATE TEMP {what} is not supported: every {what.lower()} is durable; "
            f"use CREATE {what} (and DROP {what} when done)",
            code="unsupported", line=s.line, column=s.column,
        )


def new_view_name(
    s: Statement, tables: dict[str, TableRecord], views: dict[str, ViewRecord]
) -> tuple[str, bool]:
    """The name a CREATE VIEW statement gives its view, after the refusals CREATE VIEW makes
    (OR REPLACE, TEMP, a name `check_new_name` refuses, a name taken: 409 unless IF NOT
    EXISTS names a view); and whether that view exists already. EXPLAIN CREATE VIEW makes
    the same checks, so that it plans exactly what CREATE VIEW would create."""
    ast = s.ast
    if ast.args.get("replace"):
        raise SqlError("CREATE OR REPLACE VIEW is not supported", code="unsupported",
                       line=s.line, column=s.column)
    refuse_temporary(ast, "VIEW", s)
    target = ast.this
    if isinstance(target, exp.Schema):  # CREATE VIEW v(c1, c2): the planner renames
        target = target.this
    name = name_of(target, s)
    check_new_name(name, "view", s)
    if name in tables or name in views:
        if ast.args.get("exists") and name in views:
            return name, True
        kind = "table" if name in tables else "view"
        raise Conflict(f"a {kind} named {name!r} already exists", code="already_exists")
    return name, False


def drop_targets(s: Statement) -> list[exp.Expression]:
    """The one name a DROP statement names (CASCADE and lists are refused)."""
    if s.ast.args.get("cascade"):
        raise SqlError(
            "DROP ... CASCADE is not supported; drop dependent views first", code="unsupported"
        )
    targets = list(s.ast.args.get("tables") or [])
    if not targets and s.ast.this is not None:
        targets = [s.ast.this]
    if len(targets) != 1:
        raise SqlError("DROP takes exactly one name", code="unsupported")
    return targets


def dependents(views: dict[str, ViewRecord], name: str) -> list[str]:
    """The views that read relation `name` directly."""
    return [v.name for v in views.values() if name in v.dependencies]


# ---------------------------------------------------------------------- plans


def compile_statement(
    s: Statement,
    name: str | None,
    tables: dict[str, TableRecord],
    views: dict[str, ViewRecord],
    iteration_limit: int,
    statistics: Any = None,
) -> Any:
    """Plan the view (or query) of statement `s` against a catalog of tables and views (and
    the tables' statistics, which order its joins)."""
    p = planner()
    try:
        return p.compile_view(
            s.text,
            planner_catalog(tables, views, statistics),
            name=name,
            iteration_limit=iteration_limit,
        )
    except p.PlanError as e:
        line, col = s.locate(getattr(e, "line", None), getattr(e, "column", None))
        raise SqlError(
            str(getattr(e, "message", None) or e),
            code=str(getattr(e, "code", None) or "plan_error"),
            line=line,
            column=col,
        ) from None
    except ApiError:
        raise
    except RecursionError:
        raise SqlError(
            "the view is too complex: nested too deeply",
            code="too_complex",
            line=s.line,
            column=s.column,
        ) from None
    except Exception as e:  # noqa: BLE001 - a planner bug must not take the server down
        raise SqlError(f"cannot plan view {name!r}: {e}", code="unsupported") from None


def explain(
    s: Statement,
    tables: dict[str, TableRecord],
    views: dict[str, ViewRecord],
    iteration_limit: int,
    statistics: Any = None,
) -> dict[str, Any]:
    """EXPLAIN CREATE VIEW / EXPLAIN SELECT: the plan the view would have (given the same
    statistics); nothing is created."""
    inner = s.inner
    assert inner is not None
    name: str | None = None
    if inner.kind == "CREATE VIEW":
        name, _ = new_view_name(inner, tables, views)
    compiled = compile_statement(inner, name, tables, views, iteration_limit, statistics)
    return {
        "statement": "EXPLAIN",
        "name": name,
        "plan": str(compiled.explain()),
        "view_columns": column_dicts(compiled.columns),
        "dependencies": [str(d).translate(FOLD) for d in compiled.dependencies],
    }


# ---------------------------------------------------------------------- metadata reads


def table_list(state: ServerState) -> list[dict[str, Any]]:
    with state.state_lock:
        return [_table_info(state, n) for n in sorted(state.tables)]


def table_info(state: ServerState, name: str) -> dict[str, Any]:
    with state.state_lock:
        if name.translate(FOLD) not in state.tables:
            raise NotFound(f"unknown table {name!r}", code="unknown_table")
        return _table_info(state, name.translate(FOLD))


def _table_info(state: ServerState, name: str) -> dict[str, Any]:
    rec = state.tables[name]
    return {
        "name": name,
        "columns": rec.columns,
        "primary_key": rec.primary_key,
        "row_count": state.row_counts.get(name, 0),
        "created_timestamp": rec.created_ts,
        "timestamp": state.completed_ts,
    }


def view_list(state: ServerState) -> list[dict[str, Any]]:
    with state.state_lock:
        return [_view_info(state, n) for n in sorted(state.views)]


def view_info(state: ServerState, name: str) -> dict[str, Any]:
    with state.state_lock:
        if name.translate(FOLD) not in state.views:
            raise NotFound(f"unknown view {name!r}", code="unknown_view")
        return _view_info(state, name.translate(FOLD))


def _view_info(state: ServerState, name: str) -> dict[str, Any]:
    v = state.views[name]
    return {
        "name": name,
        "sql": v.sql,
        "columns": v.columns,
        "dependencies": v.dependencies,
        "status": v.status,
        "error": v.error,
        "created_timestamp": v.created_ts,
        "complete_through": v.complete_ts,
        "history_since": v.base_ts,
        "row_count": v.row_count if v.running else None,
        "arrangements": _arrangements(state, v),
    }


def _arrangements(state: ServerState, v: MaintainedView) -> dict[str, Any]:
    """`v`'s arrangement statistics, counted now if its dataflow ran since they last were.

    Counting them walks every arrangement of the view, which cost a tenth of publishing a
    single-row write when every write did it; now a read that asks for them does. The
    dataflows are the writer's: they are counted only while no write runs (the write lock
    taken without waiting, so a read never waits for a write); during one, the figures are
    those of the last count."""
    if v.stats_stale and v.df is not None and state.write_lock.acquire(blocking=False):
        try:
            v.refresh_stats()
        finally:
            state.write_lock.release()
    return v.arrangement_summary()


def explain_view(state: ServerState, name: str) -> str:
    """The plan of an existing view, as EXPLAIN prints it."""
    if name.translate(FOLD) in state.views:
        state.require_ready()
    with state.state_lock:
        v = state.views.get(name.translate(FOLD))
        if v is None:
            raise NotFound(f"unknown view {name!r}", code="unknown_view")
        if v.compiled is None:
            raise Conflict(f"view {name!r} has no plan: {v.error}", code="view_failed")
        return str(v.compiled.explain())
