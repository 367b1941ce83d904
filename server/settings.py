"""Server settings: one immutable object, built once (from the CLI or a test) and handed to
`create_app`. Nothing else in `server/` reads the environment, so a setting has exactly one
source of truth.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from server.admission import default_query_concurrency


class Settings(BaseModel):
    """Everything the server can be configured with."""

    model_config = ConfigDict(frozen=True)

    data_dir: Path | None = None
    """Directory holding the durable DuckDB database; None with `memory=True`."""
    memory: bool = False
    """Keep everything in memory (nothing survives a restart)."""
    import_dir: Path | None = None
    """The only directory `COPY ... FROM` may read (default `<data_dir>/import`; without a
    data directory COPY is disabled unless this is set)."""
    token: str | None = None
    """If set, every endpoint requires `Authorization: Bearer <token>`."""
    executor: str = "inprocess"
    spark_master: str | None = None
    spark_levels: Path | None = None
    """With the Spark executor: keep arrangements as key-partitioned Parquet levels in this
    directory (which the cluster must share at the same path) instead of Spark's block managers
    (`localCheckpoint`), so they survive the loss of an executor and are bounded by disk."""
    history_retention: int = Field(default=10_000, ge=1)
    """How many timestamps of change history are retained (for `since=` resumption)."""
    max_request_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_statements: int = Field(default=1000, ge=1)
    max_result_rows: int = Field(default=100_000, ge=1)
    max_result_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """The largest result (approximate bytes, as DuckDB holds it in Arrow form) a SELECT may
    return; a larger one is refused with `result_too_large` before it is converted."""
    as_of_timeout: float = Field(default=10.0, gt=0)
    """Default seconds a `rows?as_of=T` request waits for the view to become complete."""
    query_timeout: float = Field(default=30.0, gt=0)
    write_timeout: float = Field(default=60.0, gt=0)
    """Seconds a write request may spend before COMMIT (its statements, and computing new
    views); past it the write is rolled back and answered 408 `timeout`."""
    query_memory_limit: str = "1GB"
    query_concurrency: int = Field(default_factory=default_query_concurrency, ge=1)
    """Read queries that run at once (see `server.admission`); others wait for a slot up to
    `query_timeout`, then are answered 503 `busy`."""
    iteration_limit: int = Field(default=10_000, ge=1)
    view_time_budget: float = Field(default=300.0, gt=0)
    """Seconds one view's dataflow may run per update (or to hydrate at creation) before the
    view (or the CREATE) fails with `budget_exceeded`; bounds work an iteration limit cannot."""
    view_work_budget: int = Field(default=100_000_000, ge=1)
    """Join outputs one view's dataflow may produce per update (bounds time and the memory of
    one round of a recursion)."""
    view_memory_budget: int = Field(default=50_000_000, ge=1)
    """Records one view's dataflow may hold in its arrangements."""
    checkpoint_interval: int = Field(default=256, ge=1)
    """Checkpoint the views' history every this many timestamps (and at shutdown): after a
    crash, a restart replays at most this many timestamps of the change log."""
    hydrate_wait: float = Field(default=30.0, ge=0)
    """Seconds a request that needs the views waits for them while the server recovers at
    start-up, before it is answered 503 `hydrating`."""
    subscriber_queue_limit: int = Field(default=10_000, ge=1)
    """Messages a change-feed subscriber may leave unread before it is disconnected."""
    subscriber_queue_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """Encoded bytes a subscriber may leave unread before it is disconnected."""
    subscriber_stall_seconds: float = Field(default=60.0, gt=0)
    """A feed whose connection accepts nothing for this long is closed."""
    heartbeat_seconds: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _check_storage(self) -> Settings:
        if not self.memory and self.data_dir is None:
            raise ValueError("either data_dir or memory=True is required")
        return self

    @property
    def import_path(self) -> Path | None:
        """The import directory for `COPY ... FROM`, or None when COPY is disabled."""
        if self.import_dir is not None:
            return Path(self.import_dir)
        if self.memory or self.data_dir is None:
            return None
        return Path(self.data_dir) / "import"

    @property
    def loads_path(self) -> Path | None:
        """Where a write puts the Parquet files that dataflows load (None: a temporary
        directory, without a data directory)."""
        if self.memory or self.data_dir is None:
            return None
        return Path(self.data_dir) / "loads"

    @property
    def database_path(self) -> str:
        """The DuckDB database file (or ':memory:')."""
        if self.memory or self.data_dir is None:
            return ":memory:"
        return str(Path(self.data_dir) / "store.duckdb")
