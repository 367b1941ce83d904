"""`engine.fields` projections: the same results as the Python functions they stand for.

The columnar executor moves row ids for `Fields` maps and `JoinFields` joins instead of calling
Python per update; where the rows do not allow it (ids outside the packed-pair range, other
types) it calls them. Reachability over a sliding window, with node ids that fall on both sides
of that range, must equal BFS under both executors and every schedule, and the projected ids
must decode to exactly what the Python call returns.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import numpy as np
import pytest

from engine import Dataflow
from engine.executors.columnar import ColumnarExecutor
from engine.fields import ArrangedFields, Fields, JoinFields


def bfs(edges: list[tuple[int, int]], roots: set[int]) -> set[tuple[int, int]]:
    adj: dict[int, list[int]] = {}
    for s, d in edges:
        adj.setdefault(s, []).append(d)
    out = set()
    for r in roots:
        seen, q = {r}, deque([r])
        while q:
            n = q.popleft()
            for m in adj.get(n, ()):
                if m not in seen:
                    seen.add(m)
                    q.append(m)
        out.update((r, x) for x in seen)
    return out


def test_fields_are_the_functions_they_name() -> None:
    row = (3, "a", None)
    assert Fields(1, 0)(row) == ("a", 3) and Fields(2)(row) is None
    assert JoinFields("left", "right")(1, 2, 3) == (2, 3)
    assert JoinFields("right", "key", "left")(1, 2, 3) == (3, 1, 2) and JoinFields("key")(1, 2, 3) == 1
    with pytest.raises(ValueError):
        JoinFields("middle")
    with pytest.raises(ValueError):
        Fields()
    assert ArrangedFields("val", "key")(1, 2) == (2, 1) and ArrangedFields("key")(1, 2) == 1
    with pytest.raises(ValueError):
        ArrangedFields("left")


@pytest.mark.parametrize("sources", [("key",), ("val",), ("key", "val"), ("val", "key")])
def test_unarranged_ids_decode_as_the_call(sources: tuple[str, ...]) -> None:
    """Reading an arrangement back through `ArrangedFields` moves ids; the rows decode to what
    the Python call returns, for small ints (packed pairs), big ints and other values."""
    from engine.columnar.layout import Run
    from engine.lattice import Antichain

    ex = ColumnarExecutor()
    rng = random.Random(len(sources))
    for values in ([rng.randrange(100) for _ in range(40)],
                   [rng.randrange(1 << 40) for _ in range(40)],
                   ["s%d" % rng.randrange(9) for _ in range(20)] + [(1, "x"), None, 2.5]):
        keys = ex.rows.encode_many([rng.choice(values) for _ in range(60)])
        vals = ex.rows.encode_many([rng.choice(values) for _ in range(60)])
        z = np.zeros(60, np.int64)
        run = Run(keys, vals, z, z + 1, 1, Antichain([(0,)]), Antichain([(1,)]), Antichain([(0,)]), 0)
        f = ArrangedFields(*sources)
        got = ex.unarrange(run, f)
        want = [f(k, v) for k, v in zip(ex.rows.decode_many(keys), ex.rows.decode_many(vals),
                                        strict=True)]
        assert ex.rows.decode_many(got.data) == want


@pytest.mark.parametrize("index", [(1, 0), (0, 1), (0,), (1,), (0, 0)])
def test_projected_ids_decode_as_the_call(index: tuple[int, ...]) -> None:
    ex = ColumnarExecutor()
    rng = random.Random(len(index) * 7 + index[0])
    rows: list[Any] = [(rng.randrange(1 << 30), rng.randrange(1 << 30)) for _ in range(50)]
    ids = ex.rows.encode_many(rows)
    got = ex._project(ids, index)
    assert got is not None
    assert ex.rows.decode_many(got) == [Fields(*index)(r) for r in rows]
    # Out of the packed range (or not pairs): no projection, the executor calls the function.
    assert ex._project(ex.rows.encode_many([(1 << 31, 1), (2, 3)]), index) is None
    assert ex._project(np.zeros(0, np.int64), index) is None


@pytest.mark.parametrize("outside", [False, True])
def test_split_ids_decode_as_the_fields(outside: bool) -> None:
    """`_halves` (how an arrangement by key splits `(key, val)` rows): moved bits when every
    row is a packed pair, decoded rows when one is not; the same ids either way."""
    ex = ColumnarExecutor()
    rng = random.Random(3)
    rows: list[Any] = [(rng.randrange(1 << 30), rng.randrange(1 << 30)) for _ in range(40)]
    if outside:
        rows.append((1 << 31, 5))
    keys, vals = ex._halves(ex.rows.encode_many(rows))
    assert ex.rows.decode_many(keys) == [r[0] for r in rows]
    assert ex.rows.decode_many(vals) == [r[1] for r in rows]


def reach_dataflow(executor: Any) -> tuple[Any, Any, Any, Any]:
    df = Dataflow(executor=executor)
    edges_h, edges = df.new_input("edges")
    roots_h, roots = df.new_input("roots")

    def body(reach: Any) -> Any:
        e = edges.enter(reach.scope)
        return reach.map(Fields(1, 0)).join_map(e, JoinFields("left", "right")).concat(reach).distinct()

    cap = roots.map(lambda r: (r, r)).iterate(body).capture()
    return df, edges_h, roots_h, cap


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("per_run", [1, 5])
def test_reachability_with_fields_equals_bfs(executor: str, per_run: int) -> None:
    rng = random.Random(11 + per_run)
    # Half the nodes are beyond the packed-pair range, so both paths run, also in one batch.
    nodes = list(range(30)) + [(1 << 31) + i for i in range(30)]
    df, edges_h, roots_h, cap = reach_dataflow(ColumnarExecutor() if executor == "columnar" else None)
    roots = set(rng.sample(nodes, 4))
    for r in roots:
        roots_h.insert(r)
    window: deque[tuple[int, int]] = deque()
    for _ in range(60):
        e = (rng.choice(nodes), rng.choice(nodes))
        window.append(e)
        edges_h.insert(e)
    state: dict[Any, int] = {}
    epoch = 1
    for step in range(40):
        edges_h.remove(window.popleft())
        e = (rng.choice(nodes), rng.choice(nodes))
        window.append(e)
        edges_h.insert(e)
        edges_h.advance_to(epoch)
        roots_h.advance_to(epoch)
        epoch += 1
        if step % per_run == per_run - 1:
            df.run()
            state = dict(cap.current())
            assert state == {p: 1 for p in bfs(list(window), roots)}, step
