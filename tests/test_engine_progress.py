"""Progress tracking: the frontiers a loop reads backwards, from path summaries.

* The summary algebra: `compose` is function composition (`apply_summary` of a composition
  equals applying one summary then the other) and `summary_le` is the pointwise order, on
  seeded random summaries and times.
* Every operator class's declared `summary_form` is its `summary`; a class that overrides
  `summary` without declaring a form has none (it is never inherited).
* At every step of the graph oracles' dataflows (connected components, doubly nested SCC with
  many epochs in flight, sliding-window reachability on both executors), `backward_reach`
  equals the reference walk `compute_reach` for every operator read backwards; a graph with an
  operator whose summary has no form is scheduled by the walk and still gives BFS's answer.
* Every `Operator.reach` the scheduler takes (which reuses its last answer when nothing queued
  and neither its capabilities nor its input frontiers changed) equals the antichain of its
  pointstamps and its input frontiers mapped by its summary, computed afresh, in the same
  dataflows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import naive
import pytest
import test_engine_graphs as graphs
from harness import reachable_from

import engine.dataflow
from engine import Dataflow
from engine.dataflow import Operator
from engine.lattice import Antichain
from engine.progress import (
    IDENTITY,
    apply_summary,
    backward_plan,
    compose,
    compute_reach,
    summary_form,
    summary_le,
)


def _random_summary(rng: random.Random, n: int) -> tuple[int, int, tuple[int, ...]]:
    drop = rng.randrange(n)
    return (drop, rng.randrange(3), tuple(rng.randrange(3) for _ in range(rng.randrange(3))))


@pytest.mark.parametrize("seed", range(4))
def test_compose_is_composition_and_summary_le_is_pointwise(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        t = tuple(rng.randrange(5) for _ in range(rng.randrange(1, 5)))
        f = _random_summary(rng, len(t))
        mid = apply_summary(f, t)
        g = _random_summary(rng, len(mid))
        assert apply_summary(compose(f, g), t) == apply_summary(g, mid), (f, g, t)
        h = _random_summary(rng, len(t))
        if summary_le(f, h):
            a, b = apply_summary(f, t), apply_summary(h, t)
            assert len(a) == len(b) and all(x <= y for x, y in zip(a, b, strict=True))
    assert compose(IDENTITY, (1, 2, (3,))) == (1, 2, (3,)) == compose((1, 2, (3,)), IDENTITY)


def _operator_classes() -> list[type]:
    import engine.collection  # noqa: F401 - registers every operator class

    out, todo = [], [Operator]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def test_declared_forms_are_the_summaries() -> None:
    rng = random.Random(0)
    checked = 0
    for cls in _operator_classes():
        op = object.__new__(cls)
        form = summary_form(op)
        if form is None:
            continue
        for _ in range(50):
            t = tuple(rng.randrange(10) for _ in range(rng.randrange(2, 5)))
            assert apply_summary(form, t) == cls.summary(op, t), cls
        checked += 1
    assert checked >= 4  # the identity, enter, leave and feedback

    class Delay(Operator):
        def summary(self, t: Any) -> Any:
            return t[:-1] + (t[-1] + 2,)

    assert summary_form(object.__new__(Delay)) is None


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every `backward_reach` the scheduler takes is compared with `compute_reach`; yields
    the count of frontiers compared."""
    real = engine.dataflow.backward_reach
    count = [0]

    def both(ops: Any, plan: Any) -> Any:
        got = real(ops, plan)
        want = compute_reach(ops)
        for q, _ in plan:
            assert set(got[q].elements) == set(want[q].elements), ops[q]
            count[0] += 1
        return got

    monkeypatch.setattr(engine.dataflow, "backward_reach", both)
    yield count
    assert count[0] > 0


