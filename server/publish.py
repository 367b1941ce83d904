"""Publishing a write: maintain the views at its timestamp and install the results.

The tables' changes at `ts` are fed to the dataflows of the views they affect, in creation (`seq`) order, so a view over a view runs after the view it
reads; then, under the state lock, the catalog, row counts, view contents and history are
installed, `completed_ts = ts` is set and the updates are published to subscribers.

A group of writes committed together (`server.writes`, group commit) is published in one
engine step: each view's dataflow is fed every write's changes at that write's own timestamp
and run once; its output, history and feeds keep one batch per timestamp, exactly as if the
writes had been published one by one (subscribers see each timestamp's update, then its
progress). Only the last write of a group may change the catalog (groups of more than one
write hold DML only).

The write's last DuckDB work (its change log, the clock, COMMIT) may still be in flight on the
committer's thread (`server.committer`) while its views are maintained: it is waited for
before anything is installed (the write is durable then), and before any view is built
afresh from the store.

Invariants:
- a view whose dataflow fails (a recursion that exceeds its iteration limit, an evaluation
  error, anything `run_schedule` raises) is marked failed, with every view over it; the write
  still succeeds for the tables and the other views, and its response lists the views that
  failed. A failed view is rebuilt from the current tables (`rebuild`) at the next write that
  changes anything it reads;
- views this write does not touch are marked complete through `ts` once it is committed,
  before or while the dataflows run (`untouched`, `mark_complete`), so reads of them do not
  wait for the others;
- readers see a timestamp's results all at once: everything is installed in one critical
  section of the state lock, a view's contents as a snapshot of its output arrangement
  (`MaintainedView.install`), taken while no dataflow runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from engine.sources import FileSource
from server.catalog import compile_statement
from server.committer import Committing
from server.failures import error_json, failure
from server.hydration import imports_of
from server.sqltext import parse_statement
from server.state import ServerState
from server.statistics import TableStatistics
from server.store import Store
from server.transaction import Write, table_input
from server.views import Batch, Input, MaintainedView, TableChange, consolidate

log = logging.getLogger("diffsql.server")


@dataclass
class _Outcome:
    """What maintaining the views at one timestamp produced, to be installed."""

    # Per view, its non-empty output batches in ascending timestamp order.
    view_batches: dict[str, list[tuple[int, Batch]]] = field(default_factory=dict)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)
    rebuilt: dict[str, MaintainedView] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)  # views whose dataflow ran at ts
    # views computed afresh (`recompute`): the view each replaces, released once installed
    recomputed: dict[str, MaintainedView] = field(default_factory=dict)
    # views that failed at a timestamp of a group and were built afresh at its last one (as
    # the next write retries a failed view): each installed once its failure is published
    restarted: dict[str, MaintainedView] = field(default_factory=dict)


def publish(state: ServerState, ws: list[Write], committing: Committing | None = None
            ) -> list[list[dict[str, Any]]]:
    """Maintain every view at the timestamps of writes `ws` (ascending), committed or with
    their COMMIT in flight (`committing`, waited for before anything is installed: it raises
    `CommitFailed` if the COMMIT failed, and then nothing is installed), and install the
    results; return, for each write, the views that failed at its timestamp (a view that
    fails in a group is listed for each write whose changes reach it)."""
    w = ws[-1]  # the catalog after the group
    changes = [(x.ts, _table_batches(x)) for x in ws]
    table_batches = {name: b for _, tb in changes for name, b in tb.items()}
    order = sorted(w.views, key=lambda n: w.views[n].seq)
    views: dict[str, MaintainedView] = {
        n: w.hydrated[n] if n in w.new_views else state.views[n] for n in order
    }
    active, needed = _active_views(w, order, views, table_batches)
    if committing is None:
        # committed: the committer marks them right after COMMIT otherwise
        mark_complete(state, _untouched(w, views, active, needed), w.ts)
    outcome = _maintain(state, w, changes, order, views, active, needed, committing)
    if committing is not None:
        committing.wait()  # durable before anyone sees it
    _install(state, ws, outcome)
    failed = [{"name": n, "error": err} for n, err in outcome.failed.items()]
    if len(ws) == 1:
        return [failed]
    # In a group, a failure is reported to the writes whose changes reach the view; one that
    # none reaches (a failed view retried, a dependant of a failed view) to every write.
    reached = [[_reaches(views, f["name"], tb) for f in failed] for _, tb in changes]
    anyone = [any(r[i] for r in reached) for i in range(len(failed))]
    return [
        [f for i, f in enumerate(failed) if r[i] or not anyone[i]] for r in reached
    ]


def untouched(state: ServerState, ws: list[Write]) -> list[MaintainedView]:
    """The running views that the writes `ws` neither change nor need complete before they
    run (`_active_views`): complete through the last write's timestamp once it is committed,
    whatever the dataflows of the others do."""
    w = ws[-1]
    order = sorted(w.views, key=lambda n: w.views[n].seq)
    views = {n: w.hydrated[n] if n in w.new_views else state.views[n] for n in order}
    # the tables `_table_batches` gives changes of, without making those changes
    changed = {name for x in ws for name in (*x.batches, *x.loads, *x.unloads)}
    return _untouched(w, views, *_active_views(w, order, views, changed))


def _untouched(w: Write, views: dict[str, MaintainedView], active: set[str], needed: set[str]
               ) -> list[MaintainedView]:
    return [v for n, v in views.items()
            if v.running and n not in active and n not in needed and n not in w.new_views]


def mark_complete(state: ServerState, views: list[MaintainedView], ts: int) -> None:
    """Views `views` are complete through `ts` (committed): reads of them need not wait for
    the dataflows of the others."""
    with state.state_lock:
        for v in views:
            v.complete_ts = ts


def _table_batches(w: Write) -> dict[str, Input]:
    """The tables' changes of write `w`: row batches, and the files of its bulk loads."""
    batches: dict[str, Input] = dict(w.batches)
    for name in {**w.loads, **w.unloads}:
        loads = w.loads.get(name, [])
        files = tuple(x for x in loads if isinstance(x, FileSource))
        tables = [x for x in loads if not isinstance(x, FileSource)]
        batches[name] = TableChange(w.batches.get(name, []), files, columns=_concat(tables),
                                    retracted=_concat(w.unloads.get(name, [])))
    return batches


