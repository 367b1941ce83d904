"""A maintained view: its own engine dataflow, its contents and its retained history.

Each view runs in a dataflow of its own, fed by input handles for the tables and views it reads
(`dependencies`), so creating, failing or dropping one view never disturbs another, and its
arrangement statistics are exactly its own. Engine epochs are the server's timestamps.

Invariants (between writes, under the server's state lock):
- `contents` is the view's multiset at `complete_ts` (no zero or negative counts);
- `history` holds, in timestamp order, the consolidated, non-empty update batches at every
  timestamp in (`base_ts`, `complete_ts`]; contents at T >= base_ts is `contents` minus the
  batches after T;
- `base_ts` >= `created_ts`; while `base_ts == created_ts` ("intact") the view's whole life is
  retained, so a subscriber from before its creation gets its contents at creation as one update.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = tuple[Any, ...]
Batch = list[tuple[Row, int]]


def consolidate(updates: Iterable[tuple[Row, int]]) -> Batch:
    acc: Counter[Row] = Counter()
    for row, diff in updates:
        acc[row] += diff
    return [(row, d) for row, d in acc.items() if d != 0]


def apply_batch(contents: Counter[Row], batch: Iterable[tuple[Row, int]]) -> None:
    for row, diff in batch:
        n = contents[row] + diff
        if n:
            contents[row] = n
        else:
            del contents[row]


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
    contents: Counter[Row] = field(default_factory=Counter)
    history: list[tuple[int, Batch]] = field(default_factory=list)
    base_ts: int = 0
    complete_ts: int = 0
    stats: list[dict[str, Any]] = field(default_factory=list)
    # Engine side (owned by the writer).
    df: Any = None
    handles: dict[str, Any] = field(default_factory=dict)
    capture: Any = None

    @property
    def intact(self) -> bool:
        return self.base_ts == self.created_ts

    @property
    def running(self) -> bool:
        return self.status == "running"

    # -- engine -------------------------------------------------------------------------------

    def build(self, dataflow: Any, start_ts: int) -> None:
        """Build the compiled plan into `dataflow` with one input per dependency at `start_ts`."""
        self.df = dataflow
        self.handles = {}
        sources = {}
        for dep in self.dependencies:
            handle, coll = dataflow.new_input(name=dep)
            handle.advance_to(start_ts)
            self.handles[dep] = handle
            sources[dep] = coll
        out = self.compiled.build(dataflow, sources)
        try:  # the view keeps its own history; the capture need not
            self.capture = out.capture(history=False)
        except TypeError:
            self.capture = out.capture()

    def run_schedule(
        self, schedule: Sequence[tuple[int, Mapping[str, Iterable[tuple[Row, int]]]]], upto: int
    ) -> dict[int, Batch]:
        """Feed `schedule` (ascending timestamps), close every epoch <= `upto`, run the
        dataflow and return the output batches by timestamp. Engine errors propagate."""
        for ts, inputs in schedule:
            for dep, updates in inputs.items():
                handle = self.handles[dep]
                if handle.epoch < ts:
                    handle.advance_to(ts)
                batch = list(updates)
                if batch:
                    handle.send(batch)
        for handle in self.handles.values():
            if handle.epoch < upto + 1:
                handle.advance_to(upto + 1)
        self.df.run()
        out: dict[int, list[tuple[Row, int]]] = defaultdict(list)
        for data, time, diff in self.capture.drain():
            t = time[0] if isinstance(time, tuple) else int(time)
            out[t].append((tuple(data), diff))
        self.refresh_stats()
        return {t: b for t, b in ((t, consolidate(u)) for t, u in sorted(out.items())) if b}

    def refresh_stats(self) -> None:
        try:
            self.stats = [dict(s) for s in self.df.arrangement_stats()]
        except Exception:  # statistics are informative only
            self.stats = []

    def fail(self, message: str) -> None:
        self.status = "failed"
        self.error = message
        self.df = None
        self.handles = {}
        self.capture = None

    # -- state --------------------------------------------------------------------------------

    def contents_at(self, ts: int) -> Counter[Row]:
        """The multiset at `ts`; requires base_ts <= ts <= complete_ts."""
        acc = Counter(self.contents)
        for t, batch in reversed(self.history):
            if t <= ts:
                break
            apply_batch(acc, ((row, -d) for row, d in batch))
        return acc

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
        }
