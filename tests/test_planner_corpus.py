"""Classes of wrong answers and refusals found by an outside SQL corpus (issue 13), each as
oracle views: maintained under random INSERT/UPDATE/DELETE batches, the view equals DuckDB's
answer to the same SELECT after every batch, and batching the same updates differently yields
the same per-transaction change sets (the check of test_planner_batching).

Classes: aggregates of an outer query written inside a subquery; ``op ANY/ALL (subquery)``
with SQL's 3-valued logic, plain and correlated; empty IN lists; refusals that must name the
construct (WITH RECURSIVE ... USING KEY, BLOB literals); parenthesised joins in FROM; LATERAL.
"""

from __future__ import annotations

from collections import Counter

import pytest
import test_planner_batching as batching
from planner_support import World, catalog, norm, replay_against_duckdb, take_bulk_paths

from planner import PlanError, compile_view

OUTER_AGG = [
    "SELECT (SELECT max(a)) FROM t",
    "SELECT (SELECT sum(a)), (SELECT count(*) FROM u WHERE u.a < min(t.c) + 2) FROM t",
    "SELECT CASE WHEN 1 IN (SELECT (SELECT max(t.a))) THEN 2 ELSE NULL END FROM t",
    "SELECT 3 IN (SELECT min(t.a) UNION ALL SELECT a FROM u) FROM t",
    "SELECT EXISTS (SELECT u.a + min(t1.a) FROM u WHERE u.id > 20) FROM t t1",
    "SELECT (SELECT count(*) FROM u WHERE u.a <= max(t.a) - 3) FROM t",
    "SELECT b, (SELECT sum(t.c)), (SELECT count(t.a) + 1) FROM t GROUP BY b",
    "SELECT a, (SELECT max(u.a) + count(t.id) FROM u WHERE u.a < t.a) FROM t GROUP BY a",
    "SELECT a FROM t GROUP BY a HAVING EXISTS (SELECT 1 FROM u WHERE u.a > max(t.c))",
    "SELECT (SELECT sum(u.a * max(t.a)) FROM u) FROM t",
    "SELECT id FROM t WHERE a IN (SELECT max(a) FROM u)",
    # the aggregate mixes inner and outer columns, or names an inner table: the subquery's own
    "SELECT id, (SELECT sum(u.a + t.a) FROM u) FROM t",
    "SELECT id, (SELECT max(a) FROM u) FROM t",
]

ANY_ALL = [
    "SELECT id, a > ANY (SELECT a FROM u), a < ALL (SELECT a FROM u) FROM t",
    "SELECT id, a = ANY (SELECT a FROM u WHERE u.s = t.b),"
    " a <> ALL (SELECT a FROM u WHERE u.s = t.b) FROM t",
    "SELECT id, a <= ALL (SELECT a FROM u WHERE u.id > t.id),"
    " a >= SOME (SELECT a FROM u WHERE u.id < t.id) FROM t",
    "SELECT id FROM t WHERE c < ALL (SELECT m FROM u WHERE u.a = t.a)",
    "SELECT id FROM t WHERE NOT (a >= ANY (SELECT a FROM u WHERE a IS NOT NULL))",
    # empty subquery: ALL is TRUE and ANY is FALSE, even for a NULL left side
    "SELECT id, a > ALL (SELECT a FROM u WHERE a > 100), a > ANY (SELECT a FROM u WHERE a > 100)"
    " FROM t",
    "SELECT a, count(*) FROM t WHERE a = ANY (SELECT u.a FROM u WHERE u.id > t.id) GROUP BY a",
]

EMPTY_IN = [
    "SELECT id, a IN (), a NOT IN (), NULL IN (), NULL NOT IN () FROM t",
    "SELECT id FROM t WHERE NULL NOT IN ()",
    "SELECT id FROM t WHERE NOT (a IN ())",
]

# FROM (a CROSS JOIN b): a parenthesised join, optionally aliased and renamed
PAREN_JOIN = [
    "SELECT t.id, u.id FROM (t CROSS JOIN u) WHERE t.a = u.a",
    "SELECT t.id, e.dst FROM (t JOIN u ON t.a = u.a) JOIN e ON e.src = u.id",
    "SELECT j.b, j.s, j.id_1, e.dst FROM ((t CROSS JOIN u)) AS j, e WHERE j.id = e.src",
    "SELECT * FROM (u CROSS JOIN e) AS j WHERE j.a = j.src",
    "SELECT x.id, t.id FROM (SELECT id FROM u) x CROSS JOIN (t LEFT JOIN e ON t.a = e.src)"
    " WHERE x.id = t.a",
    "SELECT count(*), sum(a1) FROM (t CROSS JOIN u) j(i1, a1) WHERE a1 > 2",
]

