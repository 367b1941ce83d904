"""The Spark executor for the server: every view's dataflow runs its bulk work on Spark.

Invariant: one `SparkExecutor` (one SparkSession) per server process, created on the first
dataflow and shared by every view's `Dataflow`; `close()` stops it. Creating the executor only
checks that pyspark and Java are available, so `diffsql serve` fails fast without paying for
a Spark start-up twice.
"""

from __future__ import annotations

import importlib.util
import shutil
import threading
from typing import TYPE_CHECKING, Any

from server.errors import ConfigError

if TYPE_CHECKING:
    from server.settings import Settings


class SparkServerExecutor:
    name = "spark"

    def __init__(self, master: str, levels: str | None = None) -> None:
        self.master = master
        self.levels = levels
        self._executor: Any = None
        self._lock = threading.Lock()

    def spark_executor(self) -> Any:
        with self._lock:
            if self._executor is None:
                from engine.executors.spark import SparkExecutor

                # local_rows=0: every payload and batch of every view goes through Spark.
                self._executor = SparkExecutor(self.master, data_dir=self.levels, local_rows=0)
            return self._executor

    def new_dataflow(self) -> Any:
        import engine

        return engine.Dataflow(executor=self.spark_executor())

    def close(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._executor.close()
                self._executor = None


def create_executor(settings: Settings) -> SparkServerExecutor:
    if importlib.util.find_spec("pyspark") is None:
        raise ConfigError("the spark executor needs pyspark: pip install 'diffsql[spark]'")
    if shutil.which("java") is None:
        raise ConfigError("the spark executor needs Java 17 on PATH")
    levels = str(settings.spark_levels) if settings.spark_levels is not None else None
    return SparkServerExecutor(settings.spark_master or "local[2]", levels)
