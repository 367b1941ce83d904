"""Snapshot queries: `/query`, and SELECT and EXPLAIN in a read-only `/sql` request.

A query runs in a sandboxed DuckDB (`server.sandbox`) over relations taken from one snapshot:
DuckDB's MVCC snapshot of the tables paired with the views' contents at the same
`completed_ts`. Invariant: the snapshot is taken under the write lock (between two writes), so
every relation a query reads is at the same timestamp, the one its result names; reads never
block on the engine's work except to take it (they wait for a write in progress).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from contextlib import closing, contextmanager
from operator import itemgetter
from typing import Any

import duckdb
from sqlglot import exp

from planner.naming import FOLD
from server.catalog import explain, infer_type, record
from server.errors import Conflict, Forbidden, SqlError
from server.sandbox import Relation, check_relations, run_query
from server.sqltext import Statement, parse_script
from server.state import ServerState
from server.statistics import TableStatistics
from server.store import ARROW_EXACT, Row, Store, arrow_of, exact_arrow
from server.values import quote_ident, row_to_json

# From this many rows a view reaches the sandbox as Arrow columns (`view_relation`).
ARROW_VIEW_ROWS = 256


def view_relation(columns: list[dict[str, Any]], items: Iterable[tuple[Row, int]]) -> Relation:
    """A view's contents as a relation for the sandbox (untyped columns typed by value): as
    Arrow columns, which the sandbox scans in place, when every column's type holds its
    values exactly (`server.store.exact_arrow`) and the view has `ARROW_VIEW_ROWS` rows or
    more; else as Python rows, which it inserts into a table (a 900,000-row view took 2.0 s
    that way, as Arrow 0.2 s)."""
    items = list(items)
    if list(map(itemgetter(1), items)).count(1) == len(items):
        rows = list(map(itemgetter(0), items))  # a set (most views): each row once, at C speed
    else:
        rows = [r for r, n in items for _ in range(n)]
    cols = []
    for i, c in enumerate(columns):
        t = c["type"] or infer_type([r[i] for r in rows])
        cols.append((c["name"], t))
    if len(rows) >= ARROW_VIEW_ROWS:
        arrays = exact_arrow([t for _, t in cols],
                             [list(map(itemgetter(i), rows)) for i in range(len(cols))])
        if arrays is not None and arrays:
            import pyarrow as pa

            return Relation(cols, (), pa.table(arrays, names=[f"c{i}" for i in range(len(cols))]))
    return Relation(cols, rows)


# Rows per Arrow batch a table streams to the sandbox in.
STREAM_ROWS = 65_536


def table_relation(cur: Any, name: str, columns: list[tuple[str, str]],
                   stream: bool = False) -> Relation:
    """A table's rows in `cur`'s transaction, as Arrow when every column type round-trips:
    read whole now, or with `stream` streamed (each `stream()` a new scan, which the caller
    closes; one at a time on `cur`, which DuckDB requires of a connection); else read as
    Python rows now."""
    if all(ARROW_EXACT.fullmatch(t) for _, t in columns):
        text = f"SELECT * FROM main.{quote_ident(name)}"
        if stream:
            return Relation(columns, (),
                            stream=lambda: cur.sql(text).to_arrow_reader(STREAM_ROWS))
        return Relation(columns, (), arrow_of(cur.sql(text)))
    return Relation(columns, Store.read_table(cur, name))


@contextmanager
def snapshot(state: ServerState, names: list[str], streamed: Collection[str] = ()
             ) -> Iterator[tuple[int, dict[str, Relation]]]:
    """Relations `names` as of one timestamp: DuckDB tables and view contents.

    The tables in `streamed` stream to the sandbox as a query scans them, never copied whole:
    each through a cursor of its own (a DuckDB connection streams one result at a time), the
    others read whole through one shared cursor. Every cursor's READ ONLY transaction begins
    under the write lock, so all see the same commit, and stays open until the queries are
    over. Each read on the shared cursor reads its result to the end (`store.fetch_one`)
    before the next: DuckDB 2 refuses a relation on a cursor with a result left open."""
    cursors: list[Any] = []

    def pinned() -> Any:
        cur = state.store.cursor()
        cursors.append(cur)
        cur.execute("BEGIN TRANSACTION READ ONLY")
        # the transaction's snapshot is taken at its first read: here, under the lock
        cur.execute("SELECT value FROM diffsql.meta WHERE key = 'last_ts'").fetchall()
        return cur

    try:
        with state.write_lock:
            ts = state.completed_ts
            rels: dict[str, Relation] = {}
            snapshots = {}
            with state.state_lock:
                for n in names:
                    view = state.views.get(n)
                    if view is None:
                        continue
                    if not view.running:
                        raise Conflict(
                            f"view {n!r} has failed: {view.error}", code="view_failed"
                        )
                    snapshots[n] = (view.columns, view.snapshot)
                tables = {n: state.tables[n] for n in names if n in state.tables}
            # Under the write lock only: the views stay at `ts` (their snapshots never change)
            for n, (columns, snap) in snapshots.items():
                rels[n] = view_relation(columns, [] if snap is None else snap.items())
            shared = pinned() if any(n not in streamed for n in tables) else None
            opened = {n: pinned() if n in streamed else shared for n in tables}
        for n, rec in tables.items():
            rels[n] = table_relation(opened[n], n, [(c["name"], c["type"]) for c in rec.columns],
                                     stream=n in streamed)
        yield ts, rels
    finally:
        for cur in cursors:
            try:
                cur.execute("COMMIT")
            except duckdb.Error:
                pass  # a scan left open or an interrupted query: closing ends it
            cur.close()


def run_select(state: ServerState, s: Statement, rels: dict[str, Relation]) -> dict[str, Any]:
    """Run SELECT `s` over `rels` in the sandbox, under the query limits."""
    settings = state.settings
    res = run_query(
        s.text,
        rels,
        timeout=settings.query_timeout,
        memory_limit=settings.query_memory_limit,
        max_rows=settings.max_result_rows,
        max_bytes=settings.max_result_bytes,
        line=s.line,
        column=s.column,
    )
    return {
        "statement": "SELECT",
        "columns": res.columns,
        "rows": [row_to_json(r) for r in res.rows],
        "rowcount": len(res.rows),
    }


def read_many(state: ServerState, stmts: list[Statement]) -> list[dict[str, Any]]:
    """A read-only request: SELECTs over one snapshot, and EXPLAINs."""
    with state.state_lock:
        tables = dict(state.tables)
        records = {n: record(v) for n, v in state.views.items()}
    selects = iter(select_many(state, [s for s in stmts if s.kind == "SELECT"]))
    limit = state.settings.iteration_limit
    if all(s.kind == "SELECT" for s in stmts):
        return [next(selects) for _ in stmts]
    # EXPLAIN reads statistics as a view created now would: committed contents, through its
    # own cursor (the write connection may be in use).
    with closing(state.store.cursor()) as cur:
        stats = TableStatistics.of(cur, tables, state.distinct_cache)
        return [
            next(selects) if s.kind == "SELECT" else explain(s, tables, records, limit, stats)
            for s in stmts
        ]


def select_many(state: ServerState, stmts: list[Statement]) -> list[dict[str, Any]]:
    """Run SELECTs over one snapshot."""
    if not stmts:
        return []
    with state.state_lock:
        known = list(state.tables) + list(state.views)
    used_by = [check_relations(s.ast, known, line=s.line, column=s.column) for s in stmts]
    names = sorted({n for used in used_by for n in used})
    # A table streams only where every query that reads it reads it alone, and names it once:
    # DuckDB does not know a stream's size and plans joins over streams badly (TPC-H Q5 at
    # sf 1 took 0.9-1.1 s instead of 0.6 s), and cannot scan a stream twice.
    named = [Counter(t.name.translate(FOLD) for t in s.ast.find_all(exp.Table)) for s in stmts]
    streamed = {n for n in names
                if all(used == [n] and count[n] == 1
                       for used, count in zip(used_by, named, strict=True) if n in used)}
    out: list[dict[str, Any]] = []
    # The slot covers every DuckDB step of the read: copying the snapshot and the queries.
    with state.query_slots.held(state.settings.query_timeout), \
            snapshot(state, names, streamed) as (ts, rels):
        for s, used in zip(stmts, used_by, strict=True):
            res = run_select(state, s, {n: rels[n] for n in used})
            out.append({**res, "timestamp": ts})
    return out


def query(state: ServerState, sql: str) -> dict[str, Any]:
    """POST /query: one read-only SELECT over a consistent snapshot."""
    try:
        stmts = parse_script(sql, 1) if sql.strip() else []
    except SqlError as e:
        if e.code != "unsupported":
            raise
        raise Forbidden(
            "only a single read-only SELECT is allowed in /query: " + e.message,
            line=e.line,
            column=e.column,
        ) from None
    if len(stmts) != 1:
        raise SqlError("expected exactly one SELECT statement", code="syntax_error")
    s = stmts[0]
    if s.kind != "SELECT":
        raise Forbidden(
            f"{s.kind} is not allowed in a read-only query; use POST /sql",
            line=s.line,
            column=s.column,
        )
    state.require_ready()
    r = select_many(state, [s])[0]
    return {"columns": r["columns"], "rows": r["rows"], "timestamp": r["timestamp"]}
