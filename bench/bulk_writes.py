"""Bulk writes into a populated table with three views (issue 11's opening measurements):
a 10,000-row `INSERT ... VALUES`, a 100,000-row `INSERT ... SELECT`, a 100,000-row `COPY`, an
UPDATE and a DELETE of about 11,000 rows each, through the server's own write path
(`Database.execute`: parse, DuckDB transaction, change log, COMMIT, every view maintained)
against DuckDB running the same statements on an in-memory table and recomputing the three
views, in the same run. After every statement each view is checked against DuckDB over the
server's own table (`/query`'s path) and against the standalone DuckDB's answer. The views: a
GROUP BY with COUNT, SUM and MAX of a date, a filter, and a global top 5. The last line is

    summary: ours_s=<x> duckdb_s=<x> insert_values_s=<x> insert_select_s=<x> copy_s=<x> update_s=<x> delete_s=<x> ok=<true|false>

    python bench/bulk_writes.py [--repo DIR]     # DIR: another checkout, for a before/after
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parent.parent

TABLE = "CREATE TABLE t (id BIGINT, k INTEGER, v DOUBLE, s VARCHAR, d DATE)"
VIEWS = {
    "by_k": "SELECT k, count(*) AS n, sum(v) AS sv, max(d) AS md FROM t GROUP BY k",
    "big": "SELECT id, s FROM t WHERE v > 900",
    "top": "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 5",
}


def statements(import_dir: Path) -> list[tuple[str, str]]:
    values = ", ".join(
        f"({i}, {i % 100}, {i * 7 % 1000}.5, 's{i % 37}', DATE '2024-0{i % 9 + 1}-1{i % 10}')"
        for i in range(10_000))
    return [
        ("insert_values", f"INSERT INTO t VALUES {values}"),
        ("insert_select", "INSERT INTO t SELECT i, i % 100, i * 3 % 1000 + 0.25, 's' || (i % 41),"
                          " DATE '2024-01-01' + (i % 200)::INT FROM range(100000, 200000) r(i)"),
        ("copy", f"COPY t FROM '{import_dir / 'more.parquet'}' (FORMAT parquet)"),
        ("update", "UPDATE t SET v = v + 1 WHERE k < 10"),
        ("delete", "DELETE FROM t WHERE k >= 90"),
    ]


def fingerprint(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(round(x, 6) if isinstance(x, float) else str(x) for x in r))
                   for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose server runs")
    args = ap.parse_args()
    sys.path.insert(0, str(args.repo))
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    ok = True
    with tempfile.TemporaryDirectory(prefix="diffsql-bulk-") as d:
        tmp = Path(d)
        import_dir = tmp / "import"
        import_dir.mkdir()
        duckdb.connect().execute(
            "COPY (SELECT i::BIGINT AS id, (i % 100)::INTEGER AS k, i * 3 % 1000 + 0.75 AS v,"
            " 's' || (i % 43) AS s, DATE '2024-01-01' + (i % 250)::INT AS d"
            f" FROM range(300000, 400000) r(i)) TO '{import_dir / 'more.parquet'}'"
            " (FORMAT parquet)")
        stmts = statements(import_dir)

        duck = duckdb.connect()
        duck.execute(TABLE)
        duck_t: dict[str, float] = {}
        want: list[dict[str, Counter[str]]] = []
        for name, sql in stmts:
            t0 = time.perf_counter()
            duck.execute(sql)
            answers = {v: fingerprint(duck.execute(q).fetchall()) for v, q in VIEWS.items()}
            duck_t[name] = time.perf_counter() - t0
            want.append(answers)

        db = Database(Settings(data_dir=tmp / "data", import_dir=import_dir), InProcessExecutor())
        try:
            db.execute(TABLE)
            for v, q in VIEWS.items():
                db.execute(f"CREATE VIEW {v} AS {q}")
            ours: dict[str, float] = {}
            for (name, sql), answers in zip(stmts, want, strict=True):
                t0 = time.perf_counter()
                db.execute(sql.replace(str(import_dir / "more.parquet"), "more.parquet"))
                ours[name] = time.perf_counter() - t0
                for v, q in VIEWS.items():
                    got = fingerprint(db.view_rows(v, None)["rows"])
                    same = got == fingerprint(db.query(q)["rows"]) == answers[v]
                    if not same:
                        print(f"MISMATCH after {name}: view {v}")
                    ok = ok and same
        finally:
            db.close()

    print(f"{'statement':14} {'ours s':>8} {'DuckDB s':>9}   (DuckDB: the statement in memory and"
          " the three views' SELECTs)")
    for name, _ in stmts:
        print(f"{name:14} {ours[name]:>8.2f} {duck_t[name]:>9.3f}")
    print(f"{'all':14} {sum(ours.values()):>8.2f} {sum(duck_t.values()):>9.3f}   views equal"
          f" DuckDB after every statement: {ok}")
    print(f"summary: ours_s={sum(ours.values()):.2f} duckdb_s={sum(duck_t.values()):.3f} "
          + " ".join(f"{n}_s={ours[n]:.2f}" for n, _ in stmts)
          + f" ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
