"""The `diffsql` command line: serve options, `sql` and `subscribe` against a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from server_harness import REPO, Server


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO.parent,
    )


def test_unknown_executor_is_rejected(tmp_path: Path) -> None:
    r = run_cli("serve", "--data-dir", str(tmp_path), "--executor", "no-such-executor")
    assert r.returncode == 2
    assert "no-such-executor" in r.stderr


def test_serve_requires_storage_choice() -> None:
    r = run_cli("serve")
    assert r.returncode == 2


def test_sql_and_subscribe(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--history-retention", "50").start()
    try:
        r = run_cli(
            "sql",
            "--url",
            s.url,
            "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (1);"
            "CREATE VIEW v AS SELECT a, count(*) AS n FROM t GROUP BY a",
        )
        assert r.returncode == 0, r.stderr
        results = json.loads(r.stdout)["results"]
        assert [x["statement"] for x in results] == ["CREATE TABLE", "INSERT", "CREATE VIEW"]
        r = run_cli("sql", "--url", s.url, "SELEC * FROM t")
        assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "syntax_error"
        # subscribe prints one JSON message per line; read the snapshot and its progress.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
        p = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "subscribe", "v", "--url", s.url],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO.parent,
        )
        try:
            assert p.stdout is not None
            first = json.loads(p.stdout.readline())
            second = json.loads(p.stdout.readline())
        finally:
            p.kill()
            p.wait(10)
        assert first["type"] == "update" and first["updates"] == [{"row": [1, 2], "diff": 1}]
        assert second == {"type": "progress", "timestamp": first["timestamp"]}
    finally:
        s.stop()


def test_urls_with_a_trailing_slash_and_view_names_that_need_escaping(tmp_path: Path) -> None:
    """`--url http://host:port/` works as without the slash (it asked for //sql: 404), and
    `subscribe` sends a view's name as one path segment: 'h#1' asked for view h's metadata
    (and printed nothing, exit 0), 'q?x' for view q."""
    s = Server(tmp_path / "data").start()
    try:
        r = run_cli("sql", "--url", s.url + "/",
                    'CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1); CREATE VIEW h AS '
                    'SELECT a FROM t; CREATE VIEW "h#1" AS SELECT a + 1 AS b FROM t;'
                    'CREATE VIEW "q?x" AS SELECT a + 2 AS c FROM t')
        assert r.returncode == 0, r.stderr
        r = run_cli("query", "--url", s.url + "/", "SELECT count(*) AS n FROM t")
        assert r.returncode == 0 and json.loads(r.stdout)["rows"] == [[1]], r.stderr
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
        for view, row in (("h#1", [2]), ("q?x", [3])):
            p = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "subscribe", view, "--url", s.url + "/"],
                stdout=subprocess.PIPE, text=True, env=env, cwd=REPO.parent)
            try:
                assert p.stdout is not None
                first = json.loads(p.stdout.readline())
            finally:
                p.kill()
                p.wait(10)
            assert first["type"] == "update" and first["updates"] == [{"row": row, "diff": 1}]
        # a URL that answers something other than a feed is an error, not silence
        r = run_cli("subscribe", "h", "--url", s.url + "/docs#")
        assert r.returncode == 1 and "change feed" in r.stderr, (r.returncode, r.stderr)
    finally:
        s.stop()
