"""How many read queries run DuckDB at once.

Invariant: at most `QuerySlots.size` read requests (`/query`, and the SELECT-only requests of
`/sql`) hold a slot, and only a holder reads the store or runs the sandbox. A request waits for
a slot at most the query time limit, then is answered 503 `busy`; it has done nothing then.

Why a bound at all: DuckDB's Python binding takes the GIL between the tasks of every running
query (to check for signals), so each running query adds a thread that contends for the GIL with
the event loop. With 40 CPU-bound queries in flight (the thread pool's size) the event loop
waited 0.1-0.5 s for the GIL at each step, and `/health` and the change feeds with it; with 8
it waits under 40 ms. More queries than cores gain no throughput anyway: the rest queue here,
holding a thread that waits without the GIL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from server.errors import ApiError


def default_query_concurrency() -> int:
    """Twice the cores (a query waiting on I/O leaves its core to another), within 2..8."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


class QuerySlots:
    """A counting semaphore whose wait is bounded and whose refusal is an API error."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = threading.BoundedSemaphore(size)

    @contextmanager
    def held(self, wait: float) -> Iterator[None]:
        """Hold a slot for the block, waiting up to `wait` seconds for one (503 `busy`)."""
        if not self._free.acquire(timeout=wait):
            raise ApiError(
                f"the server is already running its {self.size} concurrent queries and none "
                f"finished within {wait:g}s; retry shortly",
                code="busy",
                status=503,
            )
        try:
            yield
        finally:
            self._free.release()
