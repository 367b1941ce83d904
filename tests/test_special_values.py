"""Every special value of every column type survives a view, deletes, restarts and a feed
exactly as DuckDB holds it (issue #10.1, #10.8).

Each type gets a table holding its special values (NaN, infinities, -0.0, the extremes of each
integer and DECIMAL width, the first and last representable dates and timestamps, empty, very
long and every-plane unicode strings), each twice, plus NULL. Views group by, deduplicate and
self-join on the value. After every step each view equals the same SELECT run by DuckDB
through `/query`, and a change feed resumed across the restarts accumulates to the view.
Values diffsql cannot carry exactly ('infinity' dates, years past 9999) are refused at the
write with `value_out_of_range`, never changed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.server_harness import SSE, Feed, Server

LONG = "é" * 70_000 + "x"
PLANES = "".join(chr(c) for c in (0x41, 0x7F, 0xE9, 0x4E2D, 0xFFFD, 0x1F600, 0x20000, 0x30000,
                                  0xE0041, 0xF0000, 0x10FFFD))

SPECIAL: dict[str, list[str]] = {
    "DOUBLE": ["'NaN'", "'inf'", "'-inf'", "-0.0", "0.0", "1.7976931348623157e308",
               "-1.7976931348623157e308", "5e-324", "1.5"],
    "REAL": ["'NaN'", "'inf'", "'-inf'", "-0.0", "0.0", "3.4028235e38", "1.0e-45", "0.1"],
    "SMALLINT": ["-32768", "32767", "0"],
    "INTEGER": ["-2147483648", "2147483647", "0"],
    "BIGINT": ["-9223372036854775808", "9223372036854775807", "0"],
    "DECIMAL(4,2)": ["-99.99", "99.99", "0.00", "-0.01"],
    "DECIMAL(18,3)": ["-999999999999999.999", "999999999999999.999", "0.001"],
    "DECIMAL(38,10)": ["-9999999999999999999999999999.9999999999",
                       "9999999999999999999999999999.9999999999", "0.0000000001"],
    "DATE": ["'0001-01-01'", "'9999-12-31'", "'2024-02-29'"],
    "TIMESTAMP": ["'0001-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'",
                  "'2024-02-29 12:00:00.5'"],
    "VARCHAR": ["''", f"'{LONG}'", f"'{PLANES}'", "' '", "'NaN'"],
    "BOOLEAN": ["true", "false"],
}

REFUSED: dict[str, list[str]] = {
    "DATE": ["'infinity'", "'-infinity'", "'10000-01-01'", "'0000-12-31'"],
    "TIMESTAMP": ["'infinity'", "'-infinity'", "'10000-01-01 00:00:00'"],
}

VIEWS = {
    "g": "SELECT x, count(*) AS n FROM {t} GROUP BY x",
    "d": "SELECT DISTINCT x FROM {t}",
    "j": "SELECT a.id AS i, b.id AS k FROM {t} a JOIN {t} b ON a.x = b.x",
}


def table_name(type_: str) -> str:
    return "t_" + "".join(ch if ch.isalnum() else "_" for ch in type_.lower())


def canon(v: Any) -> Any:
    # -0.0 and 0.0 are one value in SQL; which of the two a group shows is not specified
    # (DuckDB shows the first it met), so the comparison does not distinguish them.
    if isinstance(v, float) and v == 0.0:
        return 0.0
    return v


def bag(rows: list[list[Any]]) -> Counter[str]:
    return Counter(json.dumps([canon(v) for v in r]) for r in rows)


@pytest.fixture
def server(tmp_path: Path):
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()


def check(srv: Server, label: str) -> None:
    for type_ in SPECIAL:
        t = table_name(type_)
        for v, sql in VIEWS.items():
            got = srv.rows(f"{t}_{v}")["rows"]
            want = srv.query(sql.format(t=t))["rows"]
            assert bag(got) == bag(want), (label, type_, v, bag(got) - bag(want),
                                           bag(want) - bag(got))


def test_special_values_through_views_restarts_and_feeds(server: Server) -> None:
    srv = server
    for type_, values in SPECIAL.items():
        t = table_name(type_)
        srv.sql(f"CREATE TABLE {t} (id INTEGER, x {type_})")
        for v, sql in VIEWS.items():
            srv.sql(f"CREATE VIEW {t}_{v} AS {sql.format(t=t)}")
        rows = [f"({i}, {val})" for i, val in enumerate(values * 2)] + [f"({len(values) * 2}, NULL)"]
        srv.sql(f"INSERT INTO {t} VALUES " + ", ".join(rows))
    check(srv, "loaded")

    # A feed per grouping view, snapshot first, accumulated across both restarts.
    feeds: dict[str, Feed] = {}
    last = srv.sql("SELECT 1")[0].get("timestamp")
    for type_ in SPECIAL:
        name = f"{table_name(type_)}_g"
        feed, sse = Feed(), SSE(srv, name, snapshot=True)
        feed.read_until(sse, last)
        sse.close()
        feeds[name] = feed

    for type_, values in SPECIAL.items():
        t = table_name(type_)
        # delete one copy of every value (ids of the first copy), and update one value to another
        srv.sql(f"DELETE FROM {t} WHERE id < {len(values)} AND id % 2 = 0")
        srv.sql(f"UPDATE {t} SET x = (SELECT x FROM {t} WHERE id = {len(values)}) "
                f"WHERE id = {len(values) * 2 - 1}")
    check(srv, "deleted")

    srv.stop()
    srv.start()
    check(srv, "restarted")
    for type_, values in SPECIAL.items():
        t = table_name(type_)
        srv.sql(f"INSERT INTO {t} VALUES (100, {values[0]}), (101, {values[-1]})")
        srv.sql(f"DELETE FROM {t} WHERE id = {len(values) + 1}")
    srv.kill()
    srv.start()
    check(srv, "after SIGKILL")

    last = max(r["timestamp"] for r in [srv.sql(f"INSERT INTO {table_name('INTEGER')} "
                                                 "VALUES (200, 7)")[0]])
    for name, feed in feeds.items():
        sse = SSE(srv, name, since=feed.progress)
        feed.read_until(sse, last)
        sse.close()
        want = Counter(json.dumps(r) for r in srv.rows(name)["rows"])
        got = feed.contents
        assert bag([json.loads(k) for k in got.elements()]) == bag(
            [json.loads(k) for k in want.elements()]), (name, got - want, want - got)


@pytest.mark.parametrize("type_", sorted(REFUSED))
def test_values_that_would_change_are_refused(server: Server, type_: str) -> None:
    srv = server
    t = table_name(type_)
    srv.sql(f"CREATE TABLE {t} (id INTEGER, x {type_})")
    srv.sql(f"CREATE VIEW {t}_g AS SELECT x, count(*) AS n FROM {t} GROUP BY x")
    srv.sql(f"INSERT INTO {t} VALUES (1, {SPECIAL[type_][0]})")
    before = srv.rows(f"{t}_g")
    for i, val in enumerate(REFUSED[type_]):
        for stmt in (f"INSERT INTO {t} VALUES ({10 + i}, {val})",
                     f"UPDATE {t} SET x = {val} WHERE id = 1"):
            r = srv.http.post("/sql", json={"sql": stmt})
            assert r.status_code == 400, (stmt, r.text)
            err = r.json()["error"]
            assert err["code"] == "value_out_of_range", err
            assert "x" in err["message"] and "9999-12-31" in err["message"]
    after = srv.rows(f"{t}_g")
    assert after["rows"] == before["rows"] and after["timestamp"] == before["timestamp"]
    assert srv.query(f"SELECT count(*) FROM {t}")["rows"] == [[1]]


def test_tables_from_before_the_range_checks_get_them(tmp_path: Path) -> None:
    """A database written before DATE/TIMESTAMP columns had range checks: at start the server
    rebuilds such tables with the checks (rows, primary key and views unchanged), so a value
    that would change is refused there too; a table that already holds such a value keeps it
    unchecked, with a warning, and the server serves."""
    srv = Server(tmp_path / "data").start()
    srv.sql("CREATE TABLE ev (id INTEGER PRIMARY KEY, d DATE, ts TIMESTAMP NOT NULL);"
            "CREATE TABLE odd (id INTEGER, d DATE);"
            "INSERT INTO ev VALUES (1, DATE '2024-02-29', TIMESTAMP '2024-01-01 10:00:00'), "
            "(2, NULL, TIMESTAMP '0001-01-01 00:00:00'); INSERT INTO odd VALUES (1, NULL);"
            "CREATE VIEW ev_d AS SELECT d, count(*) AS n, max(ts) AS last FROM ev GROUP BY d")
    before = srv.rows("ev_d")
    srv.stop()
    # What an older server left: the same tables without the CHECK constraints.
    (db,) = [p for p in (tmp_path / "data").iterdir() if p.suffix == ".duckdb"]
    con = duckdb.connect(str(db))
    for name, defs in (("ev", "id INTEGER PRIMARY KEY, d DATE, ts TIMESTAMP NOT NULL"),
                       ("odd", "id INTEGER, d DATE")):
        con.execute(f"CREATE TABLE old_{name} ({defs})")
        con.execute(f"INSERT INTO old_{name} SELECT * FROM {name}")
        con.execute(f"DROP TABLE {name}")
        con.execute(f"ALTER TABLE old_{name} RENAME TO {name}")
    con.execute("INSERT INTO odd VALUES (2, DATE '10000-01-01')")
    assert con.execute("SELECT count(*) FROM duckdb_constraints() "
                       "WHERE constraint_type = 'CHECK'").fetchone() == (0,)
    con.close()

    srv.start()
    try:
        assert srv.rows("ev_d")["rows"] == before["rows"]
        for stmt in ("INSERT INTO ev VALUES (3, DATE '10000-01-01', TIMESTAMP '2024-01-01')",
                     "UPDATE ev SET ts = TIMESTAMP 'infinity' WHERE id = 1"):
            r = srv.http.post("/sql", json={"sql": stmt})
            assert r.status_code == 400, (stmt, r.text)
            assert r.json()["error"]["code"] == "value_out_of_range"
        r = srv.http.post("/sql", json={"sql": "INSERT INTO ev VALUES (1, NULL, TIMESTAMP "
                                                "'2024-01-01')"})
        assert r.status_code == 409, r.text  # the primary key is kept
        assert r.json()["error"]["code"] == "constraint_violation"
        srv.sql("INSERT INTO ev VALUES (3, DATE '2025-01-01', TIMESTAMP '2025-01-01')")
        want = srv.query("SELECT d, count(*) AS n, max(ts) AS last FROM ev GROUP BY d")["rows"]
        assert bag(srv.rows("ev_d")["rows"]) == bag(want)
        assert srv.query("SELECT count(*) FROM odd")["rows"] == [[2]]
        assert "odd keeps d without the range check" in srv.log_path.read_text()
    finally:
        srv.stop()
    # Done once: a table with its checks is not rebuilt at the next start.
    from server.store import Store

    store = Store(str(db))
    try:
        assert store.add_range_checks() == []
    finally:
        store.close()


@pytest.mark.parametrize("arrow_from", [10**9, 2], ids=["typed-lists", "arrow"])
def test_change_log_keeps_every_special_value_exactly(tmp_path: Path, arrow_from: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The change log (what a restart replays) holds exactly the rows DuckDB stored, whether a
    write logs one row (typed parameters) or many (typed lists, or Arrow columns from
    `store.ARROW_LOG_ROWS` rows where the column's type allows): same values, same Python
    types, the sign of -0.0 and every DECIMAL digit."""
    from server import store
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    monkeypatch.setattr(store, "ARROW_LOG_ROWS", arrow_from)
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for i, (type_, values) in enumerate(SPECIAL.items()):
            one, many = f"one_{i}", f"many_{i}"
            db.execute(f"CREATE TABLE {one} (id INTEGER, x {type_});"
                       f"CREATE TABLE {many} (id INTEGER, x {type_})")
            rows = [f"({k}, {v})" for k, v in enumerate([*values, "NULL"])]
            for r in rows:
                db.execute(f"INSERT INTO {one} VALUES {r}")  # one row per write
            db.execute(f"INSERT INTO {many} VALUES {', '.join(rows)}")
            db.execute(f"DELETE FROM {one} WHERE id = 0")
            for name in (one, many):
                rec = db.tables[name]
                stored = sorted(
                    repr(r) for r in db.store.conn.execute(f"SELECT * FROM {name}").fetchall()
                )
                logged: Counter[str] = Counter()
                for _ts, row, diff in db.store.read_log(rec, 0):
                    logged[repr(row)] += diff
                assert sorted(logged.elements()) == stored, (type_, name)
    finally:
        db.close()
