"""A new user's first hour (issue #9): statements that change nothing take no timestamp,
non-finite doubles are valid JSON everywhere, and `/docs` renders from assets the server
serves itself. Every test runs the real server subprocess.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import REPO, SSE, Server
from websockets.sync.client import connect


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "data").start()
    try:
        yield s
    finally:
        s.stop()


def _strict(text: str) -> Any:
    """Parse JSON as RFC 8259 does: bare NaN / Infinity are not JSON."""

    def reject(token: str) -> Any:
        raise AssertionError(f"invalid JSON token {token} in {text[:200]}")

    return json.loads(text, parse_constant=reject)


def _health_ts(s: Server) -> int:
    r = s.http.get("/health")
    assert r.status_code == 200
    return int(r.json()["timestamp"])


# ---------------------------------------------------------------- no-op statements (#9.6)


def test_statements_that_change_nothing_take_no_timestamp(server: Server) -> None:
    s = server
    s.sql("CREATE TABLE t (a INTEGER); CREATE VIEW v AS SELECT a FROM t")
    ts = s.sql("INSERT INTO t VALUES (1)")[0]["timestamp"]
    assert _health_ts(s) == ts
    feed = SSE(s, "v", snapshot=False)
    try:
        for script in (
            "CREATE TABLE IF NOT EXISTS t (a INTEGER)",
            "CREATE VIEW IF NOT EXISTS v AS SELECT a FROM t",
            "DROP VIEW IF EXISTS nope",
            "DROP TABLE IF EXISTS nope",
            "DELETE FROM t WHERE a > 100",
            "UPDATE t SET a = a + 1 WHERE a < 0",
            "INSERT INTO t SELECT a FROM t WHERE false",
            "CREATE TABLE IF NOT EXISTS t (a INTEGER); DROP VIEW IF EXISTS nope; SELECT count(*) FROM t",
        ):
            results = s.sql(script)
            # The result names the state it saw: the latest committed timestamp.
            assert all(r["timestamp"] == ts for r in results), (script, results)
            assert _health_ts(s) == ts, script
        info = s.http.get("/views/v").json()
        assert info["complete_through"] == ts
        # The next real write takes the very next timestamp, and the feed sees it as such:
        # no empty transactions were published in between.
        nxt = s.sql("CREATE TABLE IF NOT EXISTS t (a INTEGER); INSERT INTO t VALUES (2)")
        assert [r["timestamp"] for r in nxt] == [ts + 1, ts + 1]
        msgs = []
        while not msgs or msgs[-1]["type"] != "progress" or msgs[-1]["timestamp"] < ts + 1:
            msgs.append(feed.next())
        updates = [m for m in msgs if m["type"] == "update"]
        assert [m["timestamp"] for m in updates] == [ts + 1]
        assert updates[0]["updates"] == [{"row": [2], "diff": 1}]
    finally:
        feed.close()
    # A request that does change something still takes one timestamp, and a no-op statement
    # in it does not prevent that.
    r = s.sql("DROP VIEW IF EXISTS nope; DROP VIEW v")
    assert r[1]["dropped"] is True and r[1]["timestamp"] == ts + 2


def test_noop_state_survives_restart(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql("CREATE TABLE t (a INTEGER)")
        ts = s.sql("INSERT INTO t VALUES (1)")[0]["timestamp"]
        s.sql("CREATE TABLE IF NOT EXISTS t (a INTEGER)")
        s.stop()
        s.start()
        assert _health_ts(s) == ts
        assert s.sql("INSERT INTO t VALUES (2)")[0]["timestamp"] == ts + 1
    finally:
        s.stop()


# ---------------------------------------------------------------- non-finite doubles (#9.6)

# What JSON carries for non-finite doubles: DuckDB's spelling (to_json writes Infinity,
# -Infinity, NaN), as strings, as PostgreSQL's to_json does, so the body stays valid JSON.
NON_FINITE = ["-Infinity", "Infinity", "NaN"]


def test_non_finite_doubles_are_json_strings_everywhere(server: Server) -> None:
    s = server
    s.sql(
        "CREATE TABLE t (k INTEGER, x DOUBLE, r REAL);"
        "CREATE VIEW v AS SELECT k, x, r FROM t WHERE k >= 0"
    )
    feed = SSE(s, "v", snapshot=False)
    with connect(f"{s.ws_url}/views/v/changes?snapshot=false") as ws:
        _check_non_finite(s, feed, ws)
    feed.close()


def _check_non_finite(s: Server, feed: SSE, ws: Any) -> None:
    r = s.http.post(
        "/sql",
        json={
            "sql": "INSERT INTO t VALUES (1, 'inf', 'inf'), (2, '-inf', '-inf'), "
            "(3, 'nan', 'nan'), (4, 1.5, 0.25);"
            "SELECT k, x, r, x * 2 AS y FROM t ORDER BY k"
        },
    )
    assert r.status_code == 200, r.text
    body = _strict(r.text)
    ts = body["results"][0]["timestamp"]
    expected = [
        [1, "Infinity", "Infinity"],
        [2, "-Infinity", "-Infinity"],
        [3, "NaN", "NaN"],
        [4, 1.5, 0.25],
    ]
    doubled = ["Infinity", "-Infinity", "NaN", 3.0]
    assert body["results"][1]["rows"] == [e + [d] for e, d in zip(expected, doubled, strict=True)]

    r = s.http.post("/query", json={"sql": "SELECT k, x, r FROM v ORDER BY k"})
    assert r.status_code == 200, r.text
    assert _strict(r.text)["rows"] == expected

    r = s.http.get("/views/v/rows")
    assert r.status_code == 200, r.text
    assert sorted(_strict(r.text)["rows"]) == expected

    got: list[Any] = []
    while True:
        m = feed.next()
        if m["type"] == "update":
            got += [u["row"] for u in m["updates"]]
        if m["type"] == "progress" and m["timestamp"] >= ts:
            break
    assert sorted(got) == expected

    got = []
    while True:
        m = _strict(ws.recv(timeout=20))
        if m["type"] == "update":
            got += [u["row"] for u in m["updates"]]
        if m["type"] == "progress" and m["timestamp"] >= ts:
            break
    assert sorted(got) == expected


def test_non_finite_doubles_raw_sse_text_is_valid_json(server: Server) -> None:
    s = server
    s.sql("CREATE TABLE t (x DOUBLE); CREATE VIEW v AS SELECT x FROM t")
    s.sql("INSERT INTO t VALUES ('inf')")
    with s.http.stream("GET", "/views/v/changes", params={"snapshot": "true"}) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                data = _strict(line[5:])
                if "updates" in data:
                    assert data["updates"] == [{"row": ["Infinity"], "diff": 1}]
                    break


# ---------------------------------------------------------------- /docs offline (#9)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_assets_are_served_by_the_server_itself(server: Server, page: str) -> None:
    s = server
    r = s.http.get(page)
    assert r.status_code == 200
    html = r.text
    urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html))
    urls |= set(re.findall(r"""\burl\s*:\s*["']([^"']+)["']""", html))
    assert any(u.endswith(".js") for u in urls), urls
    if page == "/docs":
        assert any(u.endswith(".css") for u in urls), urls
    for u in sorted(urls):
        # Nothing from another host: the page must render with no network.
        assert not re.match(r"^[a-z]+:|^//", u), f"{page} references an external asset {u}"
        assert u.startswith("/"), u
        a = s.http.get(u)
        assert a.status_code == 200, (u, a.status_code)
        assert len(a.content) > 0, u
    # The OpenAPI document it loads is there and lists the API.
    spec = s.http.get("/openapi.json").json()
    assert "/sql" in spec["paths"]
    js = [u for u in urls if u.endswith(".js")]
    assert all(len(s.http.get(u).content) > 100_000 for u in js)  # the real bundle


def test_docs_need_the_token_when_one_is_set(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", token="s3cret").start()
    try:
        assert s.http.get("/docs").status_code == 401
        r = s.http.get("/docs", headers=s.headers())
        assert r.status_code == 200
        for u in re.findall(r"""(?:src|href)\s*=\s*["'](/[^"']+)["']""", r.text):
            assert s.http.get(u).status_code == 401
            assert s.http.get(u, headers=s.headers()).status_code == 200
    finally:
        s.stop()


# ---------------------------------------------------------------- the CLI (#9)


def _cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    env.pop("DIFFSQL_URL", None)
    env.pop("DIFFSQL_TOKEN", None)
    env.update(extra)
    return env


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`diffsql ARGS` with standard output a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_cli_env(**env),
        cwd=REPO.parent,
    )


def _cli_tty(*args: str, **env: str) -> tuple[int, str]:
    """`diffsql ARGS` with standard output (and error) a terminal; returns (exit code, text)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "server.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=_cli_env(**env),
        cwd=REPO.parent,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = p.wait(60)
    return code, b"".join(chunks).decode().replace("\r\n", "\n")


