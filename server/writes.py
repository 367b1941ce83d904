"""The write path: parse -> DuckDB transaction -> change log -> COMMIT -> engine -> publish.

A write request is one step of the server's clock. `write` reads top to bottom:
1. under the write lock, `Write.begin` takes the next timestamp `ts` and the current catalog;
2. `store.begin()`; each statement is applied inside the DuckDB transaction
   (`server.statements`), capturing each statement's row deltas with RETURNING; a SELECT sees
   the statements before it;
3. new views are computed against the transaction's own, uncommitted state
   (`server.hydration`);
4. the deltas are appended to the change log and the transaction COMMITs, on the committer's
   thread (`server.committer`), while
5. every affected view's dataflow runs at epoch `ts`; once the COMMIT is done (the write is
   durable) the results are installed and published (`server.publish`). The request is
   acknowledged after that, so a later read sees the write (read-your-writes). Any error
   before COMMIT rolls everything back: nothing of the request is applied (if the COMMIT
   itself fails, the dataflows that ran ahead are rebuilt from the store: `_publish`).

Group commit: a request made only of INSERT, UPDATE and DELETE statements is queued, and
whichever writer holds the write lock next commits every queued request together
(`_commit_group`): one DuckDB transaction in which each request's statements run in arrival
order, each request at its own timestamp (its own change log entries, results, view history
and feed updates); one COMMIT; one engine step for all of them (`server.publish`). Each
request keeps its all-or-nothing: if one fails, the transaction is rolled back, that request
is answered with its error, and the others are run again without it (those before it, then
those after it), so the outcome is that of running them one by one. No request is acknowledged
before the COMMIT that holds it and the publication of its timestamp, so nothing acknowledged is
lost and reads see it.

A request's own thread waits for its answer (`_write_grouped`), or, for a client waiting on the
event loop, nothing does: `submit` queues it with a callback, and `lead`, started on a thread
only when no writer is draining the queue, commits groups until the queue is empty. Over HTTP a
single-row INSERT then costs no thread of its own: eight concurrent writers had eight threads
waking each other and the event loop for the GIL around every group.

A request that changes no table, view or row takes no timestamp (feeds and `as_of` see no
empty epochs). A write's statements run under a `Deadline` (`server.deadline`): past
`write_timeout` the write is rolled back (408 `timeout`). Every `checkpoint_interval`
timestamps the writer checkpoints the views' history (`server.recovery.checkpoint`).
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

from planner.preload import PRELOAD_ROWS, preload_in_background
from server import heap
from server.catalog import explain
from server.committer import Committing
from server.deadline import Deadline
from server.errors import ApiError, Timeout, from_duckdb
from server.failures import error_json
from server.hydration import hydrate_new_views
from server.publish import mark_complete, publish, untouched
from server.recovery import checkpoint, reload
from server.sqltext import Statement
from server.state import ServerState
from server.statements import (
    COMBINED_ROWS,
    Combinable,
    apply,
    combinable,
    insert_combined,
    select_in_write,
)
from server.statistics import TableStatistics
from server.store import TableRecord
from server.transaction import Write
from server.views import Batch

log = logging.getLogger("diffsql.server")


# Requests made only of these statements may be committed in a group with others.
GROUPABLE = frozenset({"INSERT", "UPDATE", "DELETE"})
# The most requests one group commits (a bound on the work a leader does for others).
MAX_GROUP = 256
# The longest a group's leader waits for the writers of the last group (`_siblings`): about
# the round trip of an answer to a client on the same host and its next request.
GROUP_WAIT = 0.004

# A change log entry for `write_logs`: a table's row batches at their timestamps
# (`Store.append_log_at`), or a table's Arrow rows at one timestamp with one diff
# (`Store.append_log_arrow`).
ChangeLog = tuple[TableRecord, list[tuple[int, Batch]]] | tuple[TableRecord, int, Any, int]


def write(state: ServerState, stmts: list[Statement]) -> dict[str, Any]:
    """Run the statements of one write request; all its writes commit atomically at one
    timestamp. Returns {"results": [...], "failed_views": [...]}: the views whose evaluation
    failed at this write (the write itself is committed)."""
    state.require_ready()
    if all(s.kind in GROUPABLE for s in stmts):
        return _write_grouped(state, stmts)
    with state.write_lock:
        w = Write.begin(state)
        try:
            out = _transact(state, w, stmts)
            _maybe_checkpoint(state)
            if sum(w.load_counts.values()) + sum(w.unload_counts.values()) + sum(
                    map(len, w.deltas.values())) >= PRELOAD_ROWS:
                preload_in_background()  # a view over these rows will want the kernels
            return out
        finally:
            w.delete_files()


def _transact(state: ServerState, w: Write, stmts: list[Statement]) -> dict[str, Any]:
    """`write` under the write lock: the transaction, then maintaining the views."""
    deadline = state.watchdog.arm(state.settings.write_timeout, state.store.conn.interrupt)
    state.store.begin()
    try:
        results = _statements(state, w, stmts, deadline)
        if w.changes_nothing(state):
            # A request that changes no table, view or row (`CREATE TABLE IF NOT EXISTS`
            # on an existing table, a DELETE that matches nothing) is not a transaction
            # of the history: it takes no timestamp, so feeds and `as_of` see no empty
            # epochs. Its results name the state it saw, the latest committed timestamp.
            deadline.disarm()
            state.store.rollback()
            w.release()
            for r in results:
                r["timestamp"] = state.last_ts
            return {"results": results, "failed_views": []}
        hydrate_new_views(state, w)
        logs = log_batches(state, [w])
        deadline.disarm()  # from here on the write commits, however long it takes
        deadline.check()
        committing = _commit(state, [w], logs)
    except BaseException as e:
        deadline.disarm()
        state.store.rollback()
        w.release()
        err = _rolled_back(state, e, deadline)
        if err is e:
            raise
        raise err from None
    try:
        failed = _publish(state, [w], committing)[0]
    except BaseException as e:  # its COMMIT failed (nothing of it is applied), or the reload
        w.release()
        raise (from_duckdb(e) if isinstance(e, duckdb.Error) else e) from None
    if w.new_views or w.dropped_views:
        heap.settle_views(dropped=bool(w.dropped_views))
    for r in results:
        r["timestamp"] = w.ts
    return {"results": results, "failed_views": failed}


def _statements(
    state: ServerState, w: Write, stmts: list[Statement], deadline: Deadline
) -> list[dict[str, Any]]:
    """Apply a request's statements to `w` inside the open transaction; their results."""
    results: list[dict[str, Any]] = []
    for s in stmts:
        deadline.check()
        try:
            if s.kind == "SELECT":
                # Inside the transaction: it sees this request's own writes, and an
                # error in it rolls back the whole request.
                results.append(select_in_write(state, w, s))
            elif s.kind == "EXPLAIN":
                stats = TableStatistics.of(state.store.conn, w.tables, state.distinct_cache)
                results.append(explain(s, w.tables, w.views, state.settings.iteration_limit,
                                       stats))
            else:
                results.append(apply(state, w, s))
                w.trial = {}
                w.snapshots = {}
        except ApiError as e:
            if e.line is None:  # no place of its own: the statement that failed
                e.line, e.column = s.line, s.column
            raise
    deadline.check()
    return results


