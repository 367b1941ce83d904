"""Oracle suite: every view, maintained by the engine under random INSERT/UPDATE/DELETE
batches, equals DuckDB's answer to the same SELECT on the same data after every batch
(multiset, floats to 1e-6). The naive evaluator of the plan is checked against DuckDB too.
"""

from __future__ import annotations

from typing import Any

import pytest
from planner_support import (
    NAN_FLOATS,
    SCHEMAS,
    World,
    catalog,
    mode_executor,
    norm,
    replay_against_duckdb,
)

from planner import compile_view

BASE_VIEWS = {"tv": "SELECT id, a, b FROM t WHERE a IS NOT NULL"}

VIEWS: list[str] = [
    # scalar expressions
    "SELECT id, a + 1, a * 2 - c, a / 2, a // 2, a % 3, -a FROM t",
    "SELECT id, a > 2, a = c, a <> 3, b < 'm', c >= 1.0 FROM t",
    "SELECT id, (a > 2) AND flag, (a > 2) OR flag, NOT flag FROM t",
    "SELECT id, CASE WHEN a > 3 THEN 'hi' WHEN a > 1 THEN 'mid' ELSE 'lo' END,"
    " CASE b WHEN 'x' THEN 1 WHEN 'y' THEN 2 END FROM t",
    "SELECT id, COALESCE(a, 0), NULLIF(a, 2), CAST(a AS DOUBLE), CAST(c AS INTEGER),"
    " CAST(a AS VARCHAR), CAST(c AS VARCHAR) FROM t",
    "SELECT id, a IS NULL, b IS NOT NULL, a BETWEEN 1 AND 3, a NOT BETWEEN 2 AND 4 FROM t",
    "SELECT id FROM t WHERE a IN (1, 3, 5) OR b IN ('x', NULL)",
    "SELECT id, a NOT IN (1, 2, NULL), b IN ('x', 'y') FROM t",
    "SELECT id, b LIKE 'a%', b ILIKE '%B%', b NOT LIKE '_b' FROM t",
    "SELECT id, lower(b), upper(b), length(b), substr(b, 2, 2), trim(b), concat(b, '-', a),"
    " b || 'z', replace(b, 'a', 'A') FROM t",
    "SELECT id, abs(c), round(c, 1), floor(c), ceil(c), mod(a, 3), abs(a), round(c) FROM t",
    "SELECT id, d + 1, year(d), month(d), extract(day FROM d), date_trunc('month', d),"
    " date_diff('day', d, DATE '2024-01-01') FROM t",
    "SELECT id, COALESCE(b, 'none') || '/' || COALESCE(CAST(a AS VARCHAR), '?') FROM t",
    "SELECT id, greatest(a, id), least(c, 2.0), c / NULLIF(a, 0) FROM t",
    "SELECT id, flag IS TRUE, flag IS NOT FALSE, a IS DISTINCT FROM 2,"
    " c IS NOT DISTINCT FROM 2.0 FROM t",
    "SELECT id, m * 2, m + 1, m > 5, CAST(m AS DOUBLE) / 2 FROM u",
    # where DuckDB returns a value: / by zero (inf, -inf, nan), DOUBLE % 0 (nan), TRY_CAST,
    # round of doubles (binary, not decimal), and // guarded by CASE or WHERE
    "SELECT id, a / 0, c / 0, -c / 0, (c - c) / 0, c % 0, TRY_CAST(b AS INTEGER),"
    " round(c * 1.005, 2), round(c / 3, 2), round(c * 1.01, 1) FROM t",
    "SELECT id, CASE WHEN a <> 0 THEN 10 // a END, CASE WHEN a <> 0 THEN 7 % a END FROM t",
    "SELECT id, 10 // a, 10 % a FROM t WHERE a <> 0",
    # WHERE and joins
    "SELECT * FROM t WHERE a > 2 AND c < 5",
    "SELECT id FROM t WHERE b LIKE '%a%' AND (a IS NULL OR a > 2)",
    "SELECT t.id, u.id FROM t JOIN u ON t.a = u.a",
    "SELECT t.id, u.id, u.s FROM t LEFT JOIN u ON t.a = u.a AND u.s <> 'q'",
    "SELECT t.id, u.id FROM t RIGHT JOIN u ON t.a = u.a",
    "SELECT t.id, u.id, t.b, u.s FROM t FULL OUTER JOIN u ON t.a = u.a",
    "SELECT t.id, u.id FROM t CROSS JOIN u WHERE t.a < u.a AND t.id < 20",
    "SELECT x.id, y.id FROM t x JOIN t y ON x.a = y.a AND x.id < y.id",
    "SELECT t.id, u.s FROM t JOIN u ON t.a = u.a AND t.c > u.id / 10",
    "SELECT t.id, u.id FROM t LEFT JOIN u ON t.a < u.a AND u.id < 15",
    # a disjunction of conjunctions over a join: each side's filters derived from it and
    # pushed below the join (NULLs, NOT, a disjunct with a condition on one side only, a
    # three-way join whose two outer inputs each get one), and left alone with a division
    "SELECT t.id, u.id FROM t JOIN u ON t.a = u.a WHERE (t.c > 1 AND u.s = 'x') OR "
    "(t.b IS NULL AND u.m < 5 AND NOT t.flag) OR (t.c <= 0 AND u.s IS NULL)",
    "SELECT t.id, u.id FROM t JOIN u ON t.a = u.a WHERE (t.b = 'x' AND u.id > 3) OR u.m > 10",
    "SELECT x.id, u.id, y.id FROM t x JOIN u ON x.a = u.a JOIN t y ON u.id = y.a "
    "WHERE (x.b = 'x' AND y.b = 'y') OR (x.b = 'y' AND y.b = 'x') OR (x.c > 2 AND y.flag)",
    "SELECT t.id, u.id FROM t JOIN u ON t.a = u.a WHERE (t.c / t.a > 1 AND u.s = 'x') OR "
    "(t.a = 0 AND u.s = 'y')",
    # outer joins whose unmatched rows are found by key (ON: equalities and one-side
    # conjuncts), a conjunct of the preserved side, two keys, the equality written backwards
    "SELECT t.id, u.id FROM t LEFT JOIN u ON t.a = u.a AND t.c > 1",
    "SELECT t.id, u.id, u.s FROM t FULL JOIN u ON t.a = u.a AND t.b = u.s AND t.flag",
    "SELECT u.id, t.id FROM t RIGHT JOIN u ON u.a = t.a AND u.m > 1 AND t.c < 3",
    "SELECT t.a, count(u.id), count(*) FROM t LEFT JOIN u ON t.a = u.a AND t.flag GROUP BY t.a",
    # uncorrelated scalar subqueries: of exactly one row (a global aggregate), and of none
    # (HAVING, a GROUP BY, OFFSET, LIMIT 0: NULL for every row)
    "SELECT id, a - (SELECT avg(a) FROM u) AS d FROM t WHERE a > (SELECT min(a) FROM u)",
    "SELECT id, (SELECT max(a) FROM u HAVING count(*) > 1000) AS m FROM t",
    "SELECT id, (SELECT count(*) FROM u WHERE id < 0 GROUP BY a ORDER BY 1 LIMIT 1) AS n FROM t",
    "SELECT id, (SELECT max(a) FROM u LIMIT 1 OFFSET 1) AS m, (SELECT min(a) FROM u LIMIT 0) AS z"
    " FROM t",
    "SELECT x.id, y.id, z.id FROM t x JOIN u y ON x.a = y.a JOIN t z ON y.id = z.id",
    "SELECT t.id, u.id FROM t, u WHERE t.b = u.s AND t.a = u.a",
    "SELECT * FROM (SELECT a, sum(c) AS sc FROM t GROUP BY a) x"
    " JOIN (SELECT a, count(*) AS n FROM u GROUP BY a) y USING (a)",
    # aggregates
    "SELECT a, count(*), count(b), count(DISTINCT b), sum(c), avg(c), min(b), max(c)"
    " FROM t GROUP BY a",
    "SELECT b, sum(a), min(d), max(d) FROM t GROUP BY b HAVING count(*) > 1",
    "SELECT count(*), sum(a), avg(c), min(a), max(b), count(DISTINCT a) FROM t",
    "SELECT count(*), sum(a), max(c) FROM t WHERE a > 100",
    "SELECT a % 2 AS p, count(*) FROM t GROUP BY p",
    "SELECT a + 1, count(*), sum(DISTINCT a) FROM t GROUP BY a + 1",
    "SELECT s, sum(m), avg(m), max(m), min(m) FROM u GROUP BY s",
    # every value many times over, its copies retracted in pieces within one time (a value's
    # count once passed below 0 midway, which MIN/MAX's arrays of values refused)
    "SELECT q1.b, max(q1.c), min(q1.d), count(*) FROM t q1 CROSS JOIN t q2 GROUP BY q1.b",
    "SELECT t.a, count(u.id), sum(u.id) FROM t LEFT JOIN u ON t.a = u.a GROUP BY t.a",
    "SELECT u.s, count(DISTINCT t.b) FROM u LEFT JOIN t ON t.a = u.a GROUP BY u.s",
    "SELECT flag, max(a) - min(a), count(*) FILTER_PLACEHOLDER FROM t GROUP BY flag",
    # DISTINCT and set operations
    "SELECT DISTINCT a, b FROM t",
    "SELECT DISTINCT a FROM t WHERE b IS NOT NULL",
    "SELECT a FROM t UNION SELECT a FROM u",
    "SELECT a FROM t UNION ALL SELECT a FROM u",
    "SELECT a FROM t INTERSECT SELECT a FROM u",
    "SELECT a FROM t INTERSECT ALL SELECT a FROM u",
    "SELECT a FROM t EXCEPT SELECT a FROM u",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    "SELECT a, b FROM t WHERE id < 30 EXCEPT SELECT a, s FROM u",
    # subqueries
    "SELECT s, total FROM (SELECT u.s, sum(t.c) AS total FROM t JOIN u ON t.a = u.a"
    " GROUP BY u.s) q WHERE total > 1",
    "SELECT id FROM t WHERE a IN (SELECT a FROM u WHERE s = 'x')",
    "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u)",
    "SELECT id, a IN (SELECT a FROM u) FROM t",
    "SELECT id, a NOT IN (SELECT a FROM u WHERE id > 20) FROM t",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
    "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.s = t.b)",
    "SELECT id, (SELECT max(u.id) FROM u WHERE u.a = t.a) FROM t",
    "SELECT id, (SELECT count(*) FROM u WHERE u.a = t.a) FROM t",
    "SELECT id FROM t WHERE c > (SELECT avg(c) FROM t t2 WHERE t2.a = t.a)",
    "SELECT id, (SELECT count(*) FROM u) FROM t",
    "SELECT id FROM t WHERE a = (SELECT min(a) FROM u)",
    "SELECT id FROM t t1 WHERE EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t1.a AND t2.id <> t1.id)",
    "SELECT b, (SELECT count(*) FROM u WHERE u.s = t.b AND u.a > t.a) FROM t",
    "SELECT a, count(*) FROM t WHERE a IN (SELECT a FROM u WHERE u.id > t.id) GROUP BY a",
    # CTEs and views over views
    "WITH big AS (SELECT * FROM t WHERE a > 1)"
    " SELECT b1.id, b2.id FROM big b1 JOIN big b2 ON b1.b = b2.b",
    "WITH s AS (SELECT a, count(*) AS n FROM t GROUP BY a)"
    " SELECT a, n FROM s WHERE n > 1 UNION ALL SELECT a, n FROM s WHERE a IS NULL",
    "SELECT b, count(*) FROM tv GROUP BY b",
    "SELECT tv.id, u.id FROM tv JOIN u ON tv.a = u.a WHERE u.s IS NOT NULL",
    # top-k
    "SELECT a, b, id FROM t ORDER BY a DESC, b, id LIMIT 5",
    "SELECT id, c FROM t ORDER BY c NULLS FIRST, id LIMIT 3 OFFSET 2",
    "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC, a LIMIT 3",
    "SELECT id FROM t ORDER BY b DESC NULLS LAST, id DESC LIMIT 4",
    # linear recursion (DuckDB's working-table semantics coincide with the fixpoint)
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10)"
    " SELECT * FROM r",
    "WITH RECURSIVE reach(x) AS (SELECT 1 UNION SELECT e.dst FROM e JOIN reach"
    " ON e.src = reach.x) SELECT * FROM reach",
    "WITH RECURSIVE paths(s, d, len) AS (SELECT src, dst, 1 FROM e UNION ALL"
    " SELECT p.s, e.dst, p.len + 1 FROM paths p JOIN e ON p.d = e.src WHERE p.len < 3)"
    " SELECT * FROM paths",
    "WITH RECURSIVE tc(s, d) AS (SELECT src, dst FROM e UNION"
    " SELECT tc.s, e.dst FROM tc JOIN e ON tc.d = e.src) SELECT s, count(*) FROM tc GROUP BY s",
    "WITH RECURSIVE dist(x, k) AS (SELECT 1, 0 UNION SELECT e.dst, dist.k + 1 FROM dist"
    " JOIN e ON e.src = dist.x WHERE dist.k < 4) SELECT x, min(k) FROM dist GROUP BY x",
]
VIEWS = [v.replace(" FILTER_PLACEHOLDER", "") for v in VIEWS]


