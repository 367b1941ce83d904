"""Timestamps under the product partial order, antichains (frontiers), and `advance_by`.

A time is a flat tuple of ints `(epoch, i1, i2, ...)`: one coordinate for the input epoch and
one per enclosing iteration scope. Times of one scope all have the same length. The order is
the product order: `s <= t` when every coordinate of `s` is `<=` the matching one of `t`.
`join` is the coordinate-wise max (least upper bound) and `meet` the coordinate-wise min.
Python's tuple `<` is lexicographic: a linear extension of the product order, fine for sorting
and evaluation order but never a substitute for `less_equal`.

An `Antichain` is a set of mutually incomparable times, kept minimal. As a frontier it stands
for every time beyond it: `t` is beyond `F` when some `f` in `F` has `f <= t`. The empty
antichain is the frontier of a closed input: nothing is beyond it.

`advance_by(t, F)` replaces `t` by the meet over `f` in `F` of `join(t, f)`. For every `g`
beyond `F`, `t <= g` exactly when `advance_by(t, F) <= g`, so accumulations at times beyond
`F` are unchanged; two times that no time beyond `F` can tell apart get the same
representative, which is what lets compaction cancel updates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import le as _le

Time = tuple[int, ...]


def less_equal(s: Time, t: Time) -> bool:
    """The product order: every coordinate of `s` is at most that of `t`."""
    # Unrolled for the common depths: this is the innermost loop of every operator.
    n = len(s)
    if n == 1:
        return s[0] <= t[0]
    if n == 2:
        return s[0] <= t[0] and s[1] <= t[1]
    if n == 3:
        return s[0] <= t[0] and s[1] <= t[1] and s[2] <= t[2]
    return all(map(_le, s, t))


def less_than(s: Time, t: Time) -> bool:
    return s != t and less_equal(s, t)


def join(s: Time, t: Time) -> Time:
    """Least upper bound: the coordinate-wise max."""
    if s == t:
        return s
    n = len(s)
    if n == 1:
        return s if s[0] >= t[0] else t
    if n == 2:
        a, b = s
        c, d = t
        return (a if a >= c else c, b if b >= d else d)
    return tuple(map(max, s, t))


def meet(s: Time, t: Time) -> Time:
    """Greatest lower bound: the coordinate-wise min."""
    if s == t:
        return s
    n = len(s)
    if n == 1:
        return s if s[0] <= t[0] else t
    if n == 2:
        a, b = s
        c, d = t
        return (a if a <= c else c, b if b <= d else d)
    return tuple(map(min, s, t))


class Antichain:
    """A minimal set of mutually incomparable times.

    Invariant: no element is `<=` another element. Mutating methods keep it.
    """

    __slots__ = ("elements",)

    def __init__(self, times: Iterable[Time] = ()) -> None:
        self.elements: list[Time] = []
        for t in times:
            self.insert(t)

    def insert(self, t: Time) -> bool:
        """Add `t` unless an element is already `<= t`; drop the elements `t` dominates.

        Returns True when the antichain changed.
        """
        els = self.elements
        if not els:
            els.append(t)
            return True
        for e in els:
            if less_equal(e, t):
                return False
        self.elements = [e for e in els if not less_equal(t, e)]
        self.elements.append(t)
        return True

    def less_equal(self, t: Time) -> bool:
        """True when `t` is beyond this frontier (some element is `<= t`)."""
        for e in self.elements:
            if less_equal(e, t):
                return True
        return False

    def less_than(self, t: Time) -> bool:
        for e in self.elements:
            if less_than(e, t):
                return True
        return False

    def dominates(self, other: Antichain) -> bool:
        """True when every time beyond `other` is beyond self (self <= other as frontiers)."""
        # (loops, not `all` over a generator of method calls: the scheduler and every trace
        # reader's compaction ask this of two-element loop frontiers in every round)
        els = self.elements
        for t in other.elements:
            for e in els:
                if less_equal(e, t):
                    break
            else:
                return False
        return True

    def meet(self, other: Antichain) -> Antichain:
        """The frontier of times beyond either: the minimised union."""
        out = Antichain(self.elements)
        for t in other.elements:
            out.insert(t)
        return out

    def join(self, other: Antichain) -> Antichain:
        """The frontier of times beyond both: the minimised pairwise joins."""
        a, b = self.elements, other.elements
        # Compaction frontiers move forward one step at a time: usually one side is already
        # beyond the other, and the join is that side (antichains are never mutated in place
        # once shared, so returning it is safe).
        if len(a) == 1 and len(b) == 1:
            s, t = a[0], b[0]
            if less_equal(s, t):
                return other
            if less_equal(t, s):
                return self
            return Antichain([join(s, t)])
        if a == b or self.dominates(other):
            return other
        if other.dominates(self):
            return self
        return Antichain(join(x, y) for x in a for y in b)

    def is_empty(self) -> bool:
        return not self.elements

    def sorted(self) -> list[Time]:
        return sorted(self.elements)

    def __iter__(self) -> Iterator[Time]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        a, b = self.elements, other.elements
        # The scheduler compares every operator's frontiers every round; they are usually
        # the same list in the same order.
        if a == b:
            return True
        # Unequal as lists: the same set only in another order, which needs two elements
        # (one-element frontiers, a root scope's and most of a loop's, are unequal here).
        return len(a) == len(b) > 1 and sorted(a) == sorted(b)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.elements)))

    def __repr__(self) -> str:
        return "Antichain(%s)" % sorted(self.elements)


def advance_by(t: Time, frontier: Iterable[Time]) -> Time:
    """The meet over `f` in `frontier` of `join(t, f)`; `t` itself for an empty frontier."""
    result: Time | None = None
    for f in frontier:
        j = join(t, f)
        result = j if result is None else meet(result, j)
    return t if result is None else result


def advancer(frontier: Antichain | list[Time]) -> Callable[[Time], Time]:
    """A fast `advance_by` for a fixed frontier: compaction calls it once per stored update."""
    els = frontier.elements if isinstance(frontier, Antichain) else list(frontier)
    if not els:
        return lambda t: t
    if len(els) == 1:
        f = els[0]
        return lambda t: join(t, f)
    if len(els) == 2 and len(els[0]) == 2:
        # Two-coordinate times with a two-element frontier (an epoch in a loop while the next
        # epoch may start): the meet of two joins, unrolled.
        (p0, p1), (q0, q1) = els

        def advance2(t: Time) -> Time:
            a, b = t
            x0 = a if a >= p0 else p0
            y0 = a if a >= q0 else q0
            x1 = b if b >= p1 else p1
            y1 = b if b >= q1 else q1
            return (x0 if x0 <= y0 else y0, x1 if x1 <= y1 else y1)

        return advance2
    return lambda t: advance_by(t, els)


def minimum(dims: int) -> Time:
    return (0,) * dims
