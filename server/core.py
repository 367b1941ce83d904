"""The database service: the one object the routes talk to, a facade over the server's stages.

`Database` is the server's shared state (`server.state.ServerState`: store, catalog, views,
clock and the locks that guard them) plus the public operations the routes call. Each
operation is a thin call into the module that owns its concern, so a newcomer finds a stage
by its name:

- `server.writes` — the write path, top to bottom: parse -> DuckDB transaction
  (`server.transaction`, statements in `server.statements`, new views computed in
  `server.hydration`) -> change log -> COMMIT -> engine -> publish (`server.publish`);
- `server.recovery` — start-up: the catalog, views rebuilt from the tables and their
  checkpointed history, checkpoints;
- `server.queries` — snapshot queries (`/query`, SELECT in `/sql`);
- `server.contents` — a view's rows as of a timestamp, and change feed subscriptions;
- `server.catalog` — table and view records, names, plans, and the metadata reads;
- `server.deadline` (a write's time limit) and `server.failures` (how a failed view is
  described) serve the stages above.

Invariant: there is one writer (the holder of `write_lock`); everything a reader sees changes
only under `state_lock`, at once for a whole timestamp (see `server.state`).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from typing import Any

from planner.naming import FOLD
from server import catalog, contents, queries, recovery, writes
from server.errors import ApiError, NotFound, SqlError
from server.executors import Executor
from server.feeds import Message, Subscription
from server.settings import Settings
from server.sqltext import parse_script, parse_statement, plain_insert
from server.state import ServerState
from server.store import Row
from server.values import quote_ident

# Re-exported: where the limit on names was always looked up.
MAX_NAME_LENGTH = catalog.MAX_NAME_LENGTH
# The longest script `Database.submit` reads on the event loop (a few single-row INSERTs'
# worth: longer ones are matched on a thread, as their DuckDB statement runs for longer).
SUBMITTED_TEXT = 4096


class Database(ServerState):
    """The server's state: durable store, catalog, maintained views, subscriptions; and the
    operations of the API over it."""

    def __init__(self, settings: Settings, executor: Executor, background: bool = False) -> None:
        """Open the store and read the catalog; bring the views up now, or with `background`
        only when `start_recovery` is called (see `server.recovery`)."""
        super().__init__(settings, executor)
        recovery.load_catalog(self)
        if not background:
            recovery.recover_views(self)

    def start_recovery(self) -> None:
        """Bring the views up in a background thread (the server answers meanwhile: views are
        `hydrating`, and requests that need them wait for `ready`)."""
        recovery.start_recovery(self)

    def checkpoint(self) -> None:
        recovery.checkpoint(self)

    def end_feeds(self) -> None:
        """End every change feed (at shutdown, so open streams do not hold it up)."""
        with self.state_lock:
            self.hub.close_all()

    def close(self) -> None:
        with self.write_lock:
            with self.state_lock:
                self.hub.close_all()
            recovery.checkpoint(self)  # a clean restart then replays nothing
            self.hub.shutdown()
            self.watchdog.close()
            self.committer.close()
            self.store.close()
            if self.own_loads:
                shutil.rmtree(self.loads_dir, ignore_errors=True)

    # ------------------------------------------------------------------ writes

    def execute(self, sql: str) -> dict[str, Any]:
        """POST /sql: run a script of statements; all writes commit atomically at one
        timestamp (`server.writes`), a script of SELECTs and EXPLAINs reads one snapshot.

        Returns {"results": [...], "failed_views": [...]}: the views whose evaluation failed
        at this write (the write itself is committed)."""
        stmts = parse_script(sql, self.settings.max_statements)
        self.require_ready()
        if all(s.kind in ("SELECT", "EXPLAIN") for s in stmts):
            return {"results": queries.read_many(self, stmts), "failed_views": []}
        return writes.write(self, stmts)

    def submit(
        self, sql: str, answer: Callable[[dict[str, Any] | None, BaseException | None], None]
    ) -> bool | None:
        """POST /sql without a thread of its own, for the event loop: a short plain INSERT
        (`sqltext.plain_insert`) is queued for group commit and answered by `answer(result,
        error)` from the writer's thread (`writes.submit`). None when `sql` is not one, or
        the server is not ready: run `execute` on a thread. Else whether the caller must run
        `lead` on a thread. Reads no store and waits for nothing."""
        if len(sql) > SUBMITTED_TEXT or not self.ready.is_set():
            return None
        s = plain_insert(sql)
        return None if s is None else writes.submit(self, [s], answer)

    def lead(self) -> None:
        """Commit what `submit` queued (on a thread: it runs the writes)."""
        writes.lead(self)

    def create_view(self, sql: str) -> dict[str, Any]:
        """POST /views: one CREATE VIEW, as a write."""
        stmts = parse_script(sql, 1)
        if len(stmts) != 1 or stmts[0].kind != "CREATE VIEW":
            raise SqlError("expected exactly one CREATE VIEW statement", code="syntax_error")
        out = writes.write(self, stmts)
        res = out["results"][0]
        info = {**self.view_info(res["name"]), "timestamp": res["timestamp"]}
        if out["failed_views"]:
            info["failed_views"] = out["failed_views"]
        return info

    def drop_view(self, name: str) -> dict[str, Any]:
        """DELETE /views/{name}: DROP VIEW, as a write."""
        name = name.translate(FOLD)
        with self.state_lock:
            if name not in self.views:
                raise NotFound(f"unknown view {name!r}", code="unknown_view")
        try:
            out = writes.write(self, [parse_statement(f"DROP VIEW {quote_ident(name)}")])
        except ApiError as e:
            if e.code != "unknown_view":
                raise
            # dropped by another request since the check above: as if it had come first
            raise NotFound(f"unknown view {name!r}", code="unknown_view") from None
        res = out["results"][0]
        if out["failed_views"]:
            res["failed_views"] = out["failed_views"]
        return res  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ reads

    def query(self, sql: str) -> dict[str, Any]:
        """POST /query: one read-only SELECT over a consistent snapshot."""
        return queries.query(self, sql)

    def table_list(self) -> list[dict[str, Any]]:
        return catalog.table_list(self)

    def table_info(self, name: str) -> dict[str, Any]:
        return catalog.table_info(self, name)

    def view_list(self) -> list[dict[str, Any]]:
        return catalog.view_list(self)

    def view_info(self, name: str) -> dict[str, Any]:
        return catalog.view_info(self, name)

    def explain_view(self, name: str) -> str:
        return catalog.explain_view(self, name)

    async def wait_complete(self, name: str, ts: int, timeout: float) -> None:
        """Wait until view `name` is complete through `ts`."""
        await contents.wait_complete(self, name, ts, timeout)

    def view_rows(self, name: str, as_of: int | None) -> dict[str, Any]:
        return contents.view_rows(self, name, as_of)

    def view_items(
        self, name: str, as_of: int | None
    ) -> tuple[list[str], int, list[tuple[Row, int]]]:
        return contents.view_items(self, name, as_of)

    def subscribe(
        self, name: str, snapshot: bool, since: int | None, loop: asyncio.AbstractEventLoop
    ) -> tuple[Subscription, list[Message]]:
        return contents.subscribe(self, name, snapshot, since, loop)

    def unsubscribe(self, sub: Subscription) -> None:
        contents.unsubscribe(self, sub)

    def health(self) -> dict[str, Any]:
        """Liveness and progress, without the state lock: a writer installing a large result
        holds that lock, and a probe must not wait for it. Each field is read once (copying
        the view list is atomic under the GIL), so a concurrent write can make the answer a
        moment old, never inconsistent in a way that matters to a probe."""
        views = list(self.views.items())
        return {
            "status": "ok",
            # False while start-up recovery brings the views up (they are "hydrating").
            "ready": self.ready.is_set(),
            "hydrating": sorted(n for n, v in views if v.status == "hydrating"),
            "timestamp": self.completed_ts,
            "tables": len(self.tables),
            "views": len(views),
            "failed_views": sorted(n for n, v in views if v.status == "failed"),
            "executor": self.executor.name,
            "recovery": self.recovery,
            "durable": not self.settings.memory,
        }
