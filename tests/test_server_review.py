"""Fixes from a security and robustness review, each checked against the real server:
DML cannot reach files or DuckDB's catalogs, over-nested SQL is a clean 400, a SELECT in a
write request is part of its transaction, failing views are reported and retried, EXPLAIN
through /sql, WebSocket parameter errors, tokens only in headers, and views over views reading
the upstream's arrangement."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_harness import Server, multiset
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("review") / "data").start()
    s.sql("CREATE TABLE x (a INTEGER, b VARCHAR); INSERT INTO x VALUES (1, 'one')")
    yield s
    s.stop()


def error(r: Any, code: str | None = None) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, r.text
    err = r.json()["error"]
    assert set(err) == {"code", "message", "line", "column"}
    if code is not None:
        assert err["code"] == code, err
    return err  # type: ignore[no-any-return]


def x_rows(s: Server) -> list[list[Any]]:
    return s.query("SELECT * FROM x ORDER BY a")["rows"]  # type: ignore[no-any-return]


# -- 1. DML cannot read files, the store's catalog or DuckDB's system catalogs ---------------


def test_dml_cannot_read_files_or_catalogs(server: Server, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("column1\ntop-secret\n")
    path = str(secret)
    before = x_rows(server)
    attacks = [
        # A CTE of the same name in a sibling subquery must not hide the file reference.
        f'INSERT INTO x SELECT 6000 + row_number() OVER (), column1 FROM "{path}", '
        f'(WITH "{path}" AS (SELECT 1) SELECT 1)',
        f"INSERT INTO x SELECT 1, column1 FROM '{path}'",
        f'INSERT INTO x SELECT 1, b FROM x WHERE b IN (SELECT column1 FROM "{path}")',
        "INSERT INTO x SELECT 6000, name FROM sqlite_master, "
        "(WITH sqlite_master AS (SELECT 1) SELECT 1)",
        "INSERT INTO x SELECT 6000, table_name FROM duckdb_tables",
        "INSERT INTO x SELECT 6000, table_name FROM duckdb_tables()",
        "INSERT INTO x SELECT 6000, schema_name FROM information_schema.schemata",
        "INSERT INTO x SELECT 6000, key FROM diffsql.meta",
        f"UPDATE x SET b = column1 FROM \"{path}\" WHERE x.a = 1",
        f"DELETE FROM x WHERE b IN (SELECT column1 FROM read_csv('{path}'))",
        "DELETE FROM x USING sqlite_master WHERE sqlite_master.name = x.b",
        f'WITH q AS (SELECT 1) INSERT INTO x SELECT 7000, column1 FROM "{path}"',
    ]
    for sql in attacks:
        r = server.http.post("/sql", json={"sql": sql})
        err = error(r)
        assert err["code"] in ("forbidden", "unknown_table"), (sql, err)
        assert x_rows(server) == before, sql
    # CTEs in an enclosing scope still work, in DML too.
    server.sql("WITH q(a, b) AS (SELECT 2, 'two') INSERT INTO x SELECT a, b FROM q")
    server.sql("DELETE FROM x WHERE a = 2")
    assert x_rows(server) == before


def test_store_connection_is_locked_down(tmp_path: Path) -> None:
    import duckdb

    from server.store import Store

    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    store = Store(str(tmp_path / "store.duckdb"))
    try:
        with pytest.raises(duckdb.PermissionException):
            store.conn.execute(f"SELECT * FROM read_csv('{secret}')")
        with pytest.raises(duckdb.Error):
            store.conn.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            store.conn.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS o")
    finally:
        store.close()


# -- 2. over-nested SQL --------------------------------------------------------------------


def test_too_complex_sql_is_a_clean_400(server: Server) -> None:
    nested = "SELECT " + "(" * 3000 + "1" + ")" * 3000
    chain = "SELECT " + "+".join(["1"] * 20_000)
    for sql in (nested, chain, "INSERT INTO x SELECT " + "+".join(["1"] * 20_000) + ", 'z'"):
        for path in ("/sql", "/query"):
            error(server.http.post(path, json={"sql": sql}), "too_complex")
    r = server.http.post("/sql", json={"sql": "EXPLAIN CREATE VIEW deep AS " + nested[0:]})
    error(r, "too_complex")
    assert server.http.get("/health").status_code == 200
    # Moderate nesting is fine.
    assert server.query("SELECT " + "(" * 20 + "1" + ")" * 20)["rows"] == [[1]]


# -- 3. a SELECT in a write request is inside its transaction ------------------------------


def test_select_error_rolls_back_the_write(server: Server) -> None:
    server.sql("CREATE TABLE atx (a INTEGER, b INTEGER); CREATE VIEW atx_v AS SELECT a FROM atx")
    before = server.query("SELECT count(*) FROM atx")["rows"]
    ts = server.http.get("/health").json()["timestamp"]
    sql = "INSERT INTO atx VALUES (4, 4); SELECT 1 // (b - 4) FROM atx"
    r = server.http.post("/sql", json={"sql": sql})
    err = error(r)
    assert err["line"] == 1 and err["column"] is not None
    assert server.query("SELECT count(*) FROM atx")["rows"] == before
    assert server.http.get("/health").json()["timestamp"] == ts
    assert server.rows("atx_v")["rows"] == []
    # SELECTs see the writes before them (tables and views), in order.
    res = server.sql(
        "INSERT INTO atx VALUES (1, 1); SELECT count(*) AS n FROM atx; SELECT * FROM atx_v;"
        "INSERT INTO atx VALUES (2, 2); SELECT count(*) AS n FROM atx_v"
    )
    assert [r["statement"] for r in res] == ["INSERT", "SELECT", "SELECT", "INSERT", "SELECT"]
    assert res[1]["rows"] == [[1]] and res[2]["rows"] == [[1]] and res[4]["rows"] == [[2]]
    assert len({r["timestamp"] for r in res}) == 1


# -- 4. failing views ----------------------------------------------------------------------

CAPPED = (
    "CREATE VIEW capped AS WITH RECURSIVE r(n) AS (SELECT n FROM seed UNION "
    "SELECT n + 1 FROM r WHERE n < 1000) SELECT n FROM r"
)


WANT = multiset([[n] for n in range(995, 1001)])


def test_failed_view_is_reported_and_retried(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--iteration-limit", "20").start()
    try:
        s.sql(
            "CREATE TABLE seed (n INTEGER); CREATE TABLE other (a INTEGER);"
            f"{CAPPED}; CREATE VIEW capped_n AS SELECT count(*) AS c FROM capped;"
            "CREATE VIEW other_count AS SELECT count(*) AS c FROM other"
        )
        sql = "INSERT INTO seed VALUES (1); INSERT INTO other VALUES (5)"
        r = s.http.post("/sql", json={"sql": sql})
        assert r.status_code == 200, r.text  # the write is valid: it commits
        body = r.json()
        failed = {f["name"]: f["error"] for f in body["failed_views"]}
        assert set(failed) == {"capped", "capped_n"}
        assert failed["capped"]["code"] == "iteration_limit"
        assert "iteration limit" in failed["capped"]["message"]
        assert "capped" in failed["capped_n"]["message"]
        info = s.http.get("/views/capped").json()
        assert info["status"] == "failed" and "iteration limit" in info["error"]
        assert s.query("SELECT count(*) FROM seed")["rows"] == [[1]]
        assert s.rows("other_count")["rows"] == [[1]]
        # A write that does not touch it leaves it failed (and does not report it).
        r = s.http.post("/sql", json={"sql": "INSERT INTO other VALUES (6)"})
        assert r.json()["failed_views"] == []
        # Making the recursion converge brings it back, with correct contents.
        r = s.http.post("/sql", json={"sql": "DELETE FROM seed"})
        assert r.status_code == 200 and r.json()["failed_views"] == [], r.text
        for name in ("capped", "capped_n"):
            assert s.http.get(f"/views/{name}").json()["status"] == "running"
        assert s.rows("capped")["rows"] == []
        assert s.rows("capped_n")["rows"] == [[0]]
        s.sql("INSERT INTO seed VALUES (995)")
        assert multiset(s.rows("capped")["rows"]) == WANT
        assert s.rows("capped_n")["rows"] == [[6]]
        assert s.http.get("/health").json()["failed_views"] == []
        # After a restart its history replay diverges at the failing timestamp; it is rebuilt
        # from the current tables instead and runs.
        s.kill()
        s.start()
        assert s.http.get("/views/capped").json()["status"] == "running"
        assert multiset(s.rows("capped")["rows"]) == WANT
        assert s.rows("capped_n")["rows"] == [[6]]
        s.sql("INSERT INTO seed VALUES (999)")
        assert s.rows("capped_n")["rows"] == [[6]]
        # Failed at a restart: still failed, then retried at the next change.
        s.sql("INSERT INTO seed VALUES (1)")
        s.kill()
        s.start()
        assert s.http.get("/views/capped").json()["status"] == "failed"
        assert s.http.get("/health").json()["failed_views"] == ["capped", "capped_n"]
        s.sql("DELETE FROM seed WHERE n = 1")
        assert multiset(s.rows("capped")["rows"]) == WANT
        assert s.rows("capped_n")["rows"] == [[6]]
    finally:
        s.stop()


# -- 5. EXPLAIN through /sql ---------------------------------------------------------------


def test_explain_create_view(server: Server) -> None:
    server.sql("CREATE TABLE ex (k INTEGER, v INTEGER)")
    body = "SELECT k, sum(v) AS s FROM ex WHERE v > 0 GROUP BY k"
    res = server.sql(f"EXPLAIN CREATE VIEW ex_v AS {body}")
    assert res[0]["statement"] == "EXPLAIN" and res[0]["name"] == "ex_v"
    plan = res[0]["plan"]
    assert isinstance(plan, str) and "ex" in plan
    assert server.http.get("/views/ex_v").status_code == 404  # nothing was created
    server.sql(f"CREATE VIEW ex_v AS {body}")
    assert server.http.get("/views/ex_v/explain").json()["plan"] == plan
    # In a write request too, against the catalog as of that statement.
    res = server.sql(
        "CREATE TABLE ex2 (a INTEGER); EXPLAIN CREATE MATERIALIZED VIEW ex2_v AS SELECT a FROM ex2"
    )
    assert res[1]["statement"] == "EXPLAIN" and res[1]["plan"]
    assert server.http.get("/views/ex2_v").status_code == 404
    error(server.http.post("/sql", json={"sql": "EXPLAIN DELETE FROM ex"}), "unsupported")
    error(server.http.post("/sql", json={"sql": "EXPLAIN CREATE VIEW z AS SELECT * FROM nope"}))
    # EXPLAIN refuses what CREATE VIEW refuses, with the same code (it planned them all).
    select = "AS SELECT k FROM ex"
    for view, code in ((f"{'n' * 300} {select}", "name_too_long"),
                       (f"__diffsql_x {select}", "invalid_name"),
                       (f"ex_v {select}", "already_exists"), (f"ex {select}", "already_exists")):
        for sql in (f"CREATE VIEW {view}", f"EXPLAIN CREATE VIEW {view}"):
            error(server.http.post("/sql", json={"sql": sql}), code)
    for sql in (f"CREATE TEMP VIEW t_v {select}", f"CREATE OR REPLACE VIEW ex_v {select}"):
        error(server.http.post("/sql", json={"sql": sql}), "unsupported")
        error(server.http.post("/sql", json={"sql": "EXPLAIN " + sql}), "unsupported")
    assert server.sql(f"EXPLAIN CREATE VIEW IF NOT EXISTS ex_v {select}")[0]["plan"]


def _first_joined(plan: str) -> set[str]:
    """The two tables a left-deep plan joins first (its first two Get lines)."""
    gets = [line.split()[1] for line in plan.splitlines() if line.strip().startswith("Get ")]
    return set(gets[:2])


def test_join_order_follows_table_statistics(server: Server) -> None:
    """A view's joins are ordered by the tables' contents when it is created (row counts and
    distinct counts read from the store), so the same SQL is planned differently over
    different data, and gives DuckDB's answer either way."""
    server.sql(
        "CREATE TABLE st_a (k INTEGER, x INTEGER); CREATE TABLE st_b (k INTEGER, j INTEGER);"
        " CREATE TABLE st_c (j INTEGER, y INTEGER);"
        " INSERT INTO st_a SELECT i % 1000, i FROM range(2000) t(i);"
        " INSERT INTO st_b SELECT i, i % 1500 FROM range(2000) t(i);"
        " INSERT INTO st_c VALUES (1, 10), (2, 20), (1400, 30)"
    )
    body = ("SELECT st_a.x, st_c.y FROM st_a, st_b, st_c"
            " WHERE st_a.k = st_b.k AND st_b.j = st_c.j")
    # st_c is tiny: joining st_b to it first keeps the intermediate result to a few rows,
    # where FROM order (st_a with st_b) would arrange 2,000.
    plan = server.sql(f"EXPLAIN CREATE VIEW st_v1 AS {body}")[0]["plan"]
    assert _first_joined(plan) == {"st_b", "st_c"}, plan
    server.sql(f"CREATE VIEW st_v1 AS {body}")
    assert server.http.get("/views/st_v1/explain").json()["plan"] == plan
    # Now st_a is tiny and st_c large: the order turns around.
    server.sql(
        "DELETE FROM st_a WHERE x >= 3; INSERT INTO st_c SELECT i % 1500, i FROM range(5000) t(i)"
    )
    plan2 = server.sql(f"EXPLAIN CREATE VIEW st_v2 AS {body}")[0]["plan"]
    assert _first_joined(plan2) == {"st_a", "st_b"}, plan2
    server.sql(f"CREATE VIEW st_v2 AS {body}")
    want = multiset(server.query(body)["rows"])
    assert len(want) > 0
    for v in ("st_v1", "st_v2"):
        assert multiset(server.rows(v)["rows"]) == want, v


