"""Requests that race each other on one in-process server: the answer is the one they get
when they come one after the other, never an error of the interleaving."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from server.core import Database
from server.errors import NotFound
from server.executors import InProcessExecutor
from server.settings import Settings


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    d = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    yield d
    d.close()


def test_a_view_dropped_while_another_drop_of_it_waits_is_a_404(db: Database) -> None:
    """DELETE /views/x found x, then waited for the writer while another request dropped it:
    404 `unknown_view`, as when the other drop comes first (it was the DROP statement's own
    400, placed in a text the client never sent)."""
    db.execute("CREATE TABLE t (a INTEGER); CREATE VIEW x AS SELECT a FROM t")
    got: list[BaseException | None] = []

    def drop() -> None:
        try:
            db.drop_view("x")
            got.append(None)
        except BaseException as e:  # noqa: BLE001 - the answer under test
            got.append(e)

    with db.write_lock:  # the writer is busy: the drop passes its check, then waits
        other = threading.Thread(target=drop)
        other.start()
        time.sleep(0.3)
        db.execute("DROP VIEW x")  # (this thread holds the writer's lock already)
    other.join(30)
    assert len(got) == 1 and isinstance(got[0], NotFound), got
    assert got[0].status == 404 and got[0].code == "unknown_view"
    assert got[0].line is None


def test_a_feed_resumes_at_the_progress_a_quiet_view_got_before_the_clock_moved(
        db: Database) -> None:
    """A write's COMMIT marks the views it does not touch complete through its timestamp just
    before the clock moves to it: a feed that subscribed in between was sent that progress,
    and resuming from it must be accepted (it was `since_in_future`)."""
    db.execute("CREATE TABLE t (a INTEGER); CREATE TABLE u (b INTEGER);"
               " CREATE VIEW vu AS SELECT b FROM u")
    db.execute("INSERT INTO t VALUES (1)")
    loop = asyncio.new_event_loop()
    try:
        with db.state_lock:
            # the committer's state between `mark_complete` and the clock's move
            ahead = db.last_ts + 1
            db.views["vu"].complete_ts = ahead
        sub, first = db.subscribe("vu", snapshot=False, since=None, loop=loop)
        assert any(m.timestamp == ahead for m in first if m.type == "progress"), first
        db.unsubscribe(sub)
        sub, _ = db.subscribe("vu", snapshot=False, since=ahead, loop=loop)
        db.unsubscribe(sub)
    finally:
        loop.close()
