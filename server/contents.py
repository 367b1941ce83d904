"""Reading a view's contents: its rows as of a timestamp, and subscriptions to its changes.

Reads take only the state lock, which the writer holds just to install a timestamp's results,
so they are not blocked by a long write. Invariant: what a read returns is the view's
contents at one timestamp it is complete through (`complete_ts`, or `as_of` within its
retained history from `base_ts`), and a subscription starts exactly where its snapshot or
`since` ends: the updates after it are delivered by `server.feeds` as each write publishes
them, never a timestamp twice or skipped. A view's history before `base_ts` is gone (410).
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.trace import Snapshot
from server.errors import BadRequest, Conflict, Gone, NotFound, Timeout
from server.feeds import Message, Subscription, progress_message, update_message
from server.state import ServerState
from server.store import Row
from server.values import row_to_json, sort_key
from server.views import Batch, undo


async def wait_complete(state: ServerState, name: str, ts: int, timeout: float) -> None:
    """Wait until view `name` is complete through `ts`."""
    await state.wait_ready()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.002
    while True:
        with state.state_lock:
            v = state.views.get(name)
            if v is None:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
            if not v.running:
                raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
            if v.complete_ts >= ts:
                return
            done = v.complete_ts
        if loop.time() >= deadline:
            raise Timeout(
                f"view {name!r} is not complete through timestamp {ts} after {timeout:g}s "
                f"(it is complete through {done}; timestamps advance with each write)",
                code="as_of_timeout",
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


def view_rows(state: ServerState, name: str, as_of: int | None) -> dict[str, Any]:
    columns, ts, items = view_items(state, name, as_of)
    rows = sorted((r for r, n in items for _ in range(n)), key=sort_key)
    return {"columns": columns, "rows": [row_to_json(r) for r in rows], "timestamp": ts}


def view_items(
    state: ServerState, name: str, as_of: int | None
) -> tuple[list[str], int, list[tuple[Row, int]]]:
    """A view's column names, timestamp and (row, count) items as of `as_of` (default:
    complete): its output arrangement's snapshot, less the retained history after `as_of`,
    both taken under the state lock and read outside it (neither ever changes)."""
    if name in state.views:
        state.require_ready()
    with state.state_lock:
        v = state.views.get(name)
        if v is None:
            raise NotFound(f"unknown view {name!r}", code="unknown_view")
        if not v.running:
            raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
        ts = v.complete_ts if as_of is None else as_of
        if ts < v.base_ts:
            raise Gone(
                f"view {name!r} has history only from timestamp {v.base_ts} "
                f"(created at {v.created_ts}); as_of={ts} is not available"
            )
        columns = [c["name"] for c in v.columns]
        snap = v.snapshot
        later = [b for t, b in v.updates_after(ts)]
    items = [] if snap is None else snap.items()
    return columns, ts, list(undo(items, later).items()) if later else items


def subscribe(
    state: ServerState, name: str, snapshot: bool, since: int | None, loop: asyncio.AbstractEventLoop
) -> tuple[Subscription, list[Message]]:
    """Register a subscriber (see `server.feeds`). It never waits: while the server is
    hydrating it is 503 `hydrating` (`wait_ready` first). A snapshot's rows are read from the
    view's arrangement before the state lock is taken to register (the writer would wait on
    a large view's read), and used if the view is still at that snapshot then."""
    early: tuple[tuple[int, int], Snapshot] | None = None
    early_rows: Batch = []
    if snapshot and since is None:
        with state.state_lock:
            v = state.views.get(name)
            if v is not None and v.snapshot is not None:
                key = (v.created_ts, v.complete_ts)
                if not state.hub.has_snapshot(name, key):
                    early = (key, v.snapshot)
        if early is not None:
            early_rows = early[1].items()
    with state.state_lock:
        v = state.views.get(name)
        if v is None:
            raise NotFound(f"unknown view {name!r}", code="unknown_view")
        if not state.ready.is_set():
            raise state.hydrating_error_locked()
        if not v.running:
            raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
        now = v.complete_ts
        # (`complete_ts` too: a write's COMMIT marks the views it leaves alone complete
        # through its timestamp just before the clock moves to it, and a feed may have sent
        # that progress already)
        issued = max(state.last_ts, state.committed_ts, now)
        if since is not None and since > issued:
            # Never issued: a client bug. Waiting could claim progress nothing backs.
            raise BadRequest(
                f"since={since} is beyond the latest timestamp this server has issued "
                f"({issued}); resume with a timestamp the server sent",
                code="since_in_future",
            )
        msgs: list[Message] = []
        if since is not None:
            if since >= v.base_ts:
                msgs = [update_message(t, b) for t, b in v.updates_after(since)]
            elif since < state.dropped_at.get(name, 0):
                # an earlier view of this name was there at `since`: what the client holds
                # is that view's, which this one's contents at creation would not undo
                raise Gone(
                    f"view {name!r} was dropped at timestamp {state.dropped_at[name]} and "
                    f"created again; cannot resume after {since}: resubscribe with "
                    "snapshot=true"
                )
            elif v.intact:
                base = list(v.contents_at(v.base_ts).items())
                if base:
                    msgs.append(update_message(v.base_ts, base))
                msgs += [update_message(t, b) for t, b in v.updates_after(v.base_ts)]
            else:
                raise Gone(
                    f"history of view {name!r} before timestamp {v.base_ts} is no longer "
                    f"retained; cannot resume after {since}: resubscribe with snapshot=true"
                )
        elif snapshot:
            key = (v.created_ts, now)
            rows = v.items
            if early is not None and early[0] == key and early[1] is v.snapshot:
                rows = lambda: early_rows  # noqa: E731 - read before the lock
            msgs.append(state.hub.snapshot(name, key, rows))
        if since is None or since <= now:
            msgs.append(progress_message(now))
        sub = state.hub.add(name, loop)
        # Frames at or before its position are skipped: the messages above hold everything
        # through it. A view that a group of writes does not touch is complete through the
        # group's last timestamp before the group's timestamps are published one by one
        # (`writes._commit`): their progress would take the feed back. And a `since` that
        # was issued but is not yet complete for this view waits, claiming no progress
        # before the view reaches it (the client already has everything to `since`).
        sub.position = sub.after = since if since is not None and since > now else now
    return sub, msgs


def unsubscribe(state: ServerState, sub: Subscription) -> None:
    with state.state_lock:
        state.hub.remove(sub)