# -- 6. WebSocket parameter errors and tokens ----------------------------------------------


def test_websocket_bad_parameter_is_an_error_frame(server: Server) -> None:
    server.sql("CREATE VIEW IF NOT EXISTS xv AS SELECT a FROM x")
    # only ASCII digits, as the SSE feed's since (int() read '٣' as 3 and ' 3', '1_0')
    bad = ["?since=abc", "?snapshot=maybe", "?since=%D9%A3", "?since=%203", "?since=1_0",
           "?since=" + "9" * 45]
    for query in bad:
        code = "invalid_request"
        with connect(f"{server.ws_url}/views/xv/changes{query}", open_timeout=10) as ws:
            msg = json.loads(ws.recv(timeout=10))
            assert msg["type"] == "error" and msg["error"]["code"] == code, msg
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    with connect(f"{server.ws_url}/views/xv/changes?since=0&snapshot=false") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] in ("update", "progress")
    # a since with many leading zeros is that timestamp (its first 40 characters were read:
    # 0, and the feed repeated every update the client had)
    server.sql("INSERT INTO x VALUES (7, 'seven')")
    latest = server.rows("xv")["timestamp"]
    since = "0" * 42 + str(latest)
    with connect(f"{server.ws_url}/views/xv/changes?since={since}") as ws:
        assert json.loads(ws.recv(timeout=10)) == {"type": "progress", "timestamp": latest}
    for header in ("\u0663", "1_0", "x"):
        r = httpx.get(f"{server.url}/views/xv/changes", headers={"Last-Event-ID": header.encode()})
        assert error(r, "invalid_request")