def _rolled_back(state: ServerState, e: BaseException, deadline: Deadline) -> BaseException:
    """The error to answer a rolled-back request with, for what its transaction raised."""
    if deadline.fired:
        # Whatever the interrupted statement raised, the cause is the time limit.
        return Timeout(
            f"the write exceeded the time limit of {state.settings.write_timeout:g}s "
            "(--write-timeout) and was rolled back; nothing was applied",
            code="timeout",
        )
    if isinstance(e, duckdb.Error):
        return from_duckdb(e)
    return e


def _commit(state: ServerState, ws: list[Write], logs: list[ChangeLog]) -> Committing:
    """Start the last DuckDB work of the transaction holding `ws` on the committer's thread:
    the change logs `logs` (`log_batches`), the clock, COMMIT; then the views the writes do
    not touch are complete through the last write's timestamp, and the clock moves to it."""
    quiet = untouched(state, ws)

    def work() -> None:
        write_logs(state, logs)
        advance_clock(state, ws[-1])
        state.store.commit()
        mark_complete(state, quiet, ws[-1].ts)  # before reads wait for the new clock
        state.last_ts = state.committed_ts = ws[-1].ts

    return state.committer.start(work, state.store.rollback)


def _publish(state: ServerState, ws: list[Write], committing: Committing | None = None
             ) -> list[list[dict[str, Any]]]:
    """`publish` the writes `ws`, committed or being committed (`committing`); for each, the
    views that failed at it. If maintaining them fails (a bug), or their COMMIT does, the views
    are rebuilt from the store (their dataflows ran ahead of it); a COMMIT's error is raised
    then: nothing of `ws` is applied. The COMMIT is never left in flight."""
    try:
        return publish(state, ws, committing)
    except BaseException as e:
        error = committing.settle() if committing is not None else None
        if not isinstance(e, Exception):
            raise
        if error is None:  # a bug after COMMIT
            log.exception("maintaining views at timestamp %d failed; reloading", ws[-1].ts)
        else:
            log.error("the COMMIT at timestamp %d failed (%s); reloading the views",
                      ws[-1].ts, error)
        reload(state)
        if error is not None:
            raise error from None
        with state.state_lock:
            failed = [
                {"name": n, "error": error_json(v.error)}
                for n, v in sorted(state.views.items())
                if not v.running
            ]
        return [failed for _ in ws]


