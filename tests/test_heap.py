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
