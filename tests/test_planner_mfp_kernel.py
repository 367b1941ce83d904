"""The generated keyed-MFP kernels (planner.mfp_kernel) against their reference twin
(lower.compile_mfp, then the key getter) on random rows, NULL and NaN included, and the
lowering with and without them against each other."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from planner_support import World, catalog, norm

from planner import compile_view
from planner.errors import EvaluationError
from planner.ir import Call, Col, Get, Lit, Mfp, Scalar
from planner.mfp_kernel import keyed_mfp, reference_keyed_mfp

VALUES = [None, 0, 1, 2, -3, 7, 2.5, math.nan, -0.0]


def _pred(rng: random.Random, arity: int) -> Scalar:
    kind = rng.random()
    col = Col(rng.randrange(arity))
    if kind < 0.3:
        inner = Call("is_null", (col,), "BOOLEAN")
        return Call("not", (inner,), "BOOLEAN") if rng.random() < 0.7 else inner
    op = rng.choice(["eq", "ne", "lt", "le", "gt", "ge"])
    other: Scalar = Col(rng.randrange(arity)) if rng.random() < 0.4 else Lit(
        rng.choice([v for v in VALUES if v is not None]), "INTEGER")
    args = (col, other) if rng.random() < 0.5 else (other, col)
    p = Call(op, args, "BOOLEAN")
    if rng.random() < 0.2:
        return Call("and", (p, _pred(rng, arity)), "BOOLEAN")
    return p


@pytest.mark.parametrize("seed", range(40))
def test_kernel_equals_reference_on_random_rows(seed: int) -> None:
    rng = random.Random(seed)
    arity = rng.randint(1, 5)
    preds = tuple(_pred(rng, arity) for _ in range(rng.randint(0, 3)))
    project = tuple(rng.randrange(arity) for _ in range(rng.randint(1, 4)))
    keys = tuple(rng.randrange(len(project)) for _ in range(rng.randint(0, 2)))
    m = Mfp(Get("x", arity), (), preds, project)
    fast, ref = keyed_mfp(m, keys), reference_keyed_mfp(m, keys)
    assert fast is not None
    updates = []
    for i in range(300):
        row = tuple(rng.choice(VALUES) for _ in range(arity))
        assert norm({fast(row): 1}) == norm({ref(row): 1}), (m, keys, row)
        updates.append((row, (i % 3,), rng.choice([-2, -1, 1, 3])))
    # the whole-list form: the reference's outputs, each with its update's time and diff
    want = [(y, t, r) for row, t, r in updates for y in ref(row)]
    got = fast.over_updates(updates)  # type: ignore[attr-defined]
    assert len(got) == len(want)
    assert all(norm({g[0]: 1}) == norm({w[0]: 1}) and g[1:] == w[1:]
               for g, w in zip(got, want, strict=True)), (m, keys)
    _rows_form_agrees(fast, [row for row, _, _ in updates])


def _rows_form_agrees(kernel: object, rows: list) -> None:
    """`over_rows` (rows at one time kept as rows: engine.rows_at) denotes what
    `over_updates` gives for the same rows: the same outputs in order, keyed by `row_keys`,
    or the same error."""
    from engine.rows_at import RowsAt

    def outcome(f: object) -> object:
        try:
            return ("ok", [norm({d: 1}) for d, _, _ in f()])  # type: ignore[operator]
        except Exception as e:  # noqa: BLE001 - compared, not swallowed
            return ("error", type(e), str(e))

    want = outcome(lambda: kernel.over_updates([(row, (1,), 1) for row in rows]))  # type: ignore[attr-defined]
    got = outcome(lambda: RowsAt(kernel.over_rows(rows), (1,), 1,  # type: ignore[attr-defined]
                                 kernel.row_keys).updates())  # type: ignore[attr-defined]
    assert got == want


def test_unsupported_parts_fall_back() -> None:
    add = Call("add", (Col(0), Lit(1, "INTEGER")), "INTEGER")
    assert keyed_mfp(Mfp(Get("x", 2), (add,), (), (0, 2)), (0,)) is None
    gt = Call("gt", (add, Lit(1, "INTEGER")), "BOOLEAN")
    assert keyed_mfp(Mfp(Get("x", 2), (), (gt,), (0,)), (0,)) is None


JOINS = [
    "SELECT t.id, u.id FROM t, u, e WHERE t.a = u.a AND u.id = e.src AND t.c > 1 AND e.dst <> 3",
    "SELECT t.b, u.s FROM t JOIN u ON t.b = u.s AND t.a < u.a WHERE u.m IS NOT NULL",
]


@pytest.mark.parametrize("sql", JOINS)
def test_lowering_with_and_without_kernels_matches_duckdb(sql: str) -> None:
    import engine
    from planner.lower import Lowerer

    world = World(11)
    cv = compile_view(sql, catalog())
    for fuse in (True, False):
        df = engine.Dataflow()
        handles, sources = {}, {}
        for name in world.rows:
            handles[name], sources[name] = df.new_input(name)
        cap = Lowerer(df, sources, fuse=fuse).lower(cv.plan, df.root, {}, 0).capture()
        for name, rows in world.rows.items():
            handles[name].send([(r, 1) for r in rows])
            handles[name].advance_to(1)
        df.run()
        assert norm(cap.snapshot()) == world.duck(sql), fuse


@pytest.mark.parametrize("seed", range(10))
def test_projections_equal_their_reference(seed: int) -> None:
    from operator import itemgetter

    from planner.mfp_kernel import keyed_row, plain_mfp, projection

    rng = random.Random(seed)
    arity = rng.randint(1, 5)
    idx = tuple(rng.randrange(arity) for _ in range(rng.randint(0, 4)))
    rows = [tuple(rng.choice(VALUES) for _ in range(arity)) for _ in range(50)]
    updates = [(row, (i,), i - 25) for i, row in enumerate(rows)]
    want = [tuple(itemgetter(*idx)(row)) if len(idx) > 1 else tuple(row[i] for i in idx)
            for row in rows]
    f = projection(idx)
    assert [f(row) for row in rows] == want
    assert f.over_updates(updates) == [(w, t, r) for w, (_, t, r) in zip(want, updates, strict=True)]  # type: ignore[attr-defined]
    g = keyed_row(idx)
    assert [g(row) for row in rows] == [(w, row) for w, row in zip(want, rows, strict=True)]
    assert g.over_updates(updates) == [((w, row), t, r) for w, (row, t, r) in zip(want, updates, strict=True)]  # type: ignore[attr-defined]
    _rows_form_agrees(f, rows)
    _rows_form_agrees(g, rows)
    # an Mfp with no filter through plain_mfp is the projection as well
    m = Mfp(Get("x", arity), (), (), idx)
    fast = plain_mfp(m)
    assert fast is not None
    assert [fast(row) for row in rows] == [(w,) for w in want]


# -- compiled_mfp: whole MFPs with maps against lower.compile_mfp --------------------------------

_INT_TYPES = ["TINYINT", "INTEGER", "BIGINT"]
_ARITH = ["add", "sub", "mul", "mod", "intdiv", "div"]
_EDGE = [None, 0, 1, -1, 2, 7, -128, 127, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 100]


def _expr(rng: random.Random, cols: list[tuple[int, str]], depth: int) -> tuple[Scalar, str]:
    """A random scalar over `cols` (index, type): integer arithmetic (overflow and division
    errors included), DOUBLE division, comparisons, NOT, IS NULL, and sometimes a CASE (a lazy
    call the generator leaves to the reference)."""
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.7:
            i, t = rng.choice(cols)
            return Col(i), t
        t = rng.choice(_INT_TYPES)
        v = rng.choice(_EDGE)
        if v is not None and t == "TINYINT" and not -128 <= v <= 127:
            v = 3
        return Lit(v, t), t
    kind = rng.random()
    a, ta = _expr(rng, cols, depth - 1)
    b, tb = _expr(rng, cols, depth - 1)
    if kind < 0.6:
        f = rng.choice(_ARITH)
        if f == "div":
            return Call("div", (a, b), "DOUBLE"), "DOUBLE"
        t = max(ta, tb, key=lambda x: _INT_TYPES.index(x) if x in _INT_TYPES else 9)
        if t not in _INT_TYPES:
            return Call(rng.choice(["div", "add", "sub", "mul"]), (a, b), "DOUBLE"), "DOUBLE"
        return Call(f, (a, b), t), t
    if kind < 0.75:
        return Call(rng.choice(["eq", "lt", "ge", "ne"]), (a, b), "BOOLEAN"), "BOOLEAN"
    if kind < 0.78:
        return Call("is_null", (a,), "BOOLEAN"), "BOOLEAN"
    if kind < 0.82:  # casts, narrowing ones included (an out-of-range value is an error)
        t = rng.choice(_INT_TYPES + ["DOUBLE"])
        return Call(rng.choice(["cast", "cast", "try_cast"]), (a,), t), t
    if kind < 0.9:
        return Call("neg", (a,), ta) if ta in _INT_TYPES else a, ta
    c = Call("lt", (a, b), "BOOLEAN")
    return Call("case", (c, a, b), ta), ta


def _outcome(f: Any, row: tuple[Any, ...]) -> Any:
    try:
        return ("ok", norm({f(row): 1}))
    except EvaluationError as e:
        return ("error", e.message)


@pytest.mark.parametrize("seed", range(60))
def test_compiled_mfp_equals_reference(seed: int) -> None:
    from planner.lower import compile_mfp
    from planner.mfp_kernel import compiled_mfp

    rng = random.Random(seed)
    arity = rng.randint(1, 3)
    types = [rng.choice(_INT_TYPES + ["DOUBLE"]) for _ in range(arity)]
    cols = list(enumerate(types))
    maps = []
    for k in range(rng.randint(0, 3)):
        e, t = _expr(rng, cols, rng.randint(1, 3))
        maps.append(e)
        cols.append((arity + k, t))
    filters = []
    for _ in range(rng.randint(0, 2)):
        e, _t = _expr(rng, cols, 2)
        filters.append(Call("not", (Call("is_null", (e,), "BOOLEAN"),), "BOOLEAN")
                       if rng.random() < 0.3 else Call("ne", (e, Lit(0, "INTEGER")), "BOOLEAN"))
    project = tuple(rng.randrange(len(cols)) for _ in range(rng.randint(1, 4)))
    m = Mfp(Get("x", arity), tuple(maps), tuple(filters), project)
    ref = compile_mfp(m)
    fast = compiled_mfp(m)
    keys = tuple(rng.sample(range(len(project)), rng.randint(0, len(project))))
    keyed = compiled_mfp(m, keys)
    lazy = any("case" in repr(e) for e in maps + filters)
    if fast is None:
        assert lazy, m
        return
    sample = [tuple(rng.choice(_EDGE) if t != "DOUBLE" else rng.choice([None, 1.5, -0.0, 3.0])
                    for t in types) for _ in range(50)]
    sample = [tuple(v if t != "TINYINT" or v is None or -128 <= v <= 127 else 5
                    for v, t in zip(row, types, strict=True)) for row in sample]
    _rows_form_agrees(fast, sample)
    _rows_form_agrees(keyed, sample)
    for _ in range(300):
        row = tuple(rng.choice(_EDGE) if t != "DOUBLE" else rng.choice(
            [None, 0.0, -0.0, 1.5, math.inf, -math.inf, math.nan, 3.0, 1e308]) for t in types)
        row = tuple(v if t != "TINYINT" or v is None or -128 <= v <= 127 else 5
                    for v, t in zip(row, types, strict=True))
        want, got = _outcome(ref, row), _outcome(fast, row)
        assert got == want, (m, row)
        keyed_got = _outcome(lambda r: tuple((k, v) for k, v in keyed(r)), row)
        keyed_want = _outcome(lambda r: tuple((tuple(v[k] for k in keys), v) for v in ref(r)),
                              row)
        assert keyed_got == keyed_want, (m, keys, row)
        if want[0] == "ok":
            one = fast.over_updates([(row, (1,), 2)])  # type: ignore[attr-defined]
            assert [(norm({(y,): 1}), t, r) for y, t, r in one] == [
                (norm({(y,): 1}), (1,), 2) for y in ref(row)], (m, row)


@pytest.mark.parametrize("func", ["add", "sub", "mul", "div"])
def test_compiled_mfp_float_arithmetic_equals_reference(func: str) -> None:
    """The inlined IEEE paths of DOUBLE arithmetic against the reference, over every pair of
    special and ordinary floats (and an INTEGER operand, which takes the called path)."""
    from planner.lower import compile_mfp
    from planner.mfp_kernel import compiled_mfp

    e = Call(func, (Col(0), Col(1)), "DOUBLE")
    nested = Call("mul", (e, Col(0)), "DOUBLE")
    m = Mfp(Get("x", 2), (e, nested), (), (2, 3))
    ref, fast = compile_mfp(m), compiled_mfp(m)
    assert fast is not None
    values = [None, 0.0, -0.0, 1.5, -2.25, 3.0, 1e308, -1e308, 5e-324, math.inf, -math.inf,
              math.nan, 7]
    for a in values:
        for b in values:
            row = (a, b)
            assert _outcome(fast, row) == _outcome(ref, row), row


@pytest.mark.parametrize("func", ["cast", "try_cast"])
@pytest.mark.parametrize("target", ["TINYINT", "INTEGER", "BIGINT", "DOUBLE", "VARCHAR",
                                    "TIMESTAMP", "DECIMAL(5,2)"])
def test_compiled_mfp_casts_equal_reference(func: str, target: str) -> None:
    """Casts in generated MFPs (a CAST names its expression in an error, TRY_CAST gives NULL)
    against the reference, over values each target cannot hold."""
    import datetime as dt

    from planner.lower import compile_mfp
    from planner.mfp_kernel import compiled_mfp

    for source in ("BIGINT", "DOUBLE", "VARCHAR", "DATE"):
        e = Call(func, (Col(0),), target)
        m = Mfp(Get("x", 1), (e,), (Call("not", (Call("is_null", (Col(1),), "BOOLEAN"),),
                                             "BOOLEAN"),), (1,))
        ref, fast = compile_mfp(m), compiled_mfp(m)
        assert fast is not None
        # (10**400 has no DOUBLE; a datetime is what a DATE expression never holds, but the
        # inlined casts test the class, not the declared type)
        values = {"BIGINT": [None, 0, 127, 128, -129, 2**31, -(2**63), 10**400, True],
                  "DOUBLE": [None, 1.5, -0.5, 2.5, 1e20, math.inf, math.nan, -0.0],
                  "VARCHAR": [None, "12", " 7 ", "x", "1e3", "2024-02-29", "128"],
                  "DATE": [None, dt.date(2024, 2, 29), dt.date(1, 1, 1),
                           dt.datetime(2024, 2, 29, 1, 2, 3)]}[source]
        for v in values:
            assert _outcome(fast, (v,)) == _outcome(ref, (v,)), (func, target, source, v)
            if _outcome(ref, (v,))[0] == "ok":  # the very values, classes and signs included
                assert repr(fast((v,))) == repr(ref((v,))), (func, target, source, v)
