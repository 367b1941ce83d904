"""Hostile and careless clients against a real server process: feeds resumed from the future
(issue #9.1), bad input that once gave a 500 or hung (issue #10.4), and bearer tokens that must
never reach the log (issue #10.5). Every bad input must get a prompt 4xx with an error code, and
the server must keep serving.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.sync.client import connect

from tests.server_harness import SSE, Feed, Server, multiset

PROMPT = 5.0  # seconds: "answered promptly", with a generous margin for a loaded machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("hostile") / "data").start()
    s.sql("CREATE TABLE t (a INTEGER); CREATE VIEW v AS SELECT a, count(*) AS n FROM t GROUP BY a")
    try:
        yield s
    finally:
        s.stop()


def _latest(server: Server) -> int:
    return int(server.http.get("/health").json()["timestamp"])


def _ws_first(server: Server, query: str) -> dict[str, Any]:
    with connect(f"{server.ws_url}/views/v/changes{query}", open_timeout=PROMPT) as ws:
        return json.loads(ws.recv(timeout=PROMPT))  # type: ignore[no-any-return]


# -- issue #9.1: a feed never claims progress past what is complete, never skips an update ---


def test_sse_since_beyond_every_issued_timestamp_is_a_4xx(server: Server) -> None:
    latest = _latest(server)
    t0 = time.monotonic()
    r = server.http.get("/views/v/changes", params={"since": latest + 50}, timeout=PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "since_in_future" and str(latest) in err["message"]


def test_ws_since_beyond_every_issued_timestamp_is_an_error_frame(server: Server) -> None:
    msg = _ws_first(server, "?since=999999")
    assert msg["type"] == "error" and msg["error"]["code"] == "since_in_future", msg


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_feed_resumed_at_the_latest_timestamp_delivers_the_next_write(
    server: Server, transport: str
) -> None:
    before = server.sql("INSERT INTO t VALUES (1)")[0]["timestamp"]
    contents = multiset(server.rows("v", as_of=before)["rows"])
    feed = Feed()
    feed.contents, feed.progress = contents, before
    with ExitStack() as stack:
        if transport == "sse":
            sse = SSE(server, "v", since=before)
            stack.callback(sse.close)
            nxt = sse.next
        else:
            ws = stack.enter_context(
                connect(f"{server.ws_url}/views/v/changes?since={before}", open_timeout=PROMPT)
            )

            def nxt() -> dict[str, Any]:
                return json.loads(ws.recv(timeout=20))  # type: ignore[no-any-return]

        first = nxt()
        # Progress is never claimed past the latest complete timestamp.
        assert first == {"type": "progress", "timestamp": before}, first
        after = server.sql("INSERT INTO t VALUES (2), (1)")[0]["timestamp"]
        while feed.progress < after:
            feed.apply(nxt())
        assert after in feed.seen
        assert feed.contents == multiset(server.rows("v", as_of=after)["rows"])


# -- issue #10.4: bad input is a prompt 4xx with a code ---------------------------------------


@pytest.mark.parametrize("path", ["/sql", "/query", "/views"])
def test_lone_surrogate_in_json_is_a_400(server: Server, path: str) -> None:
    for body in (b'{"sql": "\\ud800"}', b'{"sql": "SELECT \'\\udfff\' AS x"}'):
        r = server.http.post(
            path, content=body, headers={"content-type": "application/json"}, timeout=PROMPT
        )
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_unicode" and "surrogate" in err["message"], err
        assert set(err) == {"code", "message", "line", "column"}
    # A valid surrogate pair is fine (one astral character).
    r = server.http.post(
        "/query", content=b'{"sql": "SELECT \'\\ud83d\\ude00\' AS x"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200 and r.json()["rows"] == [["\U0001f600"]], r.text
    assert server.http.get("/health").status_code == 200


def test_head_health(server: Server) -> None:
    r = server.http.head("/health")
    assert r.status_code == 200 and r.content == b""


@pytest.mark.parametrize("since", ["1180591620717411303424", "9223372036854775808", "-1"])
def test_since_out_of_range_is_a_prompt_4xx(server: Server, since: str) -> None:
    t0 = time.monotonic()
    r = server.http.get("/views/v/changes", params={"since": since}, timeout=PROMPT)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] in ("invalid_request", "since_in_future")
    msg = _ws_first(server, f"?since={since}")
    assert msg["type"] == "error" and msg["error"]["code"] in ("invalid_request",
                                                                "since_in_future")
    assert time.monotonic() - t0 < 2 * PROMPT


@pytest.mark.parametrize("since", ["1_0", "3.0", " 3", "+2", "\u0663", "0x1", ""])
def test_since_is_digits_on_both_feeds(server: Server, since: str) -> None:
    """SSE reads since as the WebSocket feed and Last-Event-ID do: ASCII digits only (it took
    what Python's int() takes: since=1_0 resumed after timestamp 10)."""
    r = server.http.get("/views/v/changes", params={"since": since}, timeout=PROMPT)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    msg = _ws_first(server, f"?since={quote(since)}")
    assert msg["type"] == "error" and msg["error"]["code"] == "invalid_request", msg


@pytest.mark.parametrize("value,snapshot", [("t", True), ("TRUE", True), ("on", True),
                                            ("n", False), ("off", False), ("0", False),
                                            (" true", None), ("maybe", None)])
def test_snapshot_is_read_alike_on_both_feeds(server: Server, value: str,
                                              snapshot: bool | None) -> None:
    """Both feeds take the same snapshot values (the WebSocket's took ' true' and refused
    't', the SSE feed the other way round): with a snapshot the first message is the view's
    contents (an update), without one its progress; a value neither takes is a 4xx or an error
    frame."""
    server.sql("INSERT INTO t VALUES (5)")
    first = _ws_first(server, f"?snapshot={quote(value)}")
    if snapshot is None:
        assert first["type"] == "error" and first["error"]["code"] == "invalid_request", first
        r = server.http.get("/views/v/changes", params={"snapshot": value}, timeout=PROMPT)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
        return
    sse = SSE(server, "v", snapshot=value)
    try:
        got = sse.next()
    finally:
        sse.close()
    want = "update" if snapshot else "progress"  # a snapshot is an update of the contents
    assert first["type"] == want and got["type"] == want, (first, got)


def test_snapshot_with_since_zero_answers_promptly(server: Server) -> None:
    # A view created after timestamp 0: since=0 replays its whole retained life.
    server.sql("CREATE VIEW late AS SELECT a FROM t WHERE a > 1")
    now = server.sql("INSERT INTO t VALUES (5)")[0]["timestamp"]
    t0 = time.monotonic()
    sse = SSE(server, "late", snapshot=True, since=0)
    try:
        assert sse.status == 200
        feed = Feed()
        feed.read_until(sse, now)
        assert time.monotonic() - t0 < PROMPT
        assert feed.contents == multiset(server.rows("late", as_of=now)["rows"])
    finally:
        sse.close()
    with connect(f"{server.ws_url}/views/late/changes?snapshot=true&since=0") as ws:
        feed = Feed()
        while feed.progress < now:
            feed.apply(json.loads(ws.recv(timeout=PROMPT)))
    assert feed.contents == multiset(server.rows("late", as_of=now)["rows"])


# -- issue #10.5: the bearer token never appears in the log -----------------------------------

TOKEN = "s3cr3t-T0KEN-9f2c7d1e5b"


def _raw_request(server: Server, target: str, headers: dict[str, str]) -> bytes:
    """One raw HTTP request (so nothing on the client side rewrites it)."""
    lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{server.port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", server.port), timeout=PROMPT) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
    return data


class _FileTokenServer(Server):
    """A server given its token only by --token-file (never on its command line)."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}


def test_token_never_logged_at_debug_level(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    s = _FileTokenServer(
        tmp_path / "data", "--token-file", str(token_file), "--log-level", "debug"
    ).start()
    try:
        auth = s.headers()
        assert TOKEN not in " ".join(s.proc.args)  # type: ignore[union-attr, arg-type]
        assert s.http.get("/health").status_code == 401  # the file's token is required
        assert s.http.get("/health", headers=auth).status_code == 200
        s.sql("CREATE TABLE t (a INTEGER); CREATE VIEW v AS SELECT a FROM t")
        assert s.http.get("/views/v/rows", params={"token": TOKEN}).status_code == 401
        assert b"401" in _raw_request(s, f"/health?access_token={TOKEN}&x=1", {})
        assert b"200" in _raw_request(s, "/health", auth)
        # WebSocket: header, subprotocol, and a token in the URL (refused, but never logged).
        with connect(f"{s.ws_url}/views/v/changes?snapshot=false", additional_headers=auth) as ws:
            assert json.loads(ws.recv(timeout=PROMPT))["type"] == "progress"
        with connect(
            f"{s.ws_url}/views/v/changes", subprotocols=["diffsql", f"bearer.{TOKEN}"]
        ) as ws:
            assert json.loads(ws.recv(timeout=PROMPT))["type"] in ("update", "progress")
        with pytest.raises(Exception):  # noqa: B017 - refused at the handshake or closed
            with connect(f"{s.ws_url}/views/v/changes?token={TOKEN}") as ws:
                ws.recv(timeout=PROMPT)
        # An SSE feed with the header, and an error that quotes the request.
        with httpx.stream("GET", f"{s.url}/views/v/changes", headers=auth, timeout=PROMPT) as r:
            assert r.status_code == 200
            next(r.iter_lines())
        s.http.post("/sql", json={"sql": f"SELECT '{TOKEN}' FROM nope"}, headers=auth)
    finally:
        s.stop()
    log = s.log_path.read_text(errors="replace")
    assert "debug" in log.lower(), "the server did not log at debug level"
    assert TOKEN not in log, [line for line in log.splitlines() if TOKEN in line][:5]
    assert "Logging error" not in log  # redaction must not break a formatter
    assert "[REDACTED]" in log  # the secrets were there to redact (the test can fail)


def test_as_of_beyond_int64_is_a_prompt_400(server: Server) -> None:
    t0 = time.monotonic()
    r = server.http.get("/views/v/rows", params={"as_of": "1180591620717411303424"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    assert time.monotonic() - t0 < PROMPT


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_unusable_token_file_is_a_usage_error(tmp_path: Path, content: str | None) -> None:
    import subprocess
    import sys

    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    p = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve", "--memory", "--token-file", str(path)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[1],
    )
    assert p.returncode == 2 and "--token-file" in p.stderr, p.stderr