@pytest.fixture
def fresh_reach(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every `Operator.reach` the scheduler takes is compared with the antichain computed
    afresh from the operator's pointstamps and input frontiers; yields the count of answers
    that were reused."""
    real = Operator.reach
    reused = [0]

    def both(op: Operator, frontiers: list[Antichain]) -> Antichain:
        memo = op._reach_memo
        got = real(op, frontiers)
        if memo is not None and got is memo[2]:
            reused[0] += 1
        want = Antichain(op.pointstamps())
        for f in frontiers:
            for t in f.elements:
                s = op.summary(t)
                if s is not None:
                    want.insert(s)
        assert set(got.elements) == set(want.elements), (op, frontiers)
        assert len(got.elements) == len(set(got.elements)), got
        return got

    monkeypatch.setattr(Operator, "reach", both)
    yield reused
    assert reused[0] > 0


@pytest.mark.parametrize("graph", ["cc", "scc", "reach"])
def test_reach_of_every_operator_equals_a_fresh_one(fresh_reach: list[int], graph: str) -> None:
    {
        "cc": graphs.test_connected_components_fig7_under_random_updates,
        "scc": graphs.test_scc_many_epochs_in_flight_equals_stepwise,
        "reach": graphs.test_reachability_sliding_window_changing_roots,
    }[graph]()


def test_reach_of_every_operator_equals_a_fresh_one_columnar(fresh_reach: list[int]) -> None:
    _columnar_reachability()


def test_connected_components_frontiers(checked: list[int]) -> None:
    graphs.test_connected_components_fig7_under_random_updates()


def test_scc_doubly_nested_frontiers(checked: list[int]) -> None:
    graphs.test_scc_many_epochs_in_flight_equals_stepwise()


def test_reachability_frontiers(checked: list[int]) -> None:
    graphs.test_reachability_sliding_window_changing_roots()


def test_reachability_frontiers_columnar(checked: list[int]) -> None:
    _columnar_reachability()


def _columnar_reachability() -> None:
    """Sliding-window reachability on the columnar executor, several epochs in flight,
    checked against BFS."""
    from engine.executors.columnar import ColumnarExecutor
    from engine.fields import Fields, JoinFields

    rng = random.Random(5)
    df = Dataflow(executor=ColumnarExecutor())
    edges_h, edges = df.new_input("edges")
    roots_h, roots = df.new_input("roots")

    def body(reach: Any) -> Any:
        step = reach.map(Fields(1, 0)).join_map(edges.enter(reach.scope), JoinFields("left", "right"))
        return step.concat(reach).distinct()

    cap = roots.map(lambda r: (r, r)).iterate(body).capture()
    win = [(rng.randrange(30), rng.randrange(30)) for _ in range(40)]
    for e in win:
        edges_h.insert(e)
    roots_h.insert_many([1, 2])
    for epoch in range(1, 40):
        edges_h.advance_to(epoch)
        roots_h.advance_to(epoch)
        if epoch % 3:  # some epochs wait, so several are in flight at once
            df.run()
            state = naive.accumulate(cap.updates, (epoch,))
            want = {(r, n): 1 for r in (1, 2) for n in naive.reachable({r}, set(win))}
            assert state == want, epoch
        new = (rng.randrange(30), rng.randrange(30))
        edges_h.remove(win.pop(0))
        edges_h.insert(new)
        win.append(new)


def test_an_operator_without_a_form_is_scheduled_by_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A feedback whose summary declares no form: no plan, `compute_reach` serves, and the
    loop still converges to the right answer at every epoch."""
    from engine.operators.iterate import FeedbackOp

    class Undeclared(FeedbackOp):
        summary_form = None

        def summary(self, t: Any) -> Any:
            return FeedbackOp.summary(self, t)

    import engine.collection

    monkeypatch.setattr(engine.collection, "FeedbackOp", Undeclared)
    walked = [0]
    real = engine.dataflow.compute_reach

    def walk(*a: Any) -> Any:
        walked[0] += 1
        return real(*a)

    monkeypatch.setattr(engine.dataflow, "compute_reach", walk)
    graphs.test_reachability_sliding_window_changing_roots()
    assert walked[0] > 0


def test_backward_plan_of_a_loop() -> None:
    """The reachability loop's plan: one backward source (the feedback), reached from every
    operator before it, through +1 on the loop counter from inside the loop and through
    enter then +1 from the root scope."""
    df = Dataflow()
    _, edges = df.new_input("edges")
    _, roots = df.new_input("roots")
    reachable_from(roots, edges).capture()
    plan = backward_plan(df.ops)
    assert plan is not None and len(plan) == 1
    q, sources = plan[0]
    assert type(df.ops[q]).__name__ == "FeedbackOp"
    forms = {type(df.ops[x]).__name__ + str(df.ops[x].scope.dims): s for x, s in sources}
    assert forms["InputOp1"] == [(0, 0, (1,))]
    assert forms["FeedbackOp2"] == [IDENTITY]
    assert forms["ReduceOp2"] == [(0, 1, ())]
    assert not any(type(df.ops[x]).__name__ == "CaptureOp" for x, _ in sources)


@pytest.fixture
def idle_passes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """After every `Dataflow.run`, one more pass finds nothing to do; yields [runs of a
    dataflow with loops, those of them that took a pass with nothing to do]."""
    real = Dataflow.run
    seen = [0, 0]

    def run(df: Dataflow, max_steps: int | None = None) -> int:
        before = df.steps
        n = real(df, max_steps)
        if max_steps is None and df.has_loops():
            seen[0] += 1
            seen[1] += df.steps - before - n
            assert not df.step(), "a run ended before its dataflow was quiescent"
        return n

    monkeypatch.setattr(Dataflow, "run", run)
    yield seen


@pytest.mark.parametrize("graph", ["cc", "scc", "reach", "columnar"])
def test_a_run_ends_on_its_last_busy_pass(idle_passes: list[int], graph: str) -> None:
    """`run` stops after the pass that left nothing queued and the loops' frontiers as it
    found them, without a pass that only confirms it: at the reachability benchmark that
    pass was one of each update's 11-15."""
    {
        "cc": graphs.test_connected_components_fig7_under_random_updates,
        "scc": graphs.test_scc_many_epochs_in_flight_equals_stepwise,
        "reach": graphs.test_reachability_sliding_window_changing_roots,
        "columnar": _columnar_reachability,
    }[graph]()
    runs, idle = idle_passes
    assert runs > 0 and idle == 0, idle_passes


@pytest.mark.parametrize("graph", ["cc", "scc", "columnar"])
def test_eager_operators_act_in_their_senders_turn(monkeypatch: pytest.MonkeyPatch,
                                                   graph: str) -> None:
    """A map, concat, loop variable, enter or leave acts on each message as it is sent,
    never in a turn of its own: none is ever activated, no pass ends with a message queued at
    one (those along a loop's feedback edge reach the operators after the variable in the
    same pass), and the graph oracles still hold."""
    from engine.operators.iterate import EnterOp, LeaveOp, VariableOp
    from engine.operators.stateless import ConcatOp, UnaryOp

    kinds = (UnaryOp, ConcatOp, VariableOp, EnterOp, LeaveOp)
    pushed: dict[type, int] = {}
    for kind in kinds:
        def activate(op: Operator, frontiers: list[Antichain]) -> None:
            raise AssertionError(f"{op} was activated")

        def push(op: Operator, port: int, payload: Any, lower: Any, real: Any = kind.push) -> None:
            pushed[type(op)] = pushed.get(type(op), 0) + 1
            real(op, port, payload, lower)

        monkeypatch.setattr(kind, "activate", activate)
        monkeypatch.setattr(kind, "push", push)
    real_pass = Dataflow._pass

    def checked(df: Dataflow, start: Any) -> Any:
        out = real_pass(df, start)
        for op in df.ops:
            assert not (isinstance(op, kinds) and op.has_messages()), op
        return out

    monkeypatch.setattr(Dataflow, "_pass", checked)
    {
        "cc": graphs.test_connected_components_fig7_under_random_updates,
        "scc": graphs.test_scc_many_epochs_in_flight_equals_stepwise,
        "columnar": _columnar_reachability,
    }[graph]()
    assert {VariableOp, EnterOp, LeaveOp} <= set(pushed), pushed


def test_reach_of_an_operator_holding_times_its_input_has_passed() -> None:
    """An operator's reach is its single input's frontier (the same object) when every time it
    holds is beyond that frontier, and includes any time it holds that is not."""

    class Holding(Operator):
        held: list[tuple[int, ...]] = []

        def capabilities(self) -> Any:
            return self.held

        def activate(self, frontiers: list[Antichain]) -> None:
            pass

    df = Dataflow(dims=2)
    _, source = df.new_input("in")
    op = Holding(df.root, "holding", [source.op])
    frontier = Antichain([(3, 0), (2, 5)])
    Holding.held = [(3, 4), (2, 7)]
    assert op.reach([frontier]) is frontier
    Holding.held = [(3, 4), (1, 9)]
    assert set(op.reach([frontier]).elements) == {(3, 0), (2, 5), (1, 9)}
    Holding.held = [(2, 1)]
    assert set(op.reach([frontier]).elements) == {(3, 0), (2, 1)}


@pytest.mark.parametrize("depth", [0, 3, engine.dataflow.EAGER_DEPTH])
def test_a_long_chain_of_eager_operators_is_pushed_through_in_stretches(
        monkeypatch: pytest.MonkeyPatch, depth: int) -> None:
    """A message goes through at most EAGER_DEPTH eager operators within one send, then waits
    in a queue for the next one's turn (later in the same pass): a chain of 300 maps and
    concats (a UNION ALL of 300 SELECTs) gives the same answer, in one busy pass, without
    recursing 600 frames deep."""
    monkeypatch.setattr(engine.dataflow, "EAGER_DEPTH", depth)
    df = Dataflow()
    handle, nums = df.new_input("nums")
    other_h, other = df.new_input("other")
    chain = nums
    for i in range(150):
        chain = chain.map(lambda x, i=i: x + 1).concat(other)
    cap = chain.capture()
    deepest = [0]
    real_send = Operator.send

    def send(op: Operator, payload: Any, lower: Any) -> None:
        deepest[0] = max(deepest[0], df.eager_depth)
        real_send(op, payload, lower)

    monkeypatch.setattr(Operator, "send", send)
    handle.insert(0)
    other_h.insert(1000)
    handle.advance_to(1)
    other_h.advance_to(1)
    assert df.run() == 1
    # `other`, joining the chain after map i, passes the 149 - i maps after it
    want = {150: 1, **{1000 + k: 1 for k in range(150)}}
    assert naive.accumulate(cap.updates, (1,)) == want
    assert deepest[0] == depth and df.eager_depth == 0
