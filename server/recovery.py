"""Start-up and recovery: the catalog, the views rebuilt from the tables, and checkpoints.

Start-up: `load_catalog` reads the clock and catalog, and the server answers at once; views
are `hydrating` until `recover_views` (a background thread holding the write lock, see
`start_recovery`) has built each from the tables' current contents and its checkpointed
history (`checkpoint`, every `checkpoint_interval` timestamps and at shutdown), replaying only
the change log after the checkpoint.

Invariants: after recovery each view's history is exactly its history before the restart (the
same batches at the same timestamps), its contents equal recomputation from the tables, and the
work is proportional to the data, not to the retained history. A view that cannot be planned or
computed fails alone (with every view over it); the server keeps running. Recovery of a view
that fails replaying its history is retried from the current tables only (its history then
starts now). The change log is the durable record: a checkpoint only shortens the replay, and
a failed checkpoint is retried at the next.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, defaultdict
from dataclasses import replace

from planner.preload import warm_arrow
from server import heap
from server.catalog import planner, planner_catalog
from server.failures import failure
from server.hydration import imports_of
from server.state import ServerState
from server.statistics import TableStatistics
from server.store import Row, Store, ViewRecord
from server.views import Batch, Input, MaintainedView, TableChange

log = logging.getLogger("diffsql.server")


def load_catalog(state: ServerState) -> None:
    """Read the clock and the catalog (fast: no table contents, no dataflows). Every view
    starts `hydrating`; `_recover_views` brings it up."""
    store = state.store
    state.ready.clear()
    state.history_since = store.get_meta("history_since")
    state.next_table_id = store.get_meta("next_table_id")
    state.checkpoint_ts = store.get_meta("checkpoint_ts")
    for rec in store.load_tables():
        state.tables[rec.name] = rec
        state.row_counts[rec.name] = store.count_rows(rec.name)
    # Writes that only change rows leave the clock in their change-log rows.
    state.last_ts = max(store.get_meta("last_ts"), store.last_logged_ts(state.tables.values()))
    t_low, t_now = state.history_since, state.last_ts
    state.view_records = store.load_views()
    state.dropped_at = store.dropped_views()
    for vrec in state.view_records:
        state.next_seq = max(state.next_seq, vrec.seq + 1)
        state.views[vrec.name] = MaintainedView(
            vrec.name,
            vrec.sql,
            vrec.columns,
            vrec.dependencies,
            vrec.created_ts,
            vrec.seq,
            status="hydrating",
            base_ts=max(t_low, vrec.created_ts),
            complete_ts=t_now,
        )
    state.completed_ts = state.committed_ts = t_now


def _current_names(state: ServerState, vrec: ViewRecord, view: MaintainedView) -> ViewRecord:
    """`vrec` with its columns named as the planner names them now, stored so. A database
    written by an earlier version may hold other names: a column repeated (`SELECT a.k,
    b.k` was stored as `k`, `k`, which DuckDB refuses for the view `/query` reads) or
    lowercased where DuckDB keeps case (`*` over a derived table). Their types are kept."""
    assert view.compiled is not None
    names = [c.name for c in view.compiled.columns]
    if names == [c["name"] for c in vrec.columns] or len(names) != len(vrec.columns):
        return vrec
    log.warning("view %s: its columns are renamed %s -> %s", vrec.name,
                [c["name"] for c in vrec.columns], names)
    columns = [dict(c, name=n) for c, n in zip(vrec.columns, names, strict=True)]
    state.store.set_view_columns(vrec.name, columns)
    renamed = replace(vrec, columns=columns)
    state.view_records = [renamed if r is vrec else r for r in state.view_records]
    view.columns = columns
    return renamed


def start_recovery(state: ServerState) -> None:
    """Bring the views up in a background thread (the server answers meanwhile: views are
    `hydrating`, and requests that need them wait for `ready`)."""
    threading.Thread(target=_recover_in_background, args=(state,), name="diffsql-recovery",
                     daemon=True).start()


def _recover_in_background(state: ServerState) -> None:
    try:
        with state.write_lock:
            recover_views(state)
    except BaseException:  # noqa: BLE001 - the store is unusable: fail loudly, as at start
        log.exception("recovery failed; the server exits")
        logging.shutdown()
        os._exit(3)


def recover_views(state: ServerState) -> None:
    """Rebuild every view from the tables' current contents, without replaying history.

    The views' history up to `checkpoint_ts` comes from the checkpoint; only the change
    log after it (empty after a clean shutdown) is replayed, from the tables' contents at
    `checkpoint_ts` (contents now minus the log after it), so each view's history after a
    restart is exactly its history before (same batches at the same timestamps) and its
    contents equal recomputation. Without a usable checkpoint (a database from before
    checkpoints) the whole retained log is replayed."""
    # The views' state built here lives as long as the server (see server.heap).
    with heap.bulk_phase(settle=True):
        _recover_views(state)
    try:
        # Before `ready`: the first query, load or hydration would pay it (0.2-0.3 s), and
        # one that came right after `ready` still waited for a warm-up running beside it.
        # (Not in the bulk phase: what the imports leave for the collector is not frozen.)
        warm_arrow()
    except Exception:  # noqa: BLE001 - a warm-up only: what needs it imports it then
        log.debug("warming pyarrow failed", exc_info=True)
    state.ready.set()
    if state.last_ts - state.checkpoint_ts >= state.settings.checkpoint_interval:
        # A replay of a whole interval (a crash after a checkpoint fell due and before it
        # was made): checkpoint now, or the next crash replays it again and more.
        checkpoint(state)


def _recover_views(state: ServerState) -> None:
    store = state.store
    began = time.monotonic()
    t_low, t_now = state.history_since, state.last_ts
    start = max(t_low, state.checkpoint_ts)
    saved = store.read_checkpoint(state.checkpoint_ts) if state.checkpoint_ts >= t_low else {}
    # Per table: contents at `start`, the batches after it, and contents now, as batches of
    # (row, count); a row a table holds twice may come as two (row, 1): the engine
    # consolidates, and without a log to undo no Counter of the table is built.
    streams: dict[str, tuple[Input, list[tuple[int, Batch]]]] = {}
    current: dict[str, Input] = {}
    for rec in state.tables.values():
        by_ts: dict[int, Batch] = defaultdict(list)
        if start < t_now:
            for ts, row, diff in store.read_log(rec, start):
                by_ts[ts].append((row, diff))
        # Without a log to undo, a table's contents enter the views as columns where their
        # types allow (engine.columns_at): no Python tuple per row until an operator needs one.
        columns = None if by_ts else store.read_columns(rec)
        if columns is not None:
            state.row_counts[rec.name] = columns.num_rows
            current[rec.name] = TableChange(columns=columns)
            streams[rec.name] = (current[rec.name], [])
            continue
        rows = Store.read_table(store.conn, rec.name)
        state.row_counts[rec.name] = len(rows)
        current[rec.name] = TableChange(inserted=rows)
        if not by_ts:
            streams[rec.name] = (current[rec.name], [])
            continue
        base: Counter[Row] = Counter(rows)
        for batch in by_ts.values():
            for row, diff in batch:
                base[row] -= diff
        if any(n < 0 for n in base.values()):
            raise RuntimeError(f"change log of table {rec.name} is inconsistent")
        streams[rec.name] = (list((+base).items()), sorted(by_ts.items()))
    replayed = {ts for _, batches in streams.values() for ts, _ in batches}
    catalog_views: dict[str, ViewRecord] = {}
    partial: set[str] = set()  # views rebuilt from the current tables only (no history)
    for vrec in state.view_records:
        view = state.views[vrec.name]
        stats = TableStatistics.of(state.store.conn, state.tables, state.distinct_cache)
        catalog = planner_catalog(state.tables, catalog_views, stats)
        catalog_views[vrec.name] = vrec
        try:
            missing = [
                d for d in vrec.dependencies if d not in state.tables and d not in state.views
            ]
            if missing:
                raise RuntimeError(f"depends on unavailable {', '.join(missing)}")
            view.compiled = planner().compile_view(
                vrec.sql, catalog, name=vrec.name, iteration_limit=state.settings.iteration_limit
            )
            vrec = _current_names(state, vrec, view)
            catalog_views[vrec.name] = vrec
        except Exception as e:  # noqa: BLE001 - any failure only fails this view
            log.warning("view %s cannot be planned during recovery: %s", vrec.name, e)
            _recovered(state, view, error=f"{type(e).__name__}: {e}")
            continue
        bad = [d for d in vrec.dependencies if d in state.views and not state.views[d].running]
        if bad:
            _recovered(state, view, error=f"depends on failed view {bad[0]}")
            continue
        if not any(d in partial for d in vrec.dependencies):
            # The checkpointed history, then the log after the checkpoint replayed.
            try:
                _recover_history(state, view, streams, start, t_now, saved.get(vrec.seq))
                _recovered(state, view)
                continue
            except Exception as e:  # noqa: BLE001 - retried below from the current tables
                log.warning("view %s failed replaying its history: %s", vrec.name, e)
                view.release()
        # Rebuild from the current tables only (a recursion that diverged at some earlier
        # timestamp may converge now); its history then starts now.
        try:
            _recover_current(state, view, current, t_now)
            partial.add(vrec.name)
            _recovered(state, view)
        except Exception as e:  # noqa: BLE001 - any failure only fails this view
            log.warning("view %s failed during recovery: %s", vrec.name, e)
            _recovered(state, view, error=failure(e)["message"])
    for view in state.views.values():
        if view.running:
            view.pin_at(t_now)
    state.recovery = {
        "checkpoint": state.checkpoint_ts,
        "replayed_timestamps": len(replayed),
        "seconds": round(time.monotonic() - began, 3),
    }
    log.info("views recovered: %s", state.recovery)


def _recovered(state: ServerState, view: MaintainedView, error: str | None = None) -> None:
    """Make a recovered view readable (or failed), under the state lock."""
    with state.state_lock:
        if error is None:
            view.status = "running"
        else:
            view.fail(error)


def _recover_history(
    state: ServerState,
    view: MaintainedView,
    streams: dict[str, tuple[Input, list[tuple[int, Batch]]]],
    start: int,
    t_now: int,
    saved: tuple[int, list[tuple[int, Batch]]] | None,
) -> None:
    """Build `view` at `start` from the tables' contents then, replay the log after it,
    and prefix the history it produces with the checkpointed history `saved` (its base
    and batches, through `start`) if the view has one. A view created after `start` (none
    of its history is saved) is built at its creation, from the contents then: the tables
    at a timestamp before it existed may hold what it cannot compute (a scalar subquery of
    two rows), which it never had to, and its history would be lost to that failure."""
    first = start if saved is not None else max(start, view.created_ts)
    view.build(state.executor.new_dataflow(), first, imports_of(view, state.views))
    schedule: dict[int, dict[str, Input]] = defaultdict(dict)
    for dep in view.handles:
        base, batches = streams[dep]
        if first > start and any(ts <= first for ts, _ in batches):
            base = [*base, *(u for ts, b in batches if ts <= first for u in b)]  # type: ignore[misc]
        schedule[first][dep] = base
        for ts, b in batches:
            if ts > first:
                schedule[ts][dep] = b
    # The output trace keeps its times from `start` on until recovery is over, so views
    # over this one, built after it ran, still see its history timestamp by timestamp.
    out = view.run_schedule(sorted(schedule.items()), t_now, pin_ts=first)
    history: list[tuple[int, Batch]] = []
    if saved is not None:
        view.base_ts = max(saved[0], state.history_since)
        history = [(t, b) for t, b in saved[1] if t > view.base_ts]
    else:  # no history of it is saved: it starts at `start` (or at its creation, later)
        view.base_ts = max(view.base_ts, start)
    for ts, b in sorted(out.items()):
        if ts > max(view.base_ts, start):
            history.append((ts, b))
    view.history = history
    view.install(sum(d for b in out.values() for _, d in b))


def _recover_current(
    state: ServerState, view: MaintainedView, current: dict[str, Input], t_now: int
) -> None:
    view.build(state.executor.new_dataflow(), t_now, imports_of(view, state.views))
    inputs = {d: current[d] for d in view.handles}
    out = view.run_schedule([(t_now, inputs)], t_now)
    view.install(sum(d for b in out.values() for _, d in b))
    view.history = []
    view.base_ts = max(t_now, view.created_ts)


def reload(state: ServerState) -> None:
    """Rebuild all in-memory state from the durable store (last resort after a bug)."""
    heap.thaw()  # the views' objects (frozen at recovery) become garbage here
    with state.state_lock:
        for name, view in list(state.views.items()):
            view.release()
            state.hub.end_view(name, "server_reset", "the server reloaded; resume with since")
        state.tables, state.views, state.row_counts = {}, {}, {}
        load_catalog(state)
    recover_views(state)


def checkpoint(state: ServerState) -> None:
    """Save every running view's history since the last checkpoint to the store, so a
    restart replays only the log after it. Called by the writer between writes (under
    the write lock); a failure is logged and the next checkpoint retries (the log still
    holds everything)."""
    if state.settings.memory or not state.ready.is_set() or state.checkpoint_ts >= state.last_ts:
        return
    since = state.checkpoint_ts
    with state.state_lock:
        chunks = [
            (v.seq, since, v.base_ts, [(t, b) for t, b in v.history if t > since])
            for v in state.views.values()
            if v.running
        ]
        through = state.completed_ts
    try:
        state.store.write_checkpoint(through, chunks)
        state.checkpoint_ts = through
    except Exception:  # noqa: BLE001 - a checkpoint is an optimisation of restart only
        log.exception("checkpoint at timestamp %d failed", through)
