"""Incremental equals recomputation through the server's bulk paths, over every column type.

As `test_server_bulk_oracle`, with every large-change path taken at any size, but over a table
of each supported type (BIGINT, INTEGER, SMALLINT, VARCHAR, DATE, TIMESTAMP, DECIMAL, DOUBLE with
NaN, both infinities and -0.0, REAL, BOOLEAN) and many NULLs, with views that group, join, order and compute on
them: the columnar paths encode each type to the engine's layout and back, and each view equals
DuckDB running its SELECT after every request; after a crash, the history replayed from the
change logs (written as Arrow) is the same at every timestamp.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from server_harness import bulk_oracle, group_of_inserts, write_imports

from server.core import Database

VIEWS = {
    "by_k": "SELECT k, count(*) AS n, count(d) AS nd, min(d) AS d0, max(ts) AS t1, sum(amt) AS s,"
    " min(x) AS x0, max(x) AS x1, count(DISTINCT n) AS dn FROM events GROUP BY k",
    "by_flag": "SELECT flag, sum(amt) AS s, max(k) AS k1, min(ts) AS t0, sum(q) AS sq, min(q) AS q0"
    " FROM events GROUP BY flag",
    "by_month": "SELECT date_trunc('month', d) AS m, count(*) AS c FROM events"
    " WHERE d IS NOT NULL GROUP BY 1",
    "recent": "SELECT id, k, ts FROM events WHERE ts >= TIMESTAMP '2024-01-15 00:00:00'",
    "join_u": "SELECT e.id, u.score FROM events e JOIN users u ON e.k = u.k AND e.d >= u.since",
    "left_u": "SELECT u.k, count(e.id) AS c FROM users u LEFT JOIN events e ON e.k = u.k"
    " GROUP BY u.k",
    "tags": "SELECT upper(k) || '-' || CAST(n AS VARCHAR) AS tag, coalesce(x, -1) AS x"
    " FROM events WHERE k LIKE 'a%'",
    "sizes": "SELECT CASE WHEN amt > 10 THEN 'big' WHEN amt IS NULL THEN 'none' ELSE 'small' END"
    " AS size, count(*) AS c FROM events GROUP BY 1",
    "top_amt": "SELECT id, amt FROM events WHERE amt IS NOT NULL ORDER BY amt DESC, id LIMIT 4",
    "real_by_n": "SELECT n, min(r) AS r0, max(r) AS r1, count(r) AS c FROM events GROUP BY n",
    "days": "SELECT DISTINCT d FROM events",
    "years": "SELECT extract(year FROM d) AS y, sum(n) AS s FROM events GROUP BY 1",
    "flagged": "SELECT k FROM users WHERE EXISTS (SELECT 1 FROM events e WHERE e.k = users.k"
    " AND e.flag)",
    "late": "SELECT id, d + INTERVAL 30 DAY AS due FROM events WHERE d < DATE '2024-02-01'",
}

# The row made of integer `x` (a SQL expression), for INSERT ... SELECT and the COPY files.
_ROW = (
    "{id}, CASE WHEN x % 6 = 0 THEN NULL ELSE ['ab', 'b', 'abc', 'c', ''][x % 5 + 1] END, "
    "CASE WHEN x % 7 = 0 THEN NULL ELSE DATE '2024-01-01' + ((x * 3) % 60)::INTEGER END, "
    "CASE WHEN x % 5 = 0 THEN NULL ELSE TIMESTAMP '2024-01-01 00:00:00' + "
    "to_minutes((x * 629) % 50000) END, "
    "CASE WHEN x % 4 = 0 THEN NULL ELSE ((x * 7) % 200 - 50) / 8 END::DECIMAL(18,4), "
    "CASE x % 11 WHEN 0 THEN NULL WHEN 1 THEN 'NaN'::DOUBLE WHEN 2 THEN 'inf'::DOUBLE "
    "WHEN 3 THEN '-0.0'::DOUBLE WHEN 4 THEN '-inf'::DOUBLE ELSE (x % 13) / 4 - 1 END::DOUBLE, "
    "CASE WHEN x % 3 = 0 THEN NULL ELSE (x % 17) / 3 END::REAL, "
    "CASE WHEN x % 8 = 0 THEN NULL ELSE x % 3 = 1 END, (x % 4)::SMALLINT, "
    "CASE WHEN x % 9 = 0 THEN NULL ELSE (x * 7919) % 2001 - 1000 END::INTEGER"
)


def _literal_row(rng: random.Random, id_: int) -> str:
    def maybe(v: str) -> str:
        return "NULL" if rng.random() < 0.2 else v
    return (f"({id_}, {maybe(repr(rng.choice(['ab', 'b', 'abc', 'zz'])))}, "
            f"{maybe(f'DATE {chr(39)}2024-0{rng.randint(1, 3)}-1{rng.randint(0, 9)}{chr(39)}')}, "
            f"{maybe(f'{chr(39)}2024-01-{rng.randint(10, 28)} 0{rng.randint(0, 9)}:30:00{chr(39)}')}, "
            f"{maybe(str(rng.randint(-500, 500) / 8))}, {maybe(str(rng.randint(-9, 9) / 4))}, "
            f"{maybe(str(rng.randint(0, 20) / 2))}, {maybe(rng.choice(['TRUE', 'FALSE']))}, "
            f"{rng.randint(0, 3)}, {maybe(str(rng.randint(-1000, 1000)))})")


def _request(rng: random.Random, next_id: list[int]) -> str:
    stmts = []
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.25:
            n = rng.randint(1, 30)
            stmts.append(f"INSERT INTO events SELECT {_ROW.format(id=f'{next_id[0]} + x')} "
                         f"FROM range({n}) r(x)")
            next_id[0] += n
        elif op < 0.35:
            stmts.append(f"COPY events FROM 'events{rng.randint(0, 2)}.parquet'")
        elif op < 0.5:
            stmts.append(rng.choice([
                "UPDATE events SET amt = amt * 2, d = d + 1 WHERE id % 5 = 1",
                "UPDATE events SET flag = NOT flag, ts = ts + INTERVAL 1 DAY WHERE id % 3 = 0",
                "UPDATE events SET x = x + 0.5, r = r * 2, k = k || 'x' WHERE id % 4 = 2",
                "UPDATE events SET k = NULL, n = n + 1 WHERE id % 9 = 4",
            ]))
        elif op < 0.65:
            stmts.append(f"DELETE FROM events WHERE id % 7 = {rng.randint(0, 6)}")
        elif op < 0.8:
            stmts.append(f"INSERT INTO events VALUES {_literal_row(rng, next_id[0])}")
            next_id[0] += 1
        elif op < 0.92:
            stmts.append(f"INSERT INTO users VALUES ({repr(rng.choice(['ab', 'b', 'abc', 'q']))},"
                         f" DATE '2024-0{rng.randint(1, 2)}-0{rng.randint(1, 9)}',"
                         f" {rng.randint(0, 9) / 2})")
        else:
            stmts.append(f"DELETE FROM users WHERE k = {repr(rng.choice(['ab', 'b', 'abc']))}")
    return "; ".join(stmts)


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_bulk_paths_over_every_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    executor: str) -> None:
    data = tmp_path / "data"
    next_id = [0]

    def setup(db: Database) -> None:
        write_imports(data, "events", lambda i: f"SELECT {_ROW.format(id=f'1000000 * {i + 1} + x')}")
        db.execute("CREATE TABLE events (id BIGINT, k VARCHAR, d DATE, ts TIMESTAMP, "
                   "amt DECIMAL(18,4), x DOUBLE, r REAL, flag BOOLEAN, n SMALLINT, q INTEGER); "
                   "CREATE TABLE users (k VARCHAR, since DATE, score DOUBLE)")
        db.execute("COPY events FROM 'events2.parquet'")

    def step(db: Database, rng: random.Random, i: int) -> None:
        if i % 5 == 4:
            group_of_inserts(db, [f"INSERT INTO events VALUES {_literal_row(rng, next_id[0] + k)}"
                                  for k in range(4)])
            next_id[0] += 4
        else:
            db.execute(_request(rng, next_id))

    bulk_oracle(data, monkeypatch, executor, 20261207, VIEWS, setup, step)
