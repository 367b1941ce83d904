"""Batching invariance: the same updates applied one per transaction or all in one transaction
give the same final view and the same accumulated change stream."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from planner_support import World, catalog, norm
from test_planner_recursion import CC

import engine
from planner import compile_view

VIEWS = [
    "SELECT t.id, u.id, t.b FROM t LEFT JOIN u ON t.a = u.a",
    "SELECT a, count(*), sum(c), min(b), max(c), count(DISTINCT b) FROM t GROUP BY a",
    "SELECT count(*), sum(a) FROM t WHERE a > 3",
    "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u)",
    "SELECT id, (SELECT count(*) FROM u WHERE u.a = t.a) FROM t",
    "SELECT a, b, id FROM t ORDER BY a DESC, b, id LIMIT 4",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    CC,
]


def _play(sql: str, batches: list[list[tuple[str, tuple, int]]], initial: dict,
          one_per_txn: bool) -> tuple[Counter, Counter]:
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in ("t", "u", "e"):
        handles[name], sources[name] = df.new_input(name)
    cap = compile_view(sql, catalog()).build(df, sources).capture()
    for name, rows in initial.items():
        handles[name].send([(r, 1) for r in rows])
    epoch = 0
    for batch in batches:
        for table, row, diff in batch:
            handles[table].send([(row, diff)])
            if one_per_txn:
                epoch += 1
                for h in handles.values():
                    h.advance_to(epoch)
                df.run()
    epoch += 1
    for h in handles.values():
        h.advance_to(epoch)
    df.run()
    stream: Counter = Counter()
    for data, _time, diff in cap.updates:
        stream[data] += diff
    return norm(cap.snapshot()), norm(stream)


@pytest.mark.parametrize("sql", VIEWS)
def test_one_per_transaction_equals_one_transaction(sql: str) -> None:
    world = World(42, sizes={"t": 25, "u": 20, "e": 10})
    initial = {n: list(rs) for n, rs in world.rows.items()}
    world.rng = random.Random(43)
    batches = [world.random_batch(5) for _ in range(6)]
    world.sync()
    single = _play(sql, batches, initial, one_per_txn=True)
    bulk = _play(sql, batches, initial, one_per_txn=False)
    assert single == bulk
    if sql is not CC:
        assert single[0] == world.duck(sql)