def _maybe_checkpoint(state: ServerState) -> None:
    if state.last_ts - state.checkpoint_ts >= state.settings.checkpoint_interval or \
            state.rebuilt_since_checkpoint:
        state.rebuilt_since_checkpoint = False
        checkpoint(state)


# ---------------------------------------------------------------------- group commit


@dataclass(eq=False)
class _Request:
    """A DML request waiting to be committed by whichever writer leads its group."""

    stmts: list[Statement]
    # How it runs combined with its neighbours (`statements.combinable`), or None.
    insert: Combinable | None = None
    # Set by the writer that answers it, under the write lock (which a waiting thread takes
    # before it looks): a flag, not an Event, as nothing sleeps on it.
    done: bool = False
    result: dict[str, Any] | None = None
    error: BaseException | None = None
    # Called with the answer once it is known, on the thread that committed the group (a
    # request queued by `submit`, whose client waits on an event loop, not on a thread).
    answer: Callable[[dict[str, Any] | None, BaseException | None], None] | None = None

    def finish(
        self, result: dict[str, Any] | None = None, error: BaseException | None = None
    ) -> None:
        self.result, self.error = result, error
        self.done = True
        if self.answer is not None:
            try:
                self.answer(result, error)
            except Exception:  # noqa: BLE001 - the group's other answers must still go out
                log.exception("answering a request failed (its client is gone)")


def _write_grouped(state: ServerState, stmts: list[Statement]) -> dict[str, Any]:
    """Group commit: queue the request; whoever holds the write lock next (its own thread,
    or one that queued earlier) commits every queued request together (`_commit_group`)."""
    # Rendered here, in the request's own thread, so the writer only joins the texts.
    req = _Request(stmts, combinable(stmts))
    with state.queued:
        state.write_queue.append(req)
        state.queued.notify()
    with state.write_lock:
        while not req.done:  # it is queued still, so the queue is not empty
            _commit_next(state)
    if req.error is not None:
        raise req.error
    assert req.result is not None
    return req.result


