"""Bad input (acceptance 3): each is a clear 4xx in the one error shape, nothing of the
request is applied, and the server keeps serving. Also authentication and size limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import duckdb
import httpx
import pytest
from server_harness import Server

from server.errors import duckdb_error


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("errors") / "data", "--max-request-bytes", "65536").start()
    s.sql(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, d DATE);"
        "INSERT INTO t VALUES (1, 'a', DATE '2024-01-01'), (2, 'b', NULL);"
        "CREATE VIEW v AS SELECT name FROM t"
    )
    yield s
    s.stop()


def state(s: Server) -> tuple[Any, ...]:
    health = s.http.get("/health").json()
    tables = s.http.get("/tables").json()
    views = [(v["name"], v["row_count"]) for v in s.http.get("/views").json()["views"]]
    rows = s.query("SELECT * FROM t ORDER BY id")["rows"]
    return health["timestamp"], tables, views, rows


def assert_error(
    r: httpx.Response, status: int | None = None, code: str | None = None
) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, r.text
    if status is not None:
        assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"code", "message", "line", "column"}
    assert isinstance(err["code"], str) and err["code"]
    assert isinstance(err["message"], str) and err["message"]
    if code is not None:
        assert err["code"] == code, err
    return err  # type: ignore[no-any-return]


BAD_SQL = [
    ("SELEC * FROM t", "syntax_error"),
    ("INSERT INTO t VALUES (3, 'c', NULL);\nINSERT INTO t VALUES (4, 'd' NULL)", "syntax_error"),
    ("INSERT INTO nope VALUES (1)", "unknown_table"),
    ("INSERT INTO t VALUES (3, 'c', NULL); INSERT INTO nope VALUES (1)", "unknown_table"),
    ("INSERT INTO t VALUES ('x', 'c', NULL)", "type_error"),
    ("INSERT INTO t VALUES (5, 'e', 'not a date')", "type_error"),
    ("INSERT INTO t VALUES (6, NULL, NULL)", "constraint_violation"),
    (
        "INSERT INTO t VALUES (7, 'g', NULL); INSERT INTO t VALUES (1, 'dup', NULL)",
        "constraint_violation",
    ),
    ("UPDATE t SET nope = 1", None),
    ("DELETE FROM v", "read_only_view"),
    ("CREATE TABLE x (a BLOB)", "unsupported"),
    ("CREATE TABLE t (a INTEGER)", "already_exists"),
    ("DROP TABLE t", "dependent_objects"),
    ("ALTER TABLE t ADD COLUMN z INTEGER", "unsupported"),
    ("CHECKPOINT", "unsupported"),
    ("COPY t TO '/tmp/x.csv'", "unsupported"),
    ("SET threads = 1", "unsupported"),
    ("INSERT INTO t SELECT * FROM read_csv('/etc/passwd')", "forbidden"),
    ("CREATE TABLE ok1 (a INTEGER); CREATE VIEW bad AS SELECT nope FROM ok1", None),
    ("CREATE TABLE ok2 (a INTEGER); SELECT * FROM nope", "unknown_table"),
    # DuckDB's message quotes a value cut inside a UTF-8 sequence, which its Python client
    # cannot decode (it raised UnicodeDecodeError: a 500)
    ("INSERT INTO t VALUES (30, 'é', NULL); UPDATE t SET name = CAST(name AS BIT) WHERE id = 30",
     "type_error"),
    ("INSERT INTO t VALUES (31, 'x', NULL); SELECT CAST('é' AS BIT)", "type_error"),
]


@pytest.mark.parametrize("sql,code", BAD_SQL)
def test_bad_sql_is_rejected_atomically(server: Server, sql: str, code: str | None) -> None:
    before = state(server)
    r = server.http.post("/sql", json={"sql": sql})
    assert_error(r, code=code)
    assert state(server) == before
    assert server.http.get("/health").status_code == 200


def test_error_position_is_in_the_request(server: Server) -> None:
    r = server.http.post("/sql", json={"sql": "INSERT INTO t VALUES (8, 'h', NULL);\n  SELEC 1"})
    err = assert_error(r, 400, "syntax_error")
    assert err["line"] == 2 and err["column"] is not None


# Statements DuckDB refuses at a place it points at; `@` marks the place (and is removed).
# Each is sent to /query (a SELECT) or /sql (also a write, which must roll back).
POINTED = [
    ("/query", "SELECT id,\n  @nosuch FROM t"),
    ("/sql", "SELECT id,\n  @nosuch FROM t"),
    ("/query", "SELECT id FROM t WHERE name > 'a' AND @sqrtt(id) > 1"),
    # after East Asian wide characters, which DuckDB's caret counts twice
    ("/query", "SELECT '漢字テスト' AS x, @sqrtt(id) FROM t"),
    # a line longer than DuckDB quotes whole: the quoted part is cut on both sides
    ("/query", "SELECT " + ", ".join(f"id + {i} AS c{i}" for i in range(12)) + ", @nosuch, "
     + ", ".join(f"id AS e{i}" for i in range(12)) + " FROM t"),
    # tabs and a zero-width space, which take no room in DuckDB's count
    ("/query", "SELECT id,\n\t\tid + 1,\n\t\t@nosuch FROM t"),
    ("/query", "SELECT '\u200b' AS x,\t@nosuch FROM t"),
    # CR LF line ends
    ("/query", "SELECT id,\r\n name,\r\n   @nosuch FROM t"),
    # the second statement of a request, its error on its own third line
    ("/sql", "INSERT INTO t VALUES (20, 'x', NULL);\nSELECT id + 100, name,\n\n  @nope FROM t"),
    # a statement that starts mid-line: its columns count from the request's line start
    ("/sql", "SELECT 1 AS one;  SELECT id,\tname, @nosuch FROM t"),
    # DuckDB ran the statement followed by a RETURNING of ours
    ("/sql", "INSERT INTO t VALUES (22, 'w',\n  @nosuchfn(2))"),
    # Statements DuckDB ran as a text of our own (an UPDATE's rows are first selected; other
    # DML is rendered again from its tree): the place is the statement's first character,
    # never a place DuckDB's context names in another text.
    ("/sql", "@DELETE FROM t\nWHERE id IN (SELECT nope FROM t)"),
    ("/sql", "INSERT INTO t VALUES (21, 'y', NULL);\n@INSERT INTO t\nSELECT id + 100, name,\n"
     "  nope FROM t"),
    ("/sql", "@UPDATE t SET name = 'z'\nWHERE nope = 1"),
    # a combining mark before the place (a stray virama), where the grapheme splits of
    # DuckDB's utf8proc and of `regex` may differ
    ("/query", "@SELECT '\u094d\u0915' AS x, nosuch FROM t"),
    # a line cut on both sides whose quoted part is in it twice: DuckDB's place is ambiguous
    ("/query", "@SELECT " + " UNION ALL SELECT ".join(
        ["(SELECT id FROM t WHERE " + "1 = 1 AND " * 6 + "nope = 1" + " AND 1 = 1" * 8 + ") AS c"]
        * 2)),
]


@pytest.mark.parametrize("route,marked", POINTED)
def test_duckdb_errors_point_at_their_place(server: Server, route: str, marked: str) -> None:
    """A statement DuckDB refuses at a place (an unknown column or function) is refused with
    that place's line and column in the request, not the statement's first character."""
    at = marked.index("@")
    sql = marked.replace("@", "")
    want_line = sql.count("\n", 0, at) + 1
    want_column = at - (sql.rfind("\n", 0, at) + 1) + 1
    before = state(server)
    r = server.http.post(route, json={"sql": sql})
    err = assert_error(r, 400)
    assert (err["line"], err["column"]) == (want_line, want_column), err
    assert state(server) == before


# Text that cannot be parsed: `@` marks the place, then what the message says.
UNPARSED = [
    # an unterminated string, quoted name or comment: sqlglot's tokenizer says neither what
    # nor where (its message quoted the request, cut short)
    ("/sql", "INSERT INTO t VALUES (30, 'q', NULL);\nSELECT @'abc", "unterminated string literal"),
    ("/query", 'SELECT id, @"nam FROM t', "unterminated quoted identifier"),
    ("/sql", "SELECT 1; -- a 'quote\n SELECT /* a */ 2, @/* open", "unterminated /* comment"),
    ("/query", "SELECT 'it''s', @E'a\\' FROM t", "unterminated string literal"),
    ("/query", "SELECT @$$ a FROM t", "unterminated dollar-quoted string"),
    ("/query", "SELECT @/* /* */ 'x", "unterminated /* comment"),  # comments nest
    # sqlglot's descriptions name its tokens and classes
    ("/sql", "SELECT 1;\nSELECT 2;\n   SELECT FROM @WHERE", "Expected table name but got 'WHERE'"),
    ("/sql", "CREATE VIEW sy AS SELECT id FROM t @WHERE;", "incomplete WHERE"),
]


@pytest.mark.parametrize("route,marked,says", UNPARSED)
def test_text_that_cannot_be_parsed_is_refused_at_its_place(
        server: Server, route: str, marked: str, says: str) -> None:
    at = marked.index("@")
    sql = marked.replace("@", "")
    before = state(server)
    err = assert_error(server.http.post(route, json={"sql": sql}), 400, "syntax_error")
    assert (err["line"], err["column"]) == (sql.count("\n", 0, at) + 1,
                                           at - (sql.rfind("\n", 0, at) + 1) + 1), err
    assert says in err["message"] and "<" not in err["message"], err
    assert state(server) == before


@pytest.mark.parametrize(
    "sql",
    [
        "COPY t TO '/tmp/diffsql-test.csv'",
        "ATTACH '/tmp/diffsql-test.duckdb' AS x",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM glob('/etc/*')",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET threads = 1",
        "PRAGMA version",
        "SELECT * FROM main.t",
        "INSERT INTO t VALUES (9, 'i', NULL)",
        "DELETE FROM t",
        "SELECT 1; SELECT 2",
        "SELECT current_setting('threads')",
        "SELECT * FROM query('SELECT 1')",
    ],
)
def test_query_sandbox(server: Server, sql: str) -> None:
    before = state(server)
    r = server.http.post("/query", json={"sql": sql})
    assert_error(r)
    assert state(server) == before


DUCKDB_REFUSES = [
    "SELECT CAST('a' AS INT)", "SELECT nope", "SELECT * FROM nope", "SELEC 1",
    "SELECT 2147483647::INT + 1", "INSERT INTO k VALUES (1)", "COMMIT",
    "SELECT * FROM read_csv('/nonexistent/x.csv')", "SELECT error('boom')",
]


def test_duckdb_errors_passed_on_as_text_keep_their_class() -> None:
    """A DuckDB error that reaches the server as text (Arrow's `OSError` of a streamed
    result, a message the client could not decode) is made the class DuckDB gives it, so it
    is refused with the same code. Oracle: DuckDB's own class for each error."""
    con = duckdb.connect()
    con.execute("CREATE TABLE k (a INTEGER PRIMARY KEY); INSERT INTO k VALUES (1)")
    for sql in DUCKDB_REFUSES:
        with pytest.raises(duckdb.Error) as refused:
            con.execute(sql).fetchall()
        again = duckdb_error(str(refused.value))
        assert type(again) is type(refused.value), (sql, type(again), type(refused.value))
        assert str(again) == str(refused.value)


