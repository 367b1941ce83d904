"""Graph oracles: connected components (paper Fig. 7), SCC (Fig. 8), sliding-window reachability.

* Fig. 7 min-label propagation via ``iterate`` on a random undirected graph under hundreds of
  random edge insertions and deletions: after every epoch each node's label is the smallest
  node of its networkx connected component.
* Fig. 8 strongly connected components, a doubly nested loop (TrimAndReverse twice inside an
  outer iterate, each with its own inner propagation loop): after every epoch the surviving
  edges are exactly the edges whose endpoints networkx puts in the same SCC.
* Reachability from a changing root set over a sliding window of edges: after every update the
  reached set equals a BFS.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import naive
import networkx as nx
from harness import reachable_from

from engine import Capture, Collection, Dataflow


def drain_into(state: dict[Any, int], cap: Capture) -> dict[Any, int]:
    """Accumulate a capture's new updates (root scope, all submitted epochs complete)."""
    for data, _time, diff in cap.drain():
        state[data] = state.get(data, 0) + diff
        if state[data] == 0:
            del state[data]
    return state


def min_label(nodes: Collection, edges: Collection) -> Collection:
    """Fig. 7: labels (node, label) improved to the minimum over in-neighbours, to fixpoint."""
    return nodes.iterate(
        lambda x: x.join(edges.enter(x.scope)).map(lambda kv: (kv[1][1], kv[1][0])).concat(x).min()
    )


def connected_components(edges: Collection) -> Collection:
    return min_label(edges.map(lambda e: (e[0], e[0])), edges)


def trim_and_reverse(edges: Collection) -> Collection:
    """Fig. 8: keep edges whose endpoints get the same reachability label, flipped.

    Every endpoint seeds its own label (the figure's src-only seeding would never trim an edge
    into a sink node).
    """
    nodes = edges.flat_map(lambda e: [(e[0], e[0]), (e[1], e[1])])
    labels = min_label(nodes, edges)
    return (
        edges.join(labels)
        .map(lambda kv: (kv[1][0], (kv[0], kv[1][1])))
        .join(labels)
        .filter(lambda kv: kv[1][0][1] == kv[1][1])
        .map(lambda kv: (kv[0], kv[1][0][0]))
    )


def scc(edges: Collection) -> Collection:
    return edges.iterate(lambda y: trim_and_reverse(trim_and_reverse(y)))


def random_edge_updates(
    rng: random.Random, n: int, initial: int, updates: int, directed: bool
) -> tuple[set[tuple[int, int]], list[tuple[tuple[int, int], int]]]:
    def rand_edge() -> tuple[int, int]:
        while True:
            a, b = rng.randrange(n), rng.randrange(n)
            if a != b:
                return (a, b) if directed else (min(a, b), max(a, b))

    present: set[tuple[int, int]] = set()
    while len(present) < initial:
        present.add(rand_edge())
    start = set(present)
    stream: list[tuple[tuple[int, int], int]] = []
    for _ in range(updates):
        if present and rng.random() < 0.5:
            e = rng.choice(sorted(present))
            present.remove(e)
            stream.append((e, -1))
        else:
            e = rand_edge()
            if e in present:
                continue
            present.add(e)
            stream.append((e, +1))
    return start, stream


def replay_and_check(
    df: Dataflow,
    handle: Any,
    cap: Capture,
    start: set[tuple[int, int]],
    stream: list[tuple[tuple[int, int], int]],
    per_epoch: int,
    want: Callable[[set[tuple[int, int]]], dict[Any, int]],
) -> None:
    """Load `start`, then apply `stream` `per_epoch` updates an epoch; after every epoch the
    accumulated output must equal `want(current edge set)`."""
    state: dict[Any, int] = {}
    present = set(start)
    for e in sorted(start):
        handle.insert(e)
    chunks = [stream[i : i + per_epoch] for i in range(0, len(stream), per_epoch)]
    for epoch in range(len(chunks) + 1):
        handle.advance_to(epoch + 1)
        df.run()
        drain_into(state, cap)
        assert state == want(present), f"output wrong after epoch {epoch}"
        for e, d in chunks[epoch] if epoch < len(chunks) else []:
            handle.insert(e, d)
            (present.add if d > 0 else present.discard)(e)


