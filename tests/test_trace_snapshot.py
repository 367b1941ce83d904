"""A trace snapshot (`engine.trace.Snapshot`) keeps answering the contents it was taken at.

The server reads a view's rows from a snapshot of its output arrangement, taken when a write
is installed, while the writer goes on running the dataflow: merging the trace, compacting it,
adding batches. So a snapshot must denote the arrangement's accumulation at the moment it was
taken, whatever the trace does afterwards, read from any thread. The oracle is a naive
multiset kept beside the dataflow.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from engine import Dataflow
from engine.executors.columnar import ColumnarExecutor
from engine.executors.inprocess import InProcessExecutor
from engine.lattice import Antichain


def _row(key, _val):  # type: ignore[no-untyped-def]
    return key


def _counts(items: list[tuple[object, int]]) -> dict[object, int]:
    """`items` as a dict, each datum once and with a non-zero count."""
    got = dict(items)
    assert len(got) == len(items), "a datum listed twice"
    assert 0 not in got.values()
    return got


def _change(handle, live: Counter, rng: random.Random, r: tuple[int, int],  # type: ignore[no-untyped-def]
            remove: float = 0.5) -> int:
    """Remove `r` (with probability `remove`, if present) or insert it, into the input and
    into `live`; the diff sent."""
    diff = -1 if live[r] and rng.random() < remove else 1
    handle.insert(r, diff)
    live[r] += diff
    return diff


def _executor(name: str):  # type: ignore[no-untyped-def]
    return InProcessExecutor() if name == "inprocess" else ColumnarExecutor()


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("data", [None, _row], ids=["by_self", "data"])
def test_a_snapshot_answers_its_moment_after_later_runs(executor: str, seed: int, data) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    df = Dataflow(executor=_executor(executor))
    handle, rows = df.new_input("rows")
    arranged = rows.arrange_by_self("view:v")
    arranged.as_collection(_row).capture(history=False, current=False)
    pin = arranged.trace.new_reader("server")
    live: Counter[tuple[int, int]] = Counter()
    # a bulk first batch (the batch layout a hydration or a COPY makes), then small ones
    first = [(rng.randrange(50), rng.randrange(4)) for _ in range(300)]
    handle.send_rows(first)
    live.update(first)
    handle.advance_to(1)
    df.run()
    taken: list[tuple[object, Counter[tuple[int, int]]]] = []
    for epoch in range(1, 60):
        for _ in range(rng.randrange(1, 12)):
            _change(handle, live, rng, (rng.randrange(50), rng.randrange(4)))
        handle.advance_to(epoch + 1)
        df.run()
        # the server's pin: the trace may compact up to the epoch just completed
        pin.set_logical_compaction(Antichain([(epoch,)]))
        pin.acked = arranged.trace.next_seq - 1
        if epoch % 7 == 0:
            taken.append((arranged.snapshot(data), +live))
        for snap, want in taken:
            assert _counts(snap.items()) == want, epoch  # type: ignore[attr-defined]
    arranged.trace.compact_all()
    for snap, want in taken:
        assert _counts(snap.items()) == want  # type: ignore[attr-defined]
    assert _counts(arranged.snapshot(data).items()) == +live


def test_a_snapshot_reads_from_another_thread_while_the_writer_runs() -> None:
    rng = random.Random(7)
    df = Dataflow(executor=InProcessExecutor())
    handle, rows = df.new_input("rows")
    arranged = rows.arrange_by_self("view:v")
    arranged.as_collection(_row).capture(history=False, current=False)
    live: Counter[tuple[int, int]] = Counter()
    handle.send_rows([(i, i % 3) for i in range(2000)])
    live.update((i, i % 3) for i in range(2000))
    handle.advance_to(1)
    df.run()
    current = [(arranged.snapshot(), +live)]
    lock = threading.Lock()  # guards `current` only, as the server's state lock does
    errors: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            with lock:
                snap, want = current[0]
            if _counts(snap.items()) != want:  # type: ignore[attr-defined]
                errors.append("a snapshot changed under its reader")
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for epoch in range(1, 120):
            for _ in range(40):
                _change(handle, live, rng, (rng.randrange(2500), rng.randrange(3)), 0.6)
            handle.advance_to(epoch + 1)
            df.run()
            with lock:
                current[0] = (arranged.snapshot(), +live)
    finally:
        done.set()
        t.join()
    assert errors == []
    assert _counts(current[0][0].items()) == +live  # type: ignore[attr-defined]


def test_a_server_view_holds_its_rows_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A view's rows, row count and `/query` relation come from its output arrangement: the
    view holds the trace's own batches (no second copy of its rows), and what it answers
    equals DuckDB over the tables after every write, however the trace merged meanwhile."""
    import duckdb

    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    oracle = duckdb.connect()
    rng = random.Random(5)
    try:
        ddl = "CREATE TABLE t (a INTEGER, b INTEGER)"
        db.execute(ddl)
        oracle.execute(ddl)
        db.execute("CREATE VIEW v AS SELECT a % 7 AS g, b FROM t WHERE a > 3")
        for i in range(40):
            if i % 3 == 2:
                sql = f"DELETE FROM t WHERE a % 11 = {rng.randrange(11)}"
            else:
                sql = "INSERT INTO t VALUES " + ", ".join(
                    f"({rng.randrange(100)}, {rng.randrange(5)})" for _ in range(rng.randrange(1, 30)))
            db.execute(sql)
            oracle.execute(sql)
            v = db.views["v"]
            assert not hasattr(v, "contents")
            trace = v.arranged.trace.existing_batches()
            assert [id(b) for b in v.snapshot.batches] == [id(b) for b in trace]
            want = Counter(oracle.execute("SELECT a % 7, b FROM t WHERE a > 3").fetchall())
            assert _counts(v.items()) == want, i
            assert v.row_count == sum(want.values())
    finally:
        db.close()


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_a_snapshot_of_one_batch_sums_each_key_over_its_times(executor: str) -> None:
    """A reader that holds compaction back (the server's pin during recovery) leaves a key
    at several times in one merged batch: its count is the sum over them, zero sums left out."""
    rng = random.Random(11)
    df = Dataflow(executor=_executor(executor))
    handle, rows = df.new_input("rows")
    arranged = rows.arrange_by_self("view:v")
    arranged.as_collection(_row).capture(history=False, current=False)
    pin = arranged.trace.new_reader("server")  # stays at the start: no time is advanced
    live: Counter[tuple[int, int]] = Counter()
    for epoch in range(40):
        for _ in range(6):
            _change(handle, live, rng, (rng.randrange(8), 0))
        handle.advance_to(epoch + 1)
        df.run()
        pin.acked = arranged.trace.next_seq - 1  # accepted, so its batches may merge
    arranged.trace.compact_all()
    batches = [b for b in arranged.trace.existing_batches() if b.records]
    assert len(batches) == 1 and batches[0].records > len(+live)  # keys at several times
    for data in (None, _row):
        assert _counts(arranged.snapshot(data).items()) == +live


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("data", [None, _row], ids=["by_self", "data"])
def test_what_a_run_sealed_is_its_changes_by_time(executor: str, data) -> None:  # type: ignore[no-untyped-def]
    """A reader's unaccepted batches after a run are exactly the run's changes, time by time,
    consolidated (the server's view output and feed updates), with several epochs a run."""
    from engine.trace import Snapshot

    rng = random.Random(13)
    df = Dataflow(executor=_executor(executor))
    handle, rows = df.new_input("rows")
    arranged = rows.arrange_by_self("view:v")
    reader = arranged.trace.new_reader("server")
    live: Counter[tuple[int, int]] = Counter()
    epoch = 0
    for run in range(40):
        want: dict[tuple[int, ...], Counter[tuple[int, int]]] = {}
        for _ in range(rng.randrange(1, 4)):  # epochs in this run
            changes: Counter[tuple[int, int]] = Counter()
            for _ in range(rng.randrange(0, 15)):
                r = (rng.randrange(12), rng.randrange(2))
                changes[r] += _change(handle, live, rng, r)
            if +changes or -changes:
                want[(epoch,)] = Counter({r: n for r, n in changes.items() if n})
            epoch += 1
            handle.advance_to(epoch)
        df.run()
        got = Snapshot(reader.unaccepted(), df.executor, data).by_time()
        assert {t: _counts(b) for t, b in got.items()} == want, run
        reader.set_logical_compaction(Antichain([(epoch - 1,)]))
        reader.acked = arranged.trace.next_seq - 1
    assert _counts(arranged.snapshot(data).items()) == +live


