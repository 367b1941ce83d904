"""Budgets (engine/budget.py): a run that exceeds its work, memory or time budget raises
BudgetExceeded promptly, even inside one join activation, and poisons the dataflow; within the
budget results are unchanged."""

from __future__ import annotations

import time

import pytest

from engine import Budget, BudgetExceeded, Dataflow, DataflowPoisoned


def _cross(n: int, budget: Budget | None) -> tuple[Dataflow, object]:
    """(k, i) x (k, j) for one key k: n * n join outputs in a single activation."""
    df = Dataflow()
    df.budget = budget
    a_in, a = df.new_input("a")
    b_in, b = df.new_input("b")
    cap = a.join_map(b, lambda k, x, y: (x, y)).capture()
    a_in.send([((0, i), 1) for i in range(n)])
    b_in.send([((0, j), 1) for j in range(n)])
    a_in.advance_to(1)
    b_in.advance_to(1)
    return df, cap


def test_work_budget_stops_one_huge_join_midway() -> None:
    df, _ = _cross(2000, Budget(work=100_000))  # 4,000,000 outputs wanted
    t0 = time.monotonic()
    with pytest.raises(BudgetExceeded, match="work budget of 100000"):
        df.run()
    assert time.monotonic() - t0 < 20
    with pytest.raises(DataflowPoisoned):
        df.run()


def test_memory_budget_counts_arranged_records() -> None:
    df = Dataflow()
    df.budget = Budget(records=1_000)
    h, c = df.new_input("x")
    c.map(lambda x: (x, x)).arrange_by_key("big")
    h.send([(i, 1) for i in range(5_000)])
    h.advance_to(1)
    with pytest.raises(BudgetExceeded, match="memory budget of 1000 arranged records") as e:
        df.run()
    assert e.value.code == "budget_exceeded"


def test_time_budget() -> None:
    df, _ = _cross(3000, Budget(seconds=0.2))
    t0 = time.monotonic()
    with pytest.raises(BudgetExceeded, match="time budget"):
        df.run()
    assert time.monotonic() - t0 < 20


def test_within_budget_results_are_unchanged() -> None:
    df, cap = _cross(50, Budget(seconds=60, work=10_000, records=100_000))
    df.run()
    assert sum(cap.current().values()) == 2500  # type: ignore[attr-defined]
    # the budget restarts with every run: a second run of the same size passes too
    df.run()