def _concat(tables: list[Any]) -> Any:
    """Arrow tables of one schema as one (None for none)."""
    if not tables:
        return None
    import pyarrow as pa

    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _reaches(views: dict[str, MaintainedView], name: str, changed: dict[str, Input]) -> bool:
    """Whether changes to the tables `changed` reach view `name` (directly or through views)."""
    deps = views[name].dependencies if name in views else []
    return any(d in changed or (d in views and _reaches(views, d, changed)) for d in deps)


def _active_views(
    w: Write,
    order: list[str],
    views: dict[str, MaintainedView],
    table_batches: Collection[str],
) -> tuple[set[str], set[str]]:
    """The views that must run at `w.ts` (something they read changed, or they are new) and
    the views those read, which must be complete through `w.ts` before they run."""
    active: set[str] = set()
    for n in order:
        deps = views[n].dependencies
        if n in w.new_views or any(d in table_batches or d in active for d in deps):
            active.add(n)
    needed: set[str] = set()
    stack = [d for n in active for d in views[n].dependencies if d in views]
    while stack:
        d = stack.pop()
        if d not in needed:
            needed.add(d)
            stack.extend(x for x in views[d].dependencies if x in views)
    return active, needed


def _maintain(
    state: ServerState,
    w: Write,
    changes: list[tuple[int, dict[str, Input]]],
    order: list[str],
    views: dict[str, MaintainedView],
    active: set[str],
    needed: set[str],
    committing: Committing | None,
) -> _Outcome:
    """Run the dataflows of the views through `w.ts`, in `seq` order, each fed `changes` (the
    tables' changes by timestamp) in one run; build new views and retried failed ones afresh
    at `w.ts` (from the committed store: after `committing`). Nothing readers see changes
    here."""
    ts = w.ts
    out_ = _Outcome()
    failed, rebuilt = out_.failed, out_.rebuilt
    for n in order:
        v = views[n]
        bad = [d for d in v.dependencies if d in failed or (d in views and d not in rebuilt
                                                             and not views[d].running)]
        if bad:
            if v.running or n in w.new_views or n in active:
                failed[n] = error_json(f"depends on failed view {bad[0]}")
                v.release()
            continue
        if n in w.reusable:
            continue  # hydrated before COMMIT, already complete through ts
        retry = not v.running and n in active
        if n in w.new_views or retry or any(d in rebuilt for d in v.dependencies):
            if committing is not None:
                committing.wait()  # it reads the committed tables
            try:
                rebuilt[n] = rebuild(state, w, v, views, rebuilt)
            except Exception as e:  # noqa: BLE001 - only this view fails
                log.warning("view %s failed at timestamp %d: %s", n, ts, e)
                failed[n] = failure(e)
            continue
        if not v.running or (n not in active and n not in needed):
            continue
        if len(changes) == 1 and _recompute(state, w, n, views):
            if committing is not None:
                committing.wait()  # it reads the committed tables
            try:
                out_.rebuilt[n], batch = recompute(state, w, v, views, rebuilt)
            except Exception as e:  # noqa: BLE001 - the view is maintained instead
                log.warning("view %s could not be computed afresh at timestamp %d (%s); "
                            "maintaining it", n, ts, e)
            else:
                # `v` stays readable until the new view is installed in its place
                out_.recomputed[n] = v
                if batch:
                    out_.view_batches[n] = [(ts, batch)]
                continue
        schedule = [
            (t, inputs)
            for t, tb in changes
            if (inputs := {d: tb[d] for d in v.dependencies if d in tb})
        ]
        try:
            out = v.run_schedule(schedule, ts)
        except Exception as e:  # noqa: BLE001 - only this view fails
            log.warning("view %s failed at timestamp %d: %s", n, ts, e)
            failed[n] = failure(e)
            if len(schedule) > 1:
                # it may have failed at an earlier write's timestamp, and a later write of
                # the group changed what it reads: one by one, that write would have retried
                # it, so it is built afresh at ts (its views that read it fail, and are
                # retried by the next write that reaches them, as after any failure)
                if committing is not None:
                    committing.wait()  # it reads the committed tables
                try:
                    out_.restarted[n] = rebuild(state, w, v, views, rebuilt, release=False)
                except Exception as again:  # noqa: BLE001 - it fails at ts too: stays failed
                    log.warning("view %s failed again at timestamp %d: %s", n, ts, again)
            continue
        out_.ran.add(n)
        if batches := _by_write(out, [t for t, _ in changes]):
            out_.view_batches[n] = batches
    return out_


