"""ASGI guard applied to every request and WebSocket before routing: bearer-token
authentication and request-size limits.

Invariant: with a token configured, no endpoint (including /docs, /health and the change
feeds) runs for a request without `Authorization: Bearer <token>`. A WebSocket client that
cannot set headers (a browser) may instead offer the subprotocol `bearer.<token>` in
`Sec-WebSocket-Protocol` (e.g. `new WebSocket(url, ["diffsql", "bearer." + token])`); the server
then selects `diffsql`, never echoing the token. Tokens are never accepted in the query string:
URLs end up in access logs (uvicorn's, a proxy's) and browser history. No body larger than the
limit is read.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import ApiError, PayloadTooLarge, Unauthorized


async def _send_error(send: Send, err: ApiError) -> None:
    body = json.dumps(err.to_json()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if err.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(PayloadTooLarge):
    pass


class GuardMiddleware:
    def __init__(self, app: ASGIApp, token: str | None, max_body: int) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body

    def _authorized(self, scope: Scope) -> bool:
        if not self.token:
            return True
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        given: list[str] = []
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        if scope["type"] == "websocket":
            given += [p[7:] for p in scope.get("subprotocols") or () if p.startswith("bearer.")]
        expected = self.token.encode()
        return any(hmac.compare_digest(g.encode(), expected) for g in given)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
                return
            await _send_error(send, Unauthorized("missing or invalid bearer token"))
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        too_large = PayloadTooLarge(f"request body exceeds {self.max_body} bytes")
        if length is not None:
            try:
                if int(length) > self.max_body:
                    await _send_error(send, too_large)
                    return
            except ValueError:
                await _send_error(send, ApiError("bad Content-Length", code="bad_request"))
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise _TooLarge(f"request body exceeds {self.max_body} bytes")
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_error(send, too_large)
