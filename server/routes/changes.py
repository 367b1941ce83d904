"""Change feeds of a view: Server-Sent Events (GET) and WebSocket, same messages.

SSE: `event: update` / `event: progress` (and `event: error` before the server ends a feed),
`data:` the message without its "type", `id:` its timestamp, so a reconnecting EventSource's
Last-Event-ID resumes exactly where it stopped. WebSocket: the messages as JSON text frames
with their "type".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from server.core import Database
from server.deps import DatabaseDep, SettingsDep
from server.errors import ApiError, BadRequest
from server.feeds import Message, Subscription

router = APIRouter(tags=["changes"])


def _sse(m: Message) -> str:
    data = {k: v for k, v in m.items() if k != "type"}
    head = f"event: {m['type']}\n"
    if "timestamp" in m:
        head += f"id: {m['timestamp']}\n"
    return head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"


async def _messages(
    db: Database, sub: Subscription, initial: list[Message], heartbeat: float
) -> AsyncIterator[Message | None]:
    """Initial messages, then live ones; None means 'idle for a heartbeat'. Ends on close."""
    try:
        for m in initial:
            yield m
        while True:
            m = await sub.next(heartbeat)
            if m is None:
                yield None
                continue
            if m["type"] == "close":
                return
            ts = m.get("timestamp")
            if sub.after is not None and ts is not None and ts <= sub.after:
                continue
            yield m
            if m["type"] == "error":
                return
    finally:
        db.unsubscribe(sub)


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
    since: int | None = Query(None, ge=0, description="resume after this timestamp"),
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    if since is None and last_event_id:
        try:
            since = int(last_event_id)
        except ValueError:
            raise BadRequest("Last-Event-ID must be a timestamp") from None
    await db.wait_ready()  # start-up recovery (see Database.wait_ready)
    sub, initial = db.subscribe(name.lower(), snapshot, since, asyncio.get_running_loop())

    async def body() -> AsyncIterator[str]:
        messages = _messages(db, sub, initial, settings.heartbeat_seconds)
        try:
            async for m in messages:
                yield ": keepalive\n\n" if m is None else _sse(m)
        finally:
            await messages.aclose()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _ws_params(query: Any) -> tuple[bool, int | None]:
    """`snapshot` and `since` of a WebSocket subscription (validated here, after the handshake,
    so that a bad value is reported in an error frame rather than as a rejected handshake)."""
    snapshot = True
    raw = query.get("snapshot")
    if raw is not None:
        low = raw.strip().lower()
        if low in ("true", "1", "yes", "on"):
            snapshot = True
        elif low in ("false", "0", "no", "off"):
            snapshot = False
        else:
            raise BadRequest(f"snapshot must be true or false, not {raw!r}", code="invalid_request")
    since: int | None = None
    raw = query.get("since")
    if raw is not None:
        try:
            since = int(raw)
        except ValueError:
            raise BadRequest(
                f"since must be a timestamp (an integer >= 0), not {raw!r}", code="invalid_request"
            ) from None
        if since < 0:
            raise BadRequest("since must be >= 0", code="invalid_request")
    return snapshot, since


@router.websocket("/views/{name}/changes")
async def changes_ws(websocket: WebSocket, name: str) -> None:
    """Query parameters `snapshot` (default true) and `since`, as for the SSE feed. Errors
    (bad parameters, unknown or failed view) arrive as one {"type": "error"} frame, then the
    connection closes with code 1008."""
    db: Database = websocket.app.state.db
    heartbeat: float = websocket.app.state.settings.heartbeat_seconds
    offered = websocket.scope.get("subprotocols") or []
    await websocket.accept(subprotocol="diffsql" if "diffsql" in offered else None)
    try:
        snapshot, since = _ws_params(websocket.query_params)
        await db.wait_ready()  # start-up recovery (see Database.wait_ready)
        sub, initial = db.subscribe(name.lower(), snapshot, since, asyncio.get_running_loop())
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
                m = step.result()
            except StopAsyncIteration:
                await websocket.close()
                return
            if m is not None:
                await websocket.send_text(json.dumps(m, separators=(",", ":")))
    except (WebSocketDisconnect, RuntimeError):
        return
    finally:
        watcher.cancel()
        db.unsubscribe(sub)
