"""A maintained view: its own engine dataflow, its contents and its retained history.

Each view runs in a dataflow of its own, so creating, failing or dropping one view never
disturbs another, and its arrangement statistics are exactly its own traces. The dataflow reads
the tables it uses through input handles, and the views it uses by importing their output
arrangements (`Arranged.import_into`): a view over a view reads the upstream's trace without a
copy. The view's own output is arranged (trace `view:<name>`) so that views over it can do the
same; each run's output is the batches it sealed into that arrangement. Engine epochs are the
server's timestamps. A table's input at a timestamp is a batch of rows, or (for a bulk load) Parquet
files that the executor reads itself (`TableChange`): on Spark the rows of a load never pass
through the server's Python process.

Engine invariants (owned by the writer):
- a dataflow that imports an upstream arrangement is run after the upstream's dataflow at the
  same timestamp, and is `release()`d before it is discarded (see `release`);
- the server holds a reader (`pin`) on every view's output trace whose logical compaction
  frontier is the last timestamp the view is complete through (`pin_at`). Without it the trace
  could advance times to its upper frontier (the *next* timestamp), and a view built later by
  importing it would see the upstream's contents at a timestamp that is not complete yet.

State invariants (between writes, under the server's state lock):
- the view's multiset at `complete_ts` is its output arrangement as `snapshot` holds it (the
  trace's batches when the writer installed `complete_ts`: `items()`), and `row_count` is its
  size; the server keeps no other copy of a view's rows;
- `history` holds, in timestamp order, the consolidated, non-empty update batches at every
  timestamp in (`base_ts`, `complete_ts`]; contents at T >= base_ts is the snapshot's minus
  the batches after T (`undo`);
- `base_ts` >= `created_ts`; while `base_ts == created_ts` ("intact") the view's whole life is
  retained, so a subscriber from before its creation gets its contents at creation as one update.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.sources import FileSource, null_unread
from engine.trace import Snapshot

Row = tuple[Any, ...]
Batch = list[tuple[Row, int]]
# A relation's rows with their counts, as `items()`: a Counter (a table read in a write), or a
# view's output arrangement (`Snapshot`).
Contents = Counter[Row] | Snapshot


@dataclass(frozen=True)
class TableChange:
    """A table's changes at one timestamp: `rows` (row, diff) held by the server, every row of
    `inserted` with diff +1 (a table's contents: no pair per row), every row of the Arrow table
    `columns` with diff +1 (a table's contents as columns, `Store.read_columns`; a bulk
    load's or a large DML statement's rows), every row of the Arrow table `retracted` with
    diff -1 (a large DELETE's or UPDATE's old rows), plus every row of `files` with diff +1,
    read by the dataflow's executor when it runs."""

    rows: Batch = field(default_factory=list)
    files: tuple[FileSource, ...] = ()
    inserted: list[Row] = field(default_factory=list)
    columns: Any = None
    retracted: Any = None

    def __bool__(self) -> bool:
        return bool(self.rows) or bool(self.files) or bool(self.inserted) or any(
            t is not None and t.num_rows for t in (self.columns, self.retracted))


# What a schedule entry may give an input at one timestamp.
Input = Iterable[tuple[Row, int]] | FileSource | TableChange


def _row(key: Any, _val: Any) -> Any:
    return key


def consolidate(updates: Iterable[tuple[Row, int]]) -> Batch:
    acc: Counter[Row] = Counter()
    for row, diff in updates:
        acc[row] += diff
    return [(row, d) for row, d in acc.items() if d != 0]


def apply_batch(contents: Counter[Row], batch: Iterable[tuple[Row, int]]) -> None:
    if not contents and isinstance(batch, list):
        # a first batch (a bulk load into an empty view): at C speed when it is consolidated
        first = dict(batch)
        if len(first) == len(batch) and 0 not in first.values():
            contents.update(first)
            return
    get = contents.get  # not Counter's `__missing__`, a Python call per new row
    for row, diff in batch:
        n = get(row, 0) + diff
        if n:
            contents[row] = n
        elif row in contents:
            del contents[row]


def undo(items: Iterable[tuple[Row, int]], later: list[Batch]) -> Counter[Row]:
    """The multiset of `items` with the update batches `later` (in timestamp order) taken
    back: a view's contents at an earlier timestamp than its snapshot's."""
    acc = Counter(dict(items))
    for batch in reversed(later):
        apply_batch(acc, ((row, -d) for row, d in batch))
    return acc


@dataclass
class MaintainedView:
    name: str
    sql: str
    columns: list[dict[str, Any]]
    dependencies: list[str]
    created_ts: int
    seq: int
    compiled: Any = None
    status: str = "running"
    error: str | None = None
    # The output arrangement's batches at `complete_ts` (`install`): read by any thread.
    snapshot: Snapshot | None = None
    row_count: int = 0
    history: list[tuple[int, Batch]] = field(default_factory=list)
    base_ts: int = 0
    complete_ts: int = 0
    # `df.arrangement_stats()` as last counted (`refresh_stats`), and whether the dataflow has
    # run since: counted when asked for (`catalog`), not at every write.
    stats: list[dict[str, Any]] = field(default_factory=list)
    stats_stale: bool = False
    # Engine side (owned by the writer).
    df: Any = None
    handles: dict[str, Any] = field(default_factory=dict)
    arranged: Any = None  # the output arrangement, imported by views over this one
    pin: Any = None  # the server's reader on the output trace (see the module docstring)
    imports: list[str] = field(default_factory=list)  # views whose arrangements df imports
    read: dict[str, frozenset[int]] = field(default_factory=dict)  # compiled.columns_read()

    @property
    def intact(self) -> bool:
        return self.base_ts == self.created_ts

    @property
    def running(self) -> bool:
        return self.status == "running"

    # -- engine -------------------------------------------------------------------------------

    def build(
        self, dataflow: Any, start_ts: int, imports: Mapping[str, Any] | None = None
    ) -> None:
        """Build the compiled plan into `dataflow`: an input handle (at `start_ts`) for each
        dependency, except those in `imports` (name -> the upstream view's output `Arranged`),
        which are read from the upstream's trace without a copy."""
        self.release()
        self.df = dataflow
        self.handles = {}
        self.imports = []
        sources = {}
        for dep in self.dependencies:
            if imports is not None and dep in imports:
                imported = imports[dep].import_into(dataflow, name=f"import:view:{dep}")
                sources[dep] = imported.as_collection(_row)
                self.imports.append(dep)
                continue
            handle, coll = dataflow.new_input(name=dep)
            handle.advance_to(start_ts)
            self.handles[dep] = handle
            sources[dep] = coll
        # Constants enter at `start_ts` only when every source is an input handle advanced to
        # it: an imported arrangement hands over its batches at their own, earlier times, and
        # a constant entered after them would be missing there (a global aggregate's row
        # retracted at a time it was never inserted).
        out = self.compiled.build(dataflow, sources, 0 if self.imports else start_ts)
        self.read = self.compiled.columns_read()
        self.arranged = out.arrange_by_self(f"view:{self.name}")
        # The server's reader: what a run sealed is its output (`run_schedule`), and what the
        # trace holds is the view's contents (`install`); nothing else reads the output.
        self.pin = self.arranged.trace.new_reader("server")

    def run_schedule(
        self,
        schedule: Sequence[tuple[int, Mapping[str, Input]]],
        upto: int,
        pin_ts: int | None = None,
    ) -> dict[int, Batch]:
        """Feed `schedule` (ascending timestamps) to the input handles (rows are sent, files
        are loaded: see `TableChange`), close every epoch <= `upto`, run the dataflow and return the output batches by timestamp. Imported
        arrangements must already be complete through `upto`. Then let the output trace
        compact up to `pin_ts` (default `upto`). Engine errors propagate."""
        for ts, inputs in schedule:
            for dep, updates in inputs.items():
                handle = self.handles.get(dep)
                if handle is None:
                    continue  # an imported view: its changes arrive through its trace
                if handle.epoch < ts:
                    handle.advance_to(ts)
                if isinstance(updates, FileSource):
                    updates = TableChange(files=(updates,))
                if isinstance(updates, TableChange):
                    for source in updates.files:
                        handle.load(source)
                    handle.send_rows(updates.inserted)
                    read = self.read.get(dep)
                    for table, diff in ((updates.columns, 1), (updates.retracted, -1)):
                        if table is not None:
                            # the columns the view does not read are NULL (as a store or
                            # file read only the others gives them): no Python value made
                            handle.send_columns(table if read is None else
                                                null_unread(table, read), diff)
                    updates = updates.rows
                batch = list(updates)
                if batch:
                    # rows from the store and from writes are canonical already (server.store)
                    handle.send(batch, canonical_data=True)
        for handle in self.handles.values():
            if handle.epoch < upto + 1:
                handle.advance_to(upto + 1)
        self.df.run()
        # The output is the batches the run sealed into the output trace, which stay unmerged
        # until the server's reader accepts them (`pin_at`). Each time's updates there are
        # consolidated; only times that share an epoch (none in an output scope of one
        # coordinate) are merged here.
        sealed = Snapshot(self.pin.unaccepted(), self.df.executor)
        out: dict[int, list[tuple[Row, int]]] = {}
        for time, batch in sealed.by_time().items():
            t = time[0] if isinstance(time, tuple) else int(time)
            out[t] = consolidate(out[t] + batch) if t in out else batch
        self.pin_at(upto if pin_ts is None else pin_ts)
        self.stats_stale = True
        return {t: out[t] for t in sorted(out) if out[t]}

    def pin_at(self, ts: int) -> None:
        """Let the output trace advance times up to `ts` (and merge what every reader read)."""
        if self.pin is None or self.arranged is None:
            return
        from engine.lattice import Antichain

        trace = self.arranged.trace
        self.pin.set_logical_compaction(Antichain([(ts,) + (0,) * (trace.dims - 1)]))
        self.pin.acked = trace.next_seq - 1

    def install(self, row_count: int) -> None:
        """Make what the output trace holds now the view's contents (`snapshot`), of
        `row_count` rows. Called by the writer, with the dataflow at rest, under the state
        lock together with `complete_ts` (or before the view is readable)."""
        self.snapshot = None if self.arranged is None else self.arranged.snapshot()
        self.row_count = row_count

    def items(self) -> list[tuple[Row, int]]:
        """The view's rows at `complete_ts` with their counts (from `snapshot`: any thread)."""
        snap = self.snapshot
        return [] if snap is None else snap.items()

    def release(self) -> None:
        """Drop the engine side: the dataflow's readers of imported traces are released, so a
        discarded dataflow never holds back an upstream's compaction."""
        if self.df is not None:
            try:
                self.df.release()
            except Exception:  # noqa: BLE001 - releasing is best effort
                pass
        if self.pin is not None:
            self.pin.drop()
        self.df = None
        self.handles = {}
        self.arranged = None
        self.pin = None
        self.imports = []
        self.snapshot = None

    def refresh_stats(self) -> None:
        """Count the arrangements' statistics (the writer's, or under the write lock: the
        dataflow must not be running)."""
        self.stats_stale = False
        try:
            self.stats = [dict(s) for s in self.df.arrangement_stats()]
        except Exception:  # statistics are informative only
            self.stats = []

    def fail(self, message: str) -> None:
        self.status = "failed"
        self.error = message
        self.release()

    # -- state --------------------------------------------------------------------------------

    def contents_at(self, ts: int) -> Counter[Row]:
        """The multiset at `ts`; requires base_ts <= ts <= complete_ts."""
        return undo(self.items(), [b for t, b in self.history if t > ts])

    def updates_after(self, since: int) -> list[tuple[int, Batch]]:
        """History batches with timestamp > `since` (requires since >= base_ts)."""
        return [(t, b) for t, b in self.history if t > since]

    def trim(self, horizon: int) -> None:
        """Forget batches at or before `horizon`, moving `base_ts` forward."""
        if horizon <= self.base_ts:
            return
        self.history = [(t, b) for t, b in self.history if t > horizon]
        self.base_ts = max(self.base_ts, min(horizon, self.complete_ts))

    def arrangement_summary(self) -> dict[str, Any]:
        return {
            "records": sum(int(s.get("records", 0)) for s in self.stats),
            "batches": sum(int(s.get("batches", 0)) for s in self.stats),
            "bytes": sum(int(s.get("bytes", 0)) for s in self.stats),
            "traces": self.stats,
            # Arrangements of other views this view reads (not copied, not counted above).
            "imports": [{"view": v, "trace": f"view:{v}"} for v in self.imports],
        }
