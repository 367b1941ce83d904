"""A COPY whose file columns already have the table's types skips DuckDB's casts.

Invariants checked, in process on a real DuckDB file: `Store.insert_arrow` returns the rows as
DuckDB stores them (equal to `SELECT *` of the table afterwards) whether the file's Arrow types
are exactly the table's (the columns are then the file's own buffers, no copy) or not (the casts
run); a NULL in a NOT NULL column of an exactly typed file is still refused with nothing
applied; and views over tables loaded both ways equal DuckDB running their SELECTs.
"""

from __future__ import annotations

import datetime
import decimal
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from server.core import Database
from server.errors import SqlError
from server.executors import InProcessExecutor
from server.settings import Settings
from server.values import row_to_json

DDL = ("CREATE TABLE t (a INTEGER NOT NULL, b BIGINT, c VARCHAR, d DOUBLE, e DECIMAL(12,3), "
       "f DATE, g BOOLEAN, h TIMESTAMP, i REAL, j SMALLINT)")
VIEWS = {
    "by_c": "SELECT c, count(*) AS n, sum(b) AS sb, min(d) AS lo, max(e) AS hi FROM t GROUP BY c",
    "some": "SELECT a, f, g, h, i, j FROM t WHERE a % 3 = 0",
}
EXACT = {
    "a": pa.int32(), "b": pa.int64(), "c": pa.string(), "d": pa.float64(),
    "e": pa.decimal128(12, 3), "f": pa.date32(), "g": pa.bool_(), "h": pa.timestamp("us"),
    "i": pa.float32(), "j": pa.int16(),
}


def _rows(n: int, start: int) -> list[tuple[Any, ...]]:
    out = []
    for k in range(start, start + n):
        out.append((
            k, None if k % 7 == 0 else k * 100_003, None if k % 11 == 0 else f"c{k % 5}",
            (-1) ** k * k / 8, decimal.Decimal(k % 1000) / 1000,
            datetime.date(2020, 1, 1) + datetime.timedelta(days=k % 400), k % 2 == 0,
            datetime.datetime(2021, 5, 6, 7, 8, 9, k % 1000000), k / 4, k % 30000,
        ))
    return out


def _write(path: Path, rows: list[tuple[Any, ...]], types: dict[str, pa.DataType]) -> None:
    cols = list(zip(*rows, strict=True))
    pq.write_table(pa.table({n: pa.array(cols[i], ty) for i, (n, ty) in enumerate(types.items())}),
                   path, row_group_size=1000)


def _bag(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(r)) for r in rows)


def _oracle(con: duckdb.DuckDBPyConnection, sql: str) -> Counter[str]:
    return _bag([row_to_json(r) for r in con.execute(sql).fetchall()])


def test_exact_types_skip_the_casts_and_equal_duckdb(tmp_path: Path) -> None:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    imp = tmp_path / "data" / "import"
    # exactly the table's types; then b as int32 and i as float64 (cast by DuckDB)
    _write(imp / "exact.parquet", _rows(3000, 0), EXACT)
    _write(imp / "cast.parquet", _rows(2000, 3000), dict(EXACT, b=pa.int32(), i=pa.float64()))
    _write(imp / "null.parquet", [(None, *_rows(1, 9000)[0][1:])], EXACT)
    oracle = duckdb.connect()
    oracle.execute(DDL)
    try:
        db.execute(DDL)
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        rec = db.tables["t"]
        names = list(EXACT)

        # The store's own answer: the exact file's columns come back uncopied, the other's
        # are DuckDB's casts; each equals what the table holds afterwards.
        for file, copied in (("exact.parquet", False), ("cast.parquet", True)):
            data = pq.read_table(imp / file)
            data = data.rename_columns([f"f{i}" for i in range(data.num_columns)])
            db.store.begin()
            try:
                typed = db.store.insert_arrow(rec, data, names)
                stored = db.store.conn.execute("SELECT * FROM t").fetchall()
            finally:
                db.store.rollback()
            assert typed.column_names == names
            assert [f.type for f in typed.schema] == list(EXACT.values())
            shares = typed.column("d").chunk(0).buffers()[1].address == \
                data.column(3).chunk(0).buffers()[1].address
            assert shares is not copied
            assert _bag([tuple(r.values()) for r in typed.to_pylist()]) == _bag(stored)

        # Through COPY: the table and the views equal DuckDB's own COPY of the same files.
        for file in ("exact.parquet", "cast.parquet"):
            db.execute(f"COPY t FROM '{file}'")
            oracle.execute(f"COPY t FROM '{imp / file}'")
        with pytest.raises(SqlError) as err:
            db.execute("COPY t FROM 'null.parquet'")  # a NULL in NOT NULL column a
        assert err.value.code == "constraint_violation"
        assert _bag(db.query("SELECT * FROM t")["rows"]) == _oracle(oracle, "SELECT * FROM t")
        assert db.query("SELECT count(*) FROM t")["rows"] == [[5000]]
        for name, sql in VIEWS.items():
            assert _bag(db.view_rows(name, None)["rows"]) == \
                _bag(db.query(sql)["rows"]), name
            assert _bag(db.view_rows(name, None)["rows"]) == _oracle(oracle, sql), name
    finally:
        db.close()


