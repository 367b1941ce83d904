"""Batching invariance, checked per transaction.

The same updates are applied one per transaction and all in one transaction. In the
one-per-transaction run, the consolidated change set the view emits at each timestamp must be
exactly the difference between DuckDB's answers (networkx for connected components) on the data
before and after that transaction, so every intermediate snapshot equals the oracle too. In the
all-in-one run, the single change set must equal the sum of the per-transaction change sets
(and the oracle's end-to-end difference). Comparing only accumulated streams would be
tautological: any stream sums to its final snapshot.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import networkx as nx
import pytest
from planner_support import World, catalog, norm, norm_value
from test_planner_recursion import CC

import engine
from planner import compile_view

VIEWS = [
    "SELECT t.id, u.id, t.b FROM t LEFT JOIN u ON t.a = u.a",
    "SELECT a, count(*), sum(c), min(b), max(c), count(DISTINCT b) FROM t GROUP BY a",
    "SELECT count(*), sum(a) FROM t WHERE a > 3",
    # (u.a holds a NULL throughout this data, which would keep a plain NOT IN empty)
    "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u WHERE a IS NOT NULL)",
    "SELECT id, (SELECT count(*) FROM u WHERE u.a = t.a) FROM t",
    "SELECT a, b, id FROM t ORDER BY a DESC, b, id LIMIT 4",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    CC,
]

Change = dict[tuple[Any, ...], int]
Update = tuple[str, tuple[Any, ...], int]


def _signed(pairs: Iterable[tuple[tuple[Any, ...], int]]) -> Change:
    """A signed multiset (negative counts kept), rows normalised like ``norm``."""
    out: dict[tuple[Any, ...], int] = defaultdict(int)
    for row, diff in pairs:
        out[tuple(norm_value(v) for v in row)] += diff
    return {k: v for k, v in out.items() if v}


def _minus(new: Counter, old: Counter) -> Change:
    return _signed([*new.items(), *((k, -v) for k, v in old.items())])


def _sum(changes: Iterable[Change]) -> Change:
    return _signed(item for c in changes for item in c.items())


def _components(rows: list[tuple[Any, ...]]) -> Counter:
    g = nx.Graph()
    g.add_edges_from((a, b) for a, b in rows if a is not None and b is not None)
    return Counter({(node, min(comp)): 1 for comp in nx.connected_components(g) for node in comp})


def _oracle(sql: str, world: World) -> Counter:
    return norm(_components(world.rows["e"])) if sql is CC else world.duck(sql)


def _play(sql: str, initial: dict[str, list[tuple[Any, ...]]],
          txns: list[list[Update]]) -> tuple[Change, list[Change]]:
    """Load ``initial`` at time 0, then transaction k at time k; returns the change set at time
    0 and the consolidated change set at each time 1..len(txns)."""
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in ("t", "u", "e"):
        handles[name], sources[name] = df.new_input(name)
    cap = compile_view(sql, catalog()).build(df, sources).capture()
    for name, rows in initial.items():
        handles[name].send([(r, 1) for r in rows])
    for epoch, txn in enumerate([None, *txns], start=1):
        for table, row, diff in txn or []:
            handles[table].send([(row, diff)])
        for h in handles.values():
            h.advance_to(epoch)
        df.run()
    by_time: dict[int, list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
    for data, time, diff in cap.updates:
        by_time[time[0]].append((data, diff))
    assert set(by_time) <= set(range(len(txns) + 1)), sorted(by_time)
    return _signed(by_time[0]), [_signed(by_time[k]) for k in range(1, len(txns) + 1)]


@pytest.mark.parametrize("sql", VIEWS)
def test_one_per_transaction_equals_one_transaction(sql: str) -> None:
    world = World(42, sizes={"t": 25, "u": 20, "e": 10})
    initial = {n: list(rs) for n, rs in world.rows.items()}
    world.rng = random.Random(43)
    updates = [u for _ in range(6) for u in world.random_batch(5)]

    # the oracle at every point: replay the updates on the initial data
    world.rows = {n: list(rs) for n, rs in initial.items()}
    world.sync()
    snapshots = [_oracle(sql, world)]
    for table, row, diff in updates:
        if diff > 0:
            world.rows[table].append(row)
        else:
            world.rows[table].remove(row)
        world.sync()
        snapshots.append(_oracle(sql, world))

    start, per_txn = _play(sql, initial, [[u] for u in updates])
    assert start == _signed(snapshots[0].items())
    acc = Counter(snapshots[0])
    for k, change in enumerate(per_txn, start=1):
        assert change == _minus(snapshots[k], snapshots[k - 1]), (k, updates[k - 1])
        for row, diff in change.items():
            acc[row] += diff
        assert +acc == snapshots[k] and not -acc, k

    bulk_start, (bulk,) = _play(sql, initial, [updates])
    assert bulk_start == start
    assert bulk == _sum(per_txn)
    assert bulk == _minus(snapshots[-1], snapshots[0])
    assert any(per_txn), "the updates should change the view"
