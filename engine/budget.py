"""A budget for one run of a dataflow: wall-clock time, work and memory.

An iteration limit bounds the *rounds* of a loop, not the work of one round: a non-linear
recursion can produce a cross product per round that grows without bound, and a many-way join
over large inputs can take arbitrarily long in a single operator activation. A `Budget` bounds
each `Dataflow.run()` instead, so a runaway view fails with a clear error while its host keeps
serving:

- ``seconds``: wall-clock time of one run;
- ``work``: updates produced by joins during one run (a join's output is where a runaway
  computation's time and memory go, so it is charged as it is produced, inside the kernel);
- ``records``: records held in the dataflow's arrangements after any scheduler step (memory).

Invariant: a run that exceeds any limit raises `BudgetExceeded` promptly (checked between
operator activations and every `CHECK_EVERY` join outputs), and the dataflow is poisoned like
after any other error: it is never left half-updated and silently reused.
"""

from __future__ import annotations

import time

from engine.errors import EngineError

CHECK_EVERY = 1 << 16  # join outputs between two checks inside one activation


class BudgetExceeded(EngineError):
    """One run of a dataflow exceeded its time, work or memory budget."""

    def __init__(self, what: str, limit: float, unit: str, hint: str) -> None:
        self.what = what
        self.limit = limit
        self.code = "budget_exceeded"
        super().__init__(
            f"{what} budget of {limit:g} {unit} exceeded: the view's computation did not finish "
            f"within it ({hint})"
        )


class Budget:
    """Limits for each run of a dataflow; ``None`` disables a limit."""

    def __init__(self, seconds: float | None = None, work: int | None = None,
                 records: int | None = None) -> None:
        self.seconds = seconds
        self.work = work
        self.records = records
        self.deadline = float("inf")
        self.done = 0

    def start(self) -> None:
        """Begin a run: the clock and the work counter restart."""
        self.deadline = time.monotonic() + self.seconds if self.seconds is not None else \
            float("inf")
        self.done = 0

    def charge(self, work: int = 0) -> None:
        """Account `work` more updates and check the time; raises `BudgetExceeded`."""
        self.done += work
        if self.work is not None and self.done > self.work:
            raise BudgetExceeded("work", self.work, "join outputs per update",
                                 "a recursion that never converges, or a join far larger "
                                 "than its inputs")
        if time.monotonic() > self.deadline:
            raise BudgetExceeded("time", self.seconds or 0, "seconds per update",
                                 "a recursion that never converges, or a very large join")

    def check_records(self, records: int) -> None:
        if self.records is not None and records > self.records:
            raise BudgetExceeded("memory", self.records, "arranged records",
                                 "the view's state grew beyond it")
