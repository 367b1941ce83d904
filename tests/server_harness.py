"""Helpers for the server's end-to-end tests: run the real server as a subprocess (uvicorn on
127.0.0.1, a free port, a temporary data directory) and talk to it over HTTP, SSE and
WebSocket. Nothing here replaces a component of the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A `diffsql serve` subprocess; `start`, `stop` (SIGTERM) or `kill` (SIGKILL)."""

    def __init__(self, data_dir: Path, *extra: str, token: str | None = None) -> None:
        self.data_dir = data_dir
        self.extra = list(extra)
        self.token = token
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.http = httpx.Client(timeout=60.0)
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def start(self, timeout: float = 60.0, wait_ready: bool = True) -> Server:
        """Start the server and wait until `/health` answers and (with `wait_ready`) reports
        the views recovered, not `hydrating`."""
        self.port = free_port()
        self.http.close()
        # One client per server run: creating an httpx client costs far more than a request.
        self.http = httpx.Client(base_url=self.url, timeout=60.0)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
        env.pop("DIFFSQL_TOKEN", None)
        args = [
            sys.executable,
            "-m",
            "server.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--log-level",
            "warning",
            *self.extra,
        ]
        if self.token:
            args += ["--token", self.token]
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            args, cwd=self.data_dir.parent, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                r = self.http.get("/health", headers=self.headers(), timeout=1.0)
                if r.status_code == 200 and (not wait_ready or r.json().get("ready", True)):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server did not start: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        self.http.close()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    # -- HTTP ------------------------------------------------------------------------------

    def sql(self, text: str) -> list[dict[str, Any]]:
        r = self.http.post("/sql", json={"sql": text}, headers=self.headers())
        assert r.status_code == 200, r.text
        return r.json()["results"]  # type: ignore[no-any-return]

    def query(self, text: str) -> dict[str, Any]:
        r = self.http.post("/query", json={"sql": text}, headers=self.headers())
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def rows(self, view: str, as_of: int | None = None) -> dict[str, Any]:
        params = {} if as_of is None else {"as_of": as_of}
        r = self.http.get(f"/views/{view}/rows", params=params, headers=self.headers())
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


def multiset(rows: list[list[Any]]) -> Counter[str]:
    """Rows as a multiset of canonical JSON strings (order-insensitive comparison); a -0.0 as
    0.0, which a view holds for it (`engine.canonical`, README) where DuckDB keeps the sign."""
    return Counter(json.dumps([0.0 if v.__class__ is float and v == 0.0 else v for v in r])
                   for r in rows)


def views_equal_duckdb(db: Any, views: dict[str, str], step: Any = None
                       ) -> dict[str, Counter[str]]:
    """In process (`server.core.Database`): each view's rows equal DuckDB running its SELECT
    over the same snapshot (`Database.query`); returns their multisets. `step` names the
    moment in a failure."""
    seen = {}
    for name, sql in views.items():
        seen[name] = multiset(db.view_rows(name, None)["rows"])
        want = multiset(db.query(sql)["rows"])
        assert seen[name] == want, (name, step, seen[name] - want, want - seen[name])
    return seen


def group_of_inserts(db: Any, texts: list[str]) -> None:
    """In process: submit `texts` (plain INSERTs) at once and commit them as one group."""
    errors: list[Any] = []
    done = threading.Event()

    def answer(result: Any, error: Any) -> None:
        errors.append(error)
        if len(errors) == len(texts):
            done.set()

    starts = [db.submit(t, answer) for t in texts]
    assert starts == [True] + [False] * (len(texts) - 1)
    db.lead()
    assert done.wait(30) and not any(errors), errors


