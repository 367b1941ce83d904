"""Recursive views: the paper's connected components and reachability against networkx under
random edge changes; fixpoint-semantics views (mutual, non-linear, aggregates and negation in
the recursion, nested recursion) against the naive iterate-until-unchanged evaluator and, since
that evaluator shares planner code with the engine lowering, against independent plain-Python
fixpoints written from the SQL (after every batch); and the iteration limit.
"""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx
import pytest
from planner_support import catalog, norm

import engine
from planner import PlanError, compile_view

CC = """
WITH RECURSIVE
  und(a, b) AS (SELECT src, dst FROM e WHERE src IS NOT NULL AND dst IS NOT NULL
                UNION SELECT dst, src FROM e WHERE src IS NOT NULL AND dst IS NOT NULL),
  labels(node, label) AS (
    SELECT a, a FROM und
    UNION
    SELECT und.b, min(l.label) FROM und JOIN labels l ON und.a = l.node GROUP BY und.b)
SELECT node, min(label) FROM labels GROUP BY node
"""

REACH = """
WITH RECURSIVE reach(x) AS (
  SELECT 1 UNION SELECT e.dst FROM e JOIN reach ON e.src = reach.x)
SELECT x FROM reach
"""

FIXPOINT_VIEWS = {
    "mutual_even_odd": """
WITH RECURSIVE ev(x) AS (SELECT 1 UNION SELECT e.dst FROM od JOIN e ON e.src = od.x),
               od(x) AS (SELECT e.dst FROM ev JOIN e ON e.src = ev.x)
SELECT 'ev', x FROM ev UNION ALL SELECT 'od', x FROM od""",
    "nonlinear_tc": """
WITH RECURSIVE tc(s, d) AS (
  SELECT src, dst FROM e UNION SELECT a.s, b.d FROM tc a JOIN tc b ON a.d = b.s)
SELECT * FROM tc""",
    "agg_in_recursion": CC,
    "negation_in_recursion": """
WITH RECURSIVE r(x) AS (
  SELECT 1 UNION
  SELECT e.dst FROM e JOIN r ON e.src = r.x
  WHERE NOT EXISTS (SELECT 1 FROM r r2 WHERE r2.x = e.dst + 100))
SELECT x FROM r""",
    "nested_recursion": """
WITH RECURSIVE r(x) AS (
  SELECT 1 UNION
  SELECT q.y FROM (
    WITH RECURSIVE s(y) AS (SELECT x FROM r
                            UNION SELECT e.dst FROM s JOIN e ON e.src = s.y WHERE e.dst < 6)
    SELECT y FROM s) q)
SELECT x FROM r""",
    "count_in_recursion": """
WITH RECURSIVE deg(n, k) AS (
  SELECT src, 0 FROM e WHERE src IS NOT NULL
  UNION
  SELECT e.src, count(*) FROM e JOIN deg ON e.dst = deg.n WHERE deg.k >= 0 GROUP BY e.src)
SELECT n, max(k) FROM deg GROUP BY n""",
}


def _edges(rng: random.Random, n: int = 20) -> list[tuple[int | None, int | None]]:
    return [(rng.randint(1, 12), rng.randint(1, 12)) for _ in range(n)] + [(None, 3), (4, None)]


def _run(sql: str, seed: int, batches: int = 20) -> None:
    """Maintain the view under random edge changes; check against expected(edges) each time."""
    cat = catalog()
    view = compile_view(sql, cat)
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in ("t", "u", "e"):
        handles[name], sources[name] = df.new_input(name)
    cap = view.build(df, sources).capture()
    rng = random.Random(seed)
    edges = _edges(rng)
    handles["e"].send([(r, 1) for r in edges])
    for epoch in range(1, batches + 1):
        handles["e"].advance_to(epoch)
        for h in ("t", "u"):
            handles[h].advance_to(epoch)
        df.run()
        yield norm(cap.snapshot()), list(edges), view
        for _ in range(3):
            if rng.random() < 0.5 and edges:
                r = edges.pop(rng.randrange(len(edges)))
                handles["e"].send([(r, -1)])
            else:
                r = (rng.randint(1, 12), rng.randint(1, 12))
                edges.append(r)
                handles["e"].send([(r, 1)])


