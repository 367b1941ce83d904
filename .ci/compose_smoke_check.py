"""The checks of .ci/compose-smoke.sh against the diffsql-spark service (docker-compose.yml).

Runs on the host, with diffsql's own dependencies (duckdb, pyarrow). It makes small tables as
files, copies them into the shared volume's import directory (`docker cp` into the
diffsql-spark container), loads them with COPY ... FROM, defines a join + aggregate view and a
WITH RECURSIVE view, changes the tables with INSERT and DELETE, and after every step compares
each view's rows, as a multiset, with the same query in an in-memory DuckDB over the same data
(and the reachable set with a BFS). Exits non-zero on the first mismatch.

    python3 .ci/compose_smoke_check.py --url http://127.0.0.1:8766 --container <id>
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

TABLES = """
CREATE TABLE customers (id INTEGER NOT NULL, region VARCHAR NOT NULL);
CREATE TABLE orders (id INTEGER NOT NULL, customer INTEGER NOT NULL, amount INTEGER NOT NULL);
CREATE TABLE edges (src INTEGER NOT NULL, dst INTEGER NOT NULL)
"""
VIEWS = {
    "region_totals": "SELECT c.region, count(*) AS n, sum(o.amount) AS total "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "reach": "WITH RECURSIVE r(node) AS (SELECT 1 UNION SELECT e.dst FROM r "
    "JOIN edges e ON r.node = e.src) SELECT node FROM r",
}
TIMEOUT = 900  # seconds for one request: a recursive view's epoch on Spark takes tens of seconds


def call(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        sys.exit(f"FAIL {method} {url}: HTTP {e.code} {e.read().decode()[:2000]}")


def run_sql(base: str, text: str, ref: duckdb.DuckDBPyConnection | None = None) -> dict:
    t0 = time.monotonic()
    out = call(f"{base}/sql", "POST", {"sql": text})
    print(f"  POST /sql ({time.monotonic() - t0:.1f} s): {text.strip()[:110]}")
    if out.get("failed_views"):
        sys.exit(f"FAIL failed_views: {out['failed_views']}")
    if ref is not None:
        ref.execute(text)
    return out


def bfs(edges: list[tuple[int, int]], root: int) -> set[int]:
    out: dict[int, list[int]] = {}
    for s, d in edges:
        out.setdefault(s, []).append(d)
    seen, todo = {root}, deque([root])
    while todo:
        for d in out.get(todo.popleft(), []):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def check(base: str, ref: duckdb.DuckDBPyConnection, step: str) -> None:
    for name, query in VIEWS.items():
        got = call(f"{base}/views/{name}/rows")
        want = ref.execute(query).fetchall()
        g = Counter(tuple(r) for r in got["rows"])
        w = Counter(tuple(r) for r in want)
        if g != w:
            sys.exit(f"FAIL {step}: view {name}\n  server: {sorted(g.elements())}\n"
                     f"  duckdb: {sorted(w.elements())}")
        print(f"  ok {step}: {name} = {len(got['rows'])} rows, equal to DuckDB "
              f"(timestamp {got['timestamp']}): {sorted(g.elements())[:8]}"
              f"{' ...' if len(got['rows']) > 8 else ''}")
    edges = ref.execute("SELECT src, dst FROM edges").fetchall()
    got = {r[0] for r in call(f"{base}/views/reach/rows")["rows"]}
    if got != bfs(edges, 1):
        sys.exit(f"FAIL {step}: reach {sorted(got)} != BFS {sorted(bfs(edges, 1))}")
    print(f"  ok {step}: reach equals BFS from node 1 over {len(edges)} edges")


def make_files(d: Path, rng: random.Random) -> None:
    regions = ["east", "west", "south", "centre"]
    with open(d / "customers.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "region"])
        for i in range(1, 51):
            w.writerow([i, regions[i % 4]])
    n = 2000
    pq.write_table(pa.table({
        "id": pa.array(range(1, n + 1), pa.int32()),
        "customer": pa.array([rng.randint(1, 50) for _ in range(n)], pa.int32()),
        "amount": pa.array([rng.randint(1, 500) for _ in range(n)], pa.int32()),
    }), d / "orders.parquet")
    # A small random graph: nodes 1..30, every node but 1 has an edge in (short paths, few
    # loop iterations on Spark), and a few nodes are unreachable (their only edges point out).
    edges = {(rng.randint(1, 25), rng.randint(2, 25)) for _ in range(40)}
    edges |= {(26, 27), (27, 28), (28, 26), (29, 1)}
    with open(d / "edges.csv", "w", newline="") as f:
        csv.writer(f).writerows(sorted(edges))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8766")
    ap.add_argument("--container", required=True, help="the diffsql-spark container")
    args = ap.parse_args()
    base, rng = args.url.rstrip("/"), random.Random(7)
    ref = duckdb.connect()

    print("create tables and views (empty)")
    run_sql(base, TABLES, ref)
    for name, query in VIEWS.items():
        run_sql(base, f"CREATE VIEW {name} AS {query}")
    check(base, ref, "empty")

    print("COPY ... FROM files in the shared volume's import directory")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "smoke"
        d.mkdir()
        make_files(d, rng)
        subprocess.run(["docker", "cp", str(d), f"{args.container}:/shared/import/"], check=True)
        run_sql(base, "COPY customers FROM 'smoke/customers.csv' (HEADER true); "
                      "COPY orders FROM '/shared/import/smoke/orders.parquet'; "
                      "COPY edges FROM 'smoke/edges.csv'")
        ref.execute(f"COPY customers FROM '{d}/customers.csv' (HEADER true); "
                    f"COPY orders FROM '{d}/orders.parquet'; COPY edges FROM '{d}/edges.csv'")
    counts = {t: call(f"{base}/tables/{t}")["row_count"] for t in ("customers", "orders", "edges")}
    print(f"  tables: {counts}")
    check(base, ref, "after COPY")

    print("INSERT and DELETE")
    run_sql(base, "INSERT INTO customers VALUES (51, 'north'); "
                  "INSERT INTO orders VALUES (5001, 51, 100), (5002, 51, 250), (5003, 3, 7); "
                  "DELETE FROM orders WHERE customer = 7 OR id <= 100", ref)
    check(base, ref, "after orders writes")
    reached = sorted(bfs(ref.execute("SELECT src, dst FROM edges").fetchall(), 1) - {1})
    cut = reached[len(reached) // 2] if reached else 2
    run_sql(base, f"INSERT INTO edges VALUES (1, 26), (28, 30); DELETE FROM edges WHERE src = {cut}",
            ref)
    check(base, ref, f"after edges writes (+1->26, +28->30, -src={cut})")
    run_sql(base, "DELETE FROM edges WHERE dst = 26", ref)
    check(base, ref, "after deleting the edge into the cycle")

    q = call(f"{base}/query", "POST", {"sql": "SELECT count(*) FROM reach r JOIN edges e "
                                               "ON e.src = r.node"})
    want = ref.execute(f"SELECT count(*) FROM ({VIEWS['reach']}) r JOIN edges e "
                       "ON e.src = r.node").fetchall()
    if [tuple(r) for r in q["rows"]] != want:
        sys.exit(f"FAIL /query over view and table: {q['rows']} != {want}")
    print(f"  ok /query over reach and edges: {q['rows']}")
    for name in VIEWS:
        v = call(f"{base}/views/{name}")
        if v.get("status") != "running":
            sys.exit(f"FAIL view {name} status {v.get('status')}")
    print("PASS diffsql-spark: every view equal to DuckDB (and BFS) after every step")


if __name__ == "__main__":
    main()
