"""Change feeds: fan-out of view updates and progress to subscribers (SSE and WebSocket).

Messages are dicts: {"type": "update", "timestamp": T, "updates": [{"row", "diff"}]} and
{"type": "progress", "timestamp": T} (every update at or before T has been sent), plus
{"type": "error", "error": {...}} before the server ends a feed.

Invariant (no update lost or repeated): a subscription's initial messages are computed and the
subscription is registered in one critical section of the server's state lock, and the writer
publishes each timestamp under the same lock after updating view state; so the initial messages
cover exactly the timestamps <= the current one and the queue exactly the later ones, in order.
Publishing crosses from the writer thread to the event loop with `call_soon_threadsafe`, which
preserves order. A subscriber that falls too far behind is ended with an error (it can resume
with `since`), so a slow client cannot grow the server's memory without bound.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from server.values import row_to_json
from server.views import Batch

Message = dict[str, Any]
_CLOSE: Message = {"type": "close"}


def update_message(ts: int, batch: Batch) -> Message:
    return {
        "type": "update",
        "timestamp": ts,
        "updates": [{"row": row_to_json(row), "diff": diff} for row, diff in batch],
    }


def progress_message(ts: int) -> Message:
    return {"type": "progress", "timestamp": ts}


def error_message(code: str, message: str) -> Message:
    return {
        "type": "error",
        "error": {"code": code, "message": message, "line": None, "column": None},
    }


@dataclass(eq=False)
class Subscription:
    view: str
    loop: asyncio.AbstractEventLoop
    limit: int
    queue: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    id: int = 0
    closed: bool = False
    after: int | None = None
    """Skip messages at or before this timestamp (a client resuming from the future)."""

    def _push(self, messages: list[Message]) -> None:
        if self.closed:
            return
        if self.queue.qsize() + len(messages) > self.limit:
            self.closed = True
            self.queue.put_nowait(
                error_message(
                    "subscriber_lagging",
                    "this subscriber fell too far behind; reconnect with since=<last timestamp>",
                )
            )
            self.queue.put_nowait(_CLOSE)
            return
        for m in messages:
            self.queue.put_nowait(m)

    def push_threadsafe(self, messages: list[Message]) -> None:
        try:
            self.loop.call_soon_threadsafe(self._push, messages)
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.closed = True

    async def next(self, timeout: float) -> Message | None:
        """The next message, None on timeout, or a {"type": "close"} message at the end."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None


class Hub:
    """Registry of subscriptions by view. All methods are called under the state lock."""

    def __init__(self, queue_limit: int) -> None:
        self.queue_limit = queue_limit
        self._subs: dict[str, dict[int, Subscription]] = {}
        self._ids = itertools.count(1)

    def add(self, view: str, loop: asyncio.AbstractEventLoop) -> Subscription:
        sub = Subscription(view, loop, self.queue_limit, id=next(self._ids))
        self._subs.setdefault(view, {})[sub.id] = sub
        return sub

    def remove(self, sub: Subscription) -> None:
        sub.closed = True
        self._subs.get(sub.view, {}).pop(sub.id, None)

    def publish(self, ts: int, batches: dict[str, Batch], views: Iterable[str]) -> None:
        """Send timestamp `ts`: its update (if any) then progress, to every view's subscribers."""
        progress = progress_message(ts)
        for view in views:
            subs = self._subs.get(view)
            if not subs:
                continue
            batch = batches.get(view)
            msgs = [update_message(ts, batch), progress] if batch else [progress]
            for sub in list(subs.values()):
                sub.push_threadsafe(msgs)

    def end_view(self, view: str, code: str, message: str) -> None:
        for sub in list(self._subs.pop(view, {}).values()):
            sub.push_threadsafe([error_message(code, message), _CLOSE])

    def close_all(self) -> None:
        for view in list(self._subs):
            for sub in list(self._subs.pop(view).values()):
                sub.push_threadsafe([_CLOSE])