def test_tokens_only_in_headers(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", token="s3cret").start()
    try:
        s.sql("CREATE TABLE a (x INTEGER); CREATE VIEW av AS SELECT x FROM a")
        r = s.http.get("/tables", params={"access_token": "s3cret"})
        error(r, "unauthorized")
        assert s.http.get("/tables", headers=s.headers()).status_code == 200
        url = f"{s.ws_url}/views/av/changes"
        with pytest.raises(InvalidStatus):
            connect(url + "?access_token=s3cret", open_timeout=10).close()
        with pytest.raises(InvalidStatus):
            connect(url, subprotocols=[Subprotocol("diffsql"), Subprotocol("bearer.wrong")]).close()
        protocols = [Subprotocol("diffsql"), Subprotocol("bearer.s3cret")]
        with connect(url, subprotocols=protocols, open_timeout=10) as ws:
            assert ws.subprotocol == "diffsql"
            assert json.loads(ws.recv(timeout=10))["type"] == "update"
        with connect(url, additional_headers=s.headers(), open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "update"
    finally:
        s.stop()
    assert "s3cret" not in s.log_path.read_text()


# -- 7. views over views read the upstream's arrangement -----------------------------------

UPSTREAM = "SELECT k, v FROM base WHERE v > 0"
DOWNSTREAM = {
    "picked": "SELECT k, v FROM up WHERE v > 5",
    "per_k": "SELECT k, count(*) AS n, sum(v) AS total FROM up GROUP BY k",
    "joined": "SELECT up.k, up.v, o.name FROM up JOIN names o ON up.k = o.k",
}


def check_views(s: Server) -> None:
    up = s.rows("up")
    assert multiset(up["rows"]) == multiset(s.query(UPSTREAM)["rows"])
    for name, body in DOWNSTREAM.items():
        want = s.query(body.replace("FROM up", f"FROM ({UPSTREAM}) AS up"))
        assert multiset(s.rows(name)["rows"]) == multiset(want["rows"]), name


def test_view_over_view_imports_the_upstream_arrangement(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql(
            "CREATE TABLE base (k INTEGER, v INTEGER); CREATE TABLE names (k INTEGER, name TEXT);"
            "INSERT INTO base VALUES (1, 3), (1, 7), (2, 9), (3, -1);"
            "INSERT INTO names VALUES (1, 'one'), (2, 'two');"
            f"CREATE VIEW up AS {UPSTREAM}"
        )
        # Created in one request together with its upstream's change, and in later ones.
        s.sql(f"INSERT INTO base VALUES (2, 8); CREATE VIEW picked AS {DOWNSTREAM['picked']}")
        for name in ("per_k", "joined"):
            s.sql(f"CREATE VIEW {name} AS {DOWNSTREAM[name]}")
        check_views(s)
        stamps = []
        for i in range(6):
            res = s.sql(
                f"INSERT INTO base VALUES ({i % 3}, {i * 2 - 3}); DELETE FROM base WHERE v = {i};"
                f"UPDATE names SET name = name || '{i}' WHERE k = {i % 2 + 1}"
            )
            stamps.append(res[0]["timestamp"])
            check_views(s)
        history = {n: s.rows(n, as_of=stamps[2]) for n in DOWNSTREAM}
        up_rows = len(s.rows("up")["rows"])
        picked = s.http.get("/views/picked").json()
        assert picked["arrangements"]["imports"] == [{"view": "up", "trace": "view:up"}]
        # Its own traces only: the output arrangement, no copy of up's rows.
        traces = picked["arrangements"]["traces"]
        assert [t["name"] for t in traces] == ["view:picked"]
        assert traces[0]["records"] == len(s.rows("picked")["rows"]) != up_rows
        up_info = s.http.get("/views/up").json()["arrangements"]
        assert up_info["imports"] == [] and "view:up" in [t["name"] for t in up_info["traces"]]
        s.kill()
        s.start()
        check_views(s)
        for n, rows in history.items():
            assert s.rows(n, as_of=stamps[2]) == rows, n
        s.sql("INSERT INTO base VALUES (1, 100), (4, 4)")
        check_views(s)
        assert s.http.get("/views/picked").json()["arrangements"]["imports"] == [
            {"view": "up", "trace": "view:up"}
        ]
        # Dropping a dependent releases its readers; the upstream keeps working.
        s.sql("DROP VIEW picked")
        s.sql("INSERT INTO base VALUES (2, 50)")
        assert multiset(s.rows("up")["rows"]) == multiset(s.query(UPSTREAM)["rows"])
    finally:
        s.stop()


def test_view_over_view_engine_objects(tmp_path: Path) -> None:
    """In process: the dependent dataflow reads the upstream's trace object (no input handle
    for it, no trace of its own holding the upstream's rows), and DROP releases its readers."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute(
            "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2), (3), (10), (20);"
            "CREATE VIEW v1 AS SELECT a FROM t WHERE a > 1; CREATE VIEW v2 AS SELECT a FROM v1 "
            "WHERE a < 15"
        )
        db.execute("INSERT INTO t VALUES (4), (30); DELETE FROM t WHERE a = 2")
        v1, v2 = db.views["v1"], db.views["v2"]
        assert sorted(r for r, n in v2.items() for _ in range(n)) == [(3,), (4,), (10,)]
        assert [h.op.name for h in v2.df.inputs] == []  # no input handle: v1 is imported
        assert v2.handles == {} and v2.imports == ["v1"]
        assert v1.arranged.trace not in v2.df.traces
        assert [t.name for t in v2.df.traces] == ["view:v2"]  # its own output only
        readers = len(v1.arranged.trace.readers)
        assert any(r in v1.arranged.trace.readers for r in v2.df.foreign_readers)
        db.execute("DROP VIEW v2")
        assert len(v1.arranged.trace.readers) < readers
        db.execute("INSERT INTO t VALUES (5)")
        assert sorted(r for r, n in db.views["v1"].items() for _ in range(n)) == [(3,), (4,), (5,), (10,), (20,), (30,)]
    finally:
        db.close()
