"""TPC-H queries beyond bench/views.py's six, each as a view over bench/views.py's data: the
shapes users write that the six leave out (EXISTS and NOT EXISTS, NOT IN, an outer join,
scalar subqueries correlated and not, COUNT(DISTINCT), CASE inside aggregates, EXTRACT, LIKE,
a disjunctive join filter, a view read twice in one query).

The queries are TPC-H's Q4, Q6-Q10, Q12-Q17, Q19, Q21 and Q22, adapted to the tables
bench/views.py generates (no partsupp or region: Q9 and Q16 read lineitem's supplier instead,
Q22 groups by nation; Q9's part name pattern matches the generated names). The tables are
loaded with COPY into a real DuckDB file through the server's `Database` in this process (the
write path without HTTP). For each query, in the same run: CREATE VIEW (hydration) against
DuckDB running the SELECT (best of 3) over its own copy; then, with every view in place, 30
single-row UPDATEs of lineitem and 30 of orders (p50 until every view is updated) and one
UPDATE of 1/120 of lineitem, against DuckDB's UPDATE and every SELECT. Every view is checked
against DuckDB after each step (multisets, floats to 1e-9 relative). The last line is

    summary: sf=<f> queries=<n> hydration_vs_duckdb=<x> worst=<q> worst_vs_duckdb=<x> write_p50_ms=<x> batch_vs_duckdb=<x> ok=<true|false>

where hydration_vs_duckdb is the sum of the hydrations over the sum of DuckDB's SELECTs.

    python bench/tpch_queries.py [--sf 0.2] [--only q13,q16]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb  # noqa: E402
from support import same  # noqa: E402
from views import TABLES, generate_tables  # noqa: E402

from server.core import Database  # noqa: E402
from server.executors import InProcessExecutor  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.values import row_to_json  # noqa: E402

QUERIES: dict[str, str] = {
    "q4": (
        "SELECT o_orderpriority, count(*) AS order_count FROM orders WHERE o_orderdate >= DATE "
        "'1993-07-01' AND o_orderdate < DATE '1993-10-01' AND EXISTS (SELECT * FROM lineitem "
        "WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority"
    ),
    "q6": (
        "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= "
        "DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND "
        "0.07 AND l_quantity < 24"
    ),
    "q7": (
        "SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, extract(year FROM l_shipdate)"
        " AS l_year, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM supplier, lineitem, "
        "orders, customer, nation n1, nation n2 WHERE s_suppkey = l_suppkey AND o_orderkey = "
        "l_orderkey AND c_custkey = o_custkey AND s_nationkey = n1.n_nationkey AND c_nationkey = "
        "n2.n_nationkey AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = "
        "'GERMANY' AND n2.n_name = 'FRANCE')) AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE "
        "'1996-12-31' GROUP BY 1, 2, 3"
    ),
    "q8": (
        "SELECT extract(year FROM o_orderdate) AS o_year, sum(CASE WHEN n2.n_name = 'BRAZIL' THEN"
        " l_extendedprice * (1 - l_discount) ELSE 0 END) / sum(l_extendedprice * (1 - "
        "l_discount)) AS mkt_share FROM part, supplier, lineitem, orders, customer, nation n1, "
        "nation n2 WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = "
        "o_orderkey AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey AND n1.n_regionkey"
        " = 1 AND s_nationkey = n2.n_nationkey AND o_orderdate BETWEEN DATE '1995-01-01' AND DATE"
        " '1996-12-31' AND p_type = 'ECONOMY ANODIZED STEEL' GROUP BY 1"
    ),
    "q9": (
        "SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year, sum(l_extendedprice *"
        " (1 - l_discount) - l_quantity * 3.5) AS amount FROM part, supplier, lineitem, orders, "
        "nation WHERE s_suppkey = l_suppkey AND p_partkey = l_partkey AND o_orderkey = l_orderkey"
        " AND s_nationkey = n_nationkey AND p_name LIKE '%7' GROUP BY 1, 2"
    ),
    "q10": (
        "SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal,"
        " n_name FROM customer, orders, lineitem, nation WHERE c_custkey = o_custkey AND "
        "l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE "
        "'1994-01-01' AND l_returnflag = 'R' AND c_nationkey = n_nationkey GROUP BY c_custkey, "
        "c_name, c_acctbal, n_name ORDER BY revenue DESC, c_custkey LIMIT 20"
    ),
    "q12": (
        "SELECT l_shipmode, sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = "
        "'2-HIGH' THEN 1 ELSE 0 END) AS high_line_count, sum(CASE WHEN o_orderpriority <> "
        "'1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count FROM "
        "orders, lineitem WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND "
        "l_commitdate < l_receiptdate AND l_shipdate < l_commitdate AND l_receiptdate >= DATE "
        "'1994-01-01' AND l_receiptdate < DATE '1995-01-01' GROUP BY l_shipmode"
    ),
    "q13": (
        "SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS "
        "c_count FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND "
        "o_orderpriority NOT LIKE '%URGENT%' GROUP BY c_custkey) c_orders GROUP BY c_count"
    ),
    "q14": (
        "SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - "
        "l_discount) ELSE 0 END) / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue FROM "
        "lineitem, part WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND "
        "l_shipdate < DATE '1995-10-01'"
    ),
    "q15": (
        "WITH revenue AS (SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - "
        "l_discount)) AS total_revenue FROM lineitem WHERE l_shipdate >= DATE '1996-01-01' AND "
        "l_shipdate < DATE '1996-04-01' GROUP BY l_suppkey) SELECT s_suppkey, s_name, "
        "total_revenue FROM supplier, revenue WHERE s_suppkey = supplier_no AND total_revenue = "
        "(SELECT max(total_revenue) FROM revenue)"
    ),
    "q16": (
        "SELECT p_type, p_size, count(DISTINCT l_suppkey) AS supplier_cnt FROM lineitem, part "
        "WHERE p_partkey = l_partkey AND p_type NOT LIKE 'MEDIUM POLISHED%' AND p_size IN (49, "
        "14, 23, 45, 19, 3, 36, 9) AND l_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE "
        "s_acctbal < 0) GROUP BY p_type, p_size"
    ),
    "q17": (
        "SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part WHERE p_partkey = "
        "l_partkey AND p_size = 15 AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem "
        "WHERE l_partkey = p_partkey)"
    ),
    "q19": (
        "SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part WHERE "
        "p_partkey = l_partkey AND ((p_size BETWEEN 1 AND 5 AND l_quantity BETWEEN 1 AND 11 AND "
        "l_shipmode IN ('AIR', 'REG AIR')) OR (p_size BETWEEN 1 AND 10 AND l_quantity BETWEEN 10 "
        "AND 20 AND l_shipmode IN ('AIR', 'REG AIR')) OR (p_size BETWEEN 1 AND 15 AND l_quantity "
        "BETWEEN 20 AND 30 AND l_shipmode IN ('AIR', 'REG AIR')))"
    ),
    "q21": (
        "SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation WHERE "
        "s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F' AND "
        "l1.l_receiptdate > l1.l_commitdate AND EXISTS (SELECT * FROM lineitem l2 WHERE "
        "l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey) AND NOT EXISTS (SELECT *"
        " FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_suppkey <> l1.l_suppkey "
        "AND l3.l_receiptdate > l3.l_commitdate) AND s_nationkey = n_nationkey AND n_name = "
        "'SAUDI ARABIA' GROUP BY s_name ORDER BY numwait DESC, s_name LIMIT 100"
    ),
    "q22": (
        "SELECT c_nationkey AS cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM "
        "customer WHERE c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00) "
        "AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey) GROUP BY c_nationkey"
    ),
}


def rows_of(rows: list[Any]) -> Counter[Any]:
    return Counter(tuple(r) for r in rows)


def ddl(table: str) -> str:
    return f"CREATE TABLE {table} (" + ", ".join(f"{c} {t}" for c, t in TABLES[table]) + ")"


def run(names: list[str], parquet: Path, data: Path, seed: int) -> dict[str, Any]:
    db = Database(Settings(data_dir=data, import_dir=parquet), InProcessExecutor())
    duck = duckdb.connect()
    bad: list[str] = []

    def check(step: str) -> None:
        for name in names:
            got = rows_of(db.view_rows(name, None)["rows"])
            want = rows_of([row_to_json(r) for r in duck.execute(QUERIES[name]).fetchall()])
            if not same(got, want):
                bad.append(f"{name} after {step}")
                print(f"  MISMATCH {name} after {step}", flush=True)

    hydration: dict[str, tuple[float, float]] = {}
    try:
        for t in TABLES:
            db.execute(ddl(t))
            duck.execute(ddl(t))
            db.execute(f"COPY {t} FROM '{t}.parquet' (FORMAT parquet)")
            duck.execute(f"COPY {t} FROM '{parquet / t}.parquet' (FORMAT parquet)")
        for name in names:
            theirs = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                duck.execute(QUERIES[name]).fetchall()
                theirs = min(theirs, time.perf_counter() - t0)
            t0 = time.perf_counter()
            db.execute(f"CREATE VIEW {name} AS {QUERIES[name]}")
            ours = time.perf_counter() - t0
            hydration[name] = (ours, theirs)
            print(f"{name:4} hydration {ours:7.3f} s   DuckDB {theirs:6.3f} s   "
                  f"{ours / theirs:6.1f}x", flush=True)
        check("hydration")
        rng = random.Random(seed)
        lines = duck.execute("SELECT l_orderkey, l_linenumber FROM lineitem").fetchall()
        orders = duck.execute("SELECT o_orderkey FROM orders").fetchall()
        writes = [f"UPDATE lineitem SET l_extendedprice = l_extendedprice + 1, l_quantity = "
                  f"l_quantity + 1, l_discount = 0.06, l_receiptdate = l_receiptdate + 3 "
                  f"WHERE l_orderkey = {o} AND l_linenumber = {n}"
                  for o, n in rng.sample(lines, 30)]
        writes += [f"UPDATE orders SET o_orderpriority = '1-URGENT', o_orderdate = "
                   f"o_orderdate + 40 WHERE o_orderkey = {o}" for (o,) in rng.sample(orders, 30)]
        single = []
        for stmt in writes:
            t0 = time.perf_counter()
            db.execute(stmt)
            single.append(time.perf_counter() - t0)
            duck.execute(stmt)
        check("single-row writes")
        stmt = ("UPDATE lineitem SET l_quantity = l_quantity + 1, l_receiptdate = "
                "l_receiptdate - 2 WHERE l_orderkey % 120 = 7")
        t0 = time.perf_counter()
        db.execute(stmt)
        batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        duck.execute(stmt)
        for name in names:
            duck.execute(QUERIES[name]).fetchall()
        duck_batch = time.perf_counter() - t0
        check("the batch")
    finally:
        db.close()
    p50 = statistics.median(single) * 1e3
    print(f"single-row UPDATE p50 {p50:.2f} ms (max {max(single) * 1e3:.1f}); UPDATE of 1/120 "
          f"of lineitem {batch:.3f} s, DuckDB's UPDATE and SELECTs {duck_batch:.3f} s",
          flush=True)
    return {"hydration": hydration, "p50": p50, "batch": batch, "duck_batch": duck_batch,
            "bad": bad}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated query names")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(QUERIES)
    with tempfile.TemporaryDirectory(prefix="diffsql-tpch-") as d:
        tmp = Path(d)
        parquet = tmp / "parquet"
        parquet.mkdir()
        rows = generate_tables(args.sf, args.seed, parquet)
        print(f"sf={args.sf:g}: " + ", ".join(f"{t}={n:,}" for t, n in rows.items()), flush=True)
        out = run(names, parquet, tmp / "data", args.seed)
    h = out["hydration"]
    worst = max(h, key=lambda n: h[n][0] / h[n][1])
    total = sum(o for o, _ in h.values()) / sum(t for _, t in h.values())
    ok = not out["bad"]
    print(f"summary: sf={args.sf:g} queries={len(names)} hydration_vs_duckdb={total:.1f} "
          f"worst={worst} worst_vs_duckdb={h[worst][0] / h[worst][1]:.1f} "
          f"write_p50_ms={out['p50']:.2f} batch_vs_duckdb={out['batch'] / out['duck_batch']:.1f} "
          f"ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
