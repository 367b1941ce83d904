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


@router.websocket("/views/{name}/changes")
async def changes_ws(
    websocket: WebSocket,
    name: str,
    snapshot: bool = True,
    since: int | None = None,
) -> None:
    db: Database = websocket.app.state.db
    heartbeat: float = websocket.app.state.settings.heartbeat_seconds
    await websocket.accept()
    try:
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
