"""Projections an executor can run without calling Python per update.

`Fields(i, j, ...)` is the map `row -> (row[i], row[j], ...)` (one index: `row[i]` itself),
`JoinFields(a, b, ...)` the join function `(key, left, right) -> (a, b, ...)` with each source
one of `"key"`, `"left"`, `"right"` (one source: that value itself), and `ArrangedFields(a, ...)`
the function `(key, val) -> (a, ...)` that reads an arrangement back as a collection, each
source `"key"` or `"val"`. All are ordinary callables,
so every executor can run them as Python functions; an executor that holds rows as integer ids
(the columnar one) recognises them and moves ids instead, when the rows' layout allows it, and
calls them per update otherwise. Either way the result is the same, which tests check.
"""

from __future__ import annotations

from typing import Any

JOIN_SOURCES = ("key", "left", "right")


class Fields:
    """The map `row -> (row[i], ...)`, or `row[i]` for one index (see the module docstring)."""

    __slots__ = ("index",)

    def __init__(self, *index: int) -> None:
        if not index:
            raise ValueError("Fields needs at least one index")
        self.index = tuple(index)

    def __call__(self, row: Any) -> Any:
        if len(self.index) == 1:
            return row[self.index[0]]
        return tuple(row[i] for i in self.index)

    def __repr__(self) -> str:
        return "Fields%r" % (self.index,)


class _Picked:
    """A function of named arguments `NAMES` returning the ones named in `sources` (one source:
    that argument itself). The columnar executor reads `sources` to move ids instead."""

    __slots__ = ("sources", "_pick")
    NAMES: tuple[str, ...] = ()

    def __init__(self, *sources: str) -> None:
        if not sources or any(s not in self.NAMES for s in sources):
            raise ValueError("%s takes one or more of %s" % (type(self).__name__, self.NAMES))
        self.sources = tuple(sources)
        self._pick = tuple(self.NAMES.index(s) for s in sources)

    def __call__(self, *args: Any) -> Any:
        if len(self._pick) == 1:
            return args[self._pick[0]]
        return tuple(args[i] for i in self._pick)

    def __repr__(self) -> str:
        return "%s%r" % (type(self).__name__, self.sources)


class JoinFields(_Picked):
    """The join function `(key, left, right) -> (source, ...)` (see the module docstring)."""

    __slots__ = ()
    NAMES = JOIN_SOURCES


ARRANGED_SOURCES = ("key", "val")


class ArrangedFields(_Picked):
    """The function `(key, val) -> (source, ...)` (see the module docstring)."""

    __slots__ = ()
    NAMES = ARRANGED_SOURCES