def test_undecodable_duckdb_errors_in_queries(server: Server) -> None:
    """A query DuckDB refuses with a message its Python client cannot decode (a value cut
    inside a UTF-8 sequence) is a 400 with DuckDB's message, the cut sequence replaced."""
    for sql in ("SELECT CAST('é' AS BIT)", "SELECT CAST(name || 'é' AS BIT) FROM t"):
        err = assert_error(server.http.post("/query", json={"sql": sql}), 400, "type_error")
        assert err["message"].startswith("Conversion Error: Invalid character"), err


def test_malformed_requests(server: Server) -> None:
    before = state(server)
    r = server.http.post("/sql", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(r, 400, "invalid_json")
    r = server.http.post("/sql", content=b'{"sql": "SELECT \xff"}',  # not UTF-8
                         headers={"content-type": "application/json"})
    assert_error(r, 400, "invalid_json")
    assert_error(server.http.post("/sql", json={"query": "SELECT 1"}), 400, "invalid_request")
    assert_error(server.http.post("/sql", json={"sql": ""}), 400)
    assert_error(server.http.post("/query", json=["SELECT 1"]), 400, "invalid_request")
    assert_error(server.http.get("/nope"), 404, "not_found")
    assert_error(server.http.put("/sql"), 405, "method_not_allowed")
    assert_error(server.http.get("/views/nope/rows"), 404, "unknown_view")
    assert_error(server.http.get("/views/v/rows", params={"as_of": "x"}), 400)
    assert_error(server.http.post("/views", json={"sql": "SELECT 1"}), 400)
    big = "INSERT INTO t VALUES " + ", ".join(f"({i + 100}, 'x', NULL)" for i in range(5000))
    assert_error(server.http.post("/sql", json={"sql": big}), 413, "payload_too_large")
    # The same body sent in chunks, with no Content-Length: the limit is found while reading.
    body = json.dumps({"sql": big}).encode()
    chunks = (body[i : i + 4096] for i in range(0, len(body), 4096))
    r = server.http.post("/sql", content=chunks, headers={"content-type": "application/json"})
    assert_error(r, 413, "payload_too_large")
    assert state(server) == before


def test_select_errors_in_a_write_request_roll_back(server: Server) -> None:
    before = state(server)
    r = server.http.post(
        "/sql", json={"sql": "INSERT INTO t VALUES (10, 'j', NULL); SELECT nope FROM t"}
    )
    assert_error(r, 400)
    assert state(server) == before


def test_token_required_everywhere(tmp_path: Any) -> None:
    s = Server(tmp_path / "data", token="s3cret").start()
    try:
        for method, path in [
            ("GET", "/health"),
            ("GET", "/tables"),
            ("POST", "/sql"),
            ("GET", "/docs"),
            ("GET", "/views/x/changes"),
        ]:
            r = s.http.request(method, f"{path}", json={"sql": "SELECT 1"})
            assert_error(r, 401, "unauthorized")
            r = s.http.request(
                method,
                f"{path}",
                json={"sql": "SELECT 1"},
                headers={"Authorization": "Bearer wrong"},
            )
            assert_error(r, 401, "unauthorized")
        assert s.sql("CREATE TABLE a (x INTEGER)")[0]["statement"] == "CREATE TABLE"
        # Never in the query string (it would land in access logs).
        r = s.http.get("/tables", params={"access_token": "s3cret"})
        assert_error(r, 401, "unauthorized")
    finally:
        s.stop()


def test_a_view_that_cannot_be_computed_is_refused_at_its_statement(server: Server) -> None:
    """`view_error` (a view whose evaluation fails: created so, or read by a SELECT of a write
    that makes it fail) points at the statement that failed, as every error without a place
    of its own does (it had no line or column)."""
    server.sql("CREATE VIEW vf AS SELECT CAST(id * 100000 AS INTEGER) * id AS x FROM t")
    try:
        for marked in ("INSERT INTO t VALUES (40, 'p', NULL);\n  @CREATE VIEW v0 AS "
                       "SELECT CAST(id * 100000000000 AS INTEGER) AS x FROM t",
                       "INSERT INTO t VALUES (100000, 'big', NULL);\n\t@SELECT count(*) FROM vf",
                       "SELECT 1; @CREATE VIEW v1 AS WITH RECURSIVE r(x) AS (SELECT 1 UNION "
                       "SELECT x + 1 FROM r) SELECT x FROM r"):
            at = marked.index("@")
            sql = marked.replace("@", "")
            before = state(server)
            err = assert_error(server.http.post("/sql", json={"sql": sql}), 400, "view_error")
            assert (err["line"], err["column"]) == (sql.count("\n", 0, at) + 1,
                                                   at - (sql.rfind("\n", 0, at) + 1) + 1), err
            assert state(server) == before
    finally:
        server.sql("DROP VIEW vf")


def test_a_new_view_over_a_failed_view_is_refused_at_its_statement(server: Server) -> None:
    """A view that reads a failed view is refused (409 `view_failed`) at its CREATE VIEW, in a
    script and by POST /views (it had no line or column)."""
    server.sql("CREATE VIEW vbad AS SELECT CAST(id * 100000 AS INTEGER) * id AS x FROM t")
    try:
        out = server.http.post("/sql", json={"sql": "INSERT INTO t VALUES (100001, 'big', NULL)"})
        assert [f["name"] for f in out.json()["failed_views"]] == ["vbad"], out.text
        sql = "INSERT INTO t VALUES (41, 'q', NULL);\n  CREATE VIEW vover AS SELECT x FROM vbad"
        before = state(server)
        err = assert_error(server.http.post("/sql", json={"sql": sql}), 409, "view_failed")
        assert (err["line"], err["column"]) == (2, 3), err
        assert state(server) == before
        err = assert_error(server.http.post(
            "/views", json={"sql": "CREATE VIEW vover AS SELECT x FROM vbad"}), 409,
            "view_failed")
        assert (err["line"], err["column"]) == (1, 1), err
    finally:
        server.sql("DELETE FROM t WHERE id = 100001; DROP VIEW vbad")
