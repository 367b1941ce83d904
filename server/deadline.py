"""A write's time limit, kept by one watchdog thread for the whole server.

Past `write_timeout` the watchdog interrupts the writer's DuckDB connection (the statement
running then fails) and marks the write's `Deadline` as fired, so the write is rolled back
(408 `timeout`). After COMMIT no limit applies (the write is durable and its views must be
maintained), so the writer disarms its deadline before COMMIT.

Invariants: `disarm` and the watchdog exclude each other (both hold the watchdog's lock), so
once a deadline is disarmed an interrupt can no longer hit the COMMIT or a later write; at most
one deadline is armed at a time (only the holder of the write lock arms one). One long-lived
thread serves every write: arming a deadline costs no thread start, which matters when many
small writes are committed in a group, each under its own deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from server.errors import Timeout


class Deadline:
    """The time limit of one write (or of one request of a group); see the module docstring."""

    def __init__(self, at: float, interrupt: Callable[[], None]) -> None:
        self.at = at
        self.fired = False
        self.armed = True
        self.interrupt = interrupt
        self.watchdog: Watchdog | None = None

    def check(self) -> None:
        """Stop between steps that DuckDB does not run (planning, computing views)."""
        if self.fired:
            raise Timeout("write time limit exceeded", code="timeout")

    def disarm(self) -> None:
        if self.watchdog is not None:
            self.watchdog.disarm(self)
        else:
            self.armed = False


class Watchdog:
    """The thread that fires the armed deadline when its time comes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._current: Deadline | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, seconds: float, interrupt: Callable[[], None]) -> Deadline:
        """A deadline `seconds` from now that calls `interrupt` when it passes while armed."""
        d = Deadline(time.monotonic() + seconds, interrupt)
        d.watchdog = self
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="diffsql-write-deadline", daemon=True
                )
                self._thread.start()
            self._current = d
            self._cond.notify()
        return d

    def disarm(self, d: Deadline) -> None:
        with self._cond:
            d.armed = False
            if self._current is d:
                self._current = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._current = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                d = self._current
                if d is None or not d.armed:
                    self._cond.wait()
                    continue
                remaining = d.at - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                d.fired = True
                d.armed = False
                self._current = None
                d.interrupt()
