"""Incremental equals recomputation through the server's bulk paths, at small sizes.

The server takes other paths for large changes than for small ones: a DML statement's rows
come back from DuckDB as Arrow (`statements.DML_ROWS`) and are logged as Arrow
(`store.ARROW_LOG_ROWS`), a write that changes a large share of a view's tables recomputes
the view (`publish.RECOMPUTE_MIN_ROWS`), and the engine builds and joins large batches as
columns (`take_bulk_paths`). Here every such path is taken at any size, in process on a real
DuckDB file: a seeded random stream of requests (COPY, `INSERT ... SELECT`, UPDATE, DELETE,
single rows, several statements in one request, requests committed as one group) and, after
each, every view equals DuckDB running its SELECT, and every view's feed, applied to its
snapshot, gives the same rows at every timestamp; after a crash (the views' history never
checkpointed), the history replayed from the change logs is the same at every timestamp, and
so are the feeds resumed after the first write's timestamp.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from server_harness import bulk_oracle, group_of_inserts, write_imports

from server.core import Database

VIEWS = {
    "by_cat": "SELECT cat, count(*) AS n, sum(qty) AS total, min(price) AS lo, max(price) AS hi "
    "FROM items GROUP BY cat",
    "n": "SELECT count(*) AS n FROM items",
    "left_j": "SELECT i.id, c.label FROM items i LEFT JOIN cats c ON i.cat = c.cat",
    "distinct_qty": "SELECT DISTINCT qty FROM items",
    "busy": "SELECT cat FROM items GROUP BY cat HAVING count(*) > 2",
    "in_sub": "SELECT id FROM items WHERE cat IN (SELECT cat FROM cats WHERE label LIKE 'l%')",
    "top": "SELECT id, price FROM items ORDER BY price DESC, id LIMIT 3",
    "top_per_cat": "SELECT c.cat, t.id FROM (SELECT DISTINCT cat FROM items) c, LATERAL "
    "(SELECT id FROM items i WHERE i.cat = c.cat ORDER BY price DESC, id LIMIT 2) t",
    "no_label": "SELECT id FROM items i WHERE NOT EXISTS (SELECT 1 FROM cats c WHERE c.cat = i.cat)",
    "not_in": "SELECT cat FROM cats WHERE cat NOT IN (SELECT qty FROM items WHERE qty IS NOT NULL)",
    "full_j": "SELECT i.cat, c.label, count(*) AS n FROM items i FULL JOIN cats c ON i.cat = c.cat "
    "GROUP BY i.cat, c.label",
    "sets": "SELECT cat FROM items EXCEPT SELECT cat FROM cats UNION SELECT qty FROM items",
    "avg_qty": "SELECT cat, avg(qty) AS a, count(DISTINCT qty) AS d FROM items GROUP BY cat",
    "chain": "WITH RECURSIVE r(n) AS (SELECT min(cat) FROM items UNION "
    "SELECT r.n + 1 FROM r JOIN items i ON i.cat = r.n + 1) SELECT n FROM r",
}


def _request(rng: random.Random, next_id: list[int]) -> str:
    stmts = []
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.25:
            n = rng.randint(1, 30)
            stmts.append(f"INSERT INTO items SELECT {next_id[0]} + x, x % 5, "
                         f"CASE WHEN x % 4 = 0 THEN NULL ELSE x % 3 END, (x % 97) / 10 "
                         f"FROM range({n}) r(x)")
            next_id[0] += n
        elif op < 0.35:
            stmts.append(f"COPY items FROM 'items{rng.randint(0, 2)}.parquet'")
        elif op < 0.5:
            stmts.append(f"UPDATE items SET qty = coalesce(qty, 0) + 1, cat = {rng.randint(0, 4)}"
                         f" WHERE id % 5 = {rng.randint(0, 4)}")
        elif op < 0.65:
            stmts.append(f"DELETE FROM items WHERE id % 7 = {rng.randint(0, 6)}")
        elif op < 0.8:
            stmts.append(f"INSERT INTO items VALUES ({next_id[0]}, {rng.randint(0, 4)}, "
                         f"{rng.choice(['NULL', 1, 2])}, {rng.randint(1, 999) / 100})")
            next_id[0] += 1
        elif op < 0.92:
            stmts.append(f"INSERT INTO cats VALUES ({rng.randint(0, 5)}, "
                         f"'{rng.choice(['low', 'loud', 'high'])}')")
        else:
            stmts.append(f"DELETE FROM cats WHERE cat = {rng.randint(0, 5)}")
    return "; ".join(stmts)


def _at_once(db: Database, texts: list[str]) -> None:
    errors: list[BaseException] = []

    def run(text: str) -> None:
        try:
            db.execute(text)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_bulk_paths_match_recomputation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        executor: str) -> None:
    data = tmp_path / "data"
    next_id = [0]

    def setup(db: Database) -> None:
        write_imports(data, "items", lambda i: (
            f"SELECT (1000000 * {i + 1} + x)::INTEGER AS id, (x % 5)::INTEGER AS cat,"
            " (x % 3)::INTEGER AS qty, ((x % 89) / 10)::DECIMAL(8,2) AS price"))
        db.execute("CREATE TABLE items (id INTEGER, cat INTEGER, qty INTEGER, "
                   "price DECIMAL(8,2)); CREATE TABLE cats (cat INTEGER, label VARCHAR)")
        db.execute("COPY items FROM 'items2.parquet'")

    def step(db: Database, rng: random.Random, i: int) -> None:
        if i % 5 == 4:
            # plain INSERTs queued, then committed as one group (one combined statement)
            group_of_inserts(db, [
                f"INSERT INTO items VALUES ({next_id[0] + k}, {rng.randint(0, 4)}, "
                f"{rng.choice(['NULL', 1, 2])}, {rng.randint(1, 999) / 100})"
                for k in range(4)])
            next_id[0] += 4
        elif i % 5 == 2:
            # DML requests at once from several threads (grouped as they meet)
            _at_once(db, [_request(rng, next_id).split("; ")[0].replace(
                "COPY items FROM", "DELETE FROM items WHERE id < 0 AND 'x' <>")
                for _ in range(3)])
        else:
            db.execute(_request(rng, next_id))

    bulk_oracle(data, monkeypatch, executor, 20261206, VIEWS, setup, step)
