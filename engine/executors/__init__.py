"""Executors: the runtimes that do operators' bulk work, behind one boundary (`base`).

`inprocess.InProcessExecutor` is the embedded default and the reference; `columnar.
ColumnarExecutor` runs arrangements, join and the counting reduces on columnar runs with
compiled kernels; `spark.SparkExecutor` runs on Apache Spark. Executors sit below the dataflow:
none of them imports the scheduler or the fluent API (the Spark executor reads the operators'
time-only logic functions, so it alone sits above `engine.operators`).

`default_executor()` is the executor of a dataflow that names none.
"""

from __future__ import annotations

import os
from typing import Any

from engine.executors.inprocess import InProcessExecutor

DEFAULT_EXECUTOR = InProcessExecutor()
_COLUMNAR: Any = None


def default_executor() -> Any:
    """The executor of a dataflow that names none: the in-process one, or the columnar one when
    `DIFFSQL_COLUMNAR=1` (one shared instance, so that every dataflow's arrangements use the
    same row ids and can be imported into each other)."""
    global _COLUMNAR
    if os.environ.get("DIFFSQL_COLUMNAR") == "1":
        if _COLUMNAR is None:
            from engine.executors.columnar import ColumnarExecutor

            _COLUMNAR = ColumnarExecutor()
        return _COLUMNAR
    return DEFAULT_EXECUTOR
