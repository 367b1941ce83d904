"""The database service: one writer that commits to the durable store and maintains views.

A write request is one step of the server's clock:
1. under the write lock, run all of its statements in one DuckDB transaction, capturing each
   statement's row deltas with RETURNING; compile and hydrate new views against the
   transaction's own (uncommitted) state; append the deltas to the change log; COMMIT.
   Any error before COMMIT rolls everything back: nothing of the request is applied.
2. after COMMIT (the write is durable), feed the deltas to every affected view's dataflow as
   epoch `ts`, then, under the state lock, update view contents/history, set
   `completed_ts = ts` and publish to subscribers. The request is acknowledged after that, so a
   later read sees the write (read-your-writes).
A view whose dataflow fails (a recursion that exceeds its iteration limit, an evaluation error
such as an overflow, anything `df.run()` raises) is marked failed; the write still succeeds for
the tables and the other views, and its response lists the views that failed (`failed_views`).
A failed view (and every view over it) is rebuilt from the current tables at the next write
that changes anything it reads, and at start-up.

Locks: the write lock is held for a whole write, including running the dataflows (a recursion
hitting its iteration limit can take seconds). Reads of view rows, view and table metadata,
change feeds and /health only take the state lock, which the writer holds just to install a
timestamp's results, so they are not blocked by a long write; views that a write does not
affect are marked complete through its timestamp before the dataflows run. Snapshot queries
(`/query`, SELECT in `/sql`) pair a DuckDB snapshot with view contents and wait for the
write lock, so they wait for a write in progress.

Reads never block on the engine's work except to take a consistent snapshot: a snapshot pairs
DuckDB's MVCC snapshot of the tables with view contents at the same `completed_ts`, taken under
the write lock (between two writes).

Bulk loads (`COPY t FROM 'file'`): the writer reads the file (Arrow, see `server.bulkload`),
DuckDB casts and stores the rows and logs them like an INSERT, and the rows as stored are
written to a Parquet file in `loads/` of the data directory. Views are fed that file, not rows:
their dataflows' executor reads it (Spark on the cluster), so the rows of a load never pass
through this process one by one. A view created in the same request as a load reads the loaded
table the same way (a Parquet snapshot of it). Load files are transport only: the change log is
the durable record, so they are deleted when the write is over (or rolled back), and leftovers
of a crash are deleted at start-up.

Start-up: `_load_catalog` reads the clock and catalog, and the server answers at once; views
are `hydrating` until `_recover_views` (a background thread holding the write lock) has built
each from the tables' current contents and its checkpointed history (`checkpoint`, every
`checkpoint_interval` timestamps and at shutdown), replaying only the change log after the
checkpoint. So each view's history after a restart is exactly its history before (same batches
at the same timestamps), its contents equal recomputation, and the work is proportional to the
data, not to the retained history. Requests that need the views wait for `ready`
(`require_ready`) for at most `hydrate_wait` seconds, then get 503 `hydrating`.

Time limit: a write's statements run under `_Deadline`: past `write_timeout` a timer interrupts
the writer's DuckDB connection and the write is rolled back (408 `timeout`); after COMMIT no
limit applies (the write is durable and its views must be maintained).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from sqlglot import exp

from engine.canonical import canonical
from engine.sources import FileSource
from server import bulkload
from server.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    SqlError,
    Timeout,
    from_duckdb,
)
from server.executors import Executor
from server.feeds import Hub, Message, Subscription, progress_message, update_message
from server.sandbox import Relation, check_relations, run_query
from server.settings import Settings
from server.sqltext import Statement, parse_script, parse_statement
from server.store import Row, Store, TableRecord, ViewRecord
from server.values import normalize_type, quote_ident, row_to_json, sort_key
from server.views import Batch, Input, MaintainedView, TableChange, apply_batch, consolidate

log = logging.getLogger("diffsql.server")

# The longest table, view or column name accepted (in characters), as in PostgreSQL's
# NAMEDATALEN spirit but generous: a view's name must fit in a URL path.
MAX_NAME_LENGTH = 255


def _planner() -> Any:
    import planner

    return planner


def _column_dicts(columns: Any) -> list[dict[str, Any]]:
    out = []
    for c in columns:
        if isinstance(c, str):
            out.append({"name": c, "type": None, "nullable": True})
        elif isinstance(c, dict):
            out.append(
                {"name": c["name"], "type": c.get("type"), "nullable": c.get("nullable", True)}
            )
        else:
            out.append(
                {
                    "name": str(c.name),
                    "type": getattr(c, "type", None),
                    "nullable": bool(getattr(c, "nullable", True)),
                }
            )
    return out


def _infer_type(values: list[Any]) -> str:
    import datetime
    import decimal

    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            return "BOOLEAN"
        if isinstance(v, int):
            return "BIGINT"
        if isinstance(v, float):
            return "DOUBLE"
        if isinstance(v, decimal.Decimal):
            return "DECIMAL(38,10)"
        if isinstance(v, datetime.datetime):
            return "TIMESTAMP"
        if isinstance(v, datetime.date):
            return "DATE"
        return "VARCHAR"
    return "VARCHAR"


def planner_catalog(tables: dict[str, TableRecord], views: dict[str, ViewRecord]) -> Any:
    p = _planner()

    def cols(cs: list[dict[str, Any]]) -> list[Any]:
        return [p.Column(c["name"], c["type"] or "VARCHAR", c["nullable"]) for c in cs]

    return p.Catalog(
        tables={
            n: p.TableSchema(n, cols(t.columns), primary_key=list(t.primary_key))
            for n, t in tables.items()
        },
        views={n: p.ViewDef(n, v.sql, cols(v.columns)) for n, v in views.items()},
    )


def _record(view: MaintainedView) -> ViewRecord:
    return ViewRecord(
        view.name, view.seq, view.sql, view.columns, view.dependencies, view.created_ts
    )


@dataclass
class _Write:
    """Provisional state of one write request (discarded on rollback)."""

    ts: int
    tables: dict[str, TableRecord]
    views: dict[str, ViewRecord]
    next_table_id: int
    next_seq: int
    history_since: int
    deltas: dict[str, Counter[Row]] = field(default_factory=lambda: defaultdict(Counter))
    new_views: dict[str, Any] = field(default_factory=dict)  # name -> compiled
    hydrated: dict[str, MaintainedView] = field(default_factory=dict)
    dropped_views: list[str] = field(default_factory=list)
    dropped_tables: list[str] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    batches: dict[str, Batch] = field(default_factory=dict)
    # Contents after the statements so far (tables read in the transaction, views computed in
    # throw-away dataflows); reset by every write statement.
    trial: dict[str, Counter[Row]] = field(default_factory=dict)
    # New views whose hydration dataflow becomes their permanent one (they read only tables
    # and no other new view reads them); the others are built again after COMMIT.
    reusable: set[str] = field(default_factory=set)
    # Bulk loads: per table, the Parquet files of rows it loaded (at ts, diff +1) and how many.
    loads: dict[str, list[FileSource]] = field(default_factory=lambda: defaultdict(list))
    load_counts: Counter[str] = field(default_factory=Counter)
    # Parquet snapshots of loaded tables, for views built in this write; reset like `trial`.
    snapshots: dict[str, Input] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)  # every file this write made


class _Deadline:
    """A write's time limit: when it passes, a timer thread interrupts the writer's DuckDB
    connection (the statement running then fails) and marks the write as timed out, so it is
    rolled back. `disarm` (before COMMIT) and the timer exclude each other: once disarmed, an
    interrupt can no longer hit the COMMIT or a later write."""

    def __init__(self, seconds: float, interrupt: Callable[[], None]) -> None:
        self.seconds = seconds
        self.fired = False
        self._armed = True
        self._lock = threading.Lock()
        self._interrupt = interrupt
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self.fired = True
            self._interrupt()

    def check(self) -> None:
        """Stop between steps that DuckDB does not run (planning, computing views)."""
        if self.fired:
            raise Timeout("write time limit exceeded", code="timeout")

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
        self._timer.cancel()


def _error_json(message: str | None, code: str = "view_failed") -> dict[str, Any]:
    return {"code": code, "message": message or "failed", "line": None, "column": None}


def _failure(e: BaseException) -> dict[str, Any]:
    """The error object of a view whose evaluation failed (anything its dataflow raised)."""
    name = type(e).__name__
    code = getattr(e, "code", None)
    if not isinstance(code, str) or not code:
        code = {
            "IterationLimitExceeded": "iteration_limit",
            "BudgetExceeded": "budget_exceeded",
            "EvaluationError": "evaluation_error",
            "DataflowPoisoned": "evaluation_error",
        }.get(name, "evaluation_error")
    message = str(getattr(e, "message", None) or e) or name
    return {"code": code, "message": f"{name}: {message}", "line": None, "column": None}


class Database:
    """The server's state: durable store, catalog, maintained views, subscriptions."""

    def __init__(self, settings: Settings, executor: Executor, background: bool = False) -> None:
        """Open the store and read the catalog; bring the views up now, or with `background`
        only when `start_recovery` is called (see `_recover_views`)."""
        self.settings = settings
        self.executor = executor
        self.write_lock = threading.RLock()
        self.state_lock = threading.Lock()
        self.hub = Hub(settings.subscriber_queue_limit, settings.subscriber_queue_bytes)
        self.store = Store(settings.database_path)
        self.tables: dict[str, TableRecord] = {}
        self.views: dict[str, MaintainedView] = {}
        self.row_counts: dict[str, int] = {}
        self.last_ts = 0
        self.committed_ts = 0
        self.completed_ts = 0
        self.history_since = 0
        self.next_table_id = 1
        self.next_seq = 1
        self.import_root = self._import_root(settings)
        self._own_loads = settings.loads_path is None
        self.loads_dir = self._loads_dir(settings)
        self._load_seq = itertools.count()
        self.ready = threading.Event()  # set once every view is recovered
        self.checkpoint_ts = 0
        # How the last recovery went: the checkpoint it started from, how many timestamps of
        # the change log it replayed after it, and how long it took (GET /health).
        self.recovery: dict[str, Any] = {}
        self._view_records: list[ViewRecord] = []
        self._load_catalog()
        if not background:
            self._recover_views()

    @staticmethod
    def _import_root(settings: Settings) -> Path | None:
        path = settings.import_path
        if path is None:
            return None
        path.mkdir(parents=True, exist_ok=True)
        return Path(os.path.realpath(path))  # the import directory itself may be a symlink

    @staticmethod
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

    def end_feeds(self) -> None:
        """End every change feed (at shutdown, so open streams do not hold it up)."""
        with self.state_lock:
            self.hub.close_all()

    def close(self) -> None:
        with self.write_lock:
            with self.state_lock:
                self.hub.close_all()
            self.checkpoint()  # a clean restart then replays nothing
            self.hub.shutdown()
            self.store.close()
            if self._own_loads:
                shutil.rmtree(self.loads_dir, ignore_errors=True)

    # ------------------------------------------------------------------ recovery

    def _load_catalog(self) -> None:
        """Read the clock and the catalog (fast: no table contents, no dataflows). Every view
        starts `hydrating`; `_recover_views` brings it up."""
        store = self.store
        self.ready.clear()
        self.last_ts = store.get_meta("last_ts")
        self.history_since = store.get_meta("history_since")
        self.next_table_id = store.get_meta("next_table_id")
        self.checkpoint_ts = store.get_meta("checkpoint_ts")
        t_low, t_now = self.history_since, self.last_ts
        for rec in store.load_tables():
            self.tables[rec.name] = rec
            self.row_counts[rec.name] = store.count_rows(rec.name)
        self._view_records = store.load_views()
        for vrec in self._view_records:
            self.next_seq = max(self.next_seq, vrec.seq + 1)
            self.views[vrec.name] = MaintainedView(
                vrec.name,
                vrec.sql,
                vrec.columns,
                vrec.dependencies,
                vrec.created_ts,
                vrec.seq,
                status="hydrating",
                base_ts=max(t_low, vrec.created_ts),
                complete_ts=t_now,
            )
        self.completed_ts = self.committed_ts = t_now

    def start_recovery(self) -> None:
        """Bring the views up in a background thread (the server answers meanwhile: views are
        `hydrating`, and requests that need them wait for `ready`)."""
        threading.Thread(target=self._recover_in_background, name="diffsql-recovery",
                         daemon=True).start()

    def _recover_in_background(self) -> None:
        try:
            with self.write_lock:
                self._recover_views()
        except BaseException:  # noqa: BLE001 - the store is unusable: fail loudly, as at start
            log.exception("recovery failed; the server exits")
            logging.shutdown()
            os._exit(3)

    def _recover_views(self) -> None:
        """Rebuild every view from the tables' current contents, without replaying history.

        The views' history up to `checkpoint_ts` comes from the checkpoint; only the change
        log after it (empty after a clean shutdown) is replayed, from the tables' contents at
        `checkpoint_ts` (contents now minus the log after it), so each view's history after a
        restart is exactly its history before (same batches at the same timestamps) and its
        contents equal recomputation. Without a usable checkpoint (a database from before
        checkpoints) the whole retained log is replayed."""
        store = self.store
        began = time.monotonic()
        t_low, t_now = self.history_since, self.last_ts
        start = max(t_low, self.checkpoint_ts)
        saved = store.read_checkpoint(self.checkpoint_ts) if self.checkpoint_ts >= t_low else {}
        # Per table: contents at `start`, the batches after it, and contents now.
        streams: dict[str, tuple[Counter[Row], list[tuple[int, Batch]]]] = {}
        current: dict[str, Counter[Row]] = {}
        for rec in self.tables.values():
            rows = Store.read_table(store.conn, rec.name)
            self.row_counts[rec.name] = len(rows)
            current[rec.name] = Counter(rows)
            base: Counter[Row] = Counter(rows)
            by_ts: dict[int, Batch] = defaultdict(list)
            if start < t_now:
                for ts, row, diff in store.read_log(rec, start):
                    by_ts[ts].append((row, diff))
                    base[row] -= diff
            if any(n < 0 for n in base.values()):
                raise RuntimeError(f"change log of table {rec.name} is inconsistent")
            streams[rec.name] = (+base, sorted(by_ts.items()))
        replayed = {ts for _, batches in streams.values() for ts, _ in batches}
        catalog_views: dict[str, ViewRecord] = {}
        partial: set[str] = set()  # views rebuilt from the current tables only (no history)
        for vrec in self._view_records:
            view = self.views[vrec.name]
            catalog = planner_catalog(self.tables, catalog_views)
            catalog_views[vrec.name] = vrec
            try:
                missing = [
                    d for d in vrec.dependencies if d not in self.tables and d not in self.views
                ]
                if missing:
                    raise RuntimeError(f"depends on unavailable {', '.join(missing)}")
                view.compiled = _planner().compile_view(
                    vrec.sql, catalog, name=vrec.name, iteration_limit=self.settings.iteration_limit
                )
            except Exception as e:  # noqa: BLE001 - any failure only fails this view
                log.warning("view %s cannot be planned during recovery: %s", vrec.name, e)
                self._recovered(view, error=f"{type(e).__name__}: {e}")
                continue
            bad = [d for d in vrec.dependencies if d in self.views and not self.views[d].running]
            if bad:
                self._recovered(view, error=f"depends on failed view {bad[0]}")
                continue
            if not any(d in partial for d in vrec.dependencies):
                # The checkpointed history, then the log after the checkpoint replayed.
                try:
                    self._recover_history(view, streams, start, t_now, saved.get(vrec.seq))
                    self._recovered(view)
                    continue
                except Exception as e:  # noqa: BLE001 - retried below from the current tables
                    log.warning("view %s failed replaying its history: %s", vrec.name, e)
                    view.release()
            # Rebuild from the current tables only (a recursion that diverged at some earlier
            # timestamp may converge now); its history then starts now.
            try:
                self._recover_current(view, current, t_now)
                partial.add(vrec.name)
                self._recovered(view)
            except Exception as e:  # noqa: BLE001 - any failure only fails this view
                log.warning("view %s failed during recovery: %s", vrec.name, e)
                self._recovered(view, error=_failure(e)["message"])
        for view in self.views.values():
            if view.running:
                view.pin_at(t_now)
        self.recovery = {
            "checkpoint": self.checkpoint_ts,
            "replayed_timestamps": len(replayed),
            "seconds": round(time.monotonic() - began, 3),
        }
        log.info("views recovered: %s", self.recovery)
        self.ready.set()

    def _recovered(self, view: MaintainedView, error: str | None = None) -> None:
        """Make a recovered view readable (or failed), under the state lock."""
        with self.state_lock:
            if error is None:
                view.status = "running"
            else:
                view.fail(error)

    def _imports(self, view: MaintainedView, views: dict[str, MaintainedView]) -> dict[str, Any]:
        return {d: views[d].arranged for d in view.dependencies if d in views}

    def _recover_history(
        self,
        view: MaintainedView,
        streams: dict[str, tuple[Counter[Row], list[tuple[int, Batch]]]],
        start: int,
        t_now: int,
        saved: tuple[int, list[tuple[int, Batch]]] | None,
    ) -> None:
        """Build `view` at `start` from the tables' contents then, replay the log after it,
        and prefix the history it produces with the checkpointed history `saved` (its base
        and batches, through `start`) if the view has one."""
        view.build(self.executor.new_dataflow(), start, self._imports(view, self.views))
        schedule: dict[int, dict[str, Batch]] = defaultdict(dict)
        for dep in view.handles:
            base, batches = streams[dep]
            schedule[start][dep] = list(base.items())
            for ts, b in batches:
                schedule[ts][dep] = b
        # The output trace keeps its times from `start` on until recovery is over, so views
        # over this one, built after it ran, still see its history timestamp by timestamp.
        out = view.run_schedule(sorted(schedule.items()), t_now, pin_ts=start)
        acc: Counter[Row] = Counter()
        history: list[tuple[int, Batch]] = []
        if saved is not None:
            view.base_ts = max(saved[0], self.history_since)
            history = [(t, b) for t, b in saved[1] if t > view.base_ts]
        else:  # no history of it is saved: it starts at `start` (or at its creation, later)
            view.base_ts = max(view.base_ts, start)
        for ts, b in sorted(out.items()):
            apply_batch(acc, b)
            if ts > max(view.base_ts, start):
                history.append((ts, b))
        view.history = history
        view.contents = acc

    def _recover_current(
        self, view: MaintainedView, current: dict[str, Counter[Row]], t_now: int
    ) -> None:
        view.build(self.executor.new_dataflow(), t_now, self._imports(view, self.views))
        inputs = {d: list(current[d].items()) for d in view.handles}
        out = view.run_schedule([(t_now, inputs)], t_now)
        acc: Counter[Row] = Counter()
        for b in out.values():
            apply_batch(acc, b)
        view.contents = acc
        view.history = []
        view.base_ts = max(t_now, view.created_ts)

    def _reload(self) -> None:
        """Rebuild all in-memory state from the durable store (last resort after a bug)."""
        with self.state_lock:
            for name, view in list(self.views.items()):
                view.release()
                self.hub.end_view(name, "server_reset", "the server reloaded; resume with since")
            self.tables, self.views, self.row_counts = {}, {}, {}
            self._load_catalog()
        self._recover_views()

    # ------------------------------------------------------------------ readiness

    def _hydrating(self) -> ApiError:
        with self.state_lock:
            return self._hydrating_locked()

    def _hydrating_locked(self) -> ApiError:
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
            raise self._hydrating()

    async def wait_ready(self) -> None:
        """`require_ready` for the event loop: polls instead of blocking it."""
        if self.ready.is_set():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.hydrate_wait
        while not self.ready.is_set():
            if loop.time() >= deadline:
                raise self._hydrating()
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self) -> None:
        """Save every running view's history since the last checkpoint to the store, so a
        restart replays only the log after it. Called by the writer between writes (under
        the write lock); a failure is logged and the next checkpoint retries (the log still
        holds everything)."""
        if self.settings.memory or not self.ready.is_set() or self.checkpoint_ts >= self.last_ts:
            return
        since = self.checkpoint_ts
        with self.state_lock:
            chunks = [
                (v.seq, since, v.base_ts, [(t, b) for t, b in v.history if t > since])
                for v in self.views.values()
                if v.running
            ]
            through = self.completed_ts
        try:
            self.store.write_checkpoint(through, chunks)
            self.checkpoint_ts = through
        except Exception:  # noqa: BLE001 - a checkpoint is an optimisation of restart only
            log.exception("checkpoint at timestamp %d failed", through)

    # ------------------------------------------------------------------ writes

    def execute(self, sql: str) -> dict[str, Any]:
        """Run a script of statements; all writes commit atomically at one timestamp.

        Returns {"results": [...], "failed_views": [...]}: the views whose evaluation failed
        at this write (the write itself is committed)."""
        stmts = parse_script(sql, self.settings.max_statements)
        self.require_ready()
        if all(s.kind in ("SELECT", "EXPLAIN") for s in stmts):
            return {"results": self._read_many(stmts), "failed_views": []}
        return self._write(stmts)

    def _write(self, stmts: list[Statement]) -> dict[str, Any]:
        self.require_ready()
        with self.write_lock:
            w = _Write(
                ts=self.last_ts + 1,
                tables=dict(self.tables),
                views={n: _record(v) for n, v in self.views.items()},
                next_table_id=self.next_table_id,
                next_seq=self.next_seq,
                history_since=self.history_since,
            )
            try:
                out = self._write_steps(w, stmts)
                if self.last_ts - self.checkpoint_ts >= self.settings.checkpoint_interval:
                    self.checkpoint()
                return out
            finally:
                # Every dataflow that reads a load file has run (or was dropped): the rows are
                # in the store, its log, and the views' arrangements.
                for path in w.files:
                    path.unlink(missing_ok=True)

    def _write_steps(self, w: _Write, stmts: list[Statement]) -> dict[str, Any]:
        """`_write` under the write lock: the transaction, then maintaining the views."""
        results: list[dict[str, Any]] = []
        deadline = _Deadline(self.settings.write_timeout, self.store.conn.interrupt)
        self.store.begin()
        try:
            for s in stmts:
                deadline.check()
                if s.kind == "SELECT":
                    # Inside the transaction: it sees this request's own writes, and an
                    # error in it rolls back the whole request.
                    results.append(self._select_in_write(w, s))
                elif s.kind == "EXPLAIN":
                    results.append(self._explain(s, w.tables, w.views))
                else:
                    results.append(self._apply(w, s))
                    w.trial = {}
                    w.snapshots = {}
            deadline.check()
            if self._changes_nothing(w):
                # A request that changes no table, view or row (`CREATE TABLE IF NOT EXISTS`
                # on an existing table, a DELETE that matches nothing) is not a transaction
                # of the history: it takes no timestamp, so feeds and `as_of` see no empty
                # epochs. Its results name the state it saw, the latest committed timestamp.
                self.store.rollback()
                for view in w.hydrated.values():
                    view.release()
                for r in results:
                    r["timestamp"] = self.last_ts
                return {"results": results, "failed_views": []}
            self._hydrate(w)
            self._log(w)
            deadline.disarm()  # from here on the write commits, however long it takes
            deadline.check()
            self.store.commit()
            self.last_ts = self.committed_ts = w.ts
        except BaseException as e:
            deadline.disarm()
            self.store.rollback()
            for view in w.hydrated.values():
                view.release()
            if deadline.fired:
                # Whatever the interrupted statement raised, the cause is the time limit.
                raise Timeout(
                    f"the write exceeded the time limit of {self.settings.write_timeout:g}s "
                    "(--write-timeout) and was rolled back; nothing was applied",
                    code="timeout",
                ) from None
            if isinstance(e, duckdb.Error):
                raise from_duckdb(e) from None
            raise
        try:
            failed = self._publish(w)
        except Exception:  # a bug after COMMIT: rebuild everything from the durable store
            log.exception("maintaining views at timestamp %d failed; reloading", w.ts)
            self._reload()
            with self.state_lock:
                failed = [
                    {"name": n, "error": _error_json(v.error)}
                    for n, v in sorted(self.views.items())
                    if not v.running
                ]
        for r in results:
            r["timestamp"] = w.ts
        return {"results": results, "failed_views": failed}

    def _changes_nothing(self, w: _Write) -> bool:
        """Whether the statements of `w` so far changed no catalog entry and no row."""
        return (
            w.tables.keys() == self.tables.keys()
            and all(w.tables[n] is self.tables[n] for n in w.tables)
            and w.views.keys() == self.views.keys()
            and not w.new_views
            and not w.dropped_views
            and not w.dropped_tables
            and not any(w.load_counts.values())
            and not any(d for delta in w.deltas.values() for d in delta.values())
        )

    def _apply(self, w: _Write, s: Statement) -> dict[str, Any]:
        handler = {
            "CREATE TABLE": self._create_table,
            "DROP TABLE": self._drop_table,
            "CREATE VIEW": self._create_view,
            "DROP VIEW": self._drop_view,
            "INSERT": self._dml,
            "UPDATE": self._dml,
            "DELETE": self._dml,
            "COPY": self._copy,
        }[s.kind]
        try:
            return handler(w, s)
        except ApiError as e:
            if e.line is None:
                e.line, e.column = s.line, s.column
            raise
        except duckdb.Error as e:
            raise from_duckdb(e, line=s.line, column=s.column) from None

    @staticmethod
    def _name_of(table: exp.Expression, s: Statement) -> str:
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            raise SqlError("expected a table name", line=s.line, column=s.column)
        if table.args.get("db") or table.args.get("catalog"):
            raise Forbidden(
                f"qualified name {table.sql()} is not allowed", line=s.line, column=s.column
            )
        return str(table.name).lower()

    @staticmethod
    def _check_new_name(name: str, what: str, s: Statement) -> None:
        """Refuse a name for a new table, view or column that could not be used safely: one
        with a NUL byte (cut short by C strings and refused in URLs) or longer than
        `MAX_NAME_LENGTH` characters (too long to address in a URL)."""
        if "\x00" in name:
            raise SqlError(
                f"{what} names cannot contain NUL bytes", code="invalid_name",
                line=s.line, column=s.column,
            )
        if len(name) > MAX_NAME_LENGTH:
            raise SqlError(
                f"{what} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}",
                code="name_too_long", line=s.line, column=s.column,
            )

    @staticmethod
    def _refuse_temporary(ast: exp.Expression, what: str, s: Statement) -> None:
        """Every table and view is durable: a TEMP one is refused rather than silently made
        durable."""
        props = ast.args.get("properties")
        if props is not None and any(
            isinstance(p, exp.TemporaryProperty) for p in props.expressions
        ):
            raise SqlError(
                f"CREATE TEMP {what} is not supported: every {what.lower()} is durable; "
                f"use CREATE {what} (and DROP {what} when done)",
                code="unsupported", line=s.line, column=s.column,
            )

    def _create_table(self, w: _Write, s: Statement) -> dict[str, Any]:
        ast = s.ast
        if ast.expression is not None:
            raise SqlError("CREATE TABLE ... AS SELECT is not supported", code="unsupported")
        if ast.args.get("replace"):
            raise SqlError("CREATE OR REPLACE TABLE is not supported", code="unsupported")
        self._refuse_temporary(ast, "TABLE", s)
        schema = ast.this
        if not isinstance(schema, exp.Schema):
            raise SqlError("CREATE TABLE needs a column list", code="syntax_error")
        name = self._name_of(schema.this, s)
        self._check_new_name(name, "table", s)
        if name in w.tables or name in w.views:
            if ast.args.get("exists") and name in w.tables:
                return {"statement": "CREATE TABLE", "name": name, "created": False}
            kind = "table" if name in w.tables else "view"
            raise Conflict(f"a {kind} named {name!r} already exists", code="already_exists")
        columns: list[dict[str, Any]] = []
        pk: list[str] = []
        for item in schema.expressions:
            if isinstance(item, exp.ColumnDef):
                cname = str(item.name).lower()  # names are case-insensitive; stored lower-case
                self._check_new_name(cname, "column", s)
                if any(c["name"] == cname for c in columns):
                    raise SqlError(f"duplicate column {cname!r}", code="duplicate_column")
                kind = item.args.get("kind")
                if kind is None:
                    raise SqlError(f"column {cname!r} needs a type", code="syntax_error")
                col = {"name": cname, "type": normalize_type(kind.sql("duckdb")), "nullable": True}
                for con in item.args.get("constraints") or []:
                    ck = con.args.get("kind")
                    if isinstance(ck, exp.NotNullColumnConstraint) and not ck.args.get(
                        "allow_null"
                    ):
                        col["nullable"] = False
                    elif isinstance(ck, exp.PrimaryKeyColumnConstraint):
                        if pk:
                            raise SqlError("more than one PRIMARY KEY", code="syntax_error")
                        pk.append(cname)
                    else:
                        raise SqlError(
                            f"unsupported column constraint {con.sql('duckdb')!r}; "
                            "supported: NOT NULL, PRIMARY KEY",
                            code="unsupported",
                        )
                columns.append(col)
            elif isinstance(item, exp.PrimaryKey):
                if pk:
                    raise SqlError("more than one PRIMARY KEY", code="syntax_error")
                pk = [str(e.name).lower() for e in item.expressions]
            else:
                raise SqlError(
                    f"unsupported table element {item.sql('duckdb')!r}", code="unsupported"
                )
        if not columns:
            raise SqlError("a table needs at least one column", code="syntax_error")
        by_lower = {c["name"].lower(): c for c in columns}
        for k in pk:
            if k.lower() not in by_lower:
                raise SqlError(f"PRIMARY KEY column {k!r} is not a column", code="unknown_column")
            by_lower[k.lower()]["nullable"] = False
        pk = [by_lower[k.lower()]["name"] for k in pk]
        rec = TableRecord(name, w.next_table_id, columns, pk, w.ts)
        w.next_table_id += 1
        self.store.create_table(rec)
        w.tables[name] = rec
        return {"statement": "CREATE TABLE", "name": name, "created": True}

    def _dependents(self, w: _Write, name: str) -> list[str]:
        return [v.name for v in w.views.values() if name in v.dependencies]

    @staticmethod
    def _drop_targets(s: Statement) -> list[exp.Expression]:
        if s.ast.args.get("cascade"):
            raise SqlError(
                "DROP ... CASCADE is not supported; drop dependent views first", code="unsupported"
            )
        targets = list(s.ast.args.get("tables") or [])
        if not targets and s.ast.this is not None:
            targets = [s.ast.this]
        if len(targets) != 1:
            raise SqlError("DROP takes exactly one name", code="unsupported")
        return targets

    def _drop_table(self, w: _Write, s: Statement) -> dict[str, Any]:
        name = self._name_of(self._drop_targets(s)[0], s)
        if name not in w.tables:
            if name in w.views:
                raise SqlError(f"{name!r} is a view; use DROP VIEW", code="wrong_object_type")
            if s.ast.args.get("exists"):
                return {"statement": "DROP TABLE", "name": name, "dropped": False}
            raise SqlError(f"unknown table {name!r}", code="unknown_table")
        deps = self._dependents(w, name)
        if deps:
            raise Conflict(
                f"cannot drop table {name!r}: views {', '.join(deps)} depend on it",
                code="dependent_objects",
            )
        self.store.drop_table(w.tables.pop(name))
        w.deltas.pop(name, None)
        w.loads.pop(name, None)
        w.load_counts.pop(name, None)
        w.written.discard(name)
        w.dropped_tables.append(name)
        return {"statement": "DROP TABLE", "name": name, "dropped": True}

    def _create_view(self, w: _Write, s: Statement) -> dict[str, Any]:
        ast = s.ast
        if ast.args.get("replace"):
            raise SqlError("CREATE OR REPLACE VIEW is not supported", code="unsupported")
        self._refuse_temporary(ast, "VIEW", s)
        target = ast.this
        if isinstance(target, exp.Schema):  # CREATE VIEW v(c1, c2): the planner renames
            target = target.this
        name = self._name_of(target, s)
        self._check_new_name(name, "view", s)
        if name in w.tables or name in w.views:
            if ast.args.get("exists") and name in w.views:
                return {"statement": "CREATE VIEW", "name": name, "created": False}
            kind = "table" if name in w.tables else "view"
            raise Conflict(f"a {kind} named {name!r} already exists", code="already_exists")
        compiled = self._compile(s, name, w.tables, w.views)
        deps = [str(d).lower() for d in compiled.dependencies]
        for d in deps:
            if d not in w.tables and d not in w.views:
                raise SqlError(f"unknown table or view {d!r}", code="unknown_table")
        rec = ViewRecord(name, w.next_seq, s.text, _column_dicts(compiled.columns), deps, w.ts)
        w.next_seq += 1
        self.store.create_view(rec)
        w.views[name] = rec
        w.new_views[name] = compiled
        return {"statement": "CREATE VIEW", "name": name, "created": True}

    def _compile(
        self,
        s: Statement,
        name: str | None,
        tables: dict[str, TableRecord],
        views: dict[str, ViewRecord],
    ) -> Any:
        """Plan the view (or query) of statement `s` against a catalog of tables and views."""
        p = _planner()
        try:
            return p.compile_view(
                s.text,
                planner_catalog(tables, views),
                name=name,
                iteration_limit=self.settings.iteration_limit,
            )
        except p.PlanError as e:
            line, col = s.locate(getattr(e, "line", None), getattr(e, "column", None))
            raise SqlError(
                str(getattr(e, "message", None) or e),
                code=str(getattr(e, "code", None) or "plan_error"),
                line=line,
                column=col,
            ) from None
        except ApiError:
            raise
        except RecursionError:
            raise SqlError(
                "the view is too complex: nested too deeply",
                code="too_complex",
                line=s.line,
                column=s.column,
            ) from None
        except Exception as e:  # noqa: BLE001 - a planner bug must not take the server down
            raise SqlError(f"cannot plan view {name!r}: {e}", code="unsupported") from None

    def _explain(
        self, s: Statement, tables: dict[str, TableRecord], views: dict[str, ViewRecord]
    ) -> dict[str, Any]:
        """EXPLAIN CREATE VIEW / EXPLAIN SELECT: the plan the view would have; nothing is
        created."""
        inner = s.inner
        assert inner is not None
        name: str | None = None
        if inner.kind == "CREATE VIEW":
            target = inner.ast.this
            if isinstance(target, exp.Schema):
                target = target.this
            name = self._name_of(target, inner)
        compiled = self._compile(inner, name, tables, views)
        return {
            "statement": "EXPLAIN",
            "name": name,
            "plan": str(compiled.explain()),
            "view_columns": _column_dicts(compiled.columns),
            "dependencies": [str(d).lower() for d in compiled.dependencies],
        }

    def _drop_view(self, w: _Write, s: Statement) -> dict[str, Any]:
        name = self._name_of(self._drop_targets(s)[0], s)
        if name not in w.views:
            if name in w.tables:
                raise SqlError(f"{name!r} is a table; use DROP TABLE", code="wrong_object_type")
            if s.ast.args.get("exists"):
                return {"statement": "DROP VIEW", "name": name, "dropped": False}
            raise NotFound(f"unknown view {name!r}", code="unknown_view", status=400)
        deps = self._dependents(w, name)
        if deps:
            raise Conflict(
                f"cannot drop view {name!r}: views {', '.join(deps)} depend on it",
                code="dependent_objects",
            )
        del w.views[name]
        self.store.drop_view(name)
        if name in w.new_views:
            del w.new_views[name]
        else:
            w.dropped_views.append(name)
        return {"statement": "DROP VIEW", "name": name, "dropped": True}

    def _dml(self, w: _Write, s: Statement) -> dict[str, Any]:
        ast = s.ast
        target = ast.this.this if isinstance(ast.this, exp.Schema) else ast.this
        name = self._name_of(target, s)
        if name in w.views:
            raise SqlError(f"{name!r} is a view; views are read-only", code="read_only_view")
        if name not in w.tables:
            raise SqlError(f"unknown table {name!r}", code="unknown_table")
        if ast.args.get("returning"):
            raise SqlError("RETURNING is not supported", code="unsupported")
        if isinstance(ast, exp.Insert):
            conflict = ast.args.get("conflict")
            if ast.args.get("alternative") or (
                conflict is not None
                and not conflict.args.get("doing_nothing")
                and "NOTHING" not in conflict.sql("duckdb").upper()
            ):
                raise SqlError(
                    "INSERT OR REPLACE / ON CONFLICT DO UPDATE is not supported; "
                    "use UPDATE, or ON CONFLICT DO NOTHING",
                    code="unsupported",
                )
        used = check_relations(
            ast,
            list(w.tables) + list(w.views),
            root_allowed=(type(ast),),
            line=s.line,
            column=s.column,
        )
        read_views = [u for u in used if u in w.views]
        if read_views:
            raise SqlError(
                f"reading views ({', '.join(read_views)}) inside {s.kind} is not supported; "
                "read the view in a separate request",
                code="unsupported",
            )
        con = self.store.conn
        delta = w.deltas[name]
        returning = exp.Returning(expressions=[exp.Star()])
        if s.kind == "UPDATE":
            alias = target.alias_or_name
            old_q = f"SELECT {quote_ident(alias)}.rowid FROM {target.sql('duckdb')}"
            with_ = ast.args.get("with_") or ast.args.get("with")
            if with_ is not None:  # the FROM and WHERE may name its CTEs
                old_q = f"{with_.sql('duckdb')} {old_q}"
            frm = ast.args.get("from_") or ast.args.get("from")
            if frm is not None:
                old_q += f", {frm.this.sql('duckdb')}"
            where = ast.args.get("where")
            if where is not None:
                old_q += f" WHERE {where.this.sql('duckdb')}"
            old = con.execute(
                f"SELECT * FROM main.{quote_ident(name)} WHERE rowid IN ({old_q})"
            ).fetchall()
            stmt = ast.copy()
            stmt.set("returning", returning)
            new = con.execute(stmt.sql("duckdb")).fetchall()
            for r in old:
                delta[canonical(tuple(r))] -= 1
            for r in new:
                delta[canonical(tuple(r))] += 1
            count = len(new)
        else:
            stmt = ast.copy()
            stmt.set("returning", returning)
            rows = con.execute(stmt.sql("duckdb")).fetchall()
            sign = 1 if s.kind == "INSERT" else -1
            for r in rows:
                delta[canonical(tuple(r))] += sign
            count = len(rows)
        w.written.add(name)
        return {"statement": s.kind, "rowcount": count}

    def _copy(self, w: _Write, s: Statement) -> dict[str, Any]:
        """COPY <table> [(columns)] FROM '<path>' [(options)]: a bulk load (see the module
        docstring and `server.bulkload`)."""
        ast = s.ast
        if not ast.args.get("kind"):
            raise SqlError(
                "COPY ... TO is not supported: the server writes no files; read a view with "
                "GET /views/{name}/rows or query with POST /query",
                code="unsupported",
            )
        target = ast.this
        listed: list[str] | None = None
        if isinstance(target, exp.Schema):
            listed = [str(e.name).lower() for e in target.expressions]
            target = target.this
        name = self._name_of(target, s)
        if name in w.views:
            raise SqlError(f"{name!r} is a view; views are read-only", code="read_only_view")
        if name not in w.tables:
            raise SqlError(f"unknown table {name!r}", code="unknown_table")
        spec = bulkload.parse_copy(ast)
        if self.import_root is None:
            raise ApiError(
                "COPY FROM is disabled: the server has no import directory (it keeps no data "
                "directory); start it with --import-dir",
                code="import_disabled",
                status=403,
            )
        master = self.settings.spark_master or "local"
        if self.settings.executor == "spark" and self._own_loads and not master.startswith("local"):
            # Load files would sit on this host's disk, where the cluster's workers cannot read
            # them after COMMIT: refuse before anything is applied.
            raise ApiError(
                "COPY FROM on a Spark cluster needs a data directory the workers share (the "
                "server keeps none: it runs with --memory)",
                code="import_disabled",
                status=403,
            )
        rec = w.tables[name]
        names = [c["name"] for c in rec.columns]
        columns = listed if listed is not None else names
        for c in columns:
            if c not in names:
                raise SqlError(f"table {name!r} has no column {c!r}", code="unknown_column")
        if len(set(columns)) != len(columns):
            raise SqlError("a column is named twice in the COPY column list",
                           code="duplicate_column")
        stored = []
        for path in bulkload.resolve_paths(self.import_root, spec.path):
            data = bulkload.read_file(spec, path, self.import_root)
            shown = os.path.relpath(path, self.import_root)
            if data.num_columns == 0 and data.num_rows == 0:
                continue  # an empty CSV file
            if data.num_columns != len(columns):
                raise SqlError(
                    f"{shown!r} has {data.num_columns} columns but COPY into {name!r} expects "
                    f"{len(columns)} ({', '.join(columns)}); columns match by position",
                    code="column_count_mismatch",
                )
            if data.num_rows == 0:
                continue
            try:
                stored.append(self.store.insert_arrow(rec, data, columns))
            except duckdb.Error as e:
                err = from_duckdb(e, line=s.line, column=s.column)
                err.message = f"COPY {name} from {shown!r}: {err.message}"
                raise err from None
        count = sum(t.num_rows for t in stored)
        if count:
            import pyarrow as pa

            rows = pa.concat_tables(stored) if len(stored) > 1 else stored[0]
            self.store.append_log_arrow(rec, w.ts, rows)
            w.loads[name].append(self._load_file(w, rec, rows))
            w.load_counts[name] += count
            w.written.add(name)
        return {"statement": "COPY", "rowcount": count}

    def _load_file(self, w: _Write, rec: TableRecord, rows: Any) -> FileSource:
        """Write Arrow table `rows` (typed as the store holds `rec`'s rows) to a Parquet file
        that dataflows load. Columns are named c0..cn-1: any table column name is safe there,
        and Spark reads them back by position and type, not by a name it might misparse."""
        import pyarrow.parquet as pq

        names = tuple(f"c{i}" for i in range(len(rec.columns)))
        path = self.loads_dir / f"{w.ts}-{rec.table_id}-{next(self._load_seq)}.parquet"
        w.files.append(path)  # deleted when the write is over, even if writing it failed
        pq.write_table(rows.rename_columns(list(names)), path)
        return FileSource((str(path),), "parquet", columns=names)

    def _table_input(
        self, w: _Write, name: str, rows: Callable[[], Iterable[tuple[Row, int]]]
    ) -> Input:
        """The contents of relation `name` (in this write's transaction), as an input of a
        view built in this write: a Parquet snapshot when `name` is a table the write
        bulk-loaded (so, on Spark, its rows never pass through this process), else `rows()`."""
        if name not in w.loads:
            return list(rows())
        src = w.snapshots.get(name)
        if src is None:
            table = self.store.read_arrow(name)
            src = self._load_file(w, w.tables[name], table) if table.num_rows else []
            w.snapshots[name] = src
        return src

    # -- new views -------------------------------------------------------------------------

    def _affected(self, w: _Write, name: str) -> bool:
        """Whether relation `name`'s contents may differ after this request's writes."""
        if name in w.tables:
            return name in w.written
        rec = w.views[name]
        return name in w.new_views or any(self._affected(w, d) for d in rec.dependencies)

    def _post_contents(self, w: _Write, name: str, trial: dict[str, Counter[Row]]) -> Counter[Row]:
        """Contents of `name` after this request's statements so far (inside the
        transaction). Views this request changes are computed in throw-away dataflows."""
        if name in w.tables:
            if name not in trial:
                trial[name] = Counter(Store.read_table(self.store.conn, name))
            return trial[name]
        if name in w.hydrated:
            return w.hydrated[name].contents
        if name in trial:
            return trial[name]
        rec = w.views[name]
        if name in w.new_views:
            compiled = w.new_views[name]
        else:
            existing = self.views[name]
            if not existing.running:
                raise Conflict(f"view {name!r} has failed: {existing.error}", code="view_failed")
            if not self._affected(w, name):
                return existing.contents  # the writer is the only mutator; no copy needed
            compiled = existing.compiled
        tmp = MaintainedView(
            name, rec.sql, rec.columns, rec.dependencies, w.ts, rec.seq, compiled=compiled
        )
        try:
            trial[name] = self._hydrate_one(w, tmp, trial)
        except ApiError:
            raise
        except Exception as e:  # noqa: BLE001 - the engine failed evaluating the view
            err = _failure(e)
            raise SqlError(
                f"view {name!r} cannot be computed: {err['message']}",
                # a budget overrun keeps its own code: the remedy (raise the budget) differs
                code="budget_exceeded" if err["code"] == "budget_exceeded" else "view_error",
            ) from None
        finally:
            tmp.release()
        return trial[name]

    def _hydrate_one(
        self, w: _Write, view: MaintainedView, trial: dict[str, Counter[Row]]
    ) -> Counter[Row]:
        """Compute `view` from the post-statement contents of what it reads, in a dataflow fed
        through input handles only (it imports nothing, so it can be discarded freely)."""
        inputs: dict[str, Input] = {
            d: self._table_input(w, d, lambda d=d: self._post_contents(w, d, trial).items())
            for d in view.dependencies
        }
        view.build(self.executor.new_dataflow(), w.ts)
        out = view.run_schedule([(w.ts, inputs)], w.ts)
        acc: Counter[Row] = Counter()
        for _, b in out.items():
            apply_batch(acc, b)
        return acc

    def _hydrate(self, w: _Write) -> None:
        """Compute every new view before COMMIT: a view that cannot be computed is rejected
        with the whole request."""
        read_by_new = {d for n in w.new_views for d in w.views[n].dependencies}
        for name, compiled in w.new_views.items():
            rec = w.views[name]
            view = MaintainedView(
                rec.name,
                rec.sql,
                rec.columns,
                rec.dependencies,
                w.ts,
                rec.seq,
                compiled=compiled,
                base_ts=w.ts,
                complete_ts=w.ts,
            )
            try:
                view.contents = self._hydrate_one(w, view, w.trial)
            except ApiError:
                view.release()
                raise
            except Exception as e:  # noqa: BLE001 - engine failure: reject the view
                view.release()
                err = _failure(e)
                raise SqlError(
                    f"view {name!r} cannot be computed: {err['message']}",
                    code="budget_exceeded" if err["code"] == "budget_exceeded" else "view_error",
                ) from None
            w.hydrated[name] = view
            if name not in read_by_new and all(d in w.tables for d in rec.dependencies):
                w.reusable.add(name)
            else:
                view.release()  # built again after COMMIT, importing what it reads

    def _view_relation(self, columns: list[dict[str, Any]], contents: Counter[Row]) -> Relation:
        rows = list(contents.elements())
        cols = []
        for i, c in enumerate(columns):
            t = c["type"] or _infer_type([r[i] for r in rows])
            cols.append((c["name"], t))
        return Relation(cols, rows)

    def _select_in_write(self, w: _Write, s: Statement) -> dict[str, Any]:
        """A SELECT of a write request, over the state after the statements before it."""
        used = check_relations(s.ast, list(w.tables) + list(w.views), line=s.line, column=s.column)
        rels: dict[str, Relation] = {}
        for u in used:
            if u in w.tables:
                cols = [(c["name"], c["type"]) for c in w.tables[u].columns]
                rels[u] = Relation(cols, Store.read_table(self.store.conn, u))
            else:
                rels[u] = self._view_relation(
                    w.views[u].columns, self._post_contents(w, u, w.trial)
                )
        return self._run_select(s, rels)

    def _run_select(self, s: Statement, rels: dict[str, Relation]) -> dict[str, Any]:
        res = run_query(
            s.text,
            rels,
            timeout=self.settings.query_timeout,
            memory_limit=self.settings.query_memory_limit,
            max_rows=self.settings.max_result_rows,
            max_bytes=self.settings.max_result_bytes,
            line=s.line,
            column=s.column,
        )
        return {
            "statement": "SELECT",
            "columns": res.columns,
            "rows": [row_to_json(r) for r in res.rows],
            "rowcount": len(res.rows),
        }

    def _log(self, w: _Write) -> None:
        for name, delta in w.deltas.items():
            if name not in w.tables:
                continue
            batch = [(row, d) for row, d in delta.items() if d]
            if batch:
                self.store.append_log(w.tables[name], w.ts, batch)
                w.batches[name] = batch
        self.store.set_meta("last_ts", w.ts)
        self.store.set_meta("next_table_id", w.next_table_id)
        horizon = w.ts - self.settings.history_retention
        step = max(1, self.settings.history_retention // 10)
        if horizon - self.history_since >= step:
            self.store.trim_logs(w.tables.values(), horizon)
            w.history_since = horizon

    # -- after COMMIT ---------------------------------------------------------------------

    def _publish(self, w: _Write) -> list[dict[str, Any]]:
        """Maintain every view at `w.ts` (after COMMIT) and install the results; return the
        views that failed at this timestamp."""
        ts = w.ts
        table_batches: dict[str, Input] = dict(w.batches)
        for name, files in w.loads.items():
            table_batches[name] = TableChange(w.batches.get(name, []), tuple(files))
        order = sorted(w.views, key=lambda n: w.views[n].seq)
        views: dict[str, MaintainedView] = {
            n: w.hydrated[n] if n in w.new_views else self.views[n] for n in order
        }
        # A view is active when something it reads (transitively) changed at ts, or it is new.
        active: set[str] = set()
        for n in order:
            deps = views[n].dependencies
            if n in w.new_views or any(d in table_batches or d in active for d in deps):
                active.add(n)
        # Views an active view reads must be complete through ts before it runs.
        needed: set[str] = set()
        stack = [d for n in active for d in views[n].dependencies if d in views]
        while stack:
            d = stack.pop()
            if d not in needed:
                needed.add(d)
                stack.extend(x for x in views[d].dependencies if x in views)
        with self.state_lock:
            # Views this write does not touch are complete through ts already: reads of them
            # need not wait for the dataflows below.
            for n, v in views.items():
                if v.running and n not in active and n not in needed and n not in w.new_views:
                    v.complete_ts = ts
        view_batches: dict[str, Batch] = {}
        failed: dict[str, dict[str, Any]] = {}
        rebuilt: dict[str, MaintainedView] = {}
        ran: set[str] = set()
        for n in order:
            v = views[n]
            bad = [d for d in v.dependencies if d in failed or (d in views and d not in rebuilt
                                                                 and not views[d].running)]
            if bad:
                if v.running or n in w.new_views or n in active:
                    failed[n] = _error_json(f"depends on failed view {bad[0]}")
                    v.release()
                continue
            if n in w.reusable:
                continue  # hydrated before COMMIT, already complete through ts
            retry = not v.running and n in active
            if n in w.new_views or retry or any(d in rebuilt for d in v.dependencies):
                try:
                    rebuilt[n] = self._rebuild(w, v, views, rebuilt)
                except Exception as e:  # noqa: BLE001 - only this view fails
                    log.warning("view %s failed at timestamp %d: %s", n, ts, e)
                    failed[n] = _failure(e)
                continue
            if not v.running or (n not in active and n not in needed):
                continue
            inputs = {d: table_batches[d] for d in v.dependencies if d in table_batches}
            try:
                out = v.run_schedule([(ts, inputs)], ts)
            except Exception as e:  # noqa: BLE001 - only this view fails
                log.warning("view %s failed at timestamp %d: %s", n, ts, e)
                failed[n] = _failure(e)
                continue
            ran.add(n)
            batch = consolidate(u for b in out.values() for u in b)
            if batch:
                view_batches[n] = batch
        trimmed = w.history_since
        with self.state_lock:
            self.tables = w.tables
            for name in w.dropped_tables:
                self.row_counts.pop(name, None)
            for name, delta in w.deltas.items():
                if name in w.tables:
                    self.row_counts[name] = self.row_counts.get(name, 0) + sum(delta.values())
            for name, n in w.load_counts.items():
                self.row_counts[name] = self.row_counts.get(name, 0) + n
            for name in w.tables:
                self.row_counts.setdefault(name, 0)
            for name in w.dropped_views:
                dropped = self.views.pop(name, None)
                if dropped is not None:
                    dropped.release()
                self.hub.end_view(name, "view_dropped", f"view {name!r} was dropped")
            for name, view in w.hydrated.items():
                if name in w.views:
                    self.views[name] = view
            for name, view in rebuilt.items():
                if name not in w.new_views:
                    log.info("view %s is running again from timestamp %d", name, ts)
                self.views[name] = view
            for name, batch in view_batches.items():
                view = self.views[name]
                apply_batch(view.contents, batch)
                view.history.append((ts, batch))
            for name, err in failed.items():
                view = self.views[name]
                was_running = view.running
                view.fail(err["message"])
                if was_running:
                    message = f"view {name!r} failed: {err['message']}"
                    self.hub.end_view(name, "view_failed", message)
            for name, view in self.views.items():
                if view.running:
                    view.complete_ts = ts
                    if name in ran:
                        view.pin_at(ts)
                if trimmed > view.base_ts:
                    view.trim(trimmed)
            self.history_since = trimmed
            self.next_table_id = w.next_table_id
            self.next_seq = w.next_seq
            self.last_ts = ts
            self.completed_ts = ts
            self.hub.publish(ts, view_batches, list(self.views))
        return [{"name": n, "error": err} for n, err in failed.items()]

    def _rebuild(
        self,
        w: _Write,
        old: MaintainedView,
        views: dict[str, MaintainedView],
        rebuilt: dict[str, MaintainedView],
    ) -> MaintainedView:
        """Build a view afresh at `w.ts` (after COMMIT): a new view, or a failed one being
        retried. It reads the tables' committed contents and imports the arrangements of the
        views it reads (which are complete through ts: they come earlier in `seq` order)."""
        ts = w.ts
        compiled = old.compiled
        if compiled is None:
            compiled = self._compile(
                parse_statement(old.sql), old.name, w.tables, {
                    n: r for n, r in w.views.items() if w.views[n].seq < old.seq
                }
            )
        view = MaintainedView(
            old.name,
            old.sql,
            old.columns,
            old.dependencies,
            old.created_ts,
            old.seq,
            compiled=compiled,
            base_ts=ts,
            complete_ts=ts,
        )
        sources = {d: rebuilt.get(d) or views[d] for d in old.dependencies if d in views}
        try:
            view.build(self.executor.new_dataflow(), ts, self._imports(view, sources))
            inputs = {
                d: self._table_input(
                    w, d, lambda d=d: Counter(Store.read_table(self.store.conn, d)).items()
                )
                for d in view.handles
            }
            out = view.run_schedule([(ts, inputs)], ts)
        except BaseException:
            view.release()
            raise
        acc: Counter[Row] = Counter()
        for b in out.values():
            apply_batch(acc, b)
        view.contents = acc
        old.release()
        return view

    # ------------------------------------------------------------------ reads

    @contextmanager
    def snapshot(self, names: list[str]) -> Iterator[tuple[int, dict[str, Relation]]]:
        """Relations `names` as of one timestamp: DuckDB tables and view contents."""
        with self.write_lock:
            cur = self.store.cursor()
        try:
            with self.write_lock:
                ts = self.completed_ts
                cur.execute("BEGIN TRANSACTION READ ONLY")
                cur.execute("SELECT value FROM diffsql.meta WHERE key = 'last_ts'").fetchall()
                rels: dict[str, Relation] = {}
                with self.state_lock:
                    for n in names:
                        view = self.views.get(n)
                        if view is None:
                            continue
                        if not view.running:
                            raise Conflict(
                                f"view {n!r} has failed: {view.error}", code="view_failed"
                            )
                        rels[n] = self._view_relation(view.columns, view.contents)
                    tables = {n: self.tables[n] for n in names if n in self.tables}
            for n, rec in tables.items():
                rels[n] = Relation(
                    [(c["name"], c["type"]) for c in rec.columns], Store.read_table(cur, n)
                )
            cur.execute("COMMIT")
            yield ts, rels
        finally:
            cur.close()

    def _read_many(self, stmts: list[Statement]) -> list[dict[str, Any]]:
        """A read-only request: SELECTs over one snapshot, and EXPLAINs."""
        with self.state_lock:
            tables = dict(self.tables)
            records = {n: _record(v) for n, v in self.views.items()}
        selects = iter(self._select_many([s for s in stmts if s.kind == "SELECT"]))
        out = []
        for s in stmts:
            out.append(next(selects) if s.kind == "SELECT" else self._explain(s, tables, records))
        return out

    def _select_many(self, stmts: list[Statement]) -> list[dict[str, Any]]:
        """Run SELECTs over one snapshot."""
        if not stmts:
            return []
        with self.state_lock:
            known = list(self.tables) + list(self.views)
        used_by = [check_relations(s.ast, known, line=s.line, column=s.column) for s in stmts]
        names = sorted({n for used in used_by for n in used})
        out: list[dict[str, Any]] = []
        with self.snapshot(names) as (ts, rels):
            for s, used in zip(stmts, used_by, strict=True):
                res = self._run_select(s, {n: rels[n] for n in used})
                out.append({**res, "timestamp": ts})
        return out

    def query(self, sql: str) -> dict[str, Any]:
        """POST /query: one read-only SELECT over a consistent snapshot."""
        try:
            stmts = parse_script(sql, 1) if sql.strip() else []
        except SqlError as e:
            if e.code != "unsupported":
                raise
            raise Forbidden(
                "only a single read-only SELECT is allowed in /query: " + e.message,
                line=e.line,
                column=e.column,
            ) from None
        if len(stmts) != 1:
            raise SqlError("expected exactly one SELECT statement", code="syntax_error")
        s = stmts[0]
        if s.kind != "SELECT":
            raise Forbidden(
                f"{s.kind} is not allowed in a read-only query; use POST /sql",
                line=s.line,
                column=s.column,
            )
        self.require_ready()
        r = self._select_many([s])[0]
        return {"columns": r["columns"], "rows": r["rows"], "timestamp": r["timestamp"]}

    def create_view(self, sql: str) -> dict[str, Any]:
        stmts = parse_script(sql, 1)
        if len(stmts) != 1 or stmts[0].kind != "CREATE VIEW":
            raise SqlError("expected exactly one CREATE VIEW statement", code="syntax_error")
        out = self._write(stmts)
        res = out["results"][0]
        info = {**self.view_info(res["name"]), "timestamp": res["timestamp"]}
        if out["failed_views"]:
            info["failed_views"] = out["failed_views"]
        return info

    def drop_view(self, name: str) -> dict[str, Any]:
        name = name.lower()
        with self.state_lock:
            if name not in self.views:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
        out = self._write([parse_statement(f"DROP VIEW {quote_ident(name)}")])
        res = out["results"][0]
        if out["failed_views"]:
            res["failed_views"] = out["failed_views"]
        return res  # type: ignore[no-any-return]

    def table_list(self) -> list[dict[str, Any]]:
        with self.state_lock:
            return [self._table_info(n) for n in sorted(self.tables)]

    def table_info(self, name: str) -> dict[str, Any]:
        with self.state_lock:
            if name.lower() not in self.tables:
                raise NotFound(f"unknown table {name!r}", code="unknown_table")
            return self._table_info(name.lower())

    def _table_info(self, name: str) -> dict[str, Any]:
        rec = self.tables[name]
        return {
            "name": name,
            "columns": rec.columns,
            "primary_key": rec.primary_key,
            "row_count": self.row_counts.get(name, 0),
            "created_timestamp": rec.created_ts,
            "timestamp": self.completed_ts,
        }

    def view_list(self) -> list[dict[str, Any]]:
        with self.state_lock:
            return [self._view_info(n) for n in sorted(self.views)]

    def view_info(self, name: str) -> dict[str, Any]:
        with self.state_lock:
            if name.lower() not in self.views:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
            return self._view_info(name.lower())

    def _view_info(self, name: str) -> dict[str, Any]:
        v = self.views[name]
        return {
            "name": name,
            "sql": v.sql,
            "columns": v.columns,
            "dependencies": v.dependencies,
            "status": v.status,
            "error": v.error,
            "created_timestamp": v.created_ts,
            "complete_through": v.complete_ts,
            "history_since": v.base_ts,
            "row_count": sum(v.contents.values()) if v.running else None,
            "arrangements": v.arrangement_summary(),
        }

    def explain_view(self, name: str) -> str:
        if name.lower() in self.views:
            self.require_ready()
        with self.state_lock:
            v = self.views.get(name.lower())
            if v is None:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
            if v.compiled is None:
                raise Conflict(f"view {name!r} has no plan: {v.error}", code="view_failed")
            return str(v.compiled.explain())

    async def wait_complete(self, name: str, ts: int, timeout: float) -> None:
        """Wait until view `name` is complete through `ts`."""
        await self.wait_ready()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.002
        while True:
            with self.state_lock:
                v = self.views.get(name)
                if v is None:
                    raise NotFound(f"unknown view {name!r}", code="unknown_view")
                if not v.running:
                    raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
                if v.complete_ts >= ts:
                    return
                done = v.complete_ts
            if loop.time() >= deadline:
                from server.errors import Timeout

                raise Timeout(
                    f"view {name!r} is not complete through timestamp {ts} after {timeout:g}s "
                    f"(it is complete through {done}; timestamps advance with each write)",
                    code="as_of_timeout",
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def view_rows(self, name: str, as_of: int | None) -> dict[str, Any]:
        columns, ts, items = self.view_items(name, as_of)
        rows = sorted((r for r, n in items for _ in range(n)), key=sort_key)
        return {"columns": columns, "rows": [row_to_json(r) for r in rows], "timestamp": ts}

    def view_items(
        self, name: str, as_of: int | None
    ) -> tuple[list[str], int, list[tuple[Row, int]]]:
        """A view's column names, timestamp and (row, count) items as of `as_of` (default:
        complete). Only copies under the state lock: callers sort and encode outside it."""
        if name in self.views:
            self.require_ready()
        with self.state_lock:
            v = self.views.get(name)
            if v is None:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
            if not v.running:
                raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
            ts = v.complete_ts if as_of is None else as_of
            if ts < v.base_ts:
                raise Gone(
                    f"view {name!r} has history only from timestamp {v.base_ts} "
                    f"(created at {v.created_ts}); as_of={ts} is not available"
                )
            contents = v.contents if ts == v.complete_ts else v.contents_at(ts)
            return [c["name"] for c in v.columns], ts, list(contents.items())

    def subscribe(
        self, name: str, snapshot: bool, since: int | None, loop: asyncio.AbstractEventLoop
    ) -> tuple[Subscription, list[Message]]:
        """Register a subscriber (see `server.feeds`). Called on the event loop, so it never
        waits: while the server is hydrating it is 503 `hydrating` (`wait_ready` first)."""
        with self.state_lock:
            v = self.views.get(name)
            if v is None:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
            if not self.ready.is_set():
                raise self._hydrating_locked()
            if not v.running:
                raise Conflict(f"view {name!r} has failed: {v.error}", code="view_failed")
            now = v.complete_ts
            issued = max(self.last_ts, self.committed_ts)
            if since is not None and since > issued:
                # Never issued: a client bug. Waiting could claim progress nothing backs.
                raise BadRequest(
                    f"since={since} is beyond the latest timestamp this server has issued "
                    f"({issued}); resume with a timestamp the server sent",
                    code="since_in_future",
                )
            msgs: list[Message] = []
            if since is not None:
                if since >= v.base_ts:
                    msgs = [update_message(t, b) for t, b in v.updates_after(since)]
                elif v.intact:
                    base = list(v.contents_at(v.base_ts).items())
                    if base:
                        msgs.append(update_message(v.base_ts, base))
                    msgs += [update_message(t, b) for t, b in v.updates_after(v.base_ts)]
                else:
                    raise Gone(
                        f"history of view {name!r} before timestamp {v.base_ts} is no longer "
                        f"retained; cannot resume after {since}: resubscribe with snapshot=true"
                    )
            elif snapshot:
                contents = v.contents
                msgs.append(
                    self.hub.snapshot(name, (v.created_ts, now), lambda: list(contents.items()))
                )
            if since is None or since <= now:
                msgs.append(progress_message(now))
            sub = self.hub.add(name, loop)
            sub.position = since if since is not None and since > now else now
            if since is not None and since > now:
                # Issued but not yet complete for this view: wait, claiming no progress
                # before the view reaches it (the client already has everything to `since`).
                sub.after = since
        return sub, msgs

    def unsubscribe(self, sub: Subscription) -> None:
        with self.state_lock:
            self.hub.remove(sub)

    def health(self) -> dict[str, Any]:
        with self.state_lock:
            return {
                "status": "ok",
                # False while start-up recovery brings the views up (they are "hydrating").
                "ready": self.ready.is_set(),
                "hydrating": sorted(n for n, v in self.views.items() if v.status == "hydrating"),
                "timestamp": self.completed_ts,
                "tables": len(self.tables),
                "views": len(self.views),
                "failed_views": sorted(n for n, v in self.views.items() if not v.running),
                "executor": self.executor.name,
                "recovery": self.recovery,
                "durable": not self.settings.memory,
            }
