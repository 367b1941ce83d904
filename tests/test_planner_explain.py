"""Golden EXPLAIN tests: the optimised plan of representative views, printed as stable indented
text, is pinned in tests/golden/planner/<name>.txt (regenerate with PLANNER_UPDATE_GOLDEN=1 and
review the diff). Also unit tests of individual rewrite rules."""

from __future__ import annotations

import os
import pathlib

import pytest
from planner_support import catalog

from planner import compile_view
from planner.ir import (
    Agg,
    Call,
    Col,
    FlatMap,
    Get,
    Join,
    Let,
    Lit,
    Mfp,
    Negate,
    Reduce,
    Threshold,
    TopK,
    Union,
)
from planner.rewrites import (
    distribute_mfps,
    fold_constants,
    join_keys_from_where,
    narrow_lets,
    pushdown_predicates,
)

GOLDEN = pathlib.Path(__file__).parent / "golden" / "planner"

CASES = {
    "filter_project": "SELECT id, a + 1 AS a1 FROM t WHERE a > 2 AND b LIKE 'x%'",
    "equi_join_from_where": "SELECT t.id, u.s FROM t, u WHERE t.a = u.a AND t.c > 1",
    "left_join": "SELECT t.id, u.id FROM t LEFT JOIN u ON t.a = u.a",
    "join_order": "SELECT t1.id, t2.id, u1.s FROM u u2, t t1, e, t t2, u u1 "
                  "WHERE t1.a = e.src AND e.dst = t2.a AND t2.id = u1.id AND u1.a = u2.a "
                  "AND u2.s = 'x' AND t1.c > t2.c",
    "delta_join": "SELECT e1.src, e3.dst, t.id FROM e e1, e e2, e e3, t "
                  "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = t.a",
    "group_by_having": "SELECT a, count(*), sum(c) FROM t GROUP BY a HAVING count(*) > 1",
    "global_aggregate": "SELECT count(*), max(c) FROM t",
    "exists_correlated": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
    "not_in": "SELECT id FROM t WHERE a NOT IN (SELECT a FROM u)",
    "comma_join_with_in": "SELECT t.id, u.s FROM t, u WHERE t.a = u.a AND t.id IN "
                          "(SELECT src FROM e)",
    "scalar_subquery": "SELECT id, (SELECT max(u.id) FROM u WHERE u.a = t.a) FROM t",
    "except_all": "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    "top_k": "SELECT a, b FROM t ORDER BY a DESC NULLS FIRST, b LIMIT 3 OFFSET 1",
    "cte_shared": "WITH big AS (SELECT * FROM t WHERE a > 1) "
                  "SELECT x.id, y.id FROM big x JOIN big y ON x.b = y.b",
    "recursive_reach": "WITH RECURSIVE r(x) AS (SELECT 1 UNION SELECT e.dst FROM e JOIN r "
                       "ON e.src = r.x) SELECT x FROM r",
    "mutual_recursion": "WITH RECURSIVE ev(x) AS (SELECT 1 UNION SELECT e.dst FROM od JOIN e "
                        "ON e.src = od.x), od(x) AS (SELECT e.dst FROM ev JOIN e "
                        "ON e.src = ev.x) SELECT x FROM od",
}


def check_golden(name: str, sql: str, directory: pathlib.Path = GOLDEN) -> None:
    """EXPLAIN of sql equals directory/<name>.txt. Only PLANNER_UPDATE_GOLDEN=1 writes the
    file; a missing file is a failure, or deleting a golden file would make its test pass."""
    text = compile_view(sql, catalog()).explain() + "\n"
    path = directory / f"{name}.txt"
    if os.environ.get("PLANNER_UPDATE_GOLDEN") == "1":
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(f"-- {sql}\n" + text)
    if not path.exists():
        pytest.fail(f"golden file {path} is missing: run with PLANNER_UPDATE_GOLDEN=1 to "
                    "create it, then review it")
    expected = path.read_text().split("\n", 1)[1]
    assert text == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_explain_golden(name: str) -> None:
    check_golden(name, CASES[name])


