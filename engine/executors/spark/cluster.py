"""The Spark executor's cluster management: the session, and the files it keeps on disk.

`_build_session` starts (or joins) a SparkSession whose Python workers can import diffsql's
modules and run the driver's Python, bound to 127.0.0.1 unless workers on other hosts must reach
the driver. With a data directory, materialised results are Parquet files: a `Level` deletes its
files when the last payload or batch that may read them is garbage, and a new executor removes
the directories that a dead process of this host left behind (`_remove_orphan_levels`).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import weakref
from typing import Any


class Level:
    """Parquet files holding one materialised result in the data directory.

    The files are deleted when the last object that reads them is garbage: every payload or
    batch whose DataFrame reads a level (directly, or lazily through a plan over it) holds it in
    `levels`, so a level outlives exactly the plans that may still read it, whether its batch
    was merged away, compacted, or dropped.
    """

    __slots__ = ("path", "__weakref__")

    def __init__(self, path: str) -> None:
        self.path = path
        weakref.finalize(self, shutil.rmtree, path, True)


def _remove_orphan_levels(data_dir: str) -> None:
    """Delete level directories left by a process of this host that is gone (a crash or a kill
    skips `close()`); directories of other hosts sharing `data_dir` are theirs to clean."""
    host = socket.gethostname()
    for name in os.listdir(data_dir):
        parts = name.rsplit("-", 2)
        if not name.startswith("levels-") or len(parts) != 3 or not parts[1].isdigit():
            continue
        if parts[0] != "levels-" + host:
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, another user's
        shutil.rmtree(os.path.join(data_dir, name), ignore_errors=True)


def _repo_root() -> str:
    """The directory holding the `engine` package: this file is engine/executors/spark/cluster.py.
    (Found from this file rather than by importing `engine`, which sits above the executors.)"""
    path = os.path.abspath(__file__)
    for _ in range(4):
        path = os.path.dirname(path)
    return path


def _build_session(master: str, partitions: int | None, conf: dict[str, str], app: str) -> Any:
    from pyspark.sql import SparkSession

    root = _repo_root()
    # Python workers must import engine/ and planner/ (closures refer to their modules) and run
    # the driver's Python, so cloudpickled functions load.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    pp = os.environ.get("PYTHONPATH", "")
    if root not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
    if partitions is None:
        partitions = 2
    # 127.0.0.1 only, unless workers on other hosts must reach the driver by name (containers).
    host = os.environ.get("DIFFSQL_SPARK_DRIVER_HOST", "127.0.0.1")
    bind = "127.0.0.1" if host == "127.0.0.1" else "0.0.0.0"
    if bind == "127.0.0.1":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", host)
        .config("spark.driver.bindAddress", bind)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        # Stable partition counts: batches stay hash-partitioned by key into `partitions`.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        # Merged-away batches' checkpoint blocks are freed when the JVM collects their RDDs.
        .config("spark.cleaner.periodicGC.interval", "5min")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
