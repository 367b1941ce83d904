"""The columnar executor runs whole dataflows exactly as the reference (per-record) executor.

Each case below is an existing engine test, re-run with every dataflow on a fresh
`ColumnarExecutor`: the per-operator oracle suite against naive recomputation (root and 2-d
times, three schedules), the interesting-times cases, the reachability, connected-components
and doubly nested SCC dataflows against BFS / networkx, and trace compaction bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import test_engine_compaction as compaction
import test_engine_graphs as graphs
import test_engine_interesting_times as interesting
import test_engine_properties as properties

import engine.executors
from engine.executors.columnar import ColumnarExecutor


@pytest.fixture(autouse=True)
def columnar(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = ColumnarExecutor()
    monkeypatch.setattr(engine.executors, "default_executor", lambda: shared)


def test_the_fixture_selects_the_columnar_executor() -> None:
    from engine import Dataflow

    assert Dataflow().executor.name == "columnar"


@pytest.mark.parametrize("schedule", ["each", "once", "steps"])
@pytest.mark.parametrize("nested", [False, True], ids=["root", "2d"])
@pytest.mark.parametrize("case", properties.CASES, ids=[c.name for c in properties.CASES])
def test_operator_matches_naive(case: Any, nested: bool, schedule: str) -> None:
    properties.test_operator_matches_naive(case, nested, schedule)


CASES: list[tuple[str, Callable[..., None], list[Any]]] = [
    ("distinct_join_of_times", interesting.test_distinct_owes_correction_at_join_of_input_times, [True, False]),
    ("cancelling_inputs", interesting.test_cancelling_inputs_still_owe_retraction, [True, False]),
    ("join_output_later", interesting.test_join_output_later_than_both_inputs, [True, False]),
]


@pytest.mark.parametrize("run_each_epoch", [True, False])
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_interesting_times(name: str, run_each_epoch: bool) -> None:
    {c[0]: c[1] for c in CASES}[name](run_each_epoch)


def test_reachability_sliding_window_equals_bfs() -> None:
    graphs.test_reachability_sliding_window_changing_roots()


def test_connected_components_equal_networkx() -> None:
    graphs.test_connected_components_fig7_under_random_updates()


def test_scc_doubly_nested_equals_networkx() -> None:
    graphs.test_scc_fig8_doubly_nested_under_random_updates()


def test_scc_many_epochs_in_flight() -> None:
    graphs.test_scc_many_epochs_in_flight_equals_stepwise()


def test_reachability_loop_traces_stay_bounded() -> None:
    compaction.test_sliding_window_reachability_loop_traces_stay_bounded()


def test_join_distinct_traces_stay_bounded() -> None:
    compaction.test_sliding_window_join_distinct_traces_stay_bounded()


def test_count_and_join_with_signed_updates() -> None:
    properties.test_count_and_join_with_signed_updates()