def submit(
    state: ServerState,
    stmts: list[Statement],
    answer: Callable[[dict[str, Any] | None, BaseException | None], None],
) -> bool:
    """Group commit for a caller that does not wait on a thread (an event loop): queue the
    request, to be answered by `answer(result, error)` from the thread that commits its group.
    Returns whether the caller must start `lead` on a thread: no writer is draining the queue
    for such requests. The request must be groupable and the state ready."""
    req = _Request(stmts, combinable(stmts), answer=answer)
    with state.queued:
        state.write_queue.append(req)
        state.queued.notify()
        start, state.leading = not state.leading, True
    return start


def lead(state: ServerState) -> None:
    """Commit queued requests group after group until the queue is empty (`submit`'s writer).

    Under `queued`, the queue is found empty and `leading` cleared together, so a request that
    `submit` queues is either in a group this writer takes or starts a new writer."""
    try:
        while True:
            with state.write_lock:
                if not _commit_next(state):
                    return
    except BaseException:
        with state.queued:
            state.leading = False
        raise


def _commit_next(state: ServerState) -> bool:
    """Under the write lock: commit the next group of queued requests, up to `MAX_GROUP`
    (after `_siblings`) and not past the next checkpoint. False when the queue is empty:
    then, in the same critical section of `queued`, no writer is draining it any more
    (`leading`)."""
    with state.queued:
        if not state.write_queue:
            state.leading = False
            return False
        _siblings(state)
        # A group takes a timestamp per request (at most): it never takes the clock past the
        # next checkpoint, which `_try_group` makes before answering, so a crash replays at
        # most `checkpoint_interval` timestamps (a group of 256 could cross it by 255).
        size = MAX_GROUP
        if not state.settings.memory:  # (in memory, nothing is checkpointed or replayed)
            due = state.settings.checkpoint_interval - (state.last_ts - state.checkpoint_ts)
            size = max(1, min(MAX_GROUP, due))
        group = state.write_queue[:size]
        del state.write_queue[:size]
    state.last_group = len(group)
    _commit_group(state, group)
    return True


def _siblings(state: ServerState) -> None:
    """Group commit's commit delay (under `state.queued`): when the last group committed
    several requests and fewer are queued now, wait up to `GROUP_WAIT` for as many.

    Concurrent writers that wait for their answer fall into two cohorts of about half each:
    the requests that arrive while a group commits make the next group, and those answered
    come back only after it has begun. Waiting the round trip of an answer lets them join,
    so each group's fixed cost (its DuckDB statement and COMMIT, one run of every view's
    dataflow) is shared by all of them. A lone writer (a last group of one) never waits."""
    want = min(state.last_group, MAX_GROUP)
    if want > 1 and len(state.write_queue) < want:
        state.queued.wait_for(lambda: len(state.write_queue) >= want, GROUP_WAIT)


def _commit_group(state: ServerState, group: list[_Request]) -> None:
    """Commit `group` (under the write lock). If request i fails, it is answered with its
    error; the requests before it (which succeeded) are run again and committed as a group,
    then the requests after it are: so each keeps its all-or-nothing, and the outcome is that
    of running the requests one by one in order. Adjacent single-row-style INSERTs into one
    table run as one statement (`statements.insert_combined`); if such a statement fails, the
    group is run again without combining, which finds the request at fault. So no request
    runs more than three times. Every request of the group is answered, whatever happens."""
    todo: deque[tuple[list[_Request], bool]] = deque([(list(group), True)])
    try:
        while todo:
            pending, combine = todo.popleft()
            if not pending:
                continue
            refused = _try_group(state, pending, combine)
            if refused is _COMBINED_FAILED:
                todo.appendleft((pending, False))
            elif refused is not None:
                i, err = refused
                pending[i].finish(error=err)
                todo.appendleft((pending[i + 1 :], combine))
                todo.appendleft((pending[:i], combine))
    except BaseException as e:
        err = from_duckdb(e) if isinstance(e, duckdb.Error) else e
        for req in group:
            if not req.done:
                req.finish(error=err)
        if not isinstance(e, Exception):
            raise


