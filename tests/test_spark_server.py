"""The real server on a real standalone Spark cluster.

Invariant checked: with `diffsql serve --executor spark --spark-master spark://...`, a recursive
view maintained under INSERT/DELETE equals the reachability computed in Python after every write,
and the test stops every process it started (master, worker, server) whatever happens.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import Server, free_port

pytestmark = pytest.mark.spark

REACH = (
    "WITH RECURSIVE reach(x) AS (SELECT 1 UNION SELECT edges.dst FROM edges"
    " JOIN reach ON edges.src = reach.x) SELECT x FROM reach"
)


def spark_class() -> tuple[str, dict[str, str]]:
    pyspark = pytest.importorskip("pyspark")
    home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_NO_DAEMONIZE="1")
    return os.path.join(home, "bin", "spark-class"), env


def wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"process exited: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {text!r}: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe, env = spark_class()
    tmp = tmp_path_factory.mktemp("spark-cluster")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port = free_port()
        mlog = tmp / "master.log"
        master = subprocess.Popen(
            [exe, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
             str(port), "--webui-port", str(free_port())],
            env=env, stdout=mlog.open("wb"), stderr=subprocess.STDOUT,
        )
        procs.append(master)
        wait_for(mlog, "I have been elected leader", master, 90)
        url = f"spark://127.0.0.1:{port}"
        wlog = tmp / "worker.log"
        worker = subprocess.Popen(
            [exe, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--webui-port", str(free_port()), "--cores", "2", "--memory", "2g",
             "--work-dir", str(tmp / "work")],
            env=env, stdout=wlog.open("wb"), stderr=subprocess.STDOUT,
        )
        procs.append(worker)
        wait_for(wlog, "Successfully registered with master", worker, 90)
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)


def reachable(edges: set[tuple[int, int]]) -> set[int]:
    seen, todo = {1}, [1]
    while todo:
        n = todo.pop()
        for a, b in edges:
            if a == n and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def test_recursive_view_on_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    # Arrangements as Parquet levels in a directory the cluster shares (same host, same path).
    levels = tmp_path / "levels"
    # Each iteration of the loop is several Spark jobs on the cluster: creating the view takes
    # about a minute here, so the write time limit is raised to the client's (README: Spark).
    server = Server(tmp_path / "data", "--executor", "spark", "--spark-master", cluster,
                    "--spark-levels", str(levels), "--write-timeout", "300")
    server.data_dir.mkdir()
    try:
        server.start(timeout=120)
        edges = {(1, 2), (2, 3), (3, 4), (5, 6)}
        server.sql("CREATE TABLE edges (src INTEGER, dst INTEGER)")
        server.sql("INSERT INTO edges VALUES " + ", ".join(f"({a}, {b})" for a, b in edges))
        r = server.http.post("/views", json={"sql": f"CREATE VIEW reach AS {REACH}"}, timeout=300)
        assert r.status_code == 201, r.text
        health = server.http.get("/health").json()
        assert health["executor"] == "spark" and not health["failed_views"], health

        def check() -> None:
            rows = server.http.get("/views/reach/rows", timeout=300).json()["rows"]
            assert sorted(x for (x,) in rows) == sorted(reachable(edges))

        check()
        for add, remove in [((4, 5), (2, 3)), ((6, 1), None)]:
            stmts = []
            if add:
                edges.add(add)
                stmts.append(f"INSERT INTO edges VALUES ({add[0]}, {add[1]})")
            if remove:
                edges.discard(remove)
                stmts.append(f"DELETE FROM edges WHERE src = {remove[0]} AND dst = {remove[1]}")
            server.http.post("/sql", json={"sql": ";".join(stmts)}, timeout=300).raise_for_status()
            check()
        assert any(levels.rglob("level-*.parquet")), "arrangements were not written as levels"
        log = server.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
    finally:
        server.stop()
