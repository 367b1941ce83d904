"""Change feeds: fan-out of view updates and progress to subscribers (SSE and WebSocket).

A feed is a sequence of frames: `update` (every change of the view at one timestamp),
`progress` (every update at or before its timestamp has been sent) and, last, `error` before the
server ends a feed. On the wire (see `routes/changes.py`) a WebSocket frame is the JSON object
{"type": ..., ...}; an SSE event is `event: <type>`, `id: <timestamp>` and `data:` the object
without its "type".

Invariant (no update lost or repeated): a subscription's initial frames are computed and the
subscription is registered in one critical section of the server's state lock, and the writer
publishes each timestamp under the same lock after updating view state; so the initial frames
cover exactly the timestamps <= the current one and the queue exactly the later ones, in order.
(A view that a group of writes does not touch is complete through the group's last timestamp
before the group's timestamps are published: a subscription drops frames at or before its
start, `Subscription.after`, so its progress never goes back.)
`Hub.publish` only captures the subscribers and the raw batches under the lock; one encoder
thread per hub serialises each frame once (not once per subscriber, never on the event loop) and
then crosses to the event loop with `call_soon_threadsafe`. Both steps are FIFO, so order holds.

Invariant (bounded memory): a subscriber's queue holds at most `limit` frames and `limit_bytes`
encoded bytes (a single frame is always accepted into an empty queue, so one large write never
disconnects a subscriber that keeps up). A subscriber that would exceed either is *lagging*: its
queue is dropped at once and its feed ends with an error frame `subscriber_lagging` carrying
`resume_since`, the timestamp of the last frame handed to its connection; resuming with
`since=resume_since` loses and repeats nothing, because every frame before the error frame was
handed to the connection before it.

Snapshots are shared: subscribers of an unchanged view at one timestamp get the same frame
(`Hub.snapshot`), copied once under the lock and encoded once; the hub keeps the latest one per
view until the view changes or ends (memory: one encoded snapshot per subscribed view).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from server.values import row_to_json
from server.views import Batch

# Rows per piece when a large update is serialised in pieces (off the event loop).
CHUNK_ROWS = 2000


def _dumps(obj: Any) -> str:
    # ensure_ascii: a value holding a lone surrogate still encodes (as an escape).
    return json.dumps(obj, separators=(",", ":"))


@dataclass(eq=False)
class Frame:
    """One message of a feed. Updates keep their raw batch until encoded (`encode`), so the
    state lock is never held to serialise them."""

    type: str
    timestamp: int | None = None
    batch: Batch | None = None
    extra: dict[str, Any] | None = None
    sse: str | None = None
    ws: str | None = None
    shared: bool = False
    """Handed to many subscribers (a cached snapshot): encode once, whole, under `_lock`."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def rows(self) -> int:
        return len(self.batch) if self.batch is not None else 0

    def to_json(self) -> dict[str, Any]:
        """The message as a dict with its "type" (tests and small frames only)."""
        return json.loads(self.ws_text())

    # -- encoding ---------------------------------------------------------------------------

    def _head(self) -> str:
        return f'{{"timestamp":{self.timestamp},"updates":['

    def _pieces(self) -> Iterator[str]:
        """The JSON of the frame without "type", in pieces of at most CHUNK_ROWS rows."""
        if self.type != "update":
            body: dict[str, Any] = {}
            if self.timestamp is not None:
                body["timestamp"] = self.timestamp
            body.update(self.extra or {})
            yield _dumps(body)
            return
        batch = self.batch or []
        yield self._head()
        for i in range(0, len(batch), CHUNK_ROWS):
            part = ",".join(
                '{"row":' + _dumps(row_to_json(row)) + ',"diff":' + str(diff) + "}"
                for row, diff in batch[i : i + CHUNK_ROWS]
            )
            yield ("," + part) if i else part
        yield "]}"

    def _sse_head(self) -> str:
        head = f"event: {self.type}\n"
        if self.timestamp is not None:
            head += f"id: {self.timestamp}\n"
        return head + "data: "

    def sse_pieces(self) -> Iterator[str]:
        """The SSE event in pieces (one event: the data line is simply written in parts)."""
        if self.sse is not None:
            yield self.sse
            return
        yield self._sse_head()
        yield from self._pieces()
        yield "\n\n"

    def sse_text(self) -> str:
        if self.sse is None:
            with self._lock:
                if self.sse is None:
                    self.sse = "".join(self.sse_pieces())
        return self.sse

    def ws_text(self) -> str:
        if self.ws is None:
            with self._lock:
                return self._ws_text()
        return self.ws

    def _ws_text(self) -> str:
        if self.ws is None:
            body = "".join(self._pieces())
            self.ws = f'{{"type":"{self.type}",' + body[1:] if body != "{}" else (
                f'{{"type":"{self.type}"}}'
            )
        return self.ws

    def encode(self) -> Frame:
        self.sse_text()
        self.ws_text()
        return self

    @property
    def nbytes(self) -> int:
        """The bytes this message costs a subscriber's queue: what it will be sent, one
        encoding (SSE or WebSocket: the same JSON, within a few bytes), not both of them (that
        made the documented 8 MiB of unsent messages about 4 MiB)."""
        return max(len(self.sse or ""), len(self.ws or ""))


