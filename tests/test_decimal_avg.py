"""AVG of a DECIMAL or an integer rounds as DuckDB rounds it, to the last bit, on every path.

DuckDB finishes a grouped or DISTINCT AVG of a DECIMAL by its hash aggregate's rule (the
unscaled sum over `count * 10**scale` in extended precision; in double for a width up to 4),
and an ungrouped one as the double of the sum over the count: `avg(x)` of 1.12, 1.12, 1.12 is
1.12 grouped and 1.1199999999999999 ungrouped. A correlated subquery's AVG is grouped (by its
outer columns). Oracle: DuckDB running each view's SELECT over the same snapshot, compared as
exact JSON (`views_equal_duckdb`), after each request of a seeded stream of inserts, updates and
deletes through the bulk paths (`bulk_oracle`), on both executors, and after a restart.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from server_harness import bulk_oracle

from server.core import Database

# widths 4 (SMALLINT storage: double division), 9, 18, 25 and 38 (long double), scales 0-22
COLUMNS = {"a": (4, 2), "b": (9, 3), "c": (18, 4), "e": (38, 10), "f": (25, 22), "z": (12, 0)}
VIEWS = {
    "grouped": "SELECT k, avg(a) AS a, avg(b) AS b, avg(c) AS c, avg(e) AS e, avg(f) AS f,"
    " avg(z) AS z, count(*) AS n FROM d GROUP BY k",
    "ungrouped": "SELECT avg(a) AS a, avg(b) AS b, avg(c) AS c, avg(e) AS e, avg(f) AS f,"
    " avg(z) AS z FROM d",
    "distinct_avg": "SELECT avg(DISTINCT a) AS a, avg(DISTINCT c) AS c, avg(DISTINCT e) AS e,"
    " avg(DISTINCT z) AS z FROM d",
    "grouped_distinct": "SELECT k % 2 AS p, avg(DISTINCT b) AS b, avg(f) AS f, sum(c) AS s"
    " FROM d GROUP BY 1",
    "correlated": "SELECT DISTINCT k, (SELECT avg(c) FROM d d2 WHERE d2.k = d.k) AS c,"
    " (SELECT avg(a) FROM d d3 WHERE d3.k = d.k) AS a FROM d",
    "expression": "SELECT k, avg(b * 2) AS b2, avg(a + z) AS az FROM d GROUP BY k",
}


def _value(rng: random.Random, width: int, scale: int) -> str:
    if rng.random() < 0.08:
        return "NULL"
    # mostly repeated values (a group's average of equal values is exact in the rule DuckDB
    # groups by, and off by one bit in the other), and magnitudes up to the type's
    digits = rng.choice([min(3, width), width - 2, width // 2 or 1])
    unscaled = rng.choice([112, 336, 1, 7, 10 ** digits - 1]) if rng.random() < 0.4 else \
        rng.randint(-(10 ** digits) + 1, 10 ** digits - 1)
    unscaled = max(-(10 ** (width - 1)) + 1, min(10 ** (width - 1) - 1, unscaled))
    text = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return f"{sign}{text[:len(text) - scale]}.{text[len(text) - scale:]}" if scale else \
        f"{sign}{text}"


def _rows(rng: random.Random, n: int, next_id: list[int]) -> str:
    out = []
    for _ in range(n):
        vals = [_value(rng, w, s) for w, s in COLUMNS.values()]
        out.append(f"({next_id[0]}, {rng.randint(0, 5)}, " + ", ".join(
            v if v == "NULL" else f"'{v}'" for v in vals) + ")")
        next_id[0] += 1
    return "INSERT INTO d VALUES " + ", ".join(out)


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_decimal_averages_round_as_duckdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          executor: str) -> None:
    data = tmp_path / "data"
    next_id = [0]

    def setup(db: Database) -> None:
        cols = ", ".join(f"{c} DECIMAL({w},{s})" for c, (w, s) in COLUMNS.items())
        db.execute(f"CREATE TABLE d (id BIGINT, k INTEGER, {cols})")
        db.execute(_rows(random.Random(1), 300, next_id))

    def step(db: Database, rng: random.Random, i: int) -> None:
        op = rng.random()
        if op < 0.5:
            db.execute(_rows(rng, rng.randint(1, 40), next_id))
        elif op < 0.7:
            db.execute(f"DELETE FROM d WHERE id % 9 = {rng.randint(0, 8)}")
        elif op < 0.85:
            db.execute(f"UPDATE d SET a = b / 100000, z = z + 1 WHERE id % 7 = {rng.randint(0, 6)}"
                       " AND abs(b) < 9999")
        else:
            db.execute(f"UPDATE d SET k = {rng.randint(0, 5)} WHERE id % 11 = 3")

    bulk_oracle(data, monkeypatch, executor, 20261207, VIEWS, setup, step, steps=25)


def test_a_narrow_decimal_divides_in_double_a_wider_in_long_double(tmp_path: Path) -> None:
    """19 values summing to 0.073: DuckDB's grouped AVG of a DECIMAL(4,3) is the double
    quotient 0.0038421052631578945, of a DECIMAL(5,3) the long double one rounded,
    0.003842105263157895; ungrouped, both are the sum's double over 19."""
    from server_harness import views_equal_duckdb

    from server.executors import create_executor
    from server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, create_executor(settings))
    try:
        db.execute("CREATE TABLE n (g INTEGER, x DECIMAL(4,3), y DECIMAL(5,3))")
        views = {"by_g": "SELECT g, avg(x) AS x, avg(y) AS y FROM n GROUP BY g",
                 "all_n": "SELECT avg(x) AS x, avg(y) AS y FROM n"}
        for name, sql in views.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        db.execute("INSERT INTO n SELECT 1, 0.004, 0.004 FROM range(18)")
        db.execute("INSERT INTO n VALUES (1, 0.001, 0.001)")
        views_equal_duckdb(db, views)
        assert db.view_rows("by_g", None)["rows"] == [[1, 0.0038421052631578945,
                                                        0.003842105263157895]]
    finally:
        db.close()


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_integer_averages_round_as_duckdb(tmp_path: Path, executor: str) -> None:
    """AVG of a BIGINT past 2**53: ungrouped, DuckDB divides the sum's double by the count
    (three 2**53 + 1s average 2**53 + 2), grouped or DISTINCT it rounds the exact quotient
    once (2**53 + 1); after inserts and deletes, on both executors."""
    from server_harness import views_equal_duckdb

    from server.executors import create_executor
    from server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", executor=executor)
    db = Database(settings, create_executor(settings))
    try:
        db.execute("CREATE TABLE b (g INTEGER, x BIGINT, i INTEGER)")
        views = {"all_b": "SELECT avg(x) AS x, avg(i) AS i, count(*) AS n FROM b",
                 "by_g": "SELECT g, avg(x) AS x FROM b GROUP BY g",
                 "distinct_b": "SELECT avg(DISTINCT x) AS x FROM b",
                 "correlated": "SELECT DISTINCT g, (SELECT avg(x) FROM b c WHERE c.g = b.g) AS x"
                 " FROM b"}
        for name, sql in views.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        db.execute(f"INSERT INTO b VALUES (1, {2 ** 53 + 1}, 1), (1, {2 ** 53 + 1}, 2),"
                   f" (1, {2 ** 53 + 1}, 3)")
        views_equal_duckdb(db, views)
        assert db.view_rows("all_b", None)["rows"] == [[float(2 ** 53 + 2), 2.0, 3]]
        assert db.view_rows("by_g", None)["rows"] == [[1, float(2 ** 53)]]
        rng = random.Random(5)
        for step in range(12):
            big = [rng.choice([rng.randint(-2 ** 63, 2 ** 63 - 1) // 4, rng.randint(2 ** 53, 2 ** 60)])
                   for _ in range(rng.randint(1, 12))]
            db.execute("INSERT INTO b VALUES " + ", ".join(
                f"({rng.randint(0, 2)}, {v}, {rng.randint(-9, 9)})" for v in big))
            if step % 3 == 2:
                db.execute(f"DELETE FROM b WHERE x % 5 = {rng.randint(0, 4)}")
            views_equal_duckdb(db, views)
    finally:
        db.close()