class FeedRecorder:
    """In process (`server.core.Database`): subscribes to views with a snapshot on an event
    loop of its own and keeps every frame, to replay them afterwards (`states`)."""

    def __init__(self, db: Any, names: Iterable[str],
                 resume: tuple[int, dict[str, Counter[str]]] | None = None) -> None:
        """With `resume` = (since, rows): resume each feed after timestamp `since`, at which
        the client held view n's rows `rows[n]`, instead of from a snapshot."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        since = None if resume is None else resume[0]
        self.start = {} if resume is None else resume[1]
        self.subs = {n: db.subscribe(n, resume is None, since, self.loop) for n in names}

    def states(self, timestamps: Iterable[int]) -> dict[str, dict[int, Counter[str]]]:
        """Per view, its rows (as `multiset`) at each of `timestamps`, as a client applying
        the feed's updates in order sees them: every update at or before a timestamp, none
        after. Fails if a feed was ended, if its timestamps go back, if it holds a row a
        negative number of times, or if its last progress is short of a timestamp asked."""
        wanted = sorted(timestamps)
        try:
            # Frames reach the loop from the hub's encoder thread, after the write returned:
            # wait until every feed's progress has reached the last timestamp asked.
            frames = asyncio.run_coroutine_threadsafe(self._frames(wanted[-1]), self.loop)
            queues = frames.result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
            if not self._thread.is_alive():
                self.loop.close()
        out: dict[str, dict[int, Counter[str]]] = {}
        for name, (_, first) in self.subs.items():
            rows: Counter[str] = Counter(self.start.get(name, {}))
            seen: dict[int, Counter[str]] = {}
            pending = list(wanted)
            last = progress = -1
            for frame in [*first, *queues[name]]:
                msg = frame.to_json()
                assert msg["type"] in ("update", "progress"), (name, msg)
                ts = msg["timestamp"]
                assert ts >= last, (name, ts, last)
                while pending and pending[0] < ts:  # every update at or before it applied
                    seen[pending.pop(0)] = +rows
                last = ts
                if msg["type"] == "update":
                    for u in msg["updates"]:
                        rows[json.dumps(u["row"])] += u["diff"]
                    assert all(n >= 0 for n in rows.values()), (name, ts, rows)
                else:
                    progress = ts
            assert not pending or pending[-1] <= progress, (name, pending, progress)
            for t in pending:
                seen[t] = +rows
            out[name] = seen
        return out

    async def _frames(self, ts: int) -> dict[str, list[Any]]:
        """On the loop: each feed's frames so far, once each holds a progress at `ts` or
        later (or, for a feed ended, its end)."""
        def done(sub: Any, first: list[Any]) -> bool:
            return sub.closed or any(f.type == "progress" and f.timestamp >= ts
                                     for f in (*first, *sub.queue))
        while not all(done(sub, first) for sub, first in self.subs.values()):
            await asyncio.sleep(0.01)
        return {name: list(sub.queue) for name, (sub, _) in self.subs.items()}


def check_history(db: Any, views: dict[str, str], history: dict[int, dict[str, Counter[str]]],
                  feeds: FeedRecorder | None) -> None:
    """In process: the views' rows at every timestamp of `history` (`views_equal_duckdb`'s,
    after each write) are what `feeds` (subscribed with a snapshot before the writes) give
    then; or, with `feeds` None (after a restart), what `db` replays from its change logs
    (`as_of`), and what each feed resumed after the first of them gives."""
    if feeds is not None:
        fed = feeds.states(history)
        for ts, seen in history.items():
            for name in views:
                assert fed[name][ts] == seen[name], (name, ts, "feed")
        return
    for ts, seen in history.items():
        for name in views:
            assert multiset(db.view_rows(name, ts)["rows"]) == seen[name], (name, ts)
    since = min(history)
    fed = FeedRecorder(db, views, resume=(since, history[since])).states(history)
    for ts, seen in history.items():
        for name in views:
            assert ts <= since or fed[name][ts] == seen[name], (name, ts, "resumed feed")


def write_imports(data: Path, table: str, select: Callable[[int], str]) -> None:
    """Parquet files `<table>0..2.parquet` in `data`'s import directory, for COPY: file i
    holds the rows of `select(i)`, a SELECT over `range(10 * (i + 1)) r(x)`."""
    for i in range(3):
        duckdb.connect().execute(
            f"COPY ({select(i)} FROM range({10 * (i + 1)}) r(x)) "
            f"TO '{data / 'import' / f'{table}{i}.parquet'}' (FORMAT parquet)")


def bulk_oracle(data: Path, monkeypatch: Any, executor: str, seed: int,
                views: dict[str, str], setup: Callable[[Any], None],
                step: Callable[[Any, random.Random, int], None], steps: int = 40) -> None:
    """The server's bulk oracle, in process on a real DuckDB file in `data`: every path that
    only a large change takes is taken at any size (`take_bulk_paths`, and the server's DML
    rows, Arrow change logs and recomputes at 1 row); `setup(db)` makes the tables and their
    first rows, then `views` are created and `step(db, rng, i)` runs request i of a seeded
    random stream. After each request, and after a crash and restart (the views' history
    never checkpointed), the views, their history and their feeds are checked
    (`views_equal_duckdb`, `check_history`)."""
    from planner_support import take_bulk_paths

    from server import publish, statements, store
    from server.core import Database
    from server.executors import create_executor
    from server.settings import Settings

    take_bulk_paths(monkeypatch)
    monkeypatch.setattr(statements, "DML_ROWS", 1)
    monkeypatch.setattr(store, "ARROW_LOG_ROWS", 1)
    monkeypatch.setattr(publish, "RECOMPUTE_MIN_ROWS", 20)
    rng = random.Random(seed)
    # no checkpoint of the views' history: the restart below replays the change logs
    settings = Settings(data_dir=data, checkpoint_interval=1_000_000, executor=executor)
    db = Database(settings, create_executor(settings))
    history: dict[int, dict[str, Counter[str]]] = {}
    try:
        setup(db)
        for name, sql in views.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        views_equal_duckdb(db, views, "created")
        feeds = FeedRecorder(db, views)
        for i in range(steps):
            step(db, rng, i)
            history[db.last_ts] = views_equal_duckdb(db, views, i)
        check_history(db, views, history, feeds)  # each feed, applied to its snapshot
    finally:
        # a crash: the store closed, the views' history never checkpointed
        db.store.conn.close()
    db = Database(settings, create_executor(settings))
    try:
        views_equal_duckdb(db, views, "restart")
        check_history(db, views, history, None)  # replayed from the change logs; resumed feeds
    finally:
        db.close()


class SSE:
    """A Server-Sent Events subscription read synchronously, event by event."""

    def __init__(self, server: Server, view: str, **params: Any) -> None:
        self._cm = server.http.stream(
            "GET",
            f"/views/{view}/changes",
            params={k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()},
            headers=server.headers(),
            timeout=httpx.Timeout(30.0, read=20.0),
        )
        self.response = self._cm.__enter__()
        self.status = self.response.status_code
        self._lines: Iterator[str] = self.response.iter_lines()

    def next(self) -> dict[str, Any]:
        event, data = "message", None
        for line in self._lines:
            if line == "":
                if data is not None:
                    return {"type": event, **data}
                continue
            if line.startswith(":"):
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:])
        raise EOFError("stream ended")

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


class Feed:
    """Accumulates a change feed (any transport) into contents by timestamp."""

    def __init__(self) -> None:
        self.contents: Counter[str] = Counter()
        self.progress = -1
        self.seen: list[int] = []

    def apply(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "update":
            assert msg["timestamp"] > self.progress, "update at or before progress"
            self.seen.append(msg["timestamp"])
            for u in msg["updates"]:
                self.contents[json.dumps(u["row"])] += u["diff"]
            self.contents = +self.contents
        elif msg["type"] == "progress":
            assert msg["timestamp"] >= self.progress
            self.progress = msg["timestamp"]
        else:
            raise AssertionError(f"unexpected message {msg}")

    def read_until(self, source: Any, ts: int) -> None:
        """Apply messages from `source.next()` until progress reaches `ts`."""
        while self.progress < ts:
            self.apply(source.next())