LATER_VIEWS = {
    "by_c": "SELECT c, count(*) AS n, sum(b) AS sb, sum(e) AS se, avg(d) AS ad, min(d) AS lo, "
            "max(e) AS hi, min(f) AS f0, max(h) AS h1, max(c) AS c1, count(DISTINCT j) AS dj, "
            "sum(DISTINCT j) AS sj FROM t GROUP BY c",
    "by_j": "SELECT j % 97 AS g, min(a) AS lo, max(a) AS hi, min(b) AS b0, max(f) AS f1, "
            "count(b) AS nb FROM t GROUP BY j % 97",
    "total": "SELECT count(*) AS n, sum(a) AS sa, min(d) AS lo, max(d) AS hi FROM t",
    # 1-2 rows a key: its batches are applied row by row (ABSORB_ROWS_PER_KEY), not absorbed
    "by_a": "SELECT a, count(*) AS n, max(d) AS hi FROM t GROUP BY a",
}


def test_later_copies_maintain_views_as_duckdb(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """COPYs into a table with rows already, a large DELETE and a large UPDATE (each large
    enough that the views' groups take the batch as columns, `ReduceTotalOp._absorb_columns`),
    between single-row writes: new groups, groups that grow, copies of rows already there,
    rows of several loads deleted; after each, every view equals DuckDB running its SELECT
    over the same data, and the table equals DuckDB's."""
    from tests.db_support import record_absorbs

    absorbed = record_absorbs(monkeypatch)
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    imp = tmp_path / "data" / "import"
    _write(imp / "first.parquet", _rows(6000, 0), EXACT)
    _write(imp / "second.parquet", _rows(8000, 4000), EXACT)  # 2,000 rows again, 6,000 new
    oracle = duckdb.connect()
    oracle.execute(DDL)
    steps = [
        "COPY t FROM 'first.parquet'",
        "INSERT INTO t VALUES (1, 2, 'c9', 0.5, 1.5, DATE '2019-01-01', true, "
        "TIMESTAMP '2030-01-01 00:00:00', 1.0, 5)",
        "DELETE FROM t WHERE a % 10 = 3",
        "COPY t FROM 'second.parquet'",
        "UPDATE t SET d = -d, c = 'c7' WHERE a % 50 = 1",
        "COPY t FROM 'first.parquet'",
        "UPDATE t SET e = e + 1, j = j % 7, f = f + 1 WHERE a % 3 = 0",
        "DELETE FROM t WHERE a < 9000 AND a % 4 <> 1",  # rows of every load, in bulk
    ]
    try:
        db.execute(DDL)
        for name, sql in LATER_VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        deleted = updated = 0
        for step in steps:
            if step.startswith("DELETE"):
                deleted = oracle.execute(f"SELECT count(*) FROM t {step[14:]}").fetchone()[0]
            if step.startswith("UPDATE t SET e"):  # the large UPDATE: the rows it changes
                updated = oracle.execute("SELECT count(*) FROM t WHERE a % 3 = 0").fetchone()[0]
            db.execute(step)
            oracle.execute(step.replace("FROM '", f"FROM '{imp}/"))
            for name, sql in LATER_VIEWS.items():
                assert _bag(db.view_rows(name, None)["rows"]) == _oracle(oracle, sql), \
                    (step, name)
        assert _bag(db.query("SELECT * FROM t")["rows"]) == _oracle(oracle, "SELECT * FROM t")
        # The later COPYs reached the three views' states as columns (8,000 and 6,000 rows
        # each); the DELETE's and the UPDATE's rows (a retraction and an insertion each) did,
        # where they convert to columns exactly: not by_c's (a DECIMAL column: its rows go by
        # rows). (total's UPDATE rows, of no column it reads, cancel out: absorbed both ways.)
        assert sum(n for n in absorbed if n > 0) == 3 * (8000 + 6000) + 2 * updated
        assert -sum(n for n in absorbed if n < 0) == 2 * deleted + 2 * updated
    finally:
        db.close()


def test_empty_lines_of_a_one_column_csv_are_null_rows(tmp_path: Path) -> None:
    """An empty line of a one-column CSV is a row holding NULL, as DuckDB's COPY reads it
    (they were skipped), but for the empty lines the file starts with; a wider file skips
    them, as DuckDB's does."""
    bodies = {"a": b"1\n\n2\n", "b": b"1\n\n2\n\n", "c": b"\n1\n2", "d": b"1\r\n\r\n2\r\n",
              "e": b"x\n\ny\n", "h": b"1\n\n\n2\n", "w": b"1,a\n\n2,b\n"}
    types = {"e": "a VARCHAR", "w": "a INTEGER, b VARCHAR"}
    db = Database(Settings(memory=True, import_dir=tmp_path), InProcessExecutor())
    con = duckdb.connect()
    try:
        for k, body in bodies.items():
            (tmp_path / f"{k}.csv").write_bytes(body)
            ddl = f"CREATE TABLE t{k} ({types.get(k, 'a INTEGER')})"
            db.execute(ddl)
            con.execute(ddl)
            db.execute(f"COPY t{k} FROM '{k}.csv'")
            con.execute(f"COPY t{k} FROM '{tmp_path / k}.csv' (HEADER false)")
            want = [list(r) for r in con.execute(f"SELECT * FROM t{k}").fetchall()]
            assert db.query(f"SELECT * FROM t{k}")["rows"] == want, k
    finally:
        db.close()
