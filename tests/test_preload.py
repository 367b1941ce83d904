"""planner.preload: what a process's first hydration over a large table would load on first use
is loaded ahead of it, and only for a database that bulk-loads a large table.

Checked in fresh processes (a test process has long loaded everything): `preload()` loads numba,
the float-sum kernels and the string key codes' kernels, and changes no result (a GROUP BY
hydrated after it equals DuckDB); a real server loads the compiled kernels (llvmlite's library
mapped into its memory) after a COPY of `PRELOAD_ROWS` rows, and not after small writes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from server_harness import Server

from planner.preload import PRELOAD_ROWS

REPO = Path(__file__).resolve().parent.parent

FRESH = """
import sys
import numpy as np, pyarrow as pa, duckdb
from planner import Catalog, Column, TableSchema, compile_view
import engine
from planner.preload import preload
assert "numba" not in sys.modules
preload()
import planner.float_sums as fs
assert "numba" in sys.modules and fs._counts.signatures and fs._terms.signatures
n = 300_000
rng = np.random.default_rng(1)
import planner.byte_codes as bc
KERNELS = [(fs, f) for f in ("_counts", "_terms", "_counts_by_code", "_terms_by_code")]
KERNELS += [(bc, "_count"), (bc, "_fill"), (bc, "_fill_onto")]
def signatures():
    return {(m.__name__, f): len(getattr(m, f).signatures) for m, f in KERNELS}
loaded = signatures()
assert all(loaded.values()), loaded
# A GROUP BY of ints summing a column with NULLs, and one of a flag summing a column made by
# DuckDB (read-only Arrow buffers, as the server's store gives a hydration: TPC-H's Q1)
flags = duckdb.sql(f"SELECT chr(65 + (i % 3)::INT) AS k, random() * 100 AS v FROM range({n}) r(i)")
cases = [
    (pa.table({"k": rng.integers(0, 7, n),
               "v": pa.array(rng.random(n) * 100, mask=rng.random(n) < 0.01)}), "BIGINT"),
    (flags.to_arrow_table().combine_chunks(), "VARCHAR"),  # one chunk: its buffers are read in place
]
for table, key_type in cases:
    cat = Catalog(tables={"t": TableSchema("t", [Column("k", key_type), Column("v", "DOUBLE")])})
    sql = "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k"
    df = engine.Dataflow()
    h, src = df.new_input("t")
    cap = compile_view(sql, cat).build(df, {"t": src}).capture()
    h.send_columns(table)
    h.advance_to(1)
    df.run()
    got = sorted(cap.snapshot())
    arrow_t = table
    want = sorted(duckdb.sql("SELECT k, sum(v), count(*) FROM arrow_t GROUP BY k").fetchall())
    assert [(k, c) for k, _, c in got] == [(k, c) for k, _, c in want], (got, want)
    assert all(abs(a - b) <= 1e-9 * abs(b) for (_, a, _), (_, b, _) in zip(got, want)), (got, want)
# neither loaded a kernel signature preload had not loaded
after = signatures()
assert after == loaded, (loaded, after)
print("ok")
"""


def test_preload_loads_the_kernels_and_changes_no_result() -> None:
    out = subprocess.run([sys.executable, "-c", FRESH], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def _llvm_loaded(pid: int) -> bool:
    return "llvmlite" in Path(f"/proc/{pid}/maps").read_text()


def test_a_large_bulk_load_preloads_the_kernels_in_the_server(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        assert s.proc is not None
        s.sql("CREATE TABLE t (k BIGINT, v DOUBLE)")
        s.sql("INSERT INTO t VALUES (1, 0.5), (2, 1.5)")
        s.sql("INSERT INTO t SELECT i % 5, i * 0.25 FROM range(1000) r(i)")
        time.sleep(1.0)
        assert not _llvm_loaded(s.proc.pid)  # small writes: no numba in the server
        imports = tmp_path / "data" / "import"
        imports.mkdir(exist_ok=True)
        pq.write_table(pa.table({"k": pa.array([i % 9 for i in range(PRELOAD_ROWS)], pa.int64()),
                                 "v": pa.array([i * 0.5 for i in range(PRELOAD_ROWS)])}),
                       imports / "big.parquet")
        s.sql("COPY t FROM 'big.parquet' (FORMAT parquet)")
        deadline = time.monotonic() + 60
        while not _llvm_loaded(s.proc.pid):
            assert time.monotonic() < deadline, "the kernels were not loaded after a bulk load"
            time.sleep(0.2)
        # ... and the server keeps serving: a view over the table equals DuckDB's answer
        s.sql("CREATE VIEW g AS SELECT k, count(*) AS c FROM t GROUP BY k")
        got = sorted(map(tuple, s.query("SELECT * FROM g")["rows"]))
        want = sorted((k, sum(1 for i in range(PRELOAD_ROWS) if i % 9 == k)
                       + (k == 1) + (k == 2) + sum(1 for i in range(1000) if i % 5 == k))
                      for k in range(9))
        assert got == want
    finally:
        s.stop()


def test_pyarrow_is_set_up_before_the_server_reports_ready(tmp_path: Path) -> None:
    """pyarrow's one-time set-up (`planner.preload.warm_arrow`: pandas, which it imports at
    its first array, and the Parquet reader) is done when `/health` first says ready, so
    the first query or COPY does not pay it; numba is still not loaded."""
    import importlib.util

    s = Server(tmp_path / "data").start()
    try:
        assert s.proc is not None
        maps = Path(f"/proc/{s.proc.pid}/maps").read_text()
        assert "pyarrow/_parquet" in maps
        if importlib.util.find_spec("pandas") is not None:
            assert "pandas/_libs" in maps
        assert not _llvm_loaded(s.proc.pid)
        s.sql("CREATE TABLE t (k BIGINT)")
        assert s.query("SELECT count(*) AS n FROM t")["rows"] == [[0]]
    finally:
        s.stop()
