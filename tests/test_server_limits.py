"""Limits that keep one request from taking the whole server (issue 10, items 7 and 8), against a
real server process: a write past `--write-timeout` is rolled back and releases the write lock;
a result past `--max-result-bytes` is refused before it grows the server; names that could not
be used safely (NUL bytes, longer than 255 characters) and TEMP tables and views are refused.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from server_harness import Server


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _error(r: Any) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "line", "column"}, body
    return body["error"]  # type: ignore[no-any-return]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    s = Server(tmp_path / "data", "--write-timeout", "1.5", "--query-timeout", "300").start()
    try:
        yield s
    finally:
        s.stop()


# An expensive subquery: DuckDB needs far longer than the time limit to finish it.
_SLOW = (
    "(SELECT count(*) FROM range(100000000000) a(x) WHERE x % 7 = 3)"
)


def test_write_past_time_limit_is_rolled_back_and_releases_the_lock(server: Server) -> None:
    server.sql(
        "CREATE TABLE t (id INTEGER, v INTEGER); INSERT INTO t SELECT x, x FROM range(100) r(x);"
        "CREATE VIEW s AS SELECT count(*) AS n, sum(v) AS total FROM t"
    )
    before = server.rows("s")
    # A request whose first statement is applied and whose second runs past the limit: none
    # of it may survive.
    started = time.monotonic()
    r = server.http.post(
        "/sql",
        json={"sql": f"INSERT INTO t VALUES (1000, 1); DELETE FROM t WHERE id < {_SLOW}"},
    )
    elapsed = time.monotonic() - started
    assert r.status_code == 408, r.text
    err = _error(r)
    assert err["code"] == "timeout"
    assert "rolled back" in err["message"]
    assert elapsed < 30, elapsed  # generous: the limit is 1.5 s
    assert server.rows("s")["rows"] == before["rows"]
    assert server.query("SELECT count(*), max(id) FROM t")["rows"] == [[100, 99]]
    # The write lock was released: a write and a snapshot query go through at once.
    done: list[Any] = []
    th = threading.Thread(target=lambda: done.append(server.sql("INSERT INTO t VALUES (200, 2)")))
    th.start()
    th.join(20)
    assert done, "a write after the timed-out one did not complete"
    assert server.rows("s")["rows"] == [[101, sum(range(100)) + 2]]
    # A write within the limit is untouched by the (cancelled) timer of the earlier writes.
    time.sleep(2)
    server.sql("UPDATE t SET v = v + 1 WHERE id = 200")
    assert server.rows("s")["rows"] == [[101, sum(range(100)) + 3]]


def test_write_time_limit_survives_restart_consistently(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--write-timeout", "1").start()
    try:
        s.sql("CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1), (2)")
        r = s.http.post("/sql", json={"sql": f"UPDATE t SET id = id + 10 WHERE id < {_SLOW}"})
        assert r.status_code == 408, r.text
    finally:
        s.stop()
    s.start()
    try:
        assert sorted(s.query("SELECT id FROM t")["rows"]) == [[1], [2]]
    finally:
        s.stop()


def test_huge_result_is_refused_without_growing_the_server(server: Server) -> None:
    assert server.proc is not None
    base = _peak_rss_mb(server.proc.pid)
    r = server.http.post("/query", json={"sql": "SELECT range(10000000)"})
    assert r.status_code == 400, r.text[:500]
    assert _error(r)["code"] == "result_too_large"
    # Many wide rows (under the row limit) too, via /sql.
    r = server.http.post(
        "/sql", json={"sql": "SELECT repeat('x', 10000) AS s FROM range(50000)"}
    )
    assert r.status_code == 400, r.text[:500]
    assert _error(r)["code"] == "result_too_large"
    grown = _peak_rss_mb(server.proc.pid) - base
    # DuckDB itself takes ~850 MB to build the list (it does not count it against its memory
    # limit); without the byte limit, Python objects and JSON for it came on top (~1.7 GB).
    assert grown < 1000, f"server peak RSS grew by {grown:.0f} MB"
    # Ordinary results still work, with the same values as before.
    assert server.query("SELECT range(3) AS r, 'a' AS s")["rows"] == [[[0, 1, 2], "a"]]
    assert server.http.get("/health").status_code == 200


def test_temp_tables_and_views_are_refused(server: Server) -> None:
    for stmt in (
        "CREATE TEMP TABLE tt (a INTEGER)",
        "CREATE TEMPORARY TABLE tt (a INTEGER)",
        "CREATE TEMP VIEW tv AS SELECT 1 AS a",
    ):
        r = server.http.post("/sql", json={"sql": stmt})
        assert r.status_code == 400, r.text
        err = _error(r)
        assert err["code"] == "unsupported"
        assert "TEMP" in err["message"]
    r = server.http.post("/views", json={"sql": "CREATE TEMP VIEW tv AS SELECT 1 AS a"})
    assert r.status_code == 400, r.text
    assert server.http.get("/tables").json() == {"tables": []}
    assert server.http.get("/tables/tt").status_code == 404
    assert server.http.get("/views/tv").status_code == 404


def test_bad_names_are_refused(server: Server) -> None:
    long_ok = "t" * 255
    server.sql(f'CREATE TABLE "{long_ok}" (a INTEGER); CREATE VIEW "{"v" * 255}" AS SELECT 1 AS a'
               '; CREATE VIEW "w" AS SELECT 1 AS "a/b"')  # a column may hold a /
    assert server.http.get(f"/views/{'v' * 255}").status_code == 200
    cases = [
        ('CREATE TABLE "a\x00b" (a INTEGER)', "invalid_name"),
        ('CREATE TABLE ok (a INTEGER, "b\x00c" INTEGER)', "invalid_name"),
        ('CREATE VIEW "v\x00w" AS SELECT 1 AS a', "invalid_name"),
        ('CREATE VIEW "ü v/x" AS SELECT 1 AS a', "invalid_name"),  # not reachable at /views/
        ('CREATE TABLE "a/b" (a INTEGER)', "invalid_name"),
        (f'CREATE TABLE "{"t" * 256}" (a INTEGER)', "name_too_long"),
        (f'CREATE VIEW "{"v" * 70000}" AS SELECT 1 AS a', "name_too_long"),
        (f'CREATE TABLE ok (a INTEGER, "{"c" * 256}" INTEGER)', "name_too_long"),
        # the server's own tables' names (an UPDATE of such a table changed nothing), and
        # DuckDB's row id, which an UPDATE reads (a column so named made it take other rows)
        ("CREATE TABLE __diffsql_updated (r BIGINT)", "invalid_name"),
        ("CREATE VIEW __DIFFSQL_arrow_v AS SELECT 1 AS a", "invalid_name"),
        ("CREATE TABLE ok (k INTEGER, RowId INTEGER)", "invalid_name"),
    ]
    for stmt, code in cases:
        r = server.http.post("/sql", json={"sql": f"CREATE TABLE first (x INTEGER); {stmt}"})
        assert r.status_code == 400, (stmt[:60], r.text[:300])
        assert _error(r)["code"] == code, (stmt[:60], r.text[:300])
    r = server.http.post("/views", json={"sql": f'CREATE VIEW "{"v" * 300}" AS SELECT 1 AS a'})
    assert r.status_code == 400 and _error(r)["code"] == "name_too_long", r.text[:300]
    # Nothing of the refused requests was applied.
    names = {t["name"] for t in server.http.get("/tables").json()["tables"]}
    assert names == {long_ok}, names


def test_errors_while_a_result_streams_are_refusals_not_500s(tmp_path: Path) -> None:
    """DuckDB's errors raised after a query's first batches (its time limit reached while rows
    stream, a cast failing on a later row, strings past what one Arrow batch holds) are the
    same refusals as when they come first (408 `timeout`, 400 `type_error`, 400
    `result_too_large`): they reached the client as 500s, passed on by Arrow as OSErrors."""
    s = Server(tmp_path / "data", "--query-timeout", "2").start()
    try:
        # rows arrive all along a scan far longer than the limit
        for route in ("/query", "/sql"):
            r = s.http.post(route, json={
                "sql": "SELECT i FROM range(100000000000) r(i) WHERE hash(i) % 50000 = 0"})
            assert r.status_code == 408, r.text[:500]
            assert _error(r)["code"] == "timeout"
        # the cast fails at row 5,000, after four batches
        sql = "SELECT (CASE WHEN i = 5000 THEN 'abc' ELSE i::VARCHAR END)::INT AS x FROM range(9000) r(i)"
        r = s.http.post("/query", json={"sql": sql})
        assert r.status_code == 400, r.text[:500]
        assert _error(r)["code"] == "type_error"
        first = s.http.post("/query", json={"sql": sql.replace("5000", "5")})
        assert first.status_code == 400 and _error(first)["code"] == "type_error"
    finally:
        s.stop()
    # 2.5 GB of strings take more than the 2 s above on a loaded machine (a timeout then came
    # first): the server's default time limit
    s = Server(tmp_path / "data2").start()
    try:
        r = s.http.post("/query", json={
            "sql": "SELECT repeat('x', 100000000) AS s FROM range(25)"})
        assert r.status_code == 400, r.text[:500]
        assert _error(r)["code"] == "result_too_large"
        assert s.query("SELECT 41 + 1 AS x")["rows"] == [[42]]
        assert s.http.get("/health").status_code == 200
    finally:
        s.stop()