def test_connected_components_fig7_under_random_updates() -> None:
    rng = random.Random(2013)
    n, per_epoch = 40, 5
    start, stream = random_edge_updates(rng, n, 45, 300, directed=False)
    df = Dataflow()
    handle, und = df.new_input(name="edges")
    edges = und.concat(und.map(lambda e: (e[1], e[0])))
    cap = connected_components(edges).capture()

    def want(present: set[tuple[int, int]]) -> dict[Any, int]:
        g = nx.Graph()
        g.add_edges_from(present)
        return {(v, min(c)): 1 for c in nx.connected_components(g) for v in c}

    replay_and_check(df, handle, cap, start, stream, per_epoch, want)


def test_scc_fig8_doubly_nested_under_random_updates() -> None:
    rng = random.Random(8)
    n, per_epoch = 18, 4
    start, stream = random_edge_updates(rng, n, 30, 200, directed=True)
    df = Dataflow()
    handle, edges = df.new_input(name="edges")
    cap = scc(edges).capture()

    def want(present: set[tuple[int, int]]) -> dict[Any, int]:
        g = nx.DiGraph()
        g.add_edges_from(present)
        comp = {v: i for i, c in enumerate(nx.strongly_connected_components(g)) for v in c}
        edges = {(a, b): 1 for a, b in present if comp[a] == comp[b]}
        assert set(edges) == naive.scc_edges_fixpoint(present)  # the oracle agrees with itself
        return edges

    replay_and_check(df, handle, cap, start, stream, per_epoch, want)


def test_scc_many_epochs_in_flight_equals_stepwise() -> None:
    """All epochs submitted before one run: the captured differences match a stepwise run."""
    rng = random.Random(99)
    start, stream = random_edge_updates(rng, 12, 18, 60, directed=True)
    results = []
    for stepwise in (True, False):
        df = Dataflow()
        handle, edges = df.new_input(name="edges")
        cap = scc(edges).capture()
        for e in sorted(start):
            handle.insert(e)
        for epoch, (e, d) in enumerate(stream):
            handle.advance_to(epoch + 1)
            if stepwise:
                df.run()
            handle.insert(e, d)
        handle.advance_to(len(stream) + 1)
        df.run()
        results.append(naive.consolidate(cap.updates))
    assert results[0] == results[1]
    present = set(start)
    for epoch, (e, d) in enumerate(stream):
        (present.add if d > 0 else present.discard)(e)
        want = {x: 1 for x in naive.scc_edges_fixpoint(present)}
        assert (
            naive.accumulate([(x, t, r) for (x, t), r in results[1].items()], (epoch + 1,)) == want
        )


def test_reachability_sliding_window_changing_roots() -> None:
    rng = random.Random(3)
    n, window, steps = 60, 80, 200
    df = Dataflow()
    edges_h, edges = df.new_input(name="edges")
    roots_h, roots = df.new_input(name="roots")
    reach = reachable_from(roots, edges)
    cap = reach.capture()
    state: dict[Any, int] = {}
    win: list[tuple[int, int]] = []
    root_set: set[int] = set()
    for epoch in range(steps):
        # slide: one edge in, the oldest out once full (duplicates allowed: a multiset window)
        e = (rng.randrange(n), rng.randrange(n))
        win.append(e)
        edges_h.insert(e)
        if len(win) > window:
            edges_h.remove(win.pop(0))
        if epoch % 4 == 0 or not root_set:
            r = rng.randrange(n)
            if r in root_set and len(root_set) > 1:
                root_set.remove(r)
                roots_h.remove(r)
            elif r not in root_set:
                root_set.add(r)
                roots_h.insert(r)
        edges_h.advance_to(epoch + 1)
        roots_h.advance_to(epoch + 1)
        df.run()
        drain_into(state, cap)
        want = {v: 1 for v in naive.reachable(root_set, set(win))}
        assert state == want, f"reachability wrong after update {epoch}"
