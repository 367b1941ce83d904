"""The server's shared state: the durable store, the catalog, the maintained views, the clock.

Every stage of the server (`server.writes` and the stages it runs, `server.recovery`,
`server.queries`, `server.contents`, `server.catalog`) works on one `ServerState`; this module
only says what the state is and which lock guards what.

Locks:
- `write_lock` is held for a whole write, including running the dataflows (a recursion hitting
  its iteration limit can take seconds), for start-up recovery and for taking a snapshot. Only
  its holder mutates the store (or the committer's thread for it, `server.committer`), the
  views' dataflows and the catalog.
- `state_lock` guards what reads look at: `tables`, `views` (their contents, history, status,
  `complete_ts`), `row_counts`, the clock and the feeds' hub. The writer holds it only to
  install a timestamp's results, so reads of view rows, metadata, feeds and /health are not
  blocked by a long write.

The clock (timestamps are the server's epochs, one per write that changes something):
- `last_ts`: the latest timestamp issued and committed to DuckDB;
- `committed_ts`: the latest durable timestamp (equal to `last_ts` between writes);
- `completed_ts`: the latest timestamp whose results every view has installed;
- `history_since`: the change log and views' history are kept after this timestamp;
- `checkpoint_ts`: views' history through this timestamp is checkpointed in the store.

Readiness: at start-up every view is `hydrating` until recovery sets `ready`; requests that
need the views wait for it at most `hydrate_wait` seconds (`require_ready`), then get 503.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from server.admission import QuerySlots
from server.committer import Committer
from server.deadline import Watchdog
from server.errors import ApiError
from server.executors import Executor
from server.feeds import Hub
from server.settings import Settings
from server.statistics import DistinctCache
from server.store import Store, TableRecord, ViewRecord
from server.views import MaintainedView


class ServerState:
    """The durable store, catalog, maintained views, subscriptions and clock (see the module
    docstring for the locks that guard them)."""

    def __init__(self, settings: Settings, executor: Executor) -> None:
        self.settings = settings
        self.executor = executor
        self.write_lock = threading.RLock()
        self.state_lock = threading.Lock()
        self.hub = Hub(settings.subscriber_queue_limit, settings.subscriber_queue_bytes)
        self.store = Store(settings.database_path)
        self.tables: dict[str, TableRecord] = {}
        self.views: dict[str, MaintainedView] = {}
        # each name a view was dropped under: the timestamp it was last dropped at
        self.dropped_at: dict[str, int] = {}
        self.row_counts: dict[str, int] = {}
        # Distinct counts of join key columns, kept between statements (server.statistics).
        self.distinct_cache = DistinctCache()
        self.last_ts = 0
        self.committed_ts = 0
        self.completed_ts = 0
        self.history_since = 0
        self.next_table_id = 1
        self.next_seq = 1
        self.import_root = _import_root(settings)
        self.own_loads = settings.loads_path is None
        self.loads_dir = _loads_dir(settings)
        self.load_seq = itertools.count()
        self.ready = threading.Event()  # set once every view is recovered
        self.checkpoint_ts = 0
        # a view failed and was built afresh since the last checkpoint: the change log replayed
        # from that checkpoint would fail it again at restart, so the writer checkpoints now
        self.rebuilt_since_checkpoint = False
        # How the last recovery went: the checkpoint it started from, how many timestamps of
        # the change log it replayed after it, and how long it took (GET /health).
        self.recovery: dict[str, Any] = {}
        # The catalog's views as stored, in creation order (what recovery rebuilds).
        self.view_records: list[ViewRecord] = []
        # DML requests waiting for group commit (`server.writes`), in arrival order; guarded
        # by `queue_lock`, drained by the holder of the write lock.
        self.queue_lock = threading.Lock()
        self.write_queue: list[Any] = []
        # Notified when a request is queued (a leader may wait for more: `writes._siblings`).
        self.queued = threading.Condition(self.queue_lock)
        # How many requests the last group committed.
        self.last_group = 0
        # Whether a writer thread (`writes.lead`) is draining the queue for the requests
        # queued without a thread of their own (`writes.submit`); guarded by `queue_lock`.
        self.leading = False
        self.watchdog = Watchdog()  # the writes' time limits
        # Runs each write's change log, clock and COMMIT while its views are maintained.
        self.committer = Committer()
        self.query_slots = QuerySlots(settings.query_concurrency)  # read queries at once

    # ------------------------------------------------------------------ readiness

    def hydrating_error(self) -> ApiError:
        with self.state_lock:
            return self.hydrating_error_locked()

    def hydrating_error_locked(self) -> ApiError:
        waiting = sorted(n for n, v in self.views.items() if v.status == "hydrating")
        return ApiError(
            f"the server is starting: views are hydrating ({', '.join(waiting[:10]) or 'none'}"
            f"{', ...' if len(waiting) > 10 else ''}); retry shortly (GET /health shows "
            "\"ready\")",
            code="hydrating",
            status=503,
        )

    def require_ready(self) -> None:
        """Wait (up to `hydrate_wait` seconds) until start-up recovery is over; else 503
        `hydrating`. For requests that need the views or the write lock."""
        if not self.ready.wait(self.settings.hydrate_wait):
            raise self.hydrating_error()

    async def wait_ready(self) -> None:
        """`require_ready` for the event loop: polls instead of blocking it."""
        if self.ready.is_set():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.hydrate_wait
        while not self.ready.is_set():
            if loop.time() >= deadline:
                raise self.hydrating_error()
            await asyncio.sleep(0.05)


def _import_root(settings: Settings) -> Path | None:
    path = settings.import_path
    if path is None:
        return None
    path.mkdir(parents=True, exist_ok=True)
    return Path(os.path.realpath(path))  # the import directory itself may be a symlink


def _loads_dir(settings: Settings) -> Path:
    path = settings.loads_path
    if path is None:
        # No data directory: the files live as long as this process.
        return Path(tempfile.mkdtemp(prefix="diffsql-loads-"))
    path.mkdir(parents=True, exist_ok=True)
    # Files left by a write that crashed: the change log holds everything committed.
    for leftover in path.glob("*.parquet"):
        leftover.unlink(missing_ok=True)
    return Path(os.path.realpath(path))
