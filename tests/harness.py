"""Helpers shared by the engine acceptance tests: feeding updates at 2-D times.

The public API only lets a program submit updates at root epochs. To put a difference at the
partially ordered time ``(e, i)`` we submit it at epoch ``e`` to the ``i``-th of ``K`` root
inputs and delay that input by ``i`` iterations inside an iterative scope, with a chain of
``i`` Variables (a Variable at iteration ``j+1`` is what it was set to at iteration ``j``).
The collection inside the scope then has exactly the submitted differences at ``(e, i)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import naive

from engine import Collection, Dataflow, InputHandle, Variable


class Stream2D:
    """A collection inside ``scope`` whose differences are fed at ``(epoch, delay)`` times."""

    def __init__(self, df: Dataflow, scope: Any, delays: int, name: str) -> None:
        self.handles: list[InputHandle] = []
        parts: list[Collection] = []
        for i in range(delays):
            handle, coll = df.new_input(name=f"{name}{i}")
            x = coll.enter(scope)
            for _ in range(i):
                v = Variable(scope)
                v.set(x)
                x = v
            self.handles.append(handle)
            parts.append(x)
        self.collection: Collection = parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0]

    def send(self, epoch: int, diffs: dict[tuple[Any, naive.Time], int]) -> None:
        """Submit the differences of ``diffs`` whose time is ``(epoch, i)``."""
        for (data, (e, i)), d in sorted(diffs.items(), key=repr):
            if e == epoch:
                assert self.handles[i].epoch == epoch
                self.handles[i].insert(data, d)

    def advance_to(self, epoch: int) -> None:
        for h in self.handles:
            h.advance_to(epoch)

    def close(self) -> None:
        for h in self.handles:
            h.close()


def scope_2d(df: Dataflow) -> Any:
    """A fresh iterative scope under the root scope of ``df``."""
    _, anchor = df.new_input(name="scope_anchor")
    return anchor.scope.iterative()


def random_grid(
    rng: random.Random,
    epochs: int,
    delays: int,
    gen: Callable[[random.Random], naive.Multiset],
    mutate: Callable[[random.Random, naive.Multiset], naive.Multiset],
) -> dict[tuple[int, int], naive.Multiset]:
    """Non-negative target collections at every grid time ``(e, i)``.

    Each point is a mutation of a neighbour, so differences stay sparse-ish and interesting.
    """
    colls: dict[tuple[int, int], naive.Multiset] = {}
    for e in range(epochs):
        for i in range(delays):
            if (e, i) == (0, 0):
                colls[(e, i)] = gen(rng)
            else:
                base = colls[(e - 1, i)] if e > 0 and (i == 0 or rng.random() < 0.5) else None
                if base is None:
                    base = colls[(e, i - 1)]
                colls[(e, i)] = mutate(rng, base)
    return colls


def reachable_from(roots: Any, edges: Any) -> Any:
    """Nodes reachable from `roots` along `(src, dst)` edges: the roadmap's reach query."""
    return roots.iterate(
        lambda x: (
            x.map(lambda v: (v, ()))
            .join(edges.enter(x.scope))
            .map(lambda kv: kv[1][1])
            .concat(x)
            .distinct()
        )
    )
