"""One write's transaction: its provisional catalog and row changes, its files, its deadline.

A `Write` is everything a write request has done inside its DuckDB transaction and not yet
published: the catalog as its statements left it, the row deltas each table received (captured
with RETURNING), the bulk loads it wrote, the views it created. Invariant: nothing in a `Write`
is visible to any reader until `server.publish` installs it after COMMIT; on rollback it is
simply discarded (with the dataflows it built released and the files it made deleted), so the
server's state is exactly as before the request.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.sources import FileSource
from planner.ir import Scalar
from server.catalog import record
from server.scan_filters import where_clause
from server.state import ServerState
from server.store import Row, TableRecord, ViewRecord
from server.views import Batch, Contents, Input, MaintainedView, TableChange


@dataclass
class Write:
    """Provisional state of one write request (discarded on rollback)."""

    ts: int
    tables: dict[str, TableRecord]
    views: dict[str, ViewRecord]
    next_table_id: int
    next_seq: int
    history_since: int
    deltas: dict[str, Counter[Row]] = field(default_factory=lambda: defaultdict(Counter))
    new_views: dict[str, Any] = field(default_factory=dict)  # name -> compiled
    # name -> (line, column) of the statement creating it, for an error computing it
    created_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    hydrated: dict[str, MaintainedView] = field(default_factory=dict)
    dropped_views: list[str] = field(default_factory=list)
    dropped_tables: list[str] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    batches: dict[str, Batch] = field(default_factory=dict)
    # Tables whose row changes at `ts` are in their change log already, written by the
    # statement that made them (combinable INSERTs: `statements.insert_combined`).
    logged: set[str] = field(default_factory=set)
    # Contents after the statements so far (tables read in the transaction, views computed in
    # throw-away dataflows); reset by every write statement.
    trial: dict[str, Contents] = field(default_factory=dict)
    # New views whose hydration dataflow becomes their permanent one (they read only tables
    # and no other new view reads them); the others are built again after COMMIT.
    reusable: set[str] = field(default_factory=set)
    # Bulk loads: per table, the rows it loaded (at ts, diff +1) and how many. Each load is a
    # Parquet file the executor reads, or, for an executor in this process, the Arrow table
    # itself when its rows convert exactly (`Store.exact_columns`): no file written and read.
    loads: dict[str, list[FileSource | Any]] = field(default_factory=lambda: defaultdict(list))
    load_counts: Counter[str] = field(default_factory=Counter)
    # Deletions in bulk (a large DELETE or UPDATE, `statements._take_rows`): per table, Arrow
    # tables of the rows deleted (at ts, diff -1, in `arrow_logs`) and how many.
    unloads: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    unload_counts: Counter[str] = field(default_factory=Counter)
    # The change log entries of the rows changed in bulk (a COPY's, a large DML statement's:
    # `(table record, ts, Arrow rows, diff)`), written just before COMMIT (`writes.write_logs`).
    arrow_logs: list[tuple[Any, int, Any, int]] = field(default_factory=list)
    # Parquet snapshots of loaded tables, for views built in this write; reset like `trial`.
    snapshots: dict[str, Input] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)  # every file this write made

    @classmethod
    def begin(cls, state: ServerState, ts: int | None = None) -> Write:
        """A write at timestamp `ts` (default: the next one), starting from the server's
        current catalog (called under the write lock)."""
        return cls(
            ts=state.last_ts + 1 if ts is None else ts,
            tables=dict(state.tables),
            views={n: record(v) for n, v in state.views.items()},
            next_table_id=state.next_table_id,
            next_seq=state.next_seq,
            history_since=state.history_since,
        )

    def changes_nothing(self, state: ServerState) -> bool:
        """Whether the statements so far changed no catalog entry and no row."""
        return (
            self._catalog_unchanged(state)
            and not any(self.load_counts.values())
            and not any(self.unload_counts.values())
            and not any(d for delta in self.deltas.values() for d in delta.values())
        )

    def _catalog_unchanged(self, state: ServerState) -> bool:
        return (
            self.tables.keys() == state.tables.keys()
            and all(self.tables[n] is state.tables[n] for n in self.tables)
            and self.views.keys() == state.views.keys()
            and not self.new_views
            and not self.dropped_views
            and not self.dropped_tables
            and self.next_table_id == state.next_table_id
        )

    def logged_at_ts(self, state: ServerState) -> bool:
        """Whether this write changed only rows, and logged some of them at `ts` (so the
        largest timestamp in the change logs is `ts`, and recovery finds the clock there)."""
        return bool(self.batches) and self._catalog_unchanged(state)

    def release(self) -> None:
        """Release the dataflows this write built (on rollback)."""
        for view in self.hydrated.values():
            view.release()

    def delete_files(self) -> None:
        """Delete every file this write made. Called when the write is over: every dataflow
        that reads a load file has run (or was dropped), so its rows are in the store, its
        log, and the views' arrangements."""
        for path in self.files:
            path.unlink(missing_ok=True)


def load_file(state: ServerState, w: Write, rec: TableRecord, rows: Any) -> FileSource:
    """Write Arrow table `rows` (typed as the store holds `rec`'s rows) to a Parquet file
    that dataflows load. Columns are named c0..cn-1: any table column name is safe there,
    and Spark reads them back by position and type, not by a name it might misparse."""
    import pyarrow.parquet as pq

    names = tuple(f"c{i}" for i in range(len(rec.columns)))
    path = state.loads_dir / f"{w.ts}-{rec.table_id}-{next(state.load_seq)}.parquet"
    w.files.append(path)  # deleted when the write is over, even if writing it failed
    pq.write_table(rows.rename_columns(list(names)), path)
    return FileSource((str(path),), "parquet", columns=names)


def table_input(
    state: ServerState, w: Write, name: str, rows: Callable[[], Iterable[tuple[Row, int]]],
    read: Collection[int] | None = None, filters: Sequence[Scalar] = (),
) -> Input:
    """The contents of relation `name` (in this write's transaction), as an input of a
    view built in this write: on Spark, a Parquet snapshot when `name` is a table the write
    bulk-loaded (so its rows never pass through this process), a table's columns
    where its types allow (`Store.read_columns`: no Python tuple per row), else `rows()`.
    With `read` (the view's `columns_read` of `name`) the columns (snapshot or table) not
    among them are NULL, and not read; with `filters` (its `scan_filters` of `name`) a
    table's columns are only of the rows DuckDB finds they accept (`server.scan_filters`:
    those it decides exactly; the view applies them all again)."""
    if name not in w.loads or state.settings.executor != "spark":
        rec = w.tables.get(name)
        columns = state.store.read_columns(rec, read, where_clause(rec, filters)) \
            if rec is not None else None
        if columns is not None:
            return TableChange(columns=columns)
        return list(rows())
    src = w.snapshots.get(name)
    if src is None:
        table = state.store.read_arrow(name)
        src = load_file(state, w, w.tables[name], table) if table.num_rows else []
        w.snapshots[name] = src
    if isinstance(src, FileSource) and read is not None and src.columns is not None:
        src = replace(src, unread=frozenset(
            c for i, c in enumerate(src.columns) if i not in read))
    return src