def test_cli_help_shows_default_url_and_environment() -> None:
    for args in (["--help"], ["sql", "--help"], ["query", "--help"], ["subscribe", "--help"]):
        r = _cli(*args)
        assert r.returncode == 0, r.stderr
        assert "DIFFSQL_URL" in r.stdout, args
        assert "http://127.0.0.1:8765" in r.stdout, args
    r = _cli("sql", "--help", DIFFSQL_URL="http://example.invalid:9")
    assert "now http://example.invalid:9" in r.stdout
    r = _cli("serve", "--help")
    for option in ("--max-result-rows", "--max-request-bytes", "--iteration-limit"):
        assert option in r.stdout


def test_cli_prints_tables_on_a_terminal_and_json_otherwise(server: Server) -> None:
    s = server
    s.sql(
        "CREATE TABLE t (id INTEGER, name VARCHAR, d DECIMAL(10,2));"
        "INSERT INTO t VALUES (1, 'ann', 1.50), (22, NULL, NULL);"
        "CREATE VIEW v AS SELECT id, name FROM t"
    )
    select = "SELECT id, name, d FROM t ORDER BY id"

    # A terminal gets a table, with DIFFSQL_URL as the server.
    code, out = _cli_tty("sql", select, DIFFSQL_URL=s.url)
    assert code == 0, out
    lines = out.strip().split("\n")
    assert lines[0].split("|")[0].strip() == "id" and "name" in lines[0] and "d" in lines[0]
    assert set(lines[1]) <= {"-", "+"}
    assert [c.strip() for c in lines[2].split("|")] == ["1", "ann", "1.50"]
    assert [c.strip() for c in lines[3].split("|")] == ["22", "NULL", "NULL"]
    assert lines[3].startswith("22") and lines[2].startswith(" 1")  # numbers right-aligned
    assert lines[-1] == "(2 rows)"
    assert not out.lstrip().startswith("{")

    code, out = _cli_tty("query", "SELECT count(*) AS n FROM v", "--url", s.url)
    assert code == 0, out
    assert out.strip().split("\n")[2].strip() == "2"

    code, out = _cli_tty("sql", "INSERT INTO t VALUES (3, 'c', 0)", "--url", s.url)
    assert code == 0 and out.startswith("INSERT 1 row at timestamp "), out

    code, out = _cli_tty("sql", "SELEC 1", "--url", s.url)
    assert code == 1 and "syntax_error" in out and "line 1" in out, out

    # --json on a terminal, and a pipe without it, get the server's JSON.
    code, out = _cli_tty("sql", select, "--json", "--url", s.url)
    assert code == 0
    assert json.loads(out)["results"][0]["rows"][0] == [1, "ann", "1.50"]
    r = _cli("query", select, DIFFSQL_URL=s.url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == [[1, "ann", "1.50"], [3, "c", "0.00"], [22, None, None]]


# ---------------------------------------------------------------- limits (#9)


def test_result_row_limit_is_configurable_and_documented(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--max-result-rows", "5", "--max-statements", "3").start()
    try:
        s.sql("CREATE TABLE t (a INTEGER); INSERT INTO t SELECT range FROM range(6)")
        s.sql("CREATE VIEW v AS SELECT a FROM t")
        for path, sql in (("/sql", "SELECT a FROM t"), ("/query", "SELECT a FROM v")):
            r = s.http.post(path, json={"sql": sql})
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "result_too_large"
            r = s.http.post(path, json={"sql": sql + " LIMIT 5"})
            assert r.status_code == 200, r.text
        assert len(s.rows("v")["rows"]) == 6  # reading a view has no row limit
        r = s.http.post("/sql", json={"sql": "SELECT 1; SELECT 2; SELECT 3; SELECT 4"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "too_many_statements"
    finally:
        s.stop()


def test_readme_limits_table_names_every_limit_option() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Limits") :]
    table = table[: table.index("\n## ")]
    help_text = _cli("serve", "--help").stdout
    options = set(re.findall(r"--(?:max|history|iteration|query|as-of|subscriber|write|view|hydrate|checkpoint)[a-z-]*", help_text))
    assert "--max-result-rows" in options and "--history-retention" in options
    for option in sorted(options):
        assert f"`{option}" in table, f"{option} is missing from the README's Limits table"
    for code in ("result_too_large", "payload_too_large", "too_complex", "history_unavailable"):
        assert code in table
    assert "100,000" in table
