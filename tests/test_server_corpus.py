"""Standard SQL the outside corpus found refused or misreported (issue 13, item 5), through the
real server: a view with a column list, a parenthesised join in FROM, and a BLOB literal that is
refused naming the construct at its position. The views are checked against recomputation
(DuckDB running the body through /query) after writes and after a restart.
"""

from __future__ import annotations

from pathlib import Path

from server_harness import Server, multiset

BODY = "SELECT a.x, b.y, a.x * b.y FROM (a CROSS JOIN b) WHERE a.x <> b.y"


def _check(s: Server) -> None:
    got = s.rows("v")
    assert got["columns"] == ["c1", "c2", "c3"], got["columns"]
    assert multiset(got["rows"]) == multiset(s.query(BODY)["rows"])
    assert multiset(s.query("SELECT c1, c3 FROM v")["rows"]) == multiset(
        [[r[0], r[2]] for r in got["rows"]])


def test_view_column_list_and_parenthesised_join(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql("CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER)")
        r = s.http.post("/sql", json={"sql": f"CREATE VIEW v(c1, c2, c3) AS {BODY}"})
        assert r.status_code == 200, r.text
        s.sql("INSERT INTO a VALUES (1), (2), (3); INSERT INTO b VALUES (2), (5)")
        _check(s)
        s.sql("DELETE FROM a WHERE x = 1; INSERT INTO b VALUES (1)")
        _check(s)
        s.stop()
        s.start()
        _check(s)
        s.sql("INSERT INTO a VALUES (7)")
        _check(s)
    finally:
        s.stop()


def test_blob_literal_is_named(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql("CREATE TABLE a (x INTEGER)")
        for sql, col in [("CREATE VIEW w AS\nSELECT x, x'303132' FROM a", 11),
                         ("SELECT x'303132'", 8)]:
            r = s.http.post("/sql", json={"sql": sql})
            assert 400 <= r.status_code < 500, r.text
            err = r.json()["error"]
            assert err["code"] == "unsupported", err
            assert "BLOB literal" in err["message"], err
            assert (err["line"], err["column"]) == (sql.count("\n") + 1, col), err
        assert [v["name"] for v in s.http.get("/views").json()["views"]] == []
    finally:
        s.stop()
