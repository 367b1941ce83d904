"""Planner views on the Spark executor against the same views on the in-process executor.

Invariant checked: every view (taken from the planner's own oracle and recursion suites: joins,
outer joins, aggregates with MIN/MAX under deletes, set operations, subqueries, top-k, linear,
non-linear and mutually recursive CTEs) built into a `Dataflow(executor=SparkExecutor(...))` has,
after every random INSERT/UPDATE/DELETE batch, exactly the contents of the same view built into
an in-process `Dataflow` fed the same batches.

The hydration batch (40-row tables) is larger than `local_rows`, so the initial traces live in
Spark; later batches are a few rows each, so deltas may take the driver fast path, but every
join or reduce against a Spark-resident trace, and every merge into one, runs in Spark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from planner_support import NAN_FLOATS, World, catalog
from test_planner_oracle import BASE_VIEWS
from test_planner_oracle import VIEWS as ORACLE_VIEWS
from test_planner_recursion import FIXPOINT_VIEWS, REACH

import engine
from planner import compile_view

pytestmark = pytest.mark.spark

WANTED = [
    "SELECT id, a + 1, a * 2 - c, a / 2, a // 2, a % 3, -a FROM t",
    "SELECT * FROM t WHERE a > 2 AND c < 5",
    "SELECT t.id, u.id FROM t JOIN u ON t.a = u.a",
    "SELECT t.id, u.id, u.s FROM t LEFT JOIN u ON t.a = u.a AND u.s <> 'q'",
    "SELECT t.id, u.id FROM t RIGHT JOIN u ON t.a = u.a",
    "SELECT t.id, u.id, t.b, u.s FROM t FULL OUTER JOIN u ON t.a = u.a",
    "SELECT x.id, y.id FROM t x JOIN t y ON x.a = y.a AND x.id < y.id",
    "SELECT a, count(*), count(b), count(DISTINCT b), sum(c), avg(c), min(b), max(c)"
    " FROM t GROUP BY a",
    "SELECT b, sum(a), min(d), max(d) FROM t GROUP BY b HAVING count(*) > 1",
    "SELECT count(*), sum(a), avg(c), min(a), max(b), count(DISTINCT a) FROM t",
    "SELECT s, sum(m), avg(m), max(m), min(m) FROM u GROUP BY s",
    "SELECT t.a, count(u.id), sum(u.id) FROM t LEFT JOIN u ON t.a = u.a GROUP BY t.a",
    "SELECT DISTINCT a, b FROM t",
    "SELECT a FROM t UNION SELECT a FROM u",
    "SELECT a FROM t INTERSECT ALL SELECT a FROM u",
    "SELECT a FROM t EXCEPT SELECT a FROM u",
    "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u)",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
    "SELECT id, (SELECT max(u.id) FROM u WHERE u.a = t.a) FROM t",
    "SELECT b, count(*) FROM tv GROUP BY b",
    "SELECT a, b, id FROM t ORDER BY a DESC, b, id LIMIT 5",
    "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC, a LIMIT 3",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10)"
    " SELECT * FROM r",
    "WITH RECURSIVE tc(s, d) AS (SELECT src, dst FROM e UNION"
    " SELECT tc.s, e.dst FROM tc JOIN e ON tc.d = e.src) SELECT s, count(*) FROM tc GROUP BY s",
    "WITH RECURSIVE dist(x, k) AS (SELECT 1, 0 UNION SELECT e.dst, dist.k + 1 FROM dist"
    " JOIN e ON e.src = dist.x WHERE dist.k < 4) SELECT x, min(k) FROM dist GROUP BY x",
]

RECURSIVE = {
    "reach": REACH,
    "mutual_even_odd": FIXPOINT_VIEWS["mutual_even_odd"],
    "nonlinear_tc": FIXPOINT_VIEWS["nonlinear_tc"],
    "connected_components": FIXPOINT_VIEWS["agg_in_recursion"],
}


def view_list() -> list[str]:
    """The views under test: those of the planner's suites that this file names."""
    missing = [v for v in WANTED if v not in ORACLE_VIEWS]
    assert not missing, f"views no longer in the planner's oracle list: {missing}"
    return WANTED + list(RECURSIVE.values())