@pytest.mark.parametrize("seed", [1, 2])
def test_connected_components_matches_networkx(seed: int) -> None:
    for got, edges, _ in _run(CC, seed):
        g = nx.Graph()
        g.add_edges_from((a, b) for a, b in edges if a is not None and b is not None)
        want = Counter()
        for comp in nx.connected_components(g):
            for node in comp:
                want[(node, min(comp))] += 1
        assert got == want


@pytest.mark.parametrize("seed", [3, 4])
def test_reachability_matches_bfs(seed: int) -> None:
    for got, edges, _ in _run(REACH, seed):
        g = nx.DiGraph()
        g.add_node(1)
        g.add_edges_from((a, b) for a, b in edges if a is not None and b is not None)
        seen = nx.descendants(g, 1) | {1}
        # SQL reaches a NULL dst too (the join is on src only)
        seen |= {b for a, b in edges if b is None and a in seen}
        want = Counter({(x,): 1 for x in seen})
        assert got == want


@pytest.mark.parametrize("name", sorted(FIXPOINT_VIEWS))
def test_fixpoint_views_match_naive_evaluator(name: str) -> None:
    for got, edges, view in _run(FIXPOINT_VIEWS[name], 7, batches=12):
        sources = {"t": {}, "u": {}, "e": Counter(edges)}
        assert got == norm(view.evaluate(sources)), name


# ------------------------------------------------------------------ independent fixpoints
#
# Plain-Python least fixpoints written from each view's SQL, not from its plan: iterate the CTE
# equations from empty bindings (RECURSION.md: one round recomputes every binding in written
# order, each seeing this round's value of earlier bindings) until a round changes nothing.
# Joins follow SQL: a NULL key matches nothing. ``edges`` is a bag (list with repeats).

Edges = list[tuple[int | None, int | None]]


def _until_stable(step, start):  # type: ignore[no-untyped-def]
    state = start
    for _ in range(10_000):
        new = step(state)
        if new == state:
            return state
        state = new
    raise AssertionError("no fixpoint within 10000 rounds")


def expected_mutual_even_odd(edges: Edges) -> Counter:
    # ev = {1} UNION (od JOIN e ON e.src = od.x).dst   (a set)
    # od = (ev JOIN e ON e.src = ev.x).dst             (a bag: one row per joined pair)
    def step(state):  # type: ignore[no-untyped-def]
        _ev, od = state
        ev = frozenset({1} | {d for s, d in edges if s is not None and s in od})
        od = Counter(d for s, d in edges if s is not None and s in ev)
        return ev, od
    ev, od = _until_stable(step, (frozenset(), Counter()))
    return Counter({("ev", x): 1 for x in ev}) + Counter({("od", x): c for x, c in od.items()})


def expected_negation_in_recursion(edges: Edges) -> Counter:
    # r = {1} UNION {e.dst | e.src = r.x AND NOT EXISTS (r2 in r: r2.x = e.dst + 100)}
    def step(r):  # type: ignore[no-untyped-def]
        out = {1}
        for s, d in edges:
            if s is None or s not in r:
                continue
            blocked = d is not None and any(x is not None and x == d + 100 for x in r)
            if not blocked:
                out.add(d)
        return frozenset(out)
    return Counter({(x,): 1 for x in _until_stable(step, frozenset())})


def expected_nested_recursion(edges: Edges) -> Counter:
    # r = {1} UNION s(r), where s(seed) = seed UNION {e.dst | e.src = s.y AND e.dst < 6}
    def inner(seed):  # type: ignore[no-untyped-def]
        def step_s(cur):  # type: ignore[no-untyped-def]
            return frozenset(seed | {d for a, d in edges if a is not None and a in cur
                                     and d is not None and d < 6})
        return _until_stable(step_s, frozenset())

    def step(r):  # type: ignore[no-untyped-def]
        return frozenset({1} | inner(r))
    return Counter({(x,): 1 for x in _until_stable(step, frozenset())})


def expected_count_in_recursion(edges: Edges) -> Counter:
    # deg = {(src, 0) | src NOT NULL} UNION
    #       {(e.src, count(*)) | e JOIN deg ON e.dst = deg.n WHERE deg.k >= 0 GROUP BY e.src}
    # view: SELECT n, max(k) FROM deg GROUP BY n   (GROUP BY keeps a NULL group)
    def step(deg):  # type: ignore[no-untyped-def]
        out = {(s, 0) for s, _ in edges if s is not None}
        counts: Counter = Counter()
        for s, d in edges:
            for n, k in deg:
                if d is not None and d == n and k >= 0:
                    counts[s] += 1
        out |= {(s, c) for s, c in counts.items()}
        return frozenset(out)
    best: dict = {}
    for n, k in _until_stable(step, frozenset()):
        best[n] = max(k, best.get(n, k))
    return Counter({(n, k): 1 for n, k in best.items()})


