"""Bulk load on the Spark executor: `COPY t FROM 'file.parquet'` with `--executor spark`.

Invariant checked: the views' dataflows load the normalised Parquet file on Spark (local[2]),
and every view equals both DuckDB's answer over the same file (an independent connection) and
the in-process server's rows, for every column type the server supports, NULLs included; a
DELETE of loaded rows by value then retracts exactly them (the values Spark read equal DuckDB's).
"""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from server_harness import Server, multiset

from server.values import row_to_json

pytestmark = pytest.mark.spark

DDL = (
    "CREATE TABLE t (a INTEGER, b BIGINT, c VARCHAR, d DOUBLE, e DECIMAL(10,2), f DATE, "
    "g BOOLEAN, h TIMESTAMP, i REAL, j SMALLINT); CREATE TABLE k (id SMALLINT, label VARCHAR)"
)
VIEWS = {
    "all_t": "SELECT * FROM t",
    "by_label": "SELECT k.label, count(*) AS n, sum(t.b) AS sb, min(t.e) AS lo, max(t.h) AS hi "
    "FROM t JOIN k ON t.j = k.id GROUP BY k.label",
}


def write_files(imp: Path) -> None:
    n = 24
    pq.write_table(
        pa.table(
            {
                "a": pa.array([i if i % 7 else None for i in range(n)], pa.int32()),
                "b": pa.array([i * 10**10 for i in range(n)], pa.int64()),
                "c": pa.array([f"s{i}" if i % 5 else None for i in range(n)]),
                "d": pa.array([i / 3 for i in range(n)]),
                "e": pa.array([decimal.Decimal(i) / 4 for i in range(n)], pa.decimal128(10, 2)),
                "f": pa.array([datetime.date(2024, 1, 1 + i) for i in range(n)], pa.date32()),
                "g": pa.array([None if i % 4 == 0 else i % 2 == 0 for i in range(n)]),
                "h": pa.array(
                    [datetime.datetime(2024, 3, 1, i, 30, 15, 250000) for i in range(n)],
                    pa.timestamp("us"),
                ),
                "i": pa.array([i + 0.1 for i in range(n)], pa.float32()),
                "j": pa.array([i % 3 for i in range(n)], pa.int16()),
            }
        ),
        imp / "t.parquet",
    )
    (imp / "k.csv").write_text("id,label\n0,zero\n1,one\n2,\n")


def post(s: Server, sql: str) -> Any:
    r = s.http.post("/sql", json={"sql": sql}, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def rows(s: Server, view: str) -> Any:
    r = s.http.get(f"/views/{view}/rows", timeout=600)
    assert r.status_code == 200, r.text
    return multiset(r.json()["rows"])


def test_copy_parquet_on_spark_equals_duckdb_and_inprocess(tmp_path: Path) -> None:
    spark = Server(tmp_path / "spark", "--executor", "spark", "--spark-master", "local[2]")
    local = Server(tmp_path / "local")
    con = duckdb.connect()
    con.execute(DDL)
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    try:
        spark.start(timeout=120)
        local.start()
        for s in (spark, local):
            write_files(s.data_dir / "import")
        imp = local.data_dir / "import"
        script = [DDL + "; " + "; ".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()),
                  "COPY t FROM 't.parquet' (FORMAT parquet); "
                  "COPY k FROM 'k.csv' (FORMAT csv, HEADER true)",
                  "DELETE FROM t WHERE j = 1 OR a IS NULL"]
        con.execute(f"COPY t FROM '{imp / 't.parquet'}' (FORMAT parquet)")
        con.execute(f"COPY k FROM '{imp / 'k.csv'}' (FORMAT csv, HEADER true)")
        for step, sql in enumerate(script):
            for s in (spark, local):
                post(s, sql)
            if step == 2:
                con.execute(sql)
            if step == 0:
                continue
            for name, q in VIEWS.items():
                want = multiset([row_to_json(r) for r in con.execute(q).fetchall()])
                assert rows(spark, name) == want, (name, step)
                assert rows(local, name) == want, (name, step)
        assert sum(rows(spark, "all_t").values()) == 13  # 8 rows with j = 1, 4 with a NULL, 1 both
        health = spark.http.get("/health").json()
        assert health["executor"] == "spark" and not health["failed_views"], health
        assert list((spark.data_dir / "loads").iterdir()) == []
        log = spark.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
    finally:
        spark.stop()
        local.stop()
