"""Delta joins (planner.ir.DeltaJoin lowered onto engine/operators/half_join.py) against the
left-deep binary join they replace, both against DuckDB: the same many-way join views, planned
both ways, maintained under random INSERT/UPDATE/DELETE batches (one epoch per batch, and many
epochs in one run, where the tie-break between inputs changed at once matters), equal to
DuckDB after every batch. Also: which plan "auto" chooses, and EXPLAIN showing it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from planner_support import SCHEMAS, World, catalog, norm

import engine
from planner import compile_view
from planner.ir import DeltaJoin, Join, walk
from planner.joins import as_binary, plan_delta_joins

VIEWS = [
    "SELECT t.id, u.id, e.dst FROM t, u, e WHERE t.a = u.a AND u.id = e.src",
    "SELECT t1.id, t2.id, u.s FROM t t1, t t2, u WHERE t1.a = t2.a AND t2.id = u.id"
    " AND t1.c > t2.c",
    "SELECT e1.src, e3.dst FROM e e1, e e2, e e3 WHERE e1.dst = e2.src AND e2.dst = e3.src",
    "SELECT e1.src, e4.dst, count(*) FROM e e1, e e2, e e3, e e4 WHERE e1.dst = e2.src"
    " AND e2.dst = e3.src AND e3.dst = e4.src GROUP BY e1.src, e4.dst",
    # a cross product and constant filters (the shape)
    "SELECT t.id, u.id, e.src FROM t, u, e WHERE t.a = 2 AND u.a = 3 AND e.dst = 4",
    "SELECT t.b, u.s, e1.dst FROM t JOIN u ON t.a = u.a JOIN e e1 ON e1.src = u.a"
    " JOIN e e2 ON e2.src = t.a AND e2.dst = e1.dst WHERE t.flag",
    # a cycle in the join graph and NULL keys (SQL equality never matches NULL)
    "SELECT t.id, u.id FROM t, u, e WHERE t.a = e.src AND u.a = e.dst AND t.id = u.id",
    # inputs of no columns, a shared CTE, keys over expressions, a residual filter, and a delta
    # join inside a correlated subquery
    "SELECT count(*) FROM t, u, e WHERE t.a = 1",
    "WITH x AS (SELECT * FROM e WHERE src > 2) SELECT x1.src, x3.dst FROM x x1, x x2, x x3"
    " WHERE x1.dst = x2.src AND x2.dst = x3.src",
    "SELECT t.id, u.id, e.src FROM t, u, e WHERE t.a + 1 = u.a AND u.id = e.src + e.dst"
    " AND t.c > u.m",
    "SELECT t.id, (SELECT count(*) FROM u, e e1, e e2 WHERE u.a = e1.src AND e1.dst = e2.src"
    " AND e2.dst = t.a) FROM t",
]


def _variants(sql: str) -> dict[str, Any]:
    cv = compile_view(sql, catalog())
    delta = plan_delta_joins(cv.plan, "delta")
    assert any(isinstance(n, DeltaJoin) for n in walk(delta)), sql
    binary = as_binary(cv.plan)
    assert not any(isinstance(n, DeltaJoin) for n in walk(binary))
    return {"delta": dataclasses.replace(cv, plan=delta),
            "binary": dataclasses.replace(cv, plan=binary)}


def _replay(world: World, views: list[Any], batches: int, per_run: int) -> None:
    """Like planner_support.replay_against_duckdb, for compiled views with chosen plans:
    ``per_run`` epochs are sent before each run (several times in one run)."""
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in SCHEMAS:
        handles[name], sources[name] = df.new_input(name)
    caps = [(cv.sql, cv.build(df, sources).capture()) for cv in views]
    for name, rows in world.rows.items():
        handles[name].send([(r, 1) for r in rows])
    epoch = 0
    for _ in range(batches):
        for _ in range(per_run):
            epoch += 1
            for h in handles.values():
                h.advance_to(epoch)
            for table, row, diff in world.random_batch(5):
                handles[table].send([(row, diff)])
        for h in handles.values():
            h.advance_to(epoch + 1)
        epoch += 1
        df.run()
        world.sync()
        for sql, cap in caps:
            got, want = norm(cap.snapshot()), world.duck(sql)
            assert got == want, (epoch, sql, dict(got - want), dict(want - got))


@pytest.mark.parametrize("sql", VIEWS)
@pytest.mark.parametrize("way", ["delta", "binary"])
def test_each_plan_matches_duckdb_after_every_batch(sql: str, way: str) -> None:
    world = World(91)
    _replay(world, [_variants(sql)[way]], batches=22, per_run=1)


@pytest.mark.parametrize("sql", VIEWS)
def test_many_epochs_in_one_run(sql: str) -> None:
    world = World(17)
    v = _variants(sql)
    _replay(world, [v["delta"], v["binary"]], batches=8, per_run=4)


def test_naive_evaluates_both_plans_alike() -> None:
    world = World(5)
    for sql in VIEWS:
        v = _variants(sql)
        assert norm(v["delta"].evaluate(world.bags())) == world.duck(sql)
        assert norm(v["binary"].evaluate(world.bags())) == world.duck(sql)


def test_auto_picks_binary_from_a_filtered_input_and_delta_otherwise() -> None:
    def kinds(sql: str) -> set[str]:
        plan = compile_view(sql, catalog()).plan
        return {type(n).__name__ for n in walk(plan) if isinstance(n, (Join, DeltaJoin))}

    # starts at the filtered input: small intermediate results, binary
    assert kinds("SELECT t.id FROM t, u, e WHERE t.a = u.a AND u.id = e.src AND t.id = 3") \
        == {"Join"}
    # no filtered input, or a cross product: delta
    assert kinds(VIEWS[0]) == {"DeltaJoin"}
    assert kinds(VIEWS[4]) == {"DeltaJoin"}
    # two inputs: a binary join is already a delta join
    assert kinds("SELECT t.id FROM t, u WHERE t.a = u.a") == {"Join"}


def test_explain_shows_the_delta_join_and_its_paths() -> None:
    text = compile_view(VIEWS[0], catalog()).explain()
    assert text.splitlines()[:2] == [
        "Mfp project=(#0, #2, #5)",
        "  DeltaJoin on=(#1 = #3, #2 = #4) paths=(%0 > %1 > %2; %1 > %0 > %2; %2 > %1 > %0)",
    ]


def test_inside_a_loop_the_delta_join_is_binary() -> None:
    sql = ("WITH RECURSIVE r(x, y) AS (SELECT src, dst FROM e UNION SELECT r.x, e2.dst FROM r,"
           " e e1, e e2 WHERE r.y = e1.src AND e1.dst = e2.src) SELECT x, y FROM r")
    world = World(23)
    v = _variants(sql)
    _replay(world, [v["delta"]], batches=6, per_run=1)


def test_a_runaway_delta_join_exceeds_the_work_budget() -> None:
    """Half joins charge their outputs to the run's budget, as binary joins do."""
    sql = "SELECT e1.src, e2.src, e3.src FROM e e1, e e2, e e3"
    cv = compile_view(sql, catalog())
    assert any(isinstance(n, DeltaJoin) for n in walk(cv.plan))
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in SCHEMAS:
        handles[name], sources[name] = df.new_input(name)
    cv.build(df, sources).capture()
    df.budget = engine.Budget(work=5_000)
    handles["e"].send([((i, i + 1), 1) for i in range(40)])  # 64,000 output rows
    for h in handles.values():
        h.advance_to(1)
    with pytest.raises(engine.BudgetExceeded):
        df.run()