# `_try_group`'s answer when a combined INSERT failed: run the group again uncombined.
_COMBINED_FAILED = (-1, RuntimeError("a combined INSERT failed"))


def _combined_run(pending: list[_Request], i: int) -> int:
    """How many requests from `pending[i]` on run as one combined INSERT: the longest run of
    combinable requests into the target of the first, up to `COMBINED_ROWS` rows in all (1
    when `pending[i]` runs alone)."""
    first = pending[i].insert
    if first is None:
        return 1
    rows, j = first.rows, i + 1
    while j < len(pending):
        nxt = pending[j].insert
        if nxt is None or nxt.target != first.target or rows + nxt.rows > COMBINED_ROWS:
            break
        rows += nxt.rows
        j += 1
    return j - i


def _try_group(
    state: ServerState, pending: list[_Request], combine: bool = True
) -> tuple[int, BaseException] | None:
    """Run every request of `pending` in one DuckDB transaction, each at its own next
    timestamp, COMMIT once and publish once, then answer them. If request i fails, roll back
    and return (i, its error): nothing of the group is applied. With `combine`, runs of
    combinable INSERTs are one statement each; if one fails, roll back and return
    `_COMBINED_FAILED`.

    A group of one plain INSERT whose clock needs no statement (`_clock_quiet`) runs without
    BEGIN and COMMIT: its one statement, which writes the rows and their change log, commits
    itself, and a failure leaves nothing applied (then it runs again uncombined, in a
    transaction, for its own error)."""
    ws: list[Write] = []
    answers: list[tuple[_Request, list[dict[str, Any]], Write | None, int]] = []
    ts = state.last_ts
    alone = (combine and len(pending) == 1 and pending[0].insert is not None
             and _clock_quiet(state, ts + 1))
    if not alone:
        state.store.begin()
    try:
        i = 0
        while i < len(pending):
            n = _combined_run(pending, i) if combine else 1
            if combine and pending[i].insert is not None:
                # One or more INSERTs as one statement, which logs their rows too
                reqs = pending[i : i + n]
                run = [Write.begin(state, ts + 1 + k) for k in range(n)]
                deadline = state.watchdog.arm(
                    state.settings.write_timeout, state.store.conn.interrupt
                )
                try:
                    parts = [r.insert for r in reqs if r.insert is not None]
                    results = insert_combined(state, run, [r.stmts[0] for r in reqs], parts)
                    deadline.disarm()
                    if not alone:
                        # In a transaction: a deadline that fired before it was disarmed
                        # fails the group, which runs again uncombined. Alone, the statement
                        # has committed: it stands, and must not run a second time.
                        deadline.check()
                except Exception as e:
                    deadline.disarm()
                    state.store.rollback()
                    if alone and deadline.fired:
                        # Its time limit stopped it, nothing applied: running it again in a
                        # transaction would only wait for the limit a second time.
                        return 0, _rolled_back(state, e, deadline)
                    return _COMBINED_FAILED
                for req, w, res in zip(reqs, run, results, strict=True):
                    ts += 1
                    ws.append(w)
                    answers.append((req, [res], w, ts))
                i += n
                continue
            req = pending[i]
            w = Write.begin(state, ts + 1)
            deadline = state.watchdog.arm(
                state.settings.write_timeout, state.store.conn.interrupt
            )
            try:
                results = _statements(state, w, req.stmts, deadline)
                deadline.disarm()
                deadline.check()  # fired before it was disarmed: the request timed out
            except BaseException as e:
                deadline.disarm()
                state.store.rollback()
                return i, _rolled_back(state, e, deadline)
            if w.changes_nothing(state):
                answers.append((req, results, None, ts))  # it saw the state through ts
            else:
                ts += 1
                ws.append(w)
                answers.append((req, results, w, ts))
            i += 1
        committing = None
        if not ws:
            state.store.rollback()
        elif alone:
            state.last_ts = state.committed_ts = ts  # committed by its statement
            # its batches, for publishing: its statement logged its rows
            if log_batches(state, ws):
                raise RuntimeError("a combined INSERT left change log entries to write")
        else:
            committing = _commit(state, ws, log_batches(state, ws))
    except BaseException:
        state.store.rollback()
        raise
    # (a failed COMMIT raises here: `_commit_group` answers the group with its error)
    failed = dict(zip((id(w) for w in ws), _publish(state, ws, committing), strict=True)) \
        if ws else {}
    if ws:
        # Before the answers: a write acknowledged before the checkpoint it made due would
        # be replayed after a crash beyond the interval (and, crash after crash, ever more).
        _maybe_checkpoint(state)
    for req, results, w, at in answers:
        for r in results:
            r["timestamp"] = at
        req.finish({"results": results, "failed_views": failed.get(id(w), []) if w else []})
    return None