INDEPENDENT = {
    "mutual_even_odd": expected_mutual_even_odd,
    "negation_in_recursion": expected_negation_in_recursion,
    "nested_recursion": expected_nested_recursion,
    "count_in_recursion": expected_count_in_recursion,
}


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
@pytest.mark.parametrize("seed", [7, 8])
def test_fixpoint_views_match_independent_python(name: str, seed: int) -> None:
    checked = 0
    for got, edges, _ in _run(FIXPOINT_VIEWS[name], seed, batches=12):
        assert got == norm(INDEPENDENT[name](edges)), (name, edges)
        checked += 1
    assert checked == 12


def test_independent_fixpoints_on_a_fixed_graph() -> None:
    """The Python fixpoints themselves, on a graph worked out by hand."""
    edges: Edges = [(1, 2), (2, 3), (3, 1), (3, 1), (2, 7), (7, 104), (None, 2), (3, None)]
    # ev: 1, then successors of od = {2, 1, 104, None} -> 3, 7, 2; od: successors of ev
    ev_od = expected_mutual_even_odd(edges)
    assert {x for (k, x) in ev_od if k == "ev"} == {1, 2, 3, 7, 104, None}
    assert ev_od[("od", 1)] == 2  # two copies of the edge (3, 1)
    # only edges into nodes < 6 count: 1 -> 2 -> 3 -> 1
    assert expected_nested_recursion(edges) == Counter({(1,): 1, (2,): 1, (3,): 1})
    # no dst + 100 is ever in r, so r is plain reachability (a NULL dst included)
    neg = expected_negation_in_recursion(edges)
    assert set(neg) == {(1,), (2,), (3,), (7,), (104,), (None,)}
    # round 2: deg rows per node 1 -> counts {1: 1, 2: 2, 3: 2, NULL: 1}; round 3: nodes 1, 2,
    # 3 have two rows each -> {1: 2, 2: 3, 3: 4, NULL: 2}; round 4 repeats round 3
    assert expected_count_in_recursion(edges) == Counter(
        {(1, 2): 1, (2, 3): 1, (3, 4): 1, (7, 0): 1, (None, 2): 1})


def test_nonlinear_tc_is_the_transitive_closure() -> None:
    for got, edges, _ in _run(FIXPOINT_VIEWS["nonlinear_tc"], 9, batches=8):
        g = nx.DiGraph()
        g.add_edges_from((a, b) for a, b in edges if a is not None and b is not None)
        # reflexive=False: (a, a) only when a lies on a cycle, as in SQL
        want = Counter({e: 1 for e in nx.transitive_closure(g, reflexive=False).edges})
        # rows with a NULL endpoint follow SQL join semantics; the naive test covers them
        assert Counter({r: c for r, c in got.items() if None not in r}) == want


def test_recursive_view_is_a_nested_scope() -> None:
    text = compile_view(FIXPOINT_VIEWS["nested_recursion"], catalog()).explain()
    assert text.count("LetRec") == 2
    inner = text.index("LetRec", text.index("LetRec") + 1)
    assert text[:inner].count("in\n") == 0  # the inner LetRec sits inside the outer binding


DIVERGES = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"


def test_iteration_limit_engine_raises() -> None:
    view = compile_view(DIVERGES, catalog(), iteration_limit=30)
    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in ("t", "u", "e"):
        handles[name], sources[name] = df.new_input(name)
    view.build(df, sources).capture()
    for h in handles.values():
        h.advance_to(1)
    with pytest.raises(engine.IterationLimitExceeded, match="30"):
        df.run()


def test_iteration_limit_naive_raises() -> None:
    view = compile_view(DIVERGES, catalog(), iteration_limit=25)
    with pytest.raises(PlanError) as info:
        view.evaluate({"t": {}, "u": {}, "e": {}})
    assert info.value.code == "recursion_limit" and "25" in info.value.message


