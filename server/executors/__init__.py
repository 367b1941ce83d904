"""Executors: where a view's dataflow runs.

An executor makes the `engine.Dataflow` objects that views are built into; everything else in
the server is the same whichever executor is chosen. `inprocess` (the default) runs the engine
in this process, record by record (the reference); `columnar` runs it in this process on the
engine's columnar executor (numba kernels over int64 columns, one row dictionary shared by every
view's dataflow, so that views reading other views' arrangements agree on row ids). Another executor plugs in as a module `server.executors.<name>` exposing
`create_executor(settings) -> Executor`; until such a module exists, asking for it is a
configuration error with a clear message (this is the hook the Spark executor will use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from server.errors import ConfigError

if TYPE_CHECKING:
    from server.settings import Settings


class Executor(Protocol):
    name: str

    def new_dataflow(self) -> Any:
        """A fresh, empty `engine.Dataflow` (or a compatible object)."""
        ...

    def close(self) -> None: ...


class InProcessExecutor:
    name = "inprocess"

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def new_dataflow(self) -> Any:
        import engine

        df = engine.Dataflow(executor=self.engine_executor())
        s = self.settings
        if s is not None:  # every view's dataflow runs under the configured budget
            df.budget = engine.Budget(s.view_time_budget, s.view_work_budget,
                                      s.view_memory_budget)
        return df

    def engine_executor(self) -> Any:
        """The engine executor of every dataflow (None: the engine's default)."""
        return None

    def close(self) -> None:
        return None


class ColumnarExecutor(InProcessExecutor):
    name = "columnar"

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings)
        from engine.executors.columnar import ColumnarExecutor as EngineColumnar

        self.shared = EngineColumnar()

    def engine_executor(self) -> Any:
        return self.shared


KNOWN = ("inprocess", "columnar", "spark")


def create_executor(settings: Settings) -> Executor:
    """The executor named by `settings.executor`; `ConfigError` if it is not available."""
    name = settings.executor
    if name == "inprocess":
        return InProcessExecutor(settings)
    if name == "columnar":
        return ColumnarExecutor(settings)
    if name not in KNOWN:
        raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(KNOWN)}")
    try:
        module = importlib.import_module(f"server.executors.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"server.executors.{name}":
            raise ConfigError(f"the {name} executor cannot start: missing module {e.name}") from e
        raise ConfigError(
            f"the {name} executor is not implemented yet (no server/executors/{name}.py); "
            "use --executor inprocess"
        ) from None
    factory = getattr(module, "create_executor", None)
    if factory is None:
        raise ConfigError(f"server.executors.{name} has no create_executor(settings)")
    return factory(settings)  # type: ignore[no-any-return]