def log_batches(state: ServerState, ws: list[Write]) -> list[ChangeLog]:
    """Make each write's row batches (`Write.batches`, what the views are fed) from its
    deltas, and return what the change logs still need (`write_logs`): those batches, each at
    its write's timestamp, and the rows the writes changed in bulk (`Write.arrow_logs`: a
    COPY's, a large DML statement's). The INSERTs run as one combined statement logged their
    rows themselves (`Write.logged`)."""
    logs: list[ChangeLog] = [log for w in ws for log in w.arrow_logs]
    by_table: dict[str, list[tuple[int, Batch]]] = defaultdict(list)
    for w in ws:
        for name, delta in w.deltas.items():
            if name not in w.tables:
                continue
            batch = [(row, d) for row, d in delta.items() if d]
            if batch:
                w.batches[name] = batch
                if name not in w.logged:
                    by_table[name].append((w.ts, batch))
    tables = ws[-1].tables
    logs.extend((tables[name], batches) for name, batches in by_table.items())
    return logs


def write_logs(state: ServerState, logs: list[ChangeLog]) -> None:
    """Append `logs` (`log_batches`) to the tables' change logs, inside the transaction (so
    they commit with the rows): one statement per table, or per bulk change."""
    for entry in logs:
        if len(entry) == 2:
            state.store.append_log_at(*entry)
        else:
            state.store.append_log_arrow(*entry)


def _trim_due(state: ServerState, ts: int) -> tuple[int, bool]:
    """The retention horizon of a write at `ts`, and whether the change logs are due a trim
    to it (one every `history_retention // 10` timestamps)."""
    horizon = ts - state.settings.history_retention
    step = max(1, state.settings.history_retention // 10)
    return horizon, horizon - state.history_since >= step


def _clock_quiet(state: ServerState, ts: int) -> bool:
    """Whether `advance_clock` writes nothing for a write at `ts` that changes only rows
    and logs some: its change log carries the clock, and no trim of the logs is due."""
    horizon, due = _trim_due(state, ts)
    return horizon < ts and not due


def advance_clock(state: ServerState, w: Write) -> None:
    """Store the clock at `w.ts` (the last write of the transaction) and trim the change logs
    older than the retention horizon, inside the transaction."""
    horizon, due = _trim_due(state, w.ts)
    if not (w.logged_at_ts(state) and horizon < w.ts):
        # A write that only changed rows has them in a change log at `w.ts` (the trim below
        # keeps them), which recovery reads the clock back from (`Store.last_logged_ts`):
        # one statement less per write.
        state.store.set_meta("last_ts", w.ts)
    if w.next_table_id != state.next_table_id:
        state.store.set_meta("next_table_id", w.next_table_id)
    if due:
        state.store.trim_logs(w.tables.values(), horizon)
        w.history_since = horizon
