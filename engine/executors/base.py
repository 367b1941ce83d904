"""The executor boundary: where operators hand their bulk work to a runtime.

Operators (in `engine/operators/`) keep everything about scheduling: queues, frontiers,
capabilities, which batches a reader has accepted, pending times. Everything that touches the
updates themselves goes through the dataflow's `Executor`: applying a stateless function to a
set of updates, splitting buffered updates at a frontier, sealing and merging batches, joining a
batch with a trace cut, one round of reduce over the keys a batch touches, consolidation, and
collecting results. A payload (a set of updates) and a batch are opaque to the operators.

Invariant: every executor's method denotes exactly the multiset of updates (or the batch
contents and description) that the in-process executor (`engine.executors.inprocess`, the
embedded default and the reference) returns for the same inputs, so the same dataflow driven by
the same scheduler produces the same results at every complete time on any executor. Payloads
and batches of one executor are never handed to another.

Executors: `inprocess` (Python lists and `trace.Batch`), `columnar` (sorted int64 runs and
compiled kernels), `spark` (DataFrames on Apache Spark). This module imports no executor, so
each of them can depend on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from engine.lattice import Antichain, Time
from engine.sources import FileSource

# The in-process payload, and what `collect` returns on every executor.
Updates = list[tuple[Any, Time, int]]


@runtime_checkable
class Executor(Protocol):
    """What operators call. `Payload` and `Batch` below stand for each executor's own types.

    A batch has at least the attributes `Trace` reads: `lower`, `upper`, `since`, `seq`,
    `records`, `approx_bytes()`, `with_upper(upper, seq)`. An executor may also define
    `merge_steps(older, newer, frontier)`, a generator that merges in fueled steps (see
    `engine.trace.merge_steps` and `Trace._work`: it yields 0 first, then is sent the fuel
    available, or None for no limit, and yields the work done); without it, merges happen at
    once.
    """

    name: str

    # -- payloads ------------------------------------------------------------------------------
    def from_updates(self, updates: Updates) -> Any:
        """A payload holding `updates`."""

    def from_rows(self, rows: list[Any], time: Time, diff: int) -> Any:
        """A payload holding `(row, time, diff)` for every row (a bulk insert at one time)."""

    def collect(self, payload: Any) -> Updates:
        """The updates of a payload, in this process."""

    def read(self, source: FileSource, time: Time) -> Any:
        """Every row of a bulk source at `time`, with diff 1 (or its diff column)."""

    def apply(self, logic: Callable[[Updates], Updates], payload: Any) -> Any:
        """`logic` applied to the payload's updates (in any partition of them)."""

    def is_empty(self, payload: Any) -> bool:
        """True if the payload holds no update."""

    def consolidate(self, payload: Any) -> Any:
        """The payload with equal `(data, time)` summed and zero diffs dropped."""

    def lower(self, payload: Any) -> Antichain:
        """The minimal times of the payload's updates."""

    def split(self, payloads: list[Any], frontier: Antichain) -> tuple[Any, Any]:
        """Updates at complete times (not beyond `frontier`), and the rest."""

    # -- batches -------------------------------------------------------------------------------
    def seal(
        self, ready: Any, by_self: bool, lower: Antichain, upper: Antichain, dims: int
    ) -> Any:
        """A batch `[lower, upper)` of `ready` updates, keyed by the data or its first half."""

    def merge(self, older: Any, newer: Any, frontier: Antichain) -> Any:
        """One batch `[older.lower, newer.upper)` of both, times advanced by `frontier`."""

    def unarrange(self, batch: Any, f: Callable[[Any, Any], Any] | None) -> Any:
        """A payload of `((key, val), time, diff)`, or `(f(key, val), time, diff)`."""

    # -- stateful kernels ----------------------------------------------------------------------
    def join(
        self, new: Any, others: list[Any], f: Callable[[Any, Any, Any], Any], new_is_left: bool,
        budget: Any = None,
    ) -> Any:
        """`f(key, v1, v2)` at the join of the times, diff the product, for every pair of an
        update of `new` and one of `others` with the same key (`new` on the left if
        `new_is_left`). `budget` is passed only by a budgeted dataflow."""

    def reduce_round(
        self,
        new: list[Any],
        pending: dict[Any, set[Time]],
        inputs: list[Any],
        outputs: list[Any],
        lower: Antichain,
        upper: Antichain,
        logic: Any,
        dims: int,
    ) -> tuple[Any | None, dict[Any, set[Time]]]:
        """One round of reduce: corrections for every key `new` touches or with pending times
        now complete, as a batch `[lower, upper)` (or None); and the pending times left."""