def update_message(ts: int, batch: Batch) -> Frame:
    return Frame("update", ts, batch=batch)


def progress_message(ts: int) -> Frame:
    return Frame("progress", ts)


def error_message(code: str, message: str, **extra: Any) -> Frame:
    err = {"code": code, "message": message, "line": None, "column": None}
    return Frame("error", extra={"error": err, **extra})


Message = Frame
_CLOSE = Frame("close")
_LAGGING = Frame("lagging")


@dataclass(eq=False)
class Subscription:
    view: str
    loop: asyncio.AbstractEventLoop
    limit: int
    limit_bytes: int
    id: int = 0
    closed: bool = False
    after: int | None = None
    """Frames at or before this timestamp are dropped as they arrive: the subscriber's first
    messages hold everything through it (`contents.subscribe`)."""
    position: int | None = None
    """Timestamp of the last frame handed to the connection (where a resume starts)."""
    queue: deque[Frame] = field(default_factory=deque)
    queued_bytes: int = 0
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def _push(self, frames: list[Frame]) -> None:
        if self.closed:
            return
        if self.after is not None:
            frames = [f for f in frames if f.timestamp is None or f.timestamp > self.after]
            if not frames:
                return
        size = sum(f.nbytes for f in frames)
        if self.queue and (
            len(self.queue) + len(frames) > self.limit
            or self.queued_bytes + size > self.limit_bytes
        ):
            # Drop what it has not read: its memory is freed now, and it resumes with since.
            self.closed = True
            self.queue.clear()
            self.queued_bytes = 0
            self.queue.append(_LAGGING)
        else:
            self.queue.extend(frames)
            self.queued_bytes += size
            if frames and frames[-1] is _CLOSE:
                self.closed = True
        self._ready.set()

    def push_threadsafe(self, frames: list[Frame]) -> None:
        try:
            self.loop.call_soon_threadsafe(self._push, frames)
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.closed = True

    async def next(self, timeout: float) -> Frame | None:
        """The next frame, None on timeout, or `_CLOSE` / `_LAGGING` at the end."""
        if not self.queue:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return None
        frame = self.queue.popleft()
        self.queued_bytes -= frame.nbytes
        return frame

    def next_nowait(self) -> Frame | None:
        """The next frame if one is queued, else None."""
        if not self.queue:
            return None
        frame = self.queue.popleft()
        self.queued_bytes -= frame.nbytes
        return frame

    def lagging_error(self) -> Frame:
        where = self.position if self.position is not None else 0
        return error_message(
            "subscriber_lagging",
            f"this subscriber fell too far behind (more than {self.limit} messages or "
            f"{self.limit_bytes} bytes unread); resume with since={where}",
            resume_since=where,
        )


