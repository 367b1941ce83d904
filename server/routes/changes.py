"""Change feeds of a view: Server-Sent Events (GET) and WebSocket, same messages.

SSE: `event: update` / `event: progress` (and `event: error` before the server ends a feed),
`data:` the message without its "type", `id:` its timestamp, so a reconnecting EventSource's
Last-Event-ID resumes exactly where it stopped. WebSocket: the messages as JSON text frames
with their "type".

Invariant: nothing here serialises a large update on the event loop (a snapshot of a big view
is encoded in pieces on a worker thread), and no connection holds the loop or unbounded memory:
frames wait in the subscription's bounded queue (see `server.feeds`), and a connection that
accepts nothing for `subscriber_stall_seconds` is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from fastapi import APIRouter, Header, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import Message as AsgiMessage
from starlette.types import Receive, Scope, Send

from planner.naming import FOLD
from server.core import Database
from server.deps import DatabaseDep, SettingsDep
from server.errors import ApiError, BadRequest
from server.feeds import Frame, Subscription, is_end

router = APIRouter(tags=["changes"])
log = logging.getLogger("diffsql.feeds")

_MAX_TS = 2**63 - 1
# Updates with more rows than this are encoded on a worker thread, not on the event loop.
_INLINE_ROWS = 64
# Frames already queued for a subscriber are written together, up to about this many bytes.
_BATCH_BYTES = 256 * 1024
_BOOL = TypeAdapter(bool)


async def _messages(
    db: Database, sub: Subscription, initial: list[Frame], heartbeat: float
) -> AsyncIterator[list[Frame] | None]:
    """Initial frames, then live ones, in lists (frames already queued are handed out
    together, so a client that is behind gets one write, not one per frame); None means 'idle
    for a heartbeat'. Ends on close or after an error frame. `sub.position` follows what has
    been handed out."""
    try:
        for m in initial:
            yield [m]
            if m.timestamp is not None:
                sub.position = m.timestamp
        while True:
            m = await sub.next(heartbeat)
            if m is None:
                yield None
                continue
            batch: list[Frame] = []
            size, end = 0, False
            while m is not None:
                if is_end(m):
                    if m.type == "lagging":
                        # Handed out before the error, in the same write: resume after them.
                        for f in batch:
                            if f.timestamp is not None:
                                sub.position = f.timestamp
                        batch.append(sub.lagging_error())
                    end = True
                    break
                batch.append(m)
                size += m.nbytes
                if m.type == "error":
                    end = True
                    break
                if size >= _BATCH_BYTES:
                    break
                m = sub.next_nowait()
            if batch:
                yield batch
                for f in batch:
                    if f.timestamp is not None:
                        sub.position = f.timestamp
            if end:
                return
    finally:
        db.unsubscribe(sub)


async def _sse_pieces(frame: Frame) -> AsyncIterator[str]:
    """The SSE text of a frame; a large one is encoded piece by piece on a worker thread."""
    if frame.sse is not None or frame.rows <= _INLINE_ROWS:
        yield frame.sse_text()
        return
    if frame.shared:  # encoded once for all its subscribers (and kept while it is cached)
        yield await run_in_threadpool(frame.sse_text)
        return
    pieces: Iterator[str] = frame.sse_pieces()
    done = object()
    while True:
        piece = await run_in_threadpool(next, pieces, done)
        if piece is done:
            return
        yield piece  # type: ignore[misc]


async def _ws_text(frame: Frame) -> str:
    if frame.ws is not None or frame.rows <= _INLINE_ROWS:
        return frame.ws_text()
    return await run_in_threadpool(frame.ws_text)


class _FeedResponse(StreamingResponse):
    """A streaming response whose every send must be accepted within `stall` seconds; a
    client that stops reading is disconnected instead of holding the feed forever."""

    def __init__(
        self, content: AsyncIterator[str], stall: float, on_close: Callable[[], None], **kw: Any
    ) -> None:
        super().__init__(content, **kw)
        self.stall = stall
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def timed_send(message: AsgiMessage) -> None:
            async with asyncio.timeout(self.stall):  # a timer, not a task per send
                await send(message)

        try:
            await super().__call__(scope, receive, timed_send)
        except (TimeoutError, ClientDisconnect) as e:
            # Starlette reports an OSError while sending (TimeoutError is one) as a disconnect.
            if isinstance(e, TimeoutError) or isinstance(e.__cause__, TimeoutError) or (
                isinstance(e.__context__, TimeoutError)
            ):
                log.warning("closed a change feed whose client read nothing for %gs", self.stall)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()  # ends the subscription now, not when collected
                except RuntimeError:
                    pass
            self.on_close()  # also when the body never started (the client left at once)


def _timestamp(raw: str, what: str) -> int:
    """A timestamp written in a query parameter or header: ASCII digits only, as the SSE
    feed's `since` is read (Python's int() would take '٣', ' 3', '1_0'); leading zeros are
    read, and one past the timestamps is refused by `_check_since`, never cut short (that
    would resume elsewhere)."""
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest(f"{what} must be a timestamp (an integer >= 0), not {raw[:40]!r}",
                         code="invalid_request")
    digits = raw.lstrip("0") or "0"
    return int(digits) if len(digits) <= 20 else _MAX_TS + 1


def _check_since(since: int | None) -> None:
    if since is not None and not 0 <= since <= _MAX_TS:
        raise BadRequest(
            f"since must be a timestamp between 0 and {_MAX_TS}", code="invalid_request"
        )


@router.get(
    "/views/{name}/changes",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def changes_sse(
    name: str,
    db: DatabaseDep,
    settings: SettingsDep,
    snapshot: bool = Query(True, description="start with the current contents"),
    since: str | None = Query(
        None, description="resume after this timestamp (at most the latest one issued; digits)"
    ),
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    # Read as text, as the WebSocket feed's since and Last-Event-ID are: an int parameter
    # would take what Python's int() takes ('1_0', ' 3', '+2', and '3.0' too).
    if since is not None:
        resume = _timestamp(since, "since")
    elif last_event_id:
        resume = _timestamp(last_event_id, "Last-Event-ID")
    else:
        resume = None
    _check_since(resume)
    await db.wait_ready()  # start-up recovery (see Database.wait_ready)
    # On a worker thread: it waits for the state lock and copies a snapshot under it.
    loop = asyncio.get_running_loop()
    sub, initial = await run_in_threadpool(db.subscribe, name.translate(FOLD), snapshot, resume, loop)

    async def body() -> AsyncIterator[str]:
        messages = _messages(db, sub, initial, settings.heartbeat_seconds)
        try:
            async for batch in messages:
                if batch is None:
                    yield ": keepalive\n\n"
                elif all(f.sse is not None or f.rows <= _INLINE_ROWS for f in batch):
                    yield "".join(f.sse_text() for f in batch)
                else:
                    for f in batch:
                        async for piece in _sse_pieces(f):
                            yield piece
        finally:
            await messages.aclose()

    return _FeedResponse(
        body(),
        settings.subscriber_stall_seconds,
        lambda: db.unsubscribe(sub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _ws_params(query: Any) -> tuple[bool, int | None]:
    """`snapshot` and `since` of a WebSocket subscription (validated here, after the handshake,
    so that a bad value is reported in an error frame rather than as a rejected handshake)."""
    snapshot = True
    raw = query.get("snapshot")
    if raw is not None:
        # read by the rule that reads the SSE feed's bool parameter (pydantic's), so that the
        # two feeds take the same values
        try:
            snapshot = _BOOL.validate_python(raw)
        except ValidationError:
            raise BadRequest(f"snapshot must be true or false, not {raw[:40]!r}",
                             code="invalid_request") from None
    since: int | None = None
    raw = query.get("since")
    if raw is not None:
        since = _timestamp(raw, "since")
        _check_since(since)
    return snapshot, since


@router.websocket("/views/{name}/changes")
async def changes_ws(websocket: WebSocket, name: str) -> None:
    """Query parameters `snapshot` (default true) and `since`, as for the SSE feed. Errors
    (bad parameters, unknown or failed view) arrive as one {"type": "error"} frame, then the
    connection closes with code 1008."""
    db: Database = websocket.app.state.db
    heartbeat: float = websocket.app.state.settings.heartbeat_seconds
    stall: float = websocket.app.state.settings.subscriber_stall_seconds
    offered = websocket.scope.get("subprotocols") or []
    await websocket.accept(subprotocol="diffsql" if "diffsql" in offered else None)
    try:
        snapshot, since = _ws_params(websocket.query_params)
        await db.wait_ready()  # start-up recovery (see Database.wait_ready)
        loop = asyncio.get_running_loop()
        sub, initial = await run_in_threadpool(db.subscribe, name.translate(FOLD), snapshot, since, loop)
    except ApiError as e:
        await websocket.send_json({"type": "error", **e.to_json()})
        await websocket.close(code=1008)
        return

    async def watch_disconnect() -> None:
        try:
            while True:
                msg: Any = await websocket.receive()
                if msg["type"] == "websocket.disconnect":
                    return
        except (WebSocketDisconnect, RuntimeError):
            return

    watcher = asyncio.create_task(watch_disconnect())
    messages = _messages(db, sub, initial, heartbeat)
    try:
        while True:
            step = asyncio.ensure_future(anext(messages))
            await asyncio.wait({step, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():  # the client went away
                step.cancel()
                return
            try:
                batch = step.result()
            except StopAsyncIteration:
                await websocket.close()
                return
            for m in batch or ():
                text = await _ws_text(m)
                async with asyncio.timeout(stall):
                    await websocket.send_text(text)
    except (WebSocketDisconnect, RuntimeError, TimeoutError):
        return
    finally:
        watcher.cancel()
        db.unsubscribe(sub)
