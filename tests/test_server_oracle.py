"""Incremental equals recomputation, through the whole server: a seeded random stream of write
requests; after each, every view's rows equal DuckDB running its query over the same snapshot,
and a change feed accumulated alongside equals the rows at the same timestamp."""

from __future__ import annotations

import random
from pathlib import Path

from server_harness import SSE, Feed, Server, multiset

VIEWS = {
    "by_cat": "SELECT cat, count(*) AS n, sum(qty) AS total, min(price) AS lo, max(price) AS hi "
    "FROM items GROUP BY cat",
    "left_j": "SELECT i.id, c.label FROM items i LEFT JOIN cats c ON i.cat = c.cat",
    "distinct_qty": "SELECT DISTINCT qty FROM items",
    "busy": "SELECT cat FROM items GROUP BY cat HAVING count(*) > 2",
    "in_sub": "SELECT id FROM items WHERE cat IN (SELECT cat FROM cats WHERE label LIKE 'l%')",
}


def test_random_writes_match_recomputation(tmp_path: Path) -> None:
    rng = random.Random(20240601)
    s = Server(tmp_path / "data").start()
    try:
        s.sql(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, cat INTEGER, qty INTEGER, "
            "price DECIMAL(8,2)); CREATE TABLE cats (cat INTEGER, label VARCHAR);"
            + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
        )
        feeds = {n: (SSE(s, n), Feed()) for n in ("by_cat", "left_j")}
        next_id = 0
        for _step in range(15):
            stmts = []
            for _ in range(rng.randint(1, 3)):
                op = rng.random()
                if op < 0.5:
                    vals = []
                    for _ in range(rng.randint(1, 4)):
                        vals.append(
                            f"({next_id}, {rng.randint(0, 4)}, {rng.choice(['NULL', 1, 2, 3])},"
                            f" {rng.randint(1, 999) / 100})"
                        )
                        next_id += 1
                    stmts.append("INSERT INTO items VALUES " + ", ".join(vals))
                elif op < 0.65:
                    stmts.append(
                        f"UPDATE items SET qty = coalesce(qty, 0) + 1, cat = {rng.randint(0, 4)}"
                        f" WHERE id % 5 = {rng.randint(0, 4)}"
                    )
                elif op < 0.8:
                    stmts.append(f"DELETE FROM items WHERE id % 7 = {rng.randint(0, 6)}")
                elif op < 0.92:
                    stmts.append(
                        f"INSERT INTO cats VALUES ({rng.randint(0, 5)}, "
                        f"'{rng.choice(['low', 'loud', 'high'])}')"
                    )
                else:
                    stmts.append(f"DELETE FROM cats WHERE cat = {rng.randint(0, 5)}")
            ts = s.sql("; ".join(stmts))[0]["timestamp"]
            for name, body in VIEWS.items():
                got = s.rows(name)
                want = s.query(body)
                assert got["timestamp"] == want["timestamp"] == ts
                assert multiset(got["rows"]) == multiset(want["rows"]), (name, stmts)
            for name, (sse, feed) in feeds.items():
                feed.read_until(sse, ts)
                assert feed.contents == multiset(s.rows(name, as_of=ts)["rows"]), name
        for sse, _ in feeds.values():
            sse.close()
    finally:
        s.stop()
