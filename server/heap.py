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
