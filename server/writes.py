"""The write path: parse -> DuckDB transaction -> change log -> COMMIT -> engine -> publish.

A write request is one step of the server's clock. `write` reads top to bottom:
1. under the write lock, `Write.begin` takes the next timestamp `ts` and the current catalog;
2. `store.begin()`; each statement is applied inside the DuckDB transaction
   (`server.statements`), capturing each statement's row deltas with RETURNING; a SELECT sees
   the statements before it;
3. new views are computed against the transaction's own, uncommitted state
   (`server.hydration`);
4. the deltas are appended to the change log (`append_log`) and the transaction COMMITs.
   Any error before COMMIT rolls everything back: nothing of the request is applied;
5. after COMMIT (the write is durable) every affected view's dataflow runs at epoch `ts` and
   the results are installed and published (`server.publish`). The request is acknowledged
   after that, so a later read sees the write (read-your-writes).

A request that changes no table, view or row takes no timestamp (feeds and `as_of` see no
empty epochs). A write's statements run under a `Deadline` (`server.transaction`): past
`write_timeout` the write is rolled back (408 `timeout`). Every `checkpoint_interval`
timestamps the writer checkpoints the views' history (`server.recovery.checkpoint`).
"""

from __future__ import annotations

import logging
from typing import Any

import duckdb

from server.catalog import explain
from server.errors import Timeout, from_duckdb
from server.failures import error_json
from server.hydration import hydrate_new_views
from server.publish import publish
from server.recovery import checkpoint, reload
from server.sqltext import Statement
from server.state import ServerState
from server.statements import apply, select_in_write
from server.transaction import Deadline, Write

log = logging.getLogger("diffsql.server")


def write(state: ServerState, stmts: list[Statement]) -> dict[str, Any]:
    """Run the statements of one write request; all its writes commit atomically at one
    timestamp. Returns {"results": [...], "failed_views": [...]}: the views whose evaluation
    failed at this write (the write itself is committed)."""
    state.require_ready()
    with state.write_lock:
        w = Write.begin(state)
        try:
            out = _transact(state, w, stmts)
            if state.last_ts - state.checkpoint_ts >= state.settings.checkpoint_interval:
                checkpoint(state)
            return out
        finally:
            w.delete_files()


def _transact(state: ServerState, w: Write, stmts: list[Statement]) -> dict[str, Any]:
    """`write` under the write lock: the transaction, then maintaining the views."""
    results: list[dict[str, Any]] = []
    deadline = Deadline(state.settings.write_timeout, state.store.conn.interrupt)
    state.store.begin()
    try:
        for s in stmts:
            deadline.check()
            if s.kind == "SELECT":
                # Inside the transaction: it sees this request's own writes, and an
                # error in it rolls back the whole request.
                results.append(select_in_write(state, w, s))
            elif s.kind == "EXPLAIN":
                results.append(explain(s, w.tables, w.views, state.settings.iteration_limit))
            else:
                results.append(apply(state, w, s))
                w.trial = {}
                w.snapshots = {}
        deadline.check()
        if w.changes_nothing(state):
            # A request that changes no table, view or row (`CREATE TABLE IF NOT EXISTS`
            # on an existing table, a DELETE that matches nothing) is not a transaction
            # of the history: it takes no timestamp, so feeds and `as_of` see no empty
            # epochs. Its results name the state it saw, the latest committed timestamp.
            state.store.rollback()
            w.release()
            for r in results:
                r["timestamp"] = state.last_ts
            return {"results": results, "failed_views": []}
        hydrate_new_views(state, w)
        append_log(state, w)
        deadline.disarm()  # from here on the write commits, however long it takes
        deadline.check()
        state.store.commit()
        state.last_ts = state.committed_ts = w.ts
    except BaseException as e:
        deadline.disarm()
        state.store.rollback()
        w.release()
        if deadline.fired:
            # Whatever the interrupted statement raised, the cause is the time limit.
            raise Timeout(
                f"the write exceeded the time limit of {state.settings.write_timeout:g}s "
                "(--write-timeout) and was rolled back; nothing was applied",
                code="timeout",
            ) from None
        if isinstance(e, duckdb.Error):
            raise from_duckdb(e) from None
        raise
    try:
        failed = publish(state, w)
    except Exception:  # a bug after COMMIT: rebuild everything from the durable store
        log.exception("maintaining views at timestamp %d failed; reloading", w.ts)
        reload(state)
        with state.state_lock:
            failed = [
                {"name": n, "error": error_json(v.error)}
                for n, v in sorted(state.views.items())
                if not v.running
            ]
    for r in results:
        r["timestamp"] = w.ts
    return {"results": results, "failed_views": failed}


def append_log(state: ServerState, w: Write) -> None:
    """Append the write's row changes to the tables' change logs at `w.ts` (inside the
    transaction, so they commit with the rows), advance the stored clock, and trim the logs
    older than the retention horizon. COPY logged its rows already (`statements.copy`)."""
    for name, delta in w.deltas.items():
        if name not in w.tables:
            continue
        batch = [(row, d) for row, d in delta.items() if d]
        if batch:
            state.store.append_log(w.tables[name], w.ts, batch)
            w.batches[name] = batch
    state.store.set_meta("last_ts", w.ts)
    state.store.set_meta("next_table_id", w.next_table_id)
    horizon = w.ts - state.settings.history_retention
    step = max(1, state.settings.history_retention // 10)
    if horizon - state.history_since >= step:
        state.store.trim_logs(w.tables.values(), horizon)
        w.history_since = horizon