def test_missing_golden_file_fails(tmp_path: pathlib.Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNER_UPDATE_GOLDEN", raising=False)
    with pytest.raises(pytest.fail.Exception, match="missing"):
        check_golden("absent", CASES["top_k"], tmp_path)
    assert not (tmp_path / "absent.txt").exists()
    monkeypatch.setenv("PLANNER_UPDATE_GOLDEN", "1")
    check_golden("absent", CASES["top_k"], tmp_path)  # writes it
    monkeypatch.delenv("PLANNER_UPDATE_GOLDEN")
    check_golden("absent", CASES["top_k"], tmp_path)  # and now it is the reference


def test_every_case_has_a_golden_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(CASES)


def test_explain_is_deterministic() -> None:
    sql = CASES["scalar_subquery"]
    assert compile_view(sql, catalog()).explain() == compile_view(sql, catalog()).explain()
    assert "0x" not in compile_view(sql, catalog()).explain()


def _gt(i: int, v: int) -> Call:
    return Call("gt", (Col(i), Lit(v, "INTEGER")), "BOOLEAN")


def test_pushdown_predicates_splits_across_join() -> None:
    j = Join(Get("t", 2), Get("u", 2))
    plan = Mfp(j, (), (_gt(0, 1), _gt(3, 2)), (0, 1, 2, 3))
    out = pushdown_predicates(plan)
    assert isinstance(out, Mfp) and not out.filter
    inner = out.input
    assert isinstance(inner, Join)
    assert inner.left == Mfp(Get("t", 2), (), (_gt(0, 1),), (0, 1))
    assert inner.right == Mfp(Get("u", 2), (), (_gt(1, 2),), (0, 1))


def test_join_keys_from_where_adds_not_null_filters() -> None:
    eq = Call("eq", (Col(0), Col(2)), "BOOLEAN")
    out = join_keys_from_where(Mfp(Join(Get("t", 2), Get("u", 2)), (), (eq,), (0, 1, 2, 3)))
    assert isinstance(out, Mfp) and not out.filter
    assert isinstance(out.input, Join) and out.input.keys == ((0, 0),)
    assert "IS NULL" in str(out.input.left.filter[0].args[0].func.upper()) or \
        out.input.left.filter[0].func == "not"


def test_fold_constants_drops_true_and_empties_false() -> None:
    assert fold_constants(Mfp(Get("t", 1), (), (Lit(True, "BOOLEAN"),), (0,))) == Get("t", 1)
    out = fold_constants(Mfp(Get("t", 1), (), (Lit(None, "BOOLEAN"),), (0,)))
    assert out.rows == () and out.arity == 1


def _value_of(plan: object) -> object:
    assert isinstance(plan, Let)
    return plan.value


def test_narrow_lets_keeps_the_columns_readers_demand() -> None:
    """A binding's value keeps the columns its readers project, filter on, join on, group
    and aggregate by; its Gets put NULL in the others. A reader that depends on whole rows
    (a threshold, a top-k) keeps every column."""
    t, g = Get("t", 5), Get("l0", 5, True)
    two = Union((Mfp(g, (), (_gt(2, 1),), (0,)), Mfp(g, (), (), (1,))))
    out = narrow_lets(Let("l0", t, two))
    assert _value_of(out) == Mfp(t, (), (), (0, 1, 2))
    narrowed = Get("l0", 3, True)
    assert all(isinstance(k, Mfp) and k.input.input == narrowed
               for k in out.body.inputs)  # type: ignore[attr-defined]
    grouped = Reduce(g, (1,), (Agg("sum", 3, False, "HUGEINT"),))
    assert _value_of(narrow_lets(Let("l0", t, grouped))) == Mfp(t, (), (), (1, 3))
    joined = Mfp(Join(g, Get("u", 2), ((4, 0),)), (), (), (0, 6))
    assert _value_of(narrow_lets(Let("l0", t, joined))) == Mfp(t, (), (), (0, 4))
    mapped = Mfp(g, (Call("add", (Col(2), Col(3)), "INTEGER"),), (_gt(5, 0),), (1,))
    assert _value_of(narrow_lets(Let("l0", t, mapped))) == Mfp(t, (), (), (1, 2, 3))
    series = Mfp(FlatMap(g, "generate_series", (Col(2), Col(3)), 1), (), (), (0, 5))
    assert _value_of(narrow_lets(Let("l0", t, series))) == Mfp(t, (), (), (0, 2, 3))
    for whole in (Threshold(g), TopK(g, (), (), 2), Mfp(Negate(Threshold(g)), (), (), (0,))):
        assert narrow_lets(Let("l0", t, whole)) == Let("l0", t, whole)


def test_distribute_mfps_moves_a_projection_into_a_union() -> None:
    a, b, c = Get("t", 3), Get("u", 3), Get("e", 3)
    out = distribute_mfps(Mfp(Union((a, Negate(Union((b, c))))), (), (), (2,)))
    assert out == Union((Mfp(a, (), (), (2,)), Negate(Union((Mfp(b, (), (), (2,)),
                                                            Mfp(c, (), (), (2,)))))))
    inlet = distribute_mfps(Mfp(Let("l0", a, Union((Get("l0", 3, True), b))), (), (), (1,)))
    assert inlet == Let("l0", a, Union((Mfp(Get("l0", 3, True), (), (), (1,)),
                                        Mfp(b, (), (), (1,)))))
    kept = Mfp(Union((a, b)), (), (_gt(0, 1),), (2,))
    assert distribute_mfps(kept) == kept  # filters move by pushdown_predicates


def test_derive_side_filters_pushes_each_sides_part_of_a_disjunction() -> None:
    """A disjunction of conjunctions over a join gains each input's part (the OR over the
    disjuncts of their conditions on that input alone), which pushdown moves below the join;
    the disjunction stays. Nothing is derived for an input some disjunct says nothing about,
    for a condition that could raise (a division), or for a single conjunction."""
    from planner.rewrites import derive_side_filters

    t, u = Get("t", 2), Get("u", 2)
    join = Join(t, u, ((0, 0),))

    def eq(i: int, v: int) -> Call:
        return Call("eq", (Col(i), Lit(v, "INTEGER")), "BOOLEAN")

    def both(*a: Call) -> Call:
        return Call("and", a, "BOOLEAN")

    def either(*a: Call) -> Call:
        return Call("or", a, "BOOLEAN")

    p = either(both(eq(1, 1), eq(3, 2)), both(eq(1, 3), _gt(3, 4)))
    out = derive_side_filters(Mfp(join, (), (p,), (0, 2)))
    assert out == Mfp(join, (), (p, either(eq(1, 1), eq(1, 3)),
                                 either(eq(3, 2), _gt(3, 4))), (0, 2))
    pushed = pushdown_predicates(out).input  # type: ignore[attr-defined]
    assert pushed.filter == (p,)  # type: ignore[attr-defined]
    inner = pushed.input  # type: ignore[attr-defined]
    assert inner.left.filter == (either(eq(1, 1), eq(1, 3)),)
    assert inner.right.filter == (either(eq(1, 2), _gt(1, 4)),)
    # nested ORs (how `a OR b OR c` parses) are one disjunction of three
    nested = either(either(both(eq(1, 1), eq(3, 2)), both(eq(1, 3), _gt(3, 4))), eq(1, 7))
    assert derive_side_filters(Mfp(join, (), (nested,), (0,))) == \
        Mfp(join, (), (nested, either(eq(1, 1), eq(1, 3), eq(1, 7))), (0,))
    # only u's part: one disjunct has no condition on t
    q = either(both(eq(1, 1), eq(3, 2)), eq(3, 5))
    assert derive_side_filters(Mfp(join, (), (q,), (0,))) == \
        Mfp(join, (), (q, either(eq(3, 2), eq(3, 5))), (0,))
    div = Call("gt", (Call("div", (Col(1), Col(0)), "INTEGER"), Lit(1, "INTEGER")),
               "BOOLEAN")
    for kept in (either(both(div, eq(3, 2)), both(eq(1, 3), eq(3, 4))),
                 both(eq(1, 1), eq(3, 2)), either(eq(1, 1), eq(1, 2))):
        assert derive_side_filters(Mfp(join, (), (kept,), (0,))) == \
            Mfp(join, (), (kept,), (0,))