def test_a_write_reads_views_it_does_not_change_from_their_arrangements(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Inside a write, a SELECT of a view the write does not change, and a new view over it,
    read its output arrangement's snapshot (`hydration.post_contents`): their answers equal
    DuckDB's over the same tables."""
    import duckdb

    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    oracle = duckdb.connect()
    try:
        setup = ("CREATE TABLE t (a INTEGER, b INTEGER); CREATE TABLE u (c INTEGER);"
                 "INSERT INTO t SELECT i, i % 4 FROM range(50) r(i)")
        db.execute(setup)
        oracle.execute(setup)
        db.execute("CREATE VIEW v AS SELECT b, count(*) AS n FROM t WHERE a > 7 GROUP BY b")
        db.execute("INSERT INTO t VALUES (100, 1), (101, 2); DELETE FROM t WHERE a = 9")
        oracle.execute("INSERT INTO t VALUES (100, 1), (101, 2); DELETE FROM t WHERE a = 9")
        want = sorted(oracle.execute(
            "SELECT b, count(*) FROM t WHERE a > 7 GROUP BY b").fetchall())
        out = db.execute("INSERT INTO u VALUES (1); SELECT b, n FROM v ORDER BY b")
        assert [tuple(r) for r in out["results"][-1]["rows"]] == want
        db.execute("INSERT INTO u VALUES (2); CREATE VIEW w AS SELECT sum(n) AS s FROM v")
        assert sorted(db.views["w"].items()) == [((sum(n for _, n in want),), 1)]
    finally:
        db.close()