def test_linear_recursion_matches_duckdb() -> None:
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE e (src INTEGER, dst INTEGER)")
    rng = random.Random(5)
    edges = [(a, b) for a, b in _edges(rng) if a is None or b is None or a < b]  # a DAG
    con.executemany("INSERT INTO e VALUES (?, ?)", [list(r) for r in edges])
    for sql in (REACH, "WITH RECURSIVE p(s, d, n) AS (SELECT src, dst, 1 FROM e UNION ALL "
                "SELECT p.s, e.dst, p.n + 1 FROM p JOIN e ON p.d = e.src) SELECT * FROM p"):
        view = compile_view(sql, catalog())
        got = norm(view.evaluate({"t": {}, "u": {}, "e": Counter(edges)}))
        assert got == norm(Counter(con.execute(sql).fetchall()))


NARROWED = [
    # an INTEGER anchor, a DOUBLE step: DuckDB casts the step's rows to the anchor's types
    "WITH RECURSIVE r(x, n) AS (SELECT 100, 0 UNION ALL SELECT x / 3, n + 1 FROM r"
    " WHERE n < 4) SELECT x, n FROM r",
    "WITH RECURSIVE r(node, cost) AS (SELECT src, 0 FROM e WHERE src < 4 UNION"
    " SELECT e.dst, r.cost + 0.75 FROM r JOIN e ON r.node = e.src WHERE r.cost < 3)"
    " SELECT node, cost FROM r",
    # a DECIMAL(8,2) anchor, a DECIMAL step of three places: rounded to two
    "WITH RECURSIVE r(id, v) AS (SELECT id, m FROM u WHERE m > 0 UNION ALL"
    " SELECT id, v * 1.125 FROM r WHERE v < 20) SELECT id, v FROM r",
    # a SMALLINT-typed anchor whose step is INTEGER
    "WITH RECURSIVE r(x) AS (SELECT CAST(a AS SMALLINT) FROM t WHERE a > 0 UNION"
    " SELECT x * 2 + 1 FROM r WHERE x < 500) SELECT x, count(*) FROM r GROUP BY x",
]


@pytest.mark.parametrize("sql", NARROWED)
def test_recursive_rows_take_the_anchors_types(sql: str) -> None:
    """A recursive CTE's columns have its anchor's types, and the rows of its recursive
    branch are cast to them, as DuckDB casts them (`x / 3` of an INTEGER `x` is 33, not
    33.3, and the next step reads 33): maintained under random changes, equal to DuckDB
    after every batch."""
    from planner_support import World, replay_against_duckdb

    world = World(3)
    world.con.execute(f"CREATE VIEW v AS {sql}")
    types = [r[1] for r in world.con.execute("DESCRIBE v").fetchall()]
    assert [c.type for c in compile_view(sql, catalog()).columns] == types
    replay_against_duckdb(world, [sql], batches=8)


def test_semi_join_on_the_cte_under_union_all_is_the_fixpoint() -> None:
    """RECURSION.md's example: under UNION ALL a semi-join on the CTE (IN, EXISTS, = ANY)
    yields each edge whose source the CTE holds once (the fixpoint, maintained and naive),
    where DuckDB's working table yields it once per step that reaches the source."""
    import duckdb

    edges = [(1, 2), (2, 3), (1, 3), (3, 4)]
    con = duckdb.connect()
    con.execute("CREATE TABLE e (src INTEGER, dst INTEGER)")
    con.executemany("INSERT INTO e VALUES (?, ?)", [list(r) for r in edges])
    for where in ("e.src IN (SELECT x FROM r)", "EXISTS (SELECT 1 FROM r WHERE r.x = e.src)",
                  "e.src = ANY (SELECT x FROM r)"):
        sql = f"WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT e.dst FROM e WHERE {where}) SELECT x FROM r"
        view = compile_view(sql, catalog())
        df = engine.Dataflow()
        handles, sources = {}, {}
        for name in ("t", "u", "e"):
            handles[name], sources[name] = df.new_input(name)
        cap = view.build(df, sources).capture()
        for edge in edges:
            handles["e"].insert(edge)
        for h in handles.values():
            h.advance_to(1)
        df.run()
        fixpoint = Counter({(1,): 1, (2,): 1, (3,): 2, (4,): 1})
        assert Counter(cap.snapshot()) == fixpoint
        assert norm(view.evaluate({"t": {}, "u": {}, "e": Counter(edges)})) == norm(fixpoint)
        assert Counter(con.execute(sql).fetchall()) == fixpoint + Counter({(4,): 1})
