"""Buffers of updates that wait for their times to complete.

Operators that act only on complete times (arrange, consolidate, feedback) keep the updates
that were beyond their input frontier. Invariant: everything in a buffer was beyond the frontier
recorded with it, so the buffer needs another look only after that frontier moves.
"""

from __future__ import annotations

from typing import Any

from engine.lattice import Antichain


def split_buffer(
    ex: Any,
    new: list[Any],
    buffer: list[Any],
    buffer_lower: Antichain,
    buffer_frontier: Antichain | None,
    frontier: Antichain,
) -> tuple[Any, list[Any], Antichain, Antichain]:
    """Split buffered and new payloads into what is complete at `frontier` and the rest.

    The buffer holds only updates that were beyond `buffer_frontier`; they are looked at again
    only when the frontier has moved, so a long wait does not rescan them on every activation.
    Returns (ready payload or None, new buffer, its lower bound, the frontier it was split at).
    """
    if frontier != buffer_frontier:
        new = buffer + new
        buffer, buffer_lower = [], Antichain()
    if not new:
        return None, buffer, buffer_lower, frontier
    ready, rest = ex.split(new, frontier)
    if not ex.is_empty(rest):
        buffer = buffer + [rest]
        buffer_lower = buffer_lower.meet(ex.lower(rest))
    return (None if ex.is_empty(ready) else ready), buffer, buffer_lower, frontier
