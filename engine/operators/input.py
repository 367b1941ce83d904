"""Inputs: where updates enter a dataflow, and the epochs that order them.

An input holds a capability at its frontier (for the usual one-coordinate root scope: the
current epoch). Updates are buffered at the frontier's time and sent on the next activation;
`advance_to` moves the frontier forward, which lets everything downstream complete earlier
times. Many epochs may be advanced before the dataflow runs: each update keeps its own epoch,
and the operators process them together.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from engine.canonical import NEEDS_CANONICAL, canonical
from engine.dataflow import Operator, Scope
from engine.lattice import Antichain, Time
from engine.sources import FileSource, rows_of

_INT = {int}
_TUPLE = {tuple}
_UNIT_DIFFS = {1, -1}
_first = itemgetter(0)
_second = itemgetter(1)
# From this many `(data, diff)` pairs, `InputHandle.send` sends them as rows per diff.
BULK_ROWS = 64

class InputOp(Operator):
    def __init__(self, scope: Scope, name: str) -> None:
        super().__init__(scope, name, [])
        self.frontier = Antichain([(0,) * scope.dims])
        self.buffer: list[tuple[Any, Time, int]] = []
        self.buffer_lower = Antichain()
        # Bulk sources, each read by the executor as one payload at its time.
        self.loads: list[tuple[FileSource, Time]] = []
        # Bulk inserts (`InputHandle.insert_many`): rows sharing one time and diff.
        self.bulk: list[tuple[list[Any], Time, int]] = []

    def capabilities(self) -> Iterable[Time]:
        yield from self.frontier.elements
        yield from self.buffer_lower.elements
        for _, t in self.loads:
            yield t

    def has_messages(self) -> bool:
        return bool(self.buffer) or bool(self.loads) or bool(self.bulk)

    def activate(self, frontiers: list[Antichain]) -> None:
        if self.loads:
            loads, self.loads = self.loads, []
            for source, t in loads:
                payload = self.dataflow.executor.read(source, t)
                if not self.dataflow.executor.is_empty(payload):
                    self.send(payload, [t])
        if self.buffer or self.bulk:
            out, lower, bulk = self.buffer, self.buffer_lower, self.bulk
            self.buffer, self.buffer_lower, self.bulk = [], Antichain(), []
            ex = self.dataflow.executor
            if out:
                self.send(ex.from_updates(out), lower.elements)
            for rows, t, diff in bulk:
                if rows.__class__ is list:
                    self.send(ex.from_rows(rows, t, diff), [t])
                elif hasattr(ex, "from_columns"):
                    self.send(ex.from_columns(rows, t, diff), [t])
                else:  # an executor without a columns form: the rows
                    self.send(ex.from_rows(list(rows_of(rows, rows.num_columns)), t, diff), [t])


class InputHandle:
    """The writer's side of an input: send updates at the current time, then advance it."""

    def __init__(self, op: InputOp) -> None:
        self.op = op
        self.dims = op.scope.dims

    @property
    def epoch(self) -> int:
        """The current epoch (the first coordinate of the smallest frontier element)."""
        els = self.op.frontier.elements
        if not els:
            raise ValueError("input %r is closed" % self.op.name)
        return min(t[0] for t in els)

    @property
    def frontier(self) -> Antichain:
        return self.op.frontier

    def _current_time(self) -> Time:
        els = self.op.frontier.elements
        if len(els) != 1:
            raise ValueError(
                "input %r has frontier %s: use update_at with an explicit time"
                % (self.op.name, self.op.frontier)
            )
        return els[0]

    def update(self, data: Any, diff: int) -> None:
        """Send `(data, now, diff)`."""
        self.update_at(data, self._current_time(), diff)

    def insert(self, data: Any, diff: int = 1) -> None:
        self.update(data, diff)

    def remove(self, data: Any) -> None:
        self.update(data, -1)

    def send_rows(self, rows: list[Any], diff: int = 1) -> None:
        """Send every row of `rows` with `diff` at the current time. The caller vouches that
        every row is canonical (as `send(..., canonical_data=True)`); many rows go as rows with
        one diff (engine.rows_at), without a `(row, diff)` pair each."""
        if not diff or not rows:
            return
        if diff.__class__ is not int:
            raise TypeError("diff must be an int, got %r" % (diff,))
        if len(rows) < BULK_ROWS or diff not in _UNIT_DIFFS:
            self.send([(row, diff) for row in rows], canonical_data=True)
            return
        t = self._current_time()
        # A copy: the caller's list may be handed to other dataflows too.
        self.op.bulk.append((list(rows), t, diff))
        self.op.buffer_lower.insert(t)

    def send_columns(self, table: Any, diff: int = 1) -> None:
        """Send every row of the Arrow table `table` with `diff` at the current time: the rows
        are the tuples of its columns' Python values (`engine.sources.rows_of`). An executor
        with a columns form (`from_columns`, engine.columns_at) keeps them as columns."""
        if not diff or not table.num_rows:
            return
        if diff not in _UNIT_DIFFS:
            raise ValueError("columns are sent with diff 1 or -1, got %r" % (diff,))
        t = self._current_time()
        self.op.bulk.append((table, t, diff))
        self.op.buffer_lower.insert(t)

    def send(self, updates: Iterable[tuple[Any, int]], canonical_data: bool = False) -> None:
        """Send many `(data, diff)` pairs at the current time.

        With `canonical_data` the caller vouches that every data is canonical already
        (`engine.canonical`: a server's rows read back from its store) and every diff an int,
        so no update is looked into here."""
        t = self._current_time()  # the frontier's one element: beyond the frontier
        buffer = self.op.buffer
        n = len(buffer)
        if canonical_data:
            if updates.__class__ is list and len(updates) >= BULK_ROWS:  # type: ignore[arg-type]
                # Many rows (a hydration, a large write): sent as rows per diff, which an
                # executor may keep as rows (engine.rows_at) instead of an update each.
                pairs: list[tuple[Any, int]] = updates  # type: ignore[assignment]
                diffs = set(map(_second, pairs))
                if diffs <= _UNIT_DIFFS:
                    for d in diffs:
                        rows = list(map(_first, pairs)) if len(diffs) == 1 else \
                            [data for data, diff in pairs if diff == d]
                        self.op.bulk.append((rows, t, d))
                    self.op.buffer_lower.insert(t)
                    return
            buffer.extend([(data, t, diff) for data, diff in updates if diff])
            if len(buffer) > n:
                self.op.buffer_lower.insert(t)
            return
        plain = NEEDS_CANONICAL.isdisjoint  # a row of no float or tuple is canonical already
        # update_at's checks, hoisted out of the per-row loop (a bulk load sends many rows)
        try:
            for data, diff in updates:
                if diff.__class__ is not int and (not isinstance(diff, int) or isinstance(diff, bool)):
                    raise TypeError("diff must be an int, got %r" % (diff,))
                if diff:
                    if data.__class__ is not tuple or not plain(map(type, data)):
                        data = canonical(data)
                    buffer.append((data, t, diff))
        except BaseException:
            # All or nothing: rows buffered before the bad one would otherwise be sent without
            # the capability that `buffer_lower` holds for them.
            del buffer[n:]
            raise
        if len(buffer) > n:
            self.op.buffer_lower.insert(t)

    def insert_many(self, rows: Iterable[Any], diff: int = 1) -> None:
        """Send `(row, now, diff)` for every row: `insert` in bulk, one payload for the batch
        (an executor that holds columns encodes it in one pass)."""
        if not isinstance(diff, int) or isinstance(diff, bool):
            raise TypeError("diff must be an int, got %r" % (diff,))
        rows = list(rows)
        if not rows or not diff:
            return
        t = self._current_time()
        # Rows of exact ints (or tuples of them, one level deep) hold no NaN: checked at C speed.
        kinds = set(map(type, rows))
        if not (
            kinds <= _INT
            or (kinds <= _TUPLE and set(map(type, itertools.chain.from_iterable(rows))) <= _INT)
        ):
            rows = [canonical(r) for r in rows]
        self.op.bulk.append((rows, t, diff))
        self.op.buffer_lower.insert(t)

    def load(self, source: FileSource) -> None:
        """Send every row of `source` at the current time (with the source's diffs).

        The executor reads the files when the dataflow next runs (see `engine.sources`), so a
        bulk load never passes through this process row by row on a distributed executor."""
        self.op.loads.append((source, self._current_time()))

    def update_at(self, data: Any, time: Time | int, diff: int) -> None:
        """Send `(data, time, diff)`; `time` must be beyond the input's frontier."""
        if isinstance(time, int):
            time = (time,) + (0,) * (self.dims - 1)
        if len(time) != self.dims:
            raise ValueError("time %r must have %d coordinates" % (time, self.dims))
        if not self.op.frontier.less_equal(time):
            raise ValueError(
                "time %r is not beyond the frontier %s of input %r"
                % (time, self.op.frontier, self.op.name)
            )
        if not isinstance(diff, int) or isinstance(diff, bool):
            raise TypeError("diff must be an int, got %r" % (diff,))
        if diff:
            self.op.buffer.append((canonical(data), time, diff))
            self.op.buffer_lower.insert(time)

    def advance_to(self, frontier: int | Time | Iterable[Time]) -> None:
        """Move the frontier forward: no more updates at times not beyond it will be sent."""
        if isinstance(frontier, int):
            new = Antichain([(frontier,) + (0,) * (self.dims - 1)])
        elif isinstance(frontier, tuple) and frontier and isinstance(frontier[0], int):
            new = Antichain([frontier])
        else:
            new = Antichain(frontier)  # type: ignore[arg-type]
        if not all(self.op.frontier.less_equal(t) for t in new):
            raise ValueError(
                "frontier %s would move input %r backwards from %s" % (new, self.op.name, self.op.frontier)
            )
        self.op.frontier = new

    def close(self) -> None:
        """No more updates, ever: the frontier becomes empty."""
        self.op.frontier = Antichain()
