"""End-to-end: the real server over HTTP, SSE and WebSocket (acceptance 1 and 4).

Every view is checked against recomputation: its rows must equal DuckDB running the view's
query over the same snapshot of the tables (through /query, where views are never recomputed
but their SQL over tables is just a query).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import SSE, Feed, Server, multiset
from websockets.sync.client import connect

VIEWS = {
    "totals": "SELECT c.region, count(*) AS orders, sum(o.amount) AS amount "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "big": "SELECT o.id, c.name, o.amount FROM orders o JOIN customers c ON o.customer = c.id "
    "WHERE o.amount > 10",
    "reach": "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM edges UNION "
    "SELECT r.src, e.dst FROM r JOIN edges e ON r.dst = e.src) SELECT src, dst FROM r",
}


class WS:
    def __init__(self, server: Server, view: str, query: str = "") -> None:
        self.conn = connect(
            f"{server.ws_url}/views/{view}/changes{query}",
            additional_headers=server.headers(),
            open_timeout=10,
        ).__enter__()

    def next(self) -> dict[str, Any]:
        return json.loads(self.conn.recv(timeout=20))  # type: ignore[no-any-return]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="module", params=["inprocess", "columnar"])
def server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
           ) -> Iterator[Server]:
    # Every test on this server runs on both local executors: views, feeds and queries must not
    # depend on which one maintains the views.
    s = Server(tmp_path_factory.mktemp("e2e") / "data", "--executor", request.param).start()
    assert s.http.get("/health").json()["executor"] == request.param
    s.sql(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, region TEXT);"
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INTEGER, amount DECIMAL(10,2),"
        " placed DATE, placed_at TIMESTAMP, ok BOOLEAN, w DOUBLE, r REAL, s SMALLINT);"
        "CREATE TABLE edges (src INTEGER, dst INTEGER)"
    )
    s.sql(
        "INSERT INTO customers VALUES (1, 'ann', 'north'), (2, 'bob', 'south'), (3, 'cy', 'north');"
        "INSERT INTO orders VALUES (1, 1, 5.50, DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05',"
        " true, 1.5, 2.5, 7), (2, 2, 20, NULL, NULL, false, NULL, NULL, NULL),"
        " (3, 3, 12.25, NULL, NULL, NULL, NULL, NULL, NULL);"
        "INSERT INTO edges VALUES (1, 2), (2, 3), (3, 4)"
    )
    for name, body in VIEWS.items():
        r = s.http.post("/views", json={"sql": f"CREATE VIEW {name} AS {body}"})
        assert r.status_code == 201, r.text
    yield s
    s.stop()


def assert_views_match_recomputation(server: Server) -> None:
    for name, body in VIEWS.items():
        got = server.rows(name)
        want = server.query(body)
        assert got["columns"] == want["columns"]
        assert multiset(got["rows"]) == multiset(want["rows"]), name


def test_tables_and_views_listing(server: Server) -> None:
    tables = server.http.get("/tables").json()["tables"]
    assert [t["name"] for t in tables] == ["customers", "edges", "orders"]
    t = server.http.get("/tables/orders").json()
    assert t["row_count"] == 3 and t["primary_key"] == ["id"]
    assert [c["type"] for c in t["columns"]] == [
        "BIGINT",
        "INTEGER",
        "DECIMAL(10,2)",
        "DATE",
        "TIMESTAMP",
        "BOOLEAN",
        "DOUBLE",
        "REAL",
        "SMALLINT",
    ]
    assert server.http.get("/tables/nope").status_code == 404
    v = server.http.get("/views/totals").json()
    assert (
        v["status"] == "running"
        and v["dependencies"] == ["orders", "customers"]
        or set(v["dependencies"]) == {"orders", "customers"}
    )
    assert {"records", "batches", "bytes"} <= set(v["arrangements"])
    assert v["complete_through"] >= v["created_timestamp"]
    assert {x["name"] for x in server.http.get("/views").json()["views"]} == set(VIEWS)
    assert server.http.get("/health").json()["status"] == "ok"
    assert server.http.get("/docs").status_code == 200
    assert "/sql" in server.http.get("/openapi.json").json()["paths"]


def test_json_values(server: Server) -> None:
    rows = server.query("SELECT amount, placed, placed_at, ok, w, r, s FROM orders WHERE id = 1")
    assert rows["rows"] == [["5.50", "2024-01-02", "2024-01-02T03:04:05", True, 1.5, 2.5, 7]]


def test_writes_maintain_views(server: Server) -> None:
    assert_views_match_recomputation(server)
    before = server.rows("totals")["timestamp"]
    res = server.sql(
        "INSERT INTO orders (id, customer, amount) VALUES (4, 1, 30), (5, 2, 1);"
        "UPDATE orders SET amount = amount * 2 WHERE customer = 3;"
        "DELETE FROM orders WHERE id = 2;"
        "INSERT INTO edges SELECT dst, dst + 1 FROM edges WHERE dst = 4;"
        "SELECT count(*) AS n FROM orders"
    )
    ts = res[0]["timestamp"]
    assert ts > before and all(r["timestamp"] == ts for r in res)
    assert [r.get("rowcount") for r in res] == [2, 1, 1, 1, 1]
    assert res[4]["rows"] == [[4]]
    assert server.rows("totals")["timestamp"] == ts  # read-your-writes
    assert_views_match_recomputation(server)
    assert [5] in [r[1:] for r in server.rows("reach")["rows"] if r[0] == 4] or [
        4,
        5,
    ] in server.rows("reach")["rows"]
    # rows as of an earlier timestamp: the view's contents then
    old = server.rows("totals", as_of=before)
    assert old["timestamp"] == before
    assert multiset(old["rows"]) != multiset(server.rows("totals")["rows"])


def test_query_joins_table_with_view(server: Server) -> None:
    r = server.query(
        "SELECT c.name, t.orders FROM customers c JOIN totals t ON c.region = t.region "
        "ORDER BY c.name"
    )
    totals = {row[0]: row[1] for row in server.rows("totals")["rows"]}
    regions = {"ann": "north", "bob": "south", "cy": "north"}
    assert r["rows"] == [[n, totals[regions[n]]] for n in sorted(regions)]
    assert r["timestamp"] == server.rows("totals")["timestamp"]


def test_as_of_waits_for_future_timestamp(server: Server) -> None:
    now = server.rows("big")["timestamp"]
    r = server.http.get("/views/big/rows", params={"as_of": now + 5, "timeout": 0.3})
    assert r.status_code == 408 and r.json()["error"]["code"] == "as_of_timeout"
    import threading

    result: dict[str, Any] = {}

    def wait() -> None:
        result["r"] = server.http.get(
            "/views/big/rows", params={"as_of": now + 1, "timeout": 20}, timeout=30
        )

    t = threading.Thread(target=wait)
    t.start()
    server.sql("INSERT INTO orders (id, customer, amount) VALUES (100, 3, 99)")
    t.join(30)
    assert result["r"].status_code == 200
    assert result["r"].json()["timestamp"] == now + 1
    assert ["100", "cy", "99.00"] in [[str(x) for x in row] for row in result["r"].json()["rows"]]


def _check_feed(server: Server, source: Any, view: str, snapshot: bool = True) -> Feed:
    feed = Feed()
    now = server.rows(view)["timestamp"]
    feed.read_until(source, now)
    if snapshot:
        assert feed.contents == multiset(server.rows(view, as_of=now)["rows"])
    return feed


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_feed_snapshot_updates_progress(server: Server, transport: str) -> None:
    source: Any = (
        SSE(server, "totals", snapshot=True)
        if transport == "sse"
        else WS(server, "totals", "?snapshot=true")
    )
    try:
        first = source.next()
        assert first["type"] == "update"
        feed = Feed()
        feed.apply(first)
        now = server.rows("totals")["timestamp"]
        feed.read_until(source, now)
        for i in range(3):
            ts = server.sql(
                f"INSERT INTO orders (id, customer, amount) VALUES ({200 + i + (10 if transport == 'ws' else 0)}, {i % 3 + 1}, {i + 1})"
            )[0]["timestamp"]
            feed.read_until(source, ts)
            # acceptance 4: the accumulated feed equals the rows at the same timestamp
            assert feed.contents == multiset(server.rows("totals", as_of=ts)["rows"])
        assert len(feed.seen) >= 3
    finally:
        source.close()


def test_sse_resume_after_disconnect_no_loss_no_repeat(server: Server) -> None:
    sse = SSE(server, "big", snapshot=True)
    feed = Feed()
    ts0 = server.rows("big")["timestamp"]
    feed.read_until(sse, ts0)
    sse.close()
    # Changes while disconnected (including one that does not touch the view).
    server.sql("INSERT INTO orders (id, customer, amount) VALUES (300, 1, 50), (301, 2, 60)")
    server.sql("UPDATE customers SET name = 'ann2' WHERE id = 1")
    server.sql("DELETE FROM orders WHERE id = 300")
    last = server.sql("INSERT INTO edges VALUES (9, 10)")[0]["timestamp"]
    sse = SSE(server, "big", since=feed.progress, snapshot=False)
    try:
        feed.read_until(sse, last)
        assert feed.contents == multiset(server.rows("big", as_of=last)["rows"])
        assert len(feed.seen) == len(set(feed.seen))
    finally:
        sse.close()
    ws = WS(server, "big", f"?since={ts0}")
    try:
        feed2 = Feed()
        feed2.contents = multiset(server.rows("big", as_of=ts0)["rows"])
        feed2.progress = ts0
        feed2.read_until(ws, last)
        assert feed2.contents == feed.contents
    finally:
        ws.close()


def test_feed_errors(server: Server) -> None:
    r = server.http.get("/views/nope/changes")
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_view"
    ws = WS(server, "nope")
    try:
        msg = ws.next()
        assert msg["type"] == "error" and msg["error"]["code"] == "unknown_view"
    finally:
        ws.close()


def test_create_and_drop_view_over_http(server: Server) -> None:
    r = server.http.post(
        "/views",
        json={"sql": "CREATE MATERIALIZED VIEW n_orders AS SELECT count(*) AS n FROM orders"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "n_orders"
    count = server.query("SELECT count(*) FROM orders")["rows"][0][0]
    assert server.rows("n_orders")["rows"] == [[count]]
    assert (
        server.http.post("/views", json={"sql": "CREATE VIEW n_orders AS SELECT 1"}).status_code
        == 409
    )
    sse = SSE(server, "n_orders")
    sse.next()
    r = server.http.delete("/views/n_orders")
    assert r.status_code == 200, r.text
    msgs = [sse.next() for _ in range(1)]
    while msgs[-1]["type"] != "error":
        msgs.append(sse.next())
    assert msgs[-1]["error"]["code"] == "view_dropped"
    sse.close()
    assert server.http.get("/views/n_orders").status_code == 404
    assert server.http.delete("/views/n_orders").status_code == 404


def test_resume_across_restart(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--history-retention", "1000").start()
    try:
        s.sql(
            "CREATE TABLE t (k INTEGER, v INTEGER); CREATE VIEW sums AS "
            "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k"
        )
        s.sql("INSERT INTO t VALUES (1, 10), (2, 20), (1, 5)")
        feed = Feed()
        sse = SSE(s, "sums")
        ts = s.rows("sums")["timestamp"]
        feed.read_until(sse, ts)
        sse.close()
        s.sql("INSERT INTO t VALUES (3, 1)")
        hist_ts = s.sql("DELETE FROM t WHERE k = 2")[0]["timestamp"]
        before = s.rows("sums", as_of=hist_ts - 1)
        s.kill()  # no clean shutdown
        s.start()
        assert s.rows("sums", as_of=hist_ts - 1) == before  # history survived
        last = s.sql("UPDATE t SET v = v + 1 WHERE k = 1")[0]["timestamp"]
        assert last == hist_ts + 1
        sse = SSE(s, "sums", since=feed.progress)
        try:
            feed.read_until(sse, last)
        finally:
            sse.close()
        assert feed.contents == multiset(s.rows("sums")["rows"])
        assert len(feed.seen) == len(set(feed.seen))
        want = s.query("SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k")
        assert multiset(want["rows"]) == feed.contents
    finally:
        s.stop()


def test_resume_across_a_drop_and_create_of_the_view_is_refused(tmp_path: Path) -> None:
    """A feed resuming from a timestamp when an earlier view of the same name existed is 410
    `history_unavailable` (it was given the new view's contents at creation, on top of the
    old view's rows the client holds), also after a restart; one resuming from after the
    drop gets those contents."""
    s = Server(tmp_path / "data", "--history-retention", "1000").start()
    try:
        s.sql("CREATE TABLE t (k INTEGER); CREATE VIEW a AS SELECT k FROM t")
        old = s.sql("INSERT INTO t VALUES (1), (2)")[0]["timestamp"]
        dropped = s.sql("DROP VIEW a")[0]["timestamp"]
        created = s.sql("CREATE VIEW a AS SELECT k FROM t WHERE k > 1")[0]["timestamp"]
        for restart in (False, True):
            if restart:
                s.kill()
                s.start()
            sse = SSE(s, "a", since=old)
            assert sse.status == 410, restart
            sse.close()
            sse = SSE(s, "a", since=dropped)
            try:
                feed = Feed()
                feed.read_until(sse, created)
                assert feed.contents == multiset([[2]]), restart
            finally:
                sse.close()
    finally:
        s.stop()


def test_history_of_a_view_running_again_survives_a_crash(tmp_path: Path) -> None:
    """A view that failed and runs again keeps its history from then on across a crash (the
    change log replayed from the checkpoint before the failure failed it again at restart,
    and its history started at the restart: as_of and since were 410)."""
    s = Server(tmp_path / "data", "--checkpoint-interval", "1000").start()
    try:
        s.sql("CREATE TABLE t (k INTEGER); CREATE TABLE u (k INTEGER, w INTEGER); "
              "CREATE VIEW f AS SELECT t.k, (SELECT u.w FROM u WHERE u.k = t.k) AS w FROM t; "
              "INSERT INTO t VALUES (1), (2); INSERT INTO u VALUES (1, 10)")
        assert s.sql("INSERT INTO u VALUES (1, 11)")  # two rows for k = 1: f fails
        again = s.sql("DELETE FROM u WHERE w = 11")[0]["timestamp"]  # f runs again
        later = s.sql("INSERT INTO u VALUES (2, 20)")[0]["timestamp"]
        last = s.sql("INSERT INTO t VALUES (3)")[0]["timestamp"]
        before = {ts: s.rows("f", as_of=ts) for ts in (again, later, last)}
        s.kill()
        s.start()
        assert {ts: s.rows("f", as_of=ts) for ts in (again, later, last)} == before
        sse = SSE(s, "f", since=later)
        try:
            feed = Feed()
            feed.read_until(sse, last)
            assert feed.contents == multiset([[3, None]])
        finally:
            sse.close()
    finally:
        s.stop()


def test_history_of_a_view_created_after_the_checkpoint_survives_a_crash(tmp_path: Path
                                                                            ) -> None:
    """A view created after the last checkpoint, over tables that held what it cannot compute
    before it existed (a scalar subquery of two rows), keeps its history across a crash, as
    do views over it: recovery built it at the checkpoint, failed replaying timestamps from
    before its creation, and started its history at the restart (410 for as_of and since)."""
    s = Server(tmp_path / "data", "--checkpoint-interval", "1000").start()
    try:
        s.sql("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1), (2)")
        s.sql("DELETE FROM t WHERE v = 2")
        made = s.sql("CREATE VIEW x AS SELECT (SELECT v FROM t) AS y")[0]["timestamp"]
        s.sql("CREATE TABLE u (w INTEGER); INSERT INTO u VALUES (1), (7)")
        over = s.sql("CREATE VIEW z AS SELECT w FROM u JOIN x ON u.w = x.y")[0]["timestamp"]
        last = s.sql("UPDATE t SET v = 7")[0]["timestamp"]
        before = {(n, ts): s.rows(n, as_of=ts) for n, ts in
                  (("x", made), ("x", last), ("z", over), ("z", last))}
        s.kill()
        s.start()
        assert {(n, ts): s.rows(n, as_of=ts) for n, ts in before} == before
        assert s.http.get("/views/x").json()["history_since"] == made
    finally:
        s.stop()


def test_atomic_ddl_and_dml_in_one_request(server: Server) -> None:
    res = server.sql(
        "CREATE TABLE pts (x INTEGER, y INTEGER); INSERT INTO pts VALUES (1, 2), (1, 2);"
        "CREATE VIEW pts_by_x AS SELECT x, count(*) AS n FROM pts GROUP BY x;"
        "INSERT INTO pts VALUES (3, 4); SELECT * FROM pts_by_x ORDER BY x"
    )
    ts = res[0]["timestamp"]
    assert {r["timestamp"] for r in res} == {ts}
    assert res[-1]["rows"] == [[1, 2], [3, 1]]
    assert server.rows("pts_by_x")["rows"] == [[1, 2], [3, 1]]
    # A subscriber resuming from before the view existed gets its contents at creation.
    sse = SSE(server, "pts_by_x", since=ts - 1)
    try:
        feed = Feed()
        feed.read_until(sse, ts)
        assert feed.seen == [ts] and feed.contents == multiset([[1, 2], [3, 1]])
    finally:
        sse.close()
    server.sql("DROP VIEW pts_by_x; DROP TABLE pts")
    assert server.http.get("/tables/pts").status_code == 404


def test_failing_recursive_view(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--iteration-limit", "20").start()
    try:
        s.sql(
            "CREATE TABLE seed (n INTEGER); CREATE TABLE other (a INTEGER);"
            "CREATE VIEW other_count AS SELECT count(*) AS c FROM other"
        )
        r = s.http.post(
            "/sql",
            json={
                "sql": "INSERT INTO seed VALUES (1); CREATE VIEW bad AS "
                "WITH RECURSIVE r(n) AS (SELECT n FROM seed UNION "
                "SELECT n + 1 FROM r WHERE n < 1000) SELECT n FROM r"
            },
        )
        assert r.status_code == 400, r.text  # cannot be computed: rejected, nothing applied
        assert s.query("SELECT count(*) FROM seed")["rows"] == [[0]]
        s.sql(
            "CREATE VIEW capped AS WITH RECURSIVE r(n) AS (SELECT n FROM seed UNION "
            "SELECT n + 1 FROM r WHERE n < 1000) SELECT n FROM r"
        )
        assert s.rows("capped")["rows"] == []
        # A write that makes the recursion exceed its limit fails only this view.
        s.sql("INSERT INTO seed VALUES (1); INSERT INTO other VALUES (5)")
        info = s.http.get("/views/capped").json()
        assert info["status"] == "failed" and info["error"]
        r = s.http.get("/views/capped/rows")
        assert r.status_code == 409 and r.json()["error"]["code"] == "view_failed"
        assert s.rows("other_count")["rows"] == [[1]]
        assert s.http.get("/health").json()["failed_views"] == ["capped"]
        s.sql("DROP VIEW capped")
        assert s.http.get("/health").json()["failed_views"] == []
    finally:
        s.stop()


def test_history_retention(tmp_path: Path) -> None:
    s = Server(tmp_path / "data", "--history-retention", "5").start()
    try:
        s.sql("CREATE TABLE t (a INTEGER); CREATE VIEW v AS SELECT a FROM t")
        stamps = [s.sql(f"INSERT INTO t VALUES ({i})")[0]["timestamp"] for i in range(12)]
        last = stamps[-1]
        for restarted in (False, True):
            if restarted:
                s.kill()
                s.start()
            r = s.http.get("/views/v/rows", params={"as_of": stamps[0]})
            assert r.status_code == 410 and r.json()["error"]["code"] == "history_unavailable"
            r = s.http.get("/views/v/changes", params={"since": stamps[0]})
            assert r.status_code == 410
            assert s.rows("v", as_of=last - 2)["rows"] == [[i] for i in range(10)]
            sse = SSE(s, "v", since=last - 2)
            try:
                feed = Feed()
                feed.contents = multiset([[i] for i in range(10)])
                feed.read_until(sse, last)
                assert feed.seen == [last - 1, last]
                assert feed.contents == multiset(s.rows("v")["rows"])
            finally:
                sse.close()
    finally:
        s.stop()
