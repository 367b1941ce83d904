"""A write's last DuckDB work on a thread of its own, while the views are maintained.

After a write's statements have run, what is left to do in DuckDB (its change log inserts,
the clock, COMMIT) and maintaining the views (the dataflows, in this process) are
independent: the dataflows are fed the write's rows as captured, not read back. DuckDB
releases the GIL while it works, so `Committer.start` runs that work on the committer's
thread while the writer runs the dataflows: the change log of a COPY of 1,000,000 rows (a
copy of its rows) is written while the views take them, and a group's COMMIT while its views
run. (A view built afresh from the store, as a view is after a load of a large part of its
tables, waits for the COMMIT instead.)

Invariants:
- nothing readers see depends on the write until `Committing.wait` has returned: the views'
  results are installed after it (`server.publish`), and every read of the store while the
  views are maintained (building a view afresh) waits for it first;
- `wait` raises `CommitFailed` if the work failed: then the transaction was rolled back on
  the committer's thread, nothing of the write is durable, and the dataflows that ran ahead
  must be rebuilt from the store (`server.writes._publish` reloads them);
- at most one write's work is in flight: the writer starts it under the write lock and waits
  for it before that lock is released; meanwhile only the committer's thread uses the
  store's writer connection.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class CommitFailed(Exception):
    """The committer's work for a write raised `error` (the transaction is rolled back)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Committing:
    """A write's DuckDB work in flight on the committer's thread."""

    def __init__(self, future: Future[None]) -> None:
        self._future = future

    def wait(self) -> None:
        """Return once the work is done (at once if it was); raise `CommitFailed` if it
        failed, each time this is called."""
        error = self._future.exception()
        if error is not None:
            raise CommitFailed(error)

    def settle(self) -> BaseException | None:
        """Wait for the work without raising: its error, or None if it committed."""
        return self._future.exception()


class Committer:
    """One thread that runs writes' last DuckDB work (`start`)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="diffsql-commit")

    def start(self, work: Callable[[], None], rollback: Callable[[], None]) -> Committing:
        """Run `work` on the committer's thread; if it raises, run `rollback` there too, so
        that no transaction stays open on the writer's connection after a failure."""

        def run() -> None:
            try:
                work()
            except BaseException:
                rollback()
                raise

        return Committing(self._pool.submit(run))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
