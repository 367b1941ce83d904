"""Load generators for the HTTP benchmarks: JSON POSTs over kept-alive HTTP/1.1 connections,
from a blocking client (one request at a time: latency) and from many clients on one asyncio
loop (each waiting for its answer before its next request: a closed loop).

Why not httpx: on this 2-core machine its client needs about 1.5 ms of CPU per request, as
much as a third of the server's, so writes/s from 8 httpx threads measured the client as much
as the server. These send a prepared request and read the status line, the headers and the
body: 0.2-0.3 ms of CPU per request. Invariant: a request counts only when its answer came back
with status 200; any other answer is raised with its body."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any


def _request(path: str, body: Any) -> bytes:
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n")
    return head.encode() + data


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise RuntimeError(f"an answer without content-length: {head[:200]!r}")


def _check(head: bytes, body: bytes) -> Any:
    if not head.startswith(b"HTTP/1.1 200"):
        status = head.partition(b"\r\n")[0].decode()
        raise RuntimeError(f"{status}: {body[:300].decode()}")
    return json.loads(body)


class Client:
    """One kept-alive connection; `post` sends a request and returns its JSON answer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def post(self, path: str, body: Any) -> Any:
        self.sock.sendall(_request(path, body))
        lines = []
        while (line := self.file.readline()) not in (b"\r\n", b""):
            lines.append(line.rstrip(b"\r\n"))
        head = b"\r\n".join(lines)
        return _check(head, self.file.read(_length(head)))

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def closed_loop(port: int, path: str, body: Callable[[], Any], clients: int,
                seconds: float) -> int:
    """`clients` connections each POST `body()` to `path`, one request at a time, for
    `seconds`; returns how many were answered (all with 200)."""
    async def one() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        done = 0
        try:
            while time.monotonic() < stop:
                writer.write(_request(path, body()))
                head = await reader.readuntil(b"\r\n\r\n")
                _check(head, await reader.readexactly(_length(head)))
                done += 1
        finally:
            writer.close()
        return done

    async def run() -> list[int]:
        return await asyncio.gather(*(one() for _ in range(clients)))

    stop = time.monotonic() + seconds
    return sum(asyncio.run(run()))
