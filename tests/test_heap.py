"""server.heap: the collector is paused inside a bulk phase and restored after it, and a
settled phase leaves what it built frozen (not rescanned by later collections)."""

import gc

from server import heap


def test_bulk_phase_pauses_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with heap.bulk_phase():
        assert not gc.isenabled()
        with heap.bulk_phase():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner phase restores the outer phase's pause
    assert gc.isenabled()


def test_bulk_phase_restores_the_collector_after_an_error() -> None:
    try:
        with heap.bulk_phase():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_settled_phase_freezes_what_it_built() -> None:
    before = gc.get_freeze_count()
    try:
        with heap.bulk_phase(settle=True):
            state = [[i] for i in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(state)
    finally:
        gc.unfreeze()


def test_a_write_that_creates_views_freezes_them_and_a_drop_lets_them_be_collected() -> None:
    """`settle_views` through the write path: after CREATE VIEW the view's dataflow is out of
    the collector's generations (frozen, so full collections do not walk its state); after DROP
    VIEW its cycles are collectable again, and nothing that was garbage at the freeze is kept."""
    import weakref

    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (k INTEGER, v INTEGER);"
                   "INSERT INTO t SELECT i % 10, i FROM range(1000) r(i)")
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle, unreachable once `garbage` is deleted
        lost = weakref.ref(_Cell(garbage))
        del garbage
        db.execute("CREATE VIEW s AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        assert lost() is None  # collected before the freeze, not frozen with the view
        df = db.views["s"].df
        assert gc.is_tracked(df) and gc.get_freeze_count() > 0
        assert not any(o is df for o in gc.get_objects())  # frozen: out of the generations
        db.execute("INSERT INTO t VALUES (1, 1)")
        want = db.query("SELECT k, sum(v) FROM t GROUP BY k")["rows"]
        assert sorted(map(tuple, db.view_rows("s", None)["rows"])) == sorted(map(tuple, want))
        dropped = weakref.ref(df)
        del df
        db.execute("DROP VIEW s")
        gc.collect()
        assert dropped() is None  # thawed: the dropped dataflow's cycles were collected
    finally:
        db.close()
        gc.unfreeze()


class _Cell:
    """A weakly referenceable holder that is part of a cycle through `garbage`."""

    def __init__(self, garbage: list) -> None:
        self.garbage = garbage
        garbage.append(self)
