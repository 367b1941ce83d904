"""The cyclic garbage collector around bulk work: paused while a hydration or a recovery builds
millions of long-lived objects, and told afterwards that those objects are long-lived.

Why: CPython's collector runs every few hundred container allocations, and each run scans
every young object that survived so far. A hydration allocates millions of tuples, dicts and
lists that all survive (they are the views' state), so the collector would scan them again and
again without finding anything: a sixth of a restart's time. Reference counting still frees
everything that is not in a cycle while the collector is paused; cycles made during the pause
are collected once it resumes.

Invariants: `bulk_phase` restores the collector's previous state (phases nest). With
`settle` (recovery) it first freezes the objects alive then: the first collection after the
pause would otherwise scan everything the phase allocated, and every later full collection
would rescan the views' state. A cycle that became garbage before a settled phase ended stays
allocated (recovery runs once per start, so this is bounded by what it allocates). A write's
hydration does not settle: its throw-away dataflows would stay allocated after every write.
Instead, once a write that created or dropped views is published, `settle_views` collects
and then freezes what is alive, so nothing that was garbage then is kept; after a drop it
first thaws, so the dropped views' cycles can be collected (`thaw` too before a reload).

Why after a write too: a server whose views were created by writes, not recovered, kept their
state in the collector's oldest generation. A full collection walks every entry of every
container held there: at TPC-H sf 1 with six views, 50-65 ms each, about every 130 groups of
eight single-row writes, 6-8% of their time in process; 14-28 ms and 1-3% once frozen (what
is left is state made since, such as merged batches).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def bulk_phase(settle: bool = False) -> Iterator[None]:
    """Pause the cyclic collector for the duration of the block (nesting-safe); with
    `settle`, mark every object alive at its end as permanent for the collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if settle:
            gc.freeze()
        if was_enabled:
            gc.enable()


def settle_views(dropped: bool) -> None:
    """After a write that created views, or with `dropped` dropped some, is published: free the
    garbage, then make every object alive permanent for the collector (`gc.freeze`)."""
    if dropped:
        thaw()
    gc.collect()
    gc.freeze()


def thaw() -> None:
    """Return the permanent objects to the collector (their cycles, once garbage, are
    collected again): before views are dropped for good or rebuilt (`recovery.reload`)."""
    gc.unfreeze()
