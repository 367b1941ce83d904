"""The generated keyed-MFP kernels (planner.mfp_kernel) against their reference twin
(lower.compile_mfp, then the key getter) on random rows, NULL and NaN included, and the
lowering with and without them against each other."""

from __future__ import annotations

import math
import random

import pytest
from planner_support import World, catalog, norm

from planner import compile_view
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
    # an Mfp with no filter through plain_mfp is the projection as well
    m = Mfp(Get("x", arity), (), (), idx)
    fast = plain_mfp(m)
    assert fast is not None
    assert [fast(row) for row in rows] == [(w,) for w in want]