def _push_all(pushes: list[tuple[Subscription, list[Frame]]]) -> None:
    """Deliver to many subscriptions with one wake-up of each event loop (not one each)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Subscription, list[Frame]]]] = {}
    for sub, frames in pushes:
        by_loop.setdefault(sub.loop, []).append((sub, frames))
    for loop, items in by_loop.items():

        def run(items: list[tuple[Subscription, list[Frame]]] = items) -> None:
            for sub, frames in items:
                sub._push(frames)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop is closed: the server is shutting down
            for sub, _ in items:
                sub.closed = True


def is_end(frame: Frame) -> bool:
    return frame is _CLOSE or frame is _LAGGING


class Hub:
    """Registry of subscriptions by view. All methods but `shutdown` are called under the
    state lock; the work they queue runs on the hub's encoder thread, in order."""

    def __init__(self, queue_limit: int, queue_bytes: int = 8 * 1024 * 1024) -> None:
        self.queue_limit = queue_limit
        self.queue_bytes = queue_bytes
        self._subs: dict[str, dict[int, Subscription]] = {}
        self._snapshots: dict[str, tuple[tuple[int, int], Frame]] = {}
        self._ids = itertools.count(1)
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feed-encoder")
        self._lock = threading.Lock()
        self._down = False

    def _later(self, job: Callable[[], None]) -> None:
        with self._lock:
            if not self._down:
                self._encoder.submit(job)

    def has_snapshot(self, view: str, key: tuple[int, int]) -> bool:
        """Whether `snapshot(view, key, ...)` would answer its cached frame."""
        cached = self._snapshots.get(view)
        return cached is not None and cached[0] == key

    def snapshot(self, view: str, key: tuple[int, int], rows: Callable[[], Batch]) -> Frame:
        """The snapshot update of `view` at `key` = (created_ts, complete_ts): one shared
        frame for every subscriber that arrives while the view is unchanged, so a crowd of
        subscribers costs one copy and one encoding, not one each."""
        cached = self._snapshots.get(view)
        if cached is not None and cached[0] == key:
            return cached[1]
        frame = Frame("update", key[1], batch=rows(), shared=True)
        self._snapshots[view] = (key, frame)
        return frame

    def add(self, view: str, loop: asyncio.AbstractEventLoop) -> Subscription:
        sub = Subscription(view, loop, self.queue_limit, self.queue_bytes, id=next(self._ids))
        self._subs.setdefault(view, {})[sub.id] = sub
        return sub

    def remove(self, sub: Subscription) -> None:
        sub.closed = True
        self._subs.get(sub.view, {}).pop(sub.id, None)

    def publish(self, ts: int, batches: dict[str, Batch], views: Iterable[str]) -> None:
        """Send timestamp `ts`: its update (if any) then progress, to every view's subscribers."""
        for view in batches:
            self._snapshots.pop(view, None)  # changed: the next snapshot is a new frame
        targets = [
            (list(subs.values()), batches.get(view))
            for view in views
            if (subs := self._subs.get(view))
        ]
        if not targets:
            return

        def send() -> None:
            progress = progress_message(ts).encode()
            pushes = []
            for subs, batch in targets:
                frames = [update_message(ts, batch).encode(), progress] if batch else [progress]
                pushes += [(sub, frames) for sub in subs]
            _push_all(pushes)

        self._later(send)

    def end_view(self, view: str, code: str, message: str) -> None:
        self._snapshots.pop(view, None)
        subs = list(self._subs.pop(view, {}).values())
        if subs:
            frames = [error_message(code, message).encode(), _CLOSE]
            self._later(lambda: _push_all([(s, frames) for s in subs]))

    def close_all(self) -> None:
        subs = [s for view in list(self._subs) for s in self._subs.pop(view).values()]
        for sub in subs:
            # Directly (not through the encoder): shutting down must not wait for encoding.
            sub.push_threadsafe([_CLOSE])

    def shutdown(self) -> None:
        with self._lock:
            self._down = True
        self._encoder.shutdown(wait=False, cancel_futures=True)