def _by_write(out: dict[int, Batch], stamps: list[int]) -> list[tuple[int, Batch]]:
    """A dataflow's output by time as one consolidated, non-empty batch per write's
    timestamp: an output time counts at the first timestamp at or after it (for one write,
    everything counts at its timestamp)."""
    buckets: dict[int, list[Batch]] = {}
    for t, batch in out.items():
        at = next((s for s in stamps if s >= t), stamps[-1])
        buckets.setdefault(at, []).append(batch)
    # a bucket of one time's batch is consolidated already (`MaintainedView.run_schedule`)
    batches = [(t, bs[0] if len(bs) == 1 else consolidate(u for b in bs for u in b))
               for t, bs in sorted(buckets.items())]
    return [(t, b) for t, b in batches if b]


def _install(state: ServerState, ws: list[Write], outcome: _Outcome) -> None:
    """Install the writes' catalog, row counts and view results, advance the clock to the
    last write's timestamp and publish every timestamp to subscribers, in order, all in one
    critical section of the state lock."""
    w = ws[-1]
    ts = w.ts
    trimmed = w.history_since
    with state.state_lock:
        state.tables = w.tables
        for name in w.dropped_tables:
            state.row_counts.pop(name, None)
        for x in ws:
            for name, delta in x.deltas.items():
                if name in w.tables:
                    state.row_counts[name] = state.row_counts.get(name, 0) + sum(delta.values())
            for name, n in x.load_counts.items():
                state.row_counts[name] = state.row_counts.get(name, 0) + n
            for name, n in x.unload_counts.items():
                state.row_counts[name] = state.row_counts.get(name, 0) - n
        for name in w.tables:
            state.row_counts.setdefault(name, 0)
        for name in w.dropped_views:
            state.dropped_at[name] = ts
            dropped = state.views.pop(name, None)
            if dropped is not None:
                dropped.release()
            state.hub.end_view(name, "view_dropped", f"view {name!r} was dropped")
        for name, view in w.hydrated.items():
            if name in w.views:
                state.views[name] = view
        for name, view in outcome.rebuilt.items():
            if name not in w.new_views and name not in outcome.recomputed:
                log.info("view %s is running again from timestamp %d", name, ts)
                state.rebuilt_since_checkpoint = True
            state.views[name] = view
        for old in outcome.recomputed.values():
            old.release()
        added: dict[str, int] = {}
        for name, batches in outcome.view_batches.items():
            view = state.views[name]
            for t, batch in batches:
                view.history.append((t, batch))
            added[name] = sum(d for _, b in batches for _, d in b)
        for name, err in outcome.failed.items():
            view = state.views[name]
            was_running = view.running
            view.fail(err["message"])
            if was_running:
                message = f"view {name!r} failed: {err['message']}"
                state.hub.end_view(name, "view_failed", message)
        for name, view in outcome.restarted.items():
            log.info("view %s is running again from timestamp %d", name, ts)
            state.views[name] = view
            state.rebuilt_since_checkpoint = True
        for name, view in state.views.items():
            if view.running:
                view.complete_ts = ts
                if name in outcome.ran:
                    view.pin_at(ts)
                    view.install(view.row_count + added.get(name, 0))
            if trimmed > view.base_ts:
                view.trim(trimmed)
        state.history_since = trimmed
        state.next_table_id = w.next_table_id
        state.next_seq = w.next_seq
        state.last_ts = ts
        state.completed_ts = ts
        names = list(state.views)
        for x in ws:
            at = {n: b for n, bs in outcome.view_batches.items() for t, b in bs if t == x.ts}
            state.hub.publish(x.ts, at, names)


