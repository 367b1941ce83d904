"""bench/views.py's six TPC-H views with the money columns as DECIMAL(15,2), as TPC-H declares
them, against the same views over DOUBLE: what a schema with exact money costs (issue 11).

The tables are bench/views.py's data (generated deterministically in a child process, loaded
with COPY), into a real DuckDB file, through the server's `Database` in this process: the write
path a request takes, without HTTP. For each money type, in the same run:
- hydration: CREATE VIEW of each view (reading the tables from the store), against DuckDB
  running the six SELECTs once over its own copy;
- 40 single-row UPDATEs of lineitem (p50 until every view is updated);
- one UPDATE of about 1/120 of lineitem (10,000 rows at sf 0.2), against DuckDB's UPDATE and
  the six SELECTs.
Every view is checked against DuckDB after each step (DECIMALs exactly, as the server prints
them; doubles to 1e-9 relative). The last line is

    summary: sf=<f> decimal_hydration_s=<x> double_hydration_s=<x> duckdb_s=<x> decimal_batch_s=<x> double_batch_s=<x> ok=<true|false>

    python bench/decimal_views.py [--sf 0.2]
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
from views import TABLES, VIEWS, generate_tables  # noqa: E402

from server.core import Database  # noqa: E402
from server.executors import InProcessExecutor  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.values import row_to_json  # noqa: E402

# TPC-H's DECIMAL(15,2) columns among bench/views.py's tables
MONEY = {"l_quantity", "l_extendedprice", "l_discount", "l_tax", "o_totalprice", "c_acctbal",
         "s_acctbal", "p_retailprice"}


def ddl(table: str, money: str) -> str:
    return f"CREATE TABLE {table} (" + ", ".join(
        f"{c} {money if c in MONEY else t}" for c, t in TABLES[table]) + ")"


def rows_of(rows: list[Any]) -> Counter[Any]:
    return Counter(tuple(r) for r in rows)


def run(money: str, parquet: Path, tmp: Path, seed: int) -> dict[str, Any]:
    """One money type: hydration, single-row writes and the batch, each checked."""
    data = tmp / money.split("(")[0].lower()
    db = Database(Settings(data_dir=data, import_dir=parquet), InProcessExecutor())
    duck = duckdb.connect()
    ok = True

    def check(step: str) -> None:
        nonlocal ok
        for name, sql in VIEWS.items():
            got = rows_of(db.view_rows(name, None)["rows"])
            want = rows_of([row_to_json(r) for r in duck.execute(sql).fetchall()])
            if not same(got, want):
                ok = False
                print(f"  MISMATCH {money} {name} after {step}", flush=True)

    try:
        for t in TABLES:
            db.execute(ddl(t, money))
            duck.execute(ddl(t, money))
            db.execute(f"COPY {t} FROM '{t}.parquet' (FORMAT parquet)")
            duck.execute(f"COPY {t} FROM '{parquet / t}.parquet' (FORMAT parquet)")
        hydrate = {}
        for name, sql in VIEWS.items():
            t0 = time.perf_counter()
            db.execute(f"CREATE VIEW {name} AS {sql}")
            hydrate[name] = time.perf_counter() - t0
        duck_h = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for sql in VIEWS.values():
                duck.execute(sql).fetchall()
            duck_h = min(duck_h, time.perf_counter() - t0)
        check("hydration")
        rng = random.Random(seed)
        keys = duck.execute("SELECT l_orderkey, l_linenumber FROM lineitem").fetchall()
        single = []
        for ok_, ln in rng.sample(keys, 40):
            stmt = (f"UPDATE lineitem SET l_extendedprice = l_extendedprice + 1, "
                    f"l_discount = 0.03 WHERE l_orderkey = {ok_} AND l_linenumber = {ln}")
            t0 = time.perf_counter()
            db.execute(stmt)
            single.append(time.perf_counter() - t0)
            duck.execute(stmt)
        check("single-row writes")
        stmt = "UPDATE lineitem SET l_quantity = l_quantity + 1 WHERE l_orderkey % 120 = 7"
        t0 = time.perf_counter()
        db.execute(stmt)
        batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        (changed,), = duck.execute(stmt).fetchall()
        for sql in VIEWS.values():
            duck.execute(sql).fetchall()
        duck_batch = time.perf_counter() - t0
        check("the batch")
    finally:
        db.close()
    print(f"{money:14} hydration {sum(hydrate.values()):6.2f} s (DuckDB's SELECTs {duck_h:.3f} s):"
          + "".join(f" {n} {s:.2f}" for n, s in hydrate.items()), flush=True)
    print(f"{'':14} single-row UPDATE p50 {statistics.median(single) * 1e3:.2f} ms;"
          f" UPDATE of {changed:,} rows {batch:.3f} s (DuckDB's UPDATE and SELECTs"
          f" {duck_batch:.3f} s)   match={ok}", flush=True)
    return {"hydration": sum(hydrate.values()), "duckdb": duck_h, "batch": batch, "ok": ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="diffsql-decimal-") as d:
        tmp = Path(d)
        parquet = tmp / "parquet"
        parquet.mkdir()
        rows = generate_tables(args.sf, args.seed, parquet)
        print(f"sf={args.sf:g}: " + ", ".join(f"{t}={n:,}" for t, n in rows.items()), flush=True)
        dec = run("DECIMAL(15,2)", parquet, tmp, args.seed)
        dbl = run("DOUBLE", parquet, tmp, args.seed)
    ok = dec["ok"] and dbl["ok"]
    print(f"summary: sf={args.sf:g} decimal_hydration_s={dec['hydration']:.2f} "
          f"double_hydration_s={dbl['hydration']:.2f} duckdb_s={dec['duckdb']:.3f} "
          f"decimal_batch_s={dec['batch']:.3f} double_batch_s={dbl['batch']:.3f} "
          f"ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