def _compile_all() -> tuple[object, list[object]]:
    cat = catalog(BASE_VIEWS)
    return cat, [compile_view(v, cat) for v in VIEWS]


def test_enough_views() -> None:
    assert len(VIEWS) >= 60


@pytest.mark.parametrize("seed", [1, 2])
def test_naive_matches_duckdb(seed: int) -> None:
    cat, views = _compile_all()
    world = World(seed)
    for name, sql in BASE_VIEWS.items():
        world.con.execute(f"CREATE VIEW {name} AS {sql}")
    base = {n: compile_view(s, cat, name=n) for n, s in BASE_VIEWS.items()}
    bad = []
    for _ in range(4):
        bags = world.bags()
        for n, v in base.items():
            bags[n] = v.evaluate(bags)
        for sql, v in zip(VIEWS, views, strict=True):
            got, want = norm(v.evaluate(bags)), world.duck(sql)
            if got != want:
                bad.append((sql, dict(got - want), dict(want - got)))
        world.random_batch(8)
        world.sync()
    assert not bad, bad[:3]


GROUPS = 6


MODES = ["rows", "columns", "bulk", "columnar"]


def _executor(mode: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`mode_executor`, with even these small tables joined as columns once they arrive
    as columns."""
    import engine.operators.half_join as half_join

    monkeypatch.setattr(half_join, "COLUMNS_MIN_ROWS", 1)
    return mode_executor(mode, monkeypatch)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", range(GROUPS))
def test_incremental_matches_duckdb(group: int, mode: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every view equals DuckDB after every batch, its first contents sent as rows (the
    per-row kernels) or as columns (the vectorised ones: planner.mfp_columns,
    planner.aggregate_columns, engine.columns_join, which then joins even these small
    tables as columns). In "bulk", also every path a large batch takes is taken at any
    size: a reduce's first rows built as columns, a join's rows joined as a table, counted
    and sorted batches, array indexes (a `count(*)` over 4,096 rows or more read 0 once,
    on a path these small tables never took). "columnar" is "bulk" on the columnar executor
    (`--executor columnar`: interned rows, compiled kernels)."""
    executor = _executor(mode, monkeypatch)
    mine = [s for i, s in enumerate(VIEWS) if i % GROUPS == group]
    replay_against_duckdb(World(100 + group), mine, batches=21, base_views=BASE_VIEWS,
                          columns=mode != "rows", executor=executor)


# The views whose every row DuckDB computes when `c` holds NaN or infinity (casting NaN to an
# integer is an error, in DuckDB as here).
NAN_VIEWS = [s for s in VIEWS if "CAST(c AS INTEGER)" not in s]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", range(GROUPS))
def test_incremental_matches_duckdb_with_nan(group: int, mode: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As `test_incremental_matches_duckdb`, with NaN (two NaN objects, so rows are made
    canonical where they enter) and infinity among the DOUBLE values: DuckDB groups, joins,
    orders and compares NaN as one value greater than all others."""
    executor = _executor(mode, monkeypatch)
    mine = [s for i, s in enumerate(NAN_VIEWS) if i % GROUPS == group]
    replay_against_duckdb(World(300 + group, floats=NAN_FLOATS), mine, batches=21,
                          base_views=BASE_VIEWS, columns=mode != "rows", executor=executor)


def test_constants_enter_at_the_first_epoch_read() -> None:
    """A view built to be read from epoch 5 (`build(..., start=5)`, as the server builds a
    view created then) holds its constants' rows from epoch 5 on, as its tables' rows: a
    global aggregate's row for an empty input is not first sent at epoch 0 and retracted at 5
    (at two times, such a row and its retraction never cancel in an arrangement, and a cross
    join with the aggregate's value joined every row three times). The contents still equal
    DuckDB's."""
    import engine

    world = World(7)
    cat = catalog()
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in SCHEMAS:
        handles[name], sources[name] = df.new_input(name)
        handles[name].advance_to(5)
    sqls = ["SELECT count(*), max(a) FROM t",
            "SELECT id, a - (SELECT avg(a) FROM u) AS d FROM t"]
    caps = [compile_view(s, cat).build(df, sources, start=5).capture() for s in sqls]
    for name, rows in world.rows.items():
        handles[name].send([(r, 1) for r in rows])
        handles[name].advance_to(6)
    df.run()
    world.sync()
    for sql, cap in zip(sqls, caps, strict=True):
        assert {t for _, t, _ in cap.updates} == {(5,)}, sql
        assert norm(cap.snapshot()) == world.duck(sql), sql