GROUPS = 2


@pytest.fixture(scope="module")
def spark_ex() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from engine.executors.spark import SparkExecutor

    ex = SparkExecutor("local[2]", local_rows=8)
    yield ex
    ex.close()


def test_enough_views() -> None:
    assert len(view_list()) >= 25


def build(df: Any, views: list[str]) -> tuple[dict[str, Any], list[Any]]:
    cat = catalog(BASE_VIEWS)
    handles, sources = {}, {}
    for name in ("t", "u", "e"):
        handles[name], sources[name] = df.new_input(name)
    for name, sql in BASE_VIEWS.items():
        sources[name] = compile_view(sql, cat, name=name).build(df, sources)
    caps = [compile_view(s, cat).build(df, sources).capture() for s in views]
    return handles, caps


def _views_match_inprocess(spark_ex: Any, views: list[str], world: World) -> None:
    dfs = [engine.Dataflow(), engine.Dataflow(executor=spark_ex)]
    built = [build(d, views) for d in dfs]
    for handles, _ in built:
        for name, rows in world.rows.items():
            handles[name].send([(r, 1) for r in rows])
    for epoch in range(1, 3):  # (hydration, then one batch of changes)
        for d, (handles, _) in zip(dfs, built, strict=True):
            for h in handles.values():
                h.advance_to(epoch)
            d.run()
        for sql, want, got in zip(views, built[0][1], built[1][1], strict=True):
            assert got.snapshot() == want.snapshot(), (epoch, sql)
        batch = world.random_batch(10)
        for handles, _ in built:
            for table, row, diff in batch:
                handles[table].send([(row, diff)])


@pytest.mark.parametrize("group", range(GROUPS))
def test_views_match_inprocess(spark_ex: Any, group: int) -> None:
    views = [v for i, v in enumerate(view_list()) if i % GROUPS == group]
    _views_match_inprocess(spark_ex, views, World(200 + group))


def test_views_over_nan_match_inprocess(spark_ex: Any) -> None:
    """The views that read the DOUBLE column `c`, with NaN (two NaN objects), infinity, 0.0
    and -0.0 among its values, and views that join and group on it: values decoded from
    Spark are canonical (one NaN) as in the engine, so a row holding NaN meets its retraction
    (a MAX over NaN once kept its old row), and -0.0 joins and groups with 0.0 (it once
    matched nothing)."""
    views = [v for v in WANTED if re.search(r"\bc\b", v)]
    assert len(views) >= 4
    views += ["SELECT x.id, y.id FROM t x JOIN t y ON x.c = y.c",
              "SELECT c, count(*) FROM t GROUP BY c", "SELECT DISTINCT c FROM t"]
    _views_match_inprocess(spark_ex, views, World(210, floats=NAN_FLOATS))



def test_an_evaluation_error_on_a_worker_reads_as_in_process(spark_ex: Any) -> None:
    """A view's evaluation error raised on a Spark worker is described as in process (its
    type, code and message): it read as PySpark's PythonException, the worker's traceback
    with the server's file paths in it."""
    from server.failures import failure

    got = []
    for df in (engine.Dataflow(), engine.Dataflow(executor=spark_ex)):
        handles, _ = build(df, ["SELECT 1 // (id - id) AS q FROM t"])
        handles["t"].send([(r, 1) for r in World(220).rows["t"]])
        for h in handles.values():
            h.advance_to(1)
        with pytest.raises(Exception) as info:
            df.run()
        got.append(failure(info.value))
    assert got[1] == got[0]
    assert got[0]["code"] == "evaluation_error"
    assert got[0]["message"].startswith("EvaluationError: division by zero: 1 // 0")
    # only PySpark's errors carry a worker's exception: a value quoting the mark is no error
    from engine.executors.spark.arrow import WORKER_ERROR
    from planner.errors import EvaluationError

    quoted = failure(EvaluationError(f"could not convert string '{WORKER_ERROR}{{\"type\": \"X\"}}'"))
    assert quoted["message"].startswith("EvaluationError: could not convert")