# LATERAL: correlated with the FROM items to its left, decorrelated like a subquery
LATERAL = [
    "SELECT t.id, s.z FROM t, LATERAL (SELECT t.a + 1 AS z) s",
    "SELECT t.id, s.* FROM t CROSS JOIN LATERAL (SELECT u.id AS uid, u.s FROM u WHERE u.a = t.a) s",
    "SELECT t.id, s.uid FROM t LEFT JOIN LATERAL (SELECT u.id AS uid FROM u WHERE u.a < t.a"
    " ORDER BY u.id LIMIT 2) s ON true",
    "SELECT t.id, s.n FROM t JOIN LATERAL (SELECT count(*) AS n FROM u WHERE u.a = t.a) s"
    " ON s.n > 0",
    "SELECT t.id, s.k FROM t LEFT JOIN LATERAL (SELECT u.id AS k FROM u WHERE u.s = t.b) s"
    " ON s.k > t.id",
    "SELECT * FROM LATERAL (SELECT 1 AS one) x, t WHERE t.a = x.one",
    "SELECT t.id, x.m FROM t, LATERAL (SELECT max(u.m) AS m FROM u WHERE u.id > t.id) x(m)",
    "SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u, LATERAL (SELECT u.a + t.a AS z) q"
    " WHERE q.z > 5)",
    # without the keyword, as DuckDB: a FROM subquery naming columns to its left is lateral
    "SELECT * FROM t, (SELECT t.a + 1 AS z) s",
    "SELECT t.id, s.a FROM t LEFT JOIN (SELECT u.a FROM u WHERE u.a < t.a) s ON s.a > 0",
]

VIEWS = OUTER_AGG + ANY_ALL + EMPTY_IN + PAREN_JOIN + LATERAL


def test_issue_examples() -> None:
    """The smallest cases of the issue, with the answers DuckDB gives."""
    cat = catalog()
    t = Counter({(i, i, None, None, None, None): 1 for i in (1, 2, 3)})
    bags = {"t": t, "u": Counter(), "e": Counter()}
    assert dict(compile_view("SELECT (SELECT max(a)) FROM t", cat).evaluate(bags)) == {(3,): 1}
    v = compile_view("SELECT CASE WHEN 1 IN (SELECT (SELECT max(t.a))) THEN 2 ELSE NULL END "
                     "FROM t", cat)
    assert dict(v.evaluate(bags)) == {(None,): 1}
    v = compile_view("SELECT NULL IN (), NULL NOT IN (), 1 IN (), 1 NOT IN ()", cat)
    assert dict(v.evaluate(bags)) == {(None, None, False, True): 1}
    v = compile_view("SELECT 2 > ALL (SELECT a FROM u), NULL > ALL (SELECT a FROM u),"
                     " 2 > ANY (SELECT a FROM u)", cat)
    assert dict(v.evaluate(bags)) == {(True, True, False): 1}
    bags["u"] = Counter({(1, 1, None, None): 1, (2, None, None, None): 1})
    v = compile_view("SELECT 2 > ALL (SELECT a FROM u), 0 > ALL (SELECT a FROM u),"
                     " 2 = ANY (SELECT a FROM u), 1 = ANY (SELECT a FROM u)", cat)
    assert dict(v.evaluate(bags)) == {(None, False, None, True): 1}


@pytest.mark.parametrize("sql", VIEWS)
def test_naive_matches_duckdb(sql: str) -> None:
    world = World(7)
    view = compile_view(sql, catalog())
    for batch in range(4):
        got, want = norm(view.evaluate(world.bags())), world.duck(sql)
        assert got == want, (batch, dict(got - want), dict(want - got))
        world.random_batch(8)
        world.sync()


GROUPS = 3


@pytest.mark.parametrize("bulk", [False, True], ids=["rows", "bulk"])
@pytest.mark.parametrize("group", range(GROUPS))
def test_incremental_matches_duckdb(group: int, bulk: bool,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Views built before any data arrives, then 21 random write batches; with `bulk`, the
    first contents as columns and every path of large batches taken (`take_bulk_paths`)."""
    if bulk:
        take_bulk_paths(monkeypatch)
    cat = catalog()
    world = World(300 + group)
    mine = [s for i, s in enumerate(VIEWS) if i % GROUPS == group]
    replay_against_duckdb(world, mine, cat, columns=bulk)


@pytest.mark.parametrize("sql", [OUTER_AGG[1], OUTER_AGG[5], OUTER_AGG[7], ANY_ALL[1],
                                 ANY_ALL[2], ANY_ALL[5], EMPTY_IN[0], PAREN_JOIN[3], LATERAL[2], LATERAL[4], LATERAL[9]])
def test_batching_invariance(sql: str) -> None:
    batching.test_one_per_transaction_equals_one_transaction(sql)


@pytest.mark.parametrize("sql,code,line,column", [
    ("WITH RECURSIVE r(i, p) USING KEY (i) AS (SELECT 1, 2 UNION SELECT i + 1, 3 FROM r\n"
     "WHERE i < 3) SELECT * FROM r", "unsupported", 1, 35),
    ("SELECT id, a > ANY ([1, 2]) FROM t", "unsupported", 1, 12),
    # an aggregate of the outer block inside a subquery of its WHERE / GROUP BY (DuckDB too)
    ("SELECT * FROM t WHERE a IN (SELECT max(t.a) FROM u)", "grouping_error", 1, 36),
    ("SELECT b FROM t GROUP BY (SELECT max(t.a))", "grouping_error", 1, 34),
    ("SELECT * FROM t RIGHT JOIN LATERAL (SELECT t.a) s ON true", "unsupported", 1, 28),
    ("CREATE VIEW w AS\nSELECT id, x'303132' FROM t", "unsupported", 2, 12),
])
def test_refusals_name_the_construct(sql: str, code: str, line: int, column: int) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    e = info.value
    assert (e.code, e.line, e.column) == (code, line, column), e
