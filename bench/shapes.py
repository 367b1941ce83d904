"""Hydration of common view shapes from columns, against DuckDB running the same SELECT.

One table of `--rows` rows (default 1,000,000) with an int key, a VARCHAR with NULLs, a
DOUBLE, a DECIMAL(12,2), a TIMESTAMP, a DATE, a BOOLEAN and a BIGINT is made in DuckDB and read
as Arrow, as the server reads its store. Each shape (a GROUP BY with an aggregate of one type,
a filter, a DISTINCT...) is compiled by the planner and hydrated in a fresh dataflow from
those columns, best of two runs; DuckDB runs the SELECT and fetches its rows. Every answer is
checked against DuckDB's. The shapes that still go by rows, one Python tuple per row, stand out
by their ratio. The last line is

    summary: rows=<n> shapes=<n> worst=<shape> worst_vs_duckdb=<x> ok=<true|false>

    python bench/shapes.py [--rows 1000000] [--only "sum decimal,min/max ts"] [--repo DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

COLUMNS = [("k", "INTEGER"), ("s", "VARCHAR"), ("v", "DOUBLE"), ("d", "DECIMAL(12,2)"),
           ("ts", "TIMESTAMP"), ("dt", "DATE"), ("b", "BOOLEAN"), ("n", "BIGINT")]
SHAPES = {
    "min/max str": "SELECT k, min(s), max(s) FROM t GROUP BY k",
    "sum decimal": "SELECT k, sum(d) FROM t GROUP BY k",
    "avg int": "SELECT k, avg(n), sum(n) FROM t GROUP BY k",
    "min/max ts": "SELECT k, min(ts), max(ts) FROM t GROUP BY k",
    "min/max date": "SELECT k, min(dt), max(dt) FROM t GROUP BY k",
    "count distinct": "SELECT k, count(DISTINCT n) FROM t GROUP BY k",
    "count str": "SELECT k, count(s), count(*), sum(v) FROM t GROUP BY k",
    "group by str": "SELECT s, count(*), sum(v) FROM t GROUP BY s",
    "group by date": "SELECT dt, count(*), sum(v) FROM t GROUP BY dt",
    "filter bool": "SELECT k, v FROM t WHERE b AND v > 10",
    "distinct": "SELECT DISTINCT k, dt FROM t",
    "sum case": "SELECT k, sum(CASE WHEN b THEN 1 ELSE 0 END) FROM t GROUP BY k",
    "max having": "SELECT k, max(v) AS m FROM t GROUP BY k HAVING max(v) > 10",
    "min/max dec": "SELECT k, min(d), max(d) FROM t GROUP BY k",
    "by hour": "SELECT date_trunc('hour', ts) AS h, count(*), sum(v) FROM t GROUP BY 1",
    "by month": "SELECT year(dt) AS y, month(dt) AS m, count(*) FROM t GROUP BY 1, 2",
    "functions": "SELECT k, round(v / 7, 2) AS r, abs(n - 5000) AS a, CAST(v AS BIGINT) AS c"
                 " FROM t WHERE s LIKE 'name1%'",
    "strings": "SELECT k, lower(s) || '!' AS l FROM t WHERE k < 100",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--only", default="", help="comma-separated shape names")
    ap.add_argument("--repo", default=str(REPO), help="the diffsql tree to measure")
    args = ap.parse_args()
    sys.path.insert(0, args.repo)
    import duckdb

    from engine import Dataflow
    from planner import Catalog, Column, TableSchema, compile_view

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT (i % 1000)::INTEGER AS k,"
        " CASE WHEN i % 7 = 0 THEN NULL ELSE 'name' || (i % 5000)::VARCHAR END AS s,"
        " i::DOUBLE AS v, (i % 100000)::DECIMAL(12,2) AS d,"
        " TIMESTAMP '2020-01-01' + to_seconds(i) AS ts,"
        " DATE '2020-01-01' + (i % 1000)::INTEGER AS dt, (i % 3 = 0) AS b,"
        f" (i % 10000)::BIGINT AS n FROM range({args.rows}) r(i)")
    cat = Catalog(tables={"t": TableSchema("t", [Column(c, ty) for c, ty in COLUMNS])})
    table = con.sql("SELECT * FROM t").to_arrow_table()
    names = [s.strip() for s in args.only.split(",") if s.strip()] or list(SHAPES)
    ok, worst, worst_ratio = True, "", 0.0
    print(f"{args.rows:,} rows; hydration from Arrow columns (best of 2) against DuckDB's SELECT")
    print(f"{'shape':16} {'ours ms':>9} {'DuckDB ms':>10} {'ratio':>7}  equal")
    for name in names:
        q = SHAPES[name]
        best, got = float("inf"), None
        for _ in range(2):
            cv = compile_view(q, cat)
            df = Dataflow()
            h, src = df.new_input("t")
            cap = cv.build(df, {"t": src}).capture(history=False, drain=False)
            t0 = time.perf_counter()
            h.send_columns(table)
            h.advance_to(1)
            df.run()
            best = min(best, time.perf_counter() - t0)
            # each row with its multiplicity: a shape's rows need not be distinct
            got = sorted((repr(r), c) for r, c in cap.current().items())
        t0 = time.perf_counter()
        want_rows = con.execute(q).fetchall()
        duck = time.perf_counter() - t0
        same = got == sorted(Counter(repr(tuple(r)) for r in want_rows).items())
        ok &= same
        ratio = best / duck
        if ratio > worst_ratio:
            worst, worst_ratio = name, ratio
        print(f"{name:16} {best * 1e3:9.1f} {duck * 1e3:10.1f} {ratio:6.1f}x  {same}", flush=True)
    print(f"summary: rows={args.rows} shapes={len(names)} worst={worst.replace(' ', '_')}"
          f" worst_vs_duckdb={worst_ratio:.1f} ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