# A write that changes at least RECOMPUTE_SHARE of the rows of the tables a view reads (which
# held at least RECOMPUTE_MIN_ROWS rows; and more rows than the view holds) is applied to the
# view by computing it afresh from the committed tables (`recompute`): a bulk load or a
# DELETE or UPDATE of a large part of a table touches most of a view's groups, and building
# every group from whole columns costs a fraction of changing each group's state (a
# 600,000-row COPY into a 1.2M-row lineitem under TPC-H Q18: 2.5 s against about 10 s). A
# load into tables that held fewer rows is maintained: its columns build the states as a
# hydration does, without reading the tables back.
RECOMPUTE_SHARE = 0.25
RECOMPUTE_MIN_ROWS = 50_000


def _recompute(state: ServerState, w: Write, name: str, views: dict[str, MaintainedView]
               ) -> bool:
    """Whether write `w` (alone at its step) is applied to view `name` by `recompute`: no
    view reads it (its output arrangement is imported by none), and the write changes a
    large share of the rows of the tables it reads (see RECOMPUTE_SHARE)."""
    v = views[name]
    if name in w.new_views:
        return False
    changed = sum(len(w.batches.get(d, ())) + w.load_counts.get(d, 0)
                  + w.unload_counts.get(d, 0) for d in v.dependencies)
    held = sum(state.row_counts.get(d, 0) for d in v.dependencies)
    if held < RECOMPUTE_MIN_ROWS or changed < RECOMPUTE_SHARE * held or v.row_count > changed:
        return False
    # last: a pass over every view, which a small write (most of them) never pays
    return not any(name in o.dependencies for o in views.values())


def recompute(state: ServerState, w: Write, old: MaintainedView,
              views: dict[str, MaintainedView], rebuilt: dict[str, MaintainedView]
              ) -> tuple[MaintainedView, Batch]:
    """View `old` computed afresh at `w.ts` from the committed tables (`rebuild`), keeping
    its history, and its output's change at `w.ts`: the new contents less the old, so its
    history and feeds go on exactly as if the write had been maintained. `old` is left as
    it is (readers read it until the new view is installed); the caller releases it."""
    before = dict(old.items())
    view = rebuild(state, w, old, views, rebuilt, release=False)
    view.history, view.base_ts = list(old.history), old.base_ts
    after = dict(view.items())
    batch = [(r, c - before.get(r, 0)) for r, c in after.items() if c != before.get(r, 0)]
    batch += [(r, -c) for r, c in before.items() if r not in after]
    return view, batch


def rebuild(
    state: ServerState,
    w: Write,
    old: MaintainedView,
    views: dict[str, MaintainedView],
    rebuilt: dict[str, MaintainedView],
    release: bool = True,
) -> MaintainedView:
    """Build a view afresh at `w.ts` (after COMMIT): a new view, or a failed one being
    retried. It reads the tables' committed contents and imports the arrangements of the
    views it reads (which are complete through ts: they come earlier in `seq` order). With
    `release`, `old`'s engine side is released."""
    ts = w.ts
    compiled = old.compiled
    if compiled is None:
        earlier = {n: r for n, r in w.views.items() if w.views[n].seq < old.seq}
        compiled = compile_statement(
            parse_statement(old.sql), old.name, w.tables, earlier,
            state.settings.iteration_limit,
            TableStatistics.of(state.store.conn, w.tables, state.distinct_cache),
        )
    view = MaintainedView(
        old.name,
        old.sql,
        old.columns,
        old.dependencies,
        old.created_ts,
        old.seq,
        compiled=compiled,
        base_ts=ts,
        complete_ts=ts,
    )
    sources = {d: rebuilt.get(d) or views[d] for d in old.dependencies if d in views}
    try:
        view.build(state.executor.new_dataflow(), ts, imports_of(view, sources))
        inputs = {
            d: table_input(
                state, w, d,
                lambda d=d: Counter(Store.read_table(state.store.conn, d)).items(),
            )
            for d in view.handles
        }
        out = view.run_schedule([(ts, inputs)], ts)
    except BaseException:
        view.release()
        raise
    view.install(sum(d for b in out.values() for _, d in b))
    if release:
        old.release()
    return view
