"""TPC-H-shaped views: hydration, single-row and batch writes, memory, and writes over HTTP (#11).

Data: six TPC-H tables (nation, supplier, part, customer, orders, lineitem) generated
deterministically from ``--seed`` at scale factor ``--sf`` (TPC-H's cardinalities: 10,000*sf
suppliers, 200,000*sf parts, 150,000*sf customers, 1,500,000*sf orders with 1-7 lines each, so
``--sf 1`` is about 6M lineitem rows; the default ``--sf 0.04`` is about 240,000, and the
whole run takes about 2 minutes on a 2-core machine, most of it Q18, see below). Value
distributions follow TPC-H's generator in spirit (uniform keys, dates from 1992-01-01 to
1998-08-02, ship/commit/receipt dates after the order date, return flag and line status from
the receipt and ship dates, extended price = quantity * the part's retail price), not to the
letter (orders keys are dense, names and comments are short). Money, quantities, discounts and
taxes are DOUBLE; dates are DATE. The tables are written as Parquet files in a temporary
directory; DuckDB loads them with ``COPY t FROM``, the in-process engine loads the same files
(``InputHandle.load`` of a ``FileSource``), and the server loads them with ``COPY ... FROM``.

Views (one dataflow per view, as the server builds them):

- ``q1``: TPC-H Q1 (aggregates over lineitem by return flag and line status, shipped by
  ``DATE '1998-12-01' - INTERVAL 90 DAY``). Changed: there is no ORDER BY (a view is a
  multiset).
- ``q3``: TPC-H Q3 (customer x orders x lineitem, aggregate, top 10). Changed: ``l_orderkey``
  is added to the ORDER BY so the top 10 has no ties.
- ``q5``: TPC-H Q5 as a 6-way join of the six tables: region is not generated, so
  ``r_name = 'ASIA'`` is ``n_regionkey = 2``, and part is the sixth table (``l_partkey =
  p_partkey AND p_size <= 40``). No ORDER BY.
- ``q18``: TPC-H Q18 (large-volume customers: ``o_orderkey IN (SELECT l_orderkey FROM lineitem
  GROUP BY l_orderkey HAVING sum(l_quantity) > 250)``, top 100). Changed: the threshold is 250,
  not 300 (at small scale factors almost no order passes 300); the joins are written ``JOIN ...
  ON`` (the comma form with the equalities in WHERE plans the same today); ``o_orderkey`` is
  added to the ORDER BY (no ties). The IN subquery becomes a fourth input joined on
  ``o_orderkey``, and with the tables' statistics the planner starts the join at orders and
  that small set, not at customer (``EXPLAIN``).
- ``minmax``: MIN/MAX by group: ``min``/``max`` of ``l_extendedprice`` and ``l_shipdate``
  and ``count(*)`` per ``l_suppkey``.
- ``topk``: top-k per group: the 3 most expensive orders of each order priority, written as
  a LATERAL subquery with ORDER BY ... LIMIT (window functions are not supported).

Measured in one run, in process (``planner.compile_view`` + ``engine.Dataflow``):

- hydration of every view (compile with the tables' statistics read from DuckDB's copy as the
  server reads them from its store, build, read the columns the view reads from DuckDB's
  copy as the server reads its store, ``server.store.read_columns``, or with
  ``--hydrate-from parquet`` from the tables' Parquet files, run) against DuckDB running the
  six SELECTs once over its loaded tables (best of 3), after the process has loaded the
  compiled kernels as a server does after a bulk load (``planner.preload``);
- single-row INSERT, UPDATE and DELETE into lineitem and into orders (``--writes`` of each;
  an UPDATE is a retraction and an insertion in one epoch): the time until every view that
  reads the table is updated, p50 and p99, against DuckDB applying the same statement and then
  recomputing every view (only the recompute is timed);
- one transaction of ``--batch`` changed rows (default 10,000, scaled down to a tenth of
  lineitem when the data is smaller; 60% lineitem UPDATE/DELETE, 20% lineitem INSERT, 20%
  orders UPDATE/DELETE/INSERT), the same comparison;
- this process's peak RSS: the engine and its store, DuckDB holding the loaded tables and
  taking every write, as the server's does. The data is generated and written in a child
  process, whose memory the allocators would otherwise keep in this one after it is freed
  (0.4-0.5 GB at sf 1). DuckDB's answers and times come from another child process with its
  own copy of the tables and the same writes (`Oracle`): its recomputes' working memory (100-200
  MB at sf 1, coming and going with each one, and about 200 MB its allocator kept) is not the
  system's. Then DuckDB's in-memory size of the loaded tables (``duckdb_memory()``) and the
  ratio of the two, and each view's arrangements (records and approximate bytes, from
  ``Dataflow.arrangement_stats()``).

Then through the HTTP server (a ``python -m server.cli serve`` subprocess on 127.0.0.1, data
directory in a temporary directory, the Parquet files as its import directory): the load with
``COPY``, creating the views, ``--http-writes`` single-row INSERTs into lineitem one after
another (latency p50/p99), and writes/s with 1 and 8 concurrent clients for ``--http-seconds``
each, from kept-alive connections that send prepared requests (``bench/http_load.py``: an httpx
client used as much CPU per request as a third of the server's). ``--skip-http`` skips this part (its figures are 0).

Every result is checked: after hydration, after every single-row write and after the batch,
each view's contents equal DuckDB running the view's SELECT on the same data (multisets, floats
to 1e-9 relative); after the HTTP writes, each view's rows (``/views/{name}/rows``) equal the
server's DuckDB running the view's SELECT (``/query``). The last line is

    summary: sf=<f> hydration_vs_duckdb=<x> write_p50_ms=<x> write_speedup_vs_recompute=<x> http_write_p50_ms=<x> http_writes_per_s_8=<n> peak_rss_mb=<n> ok=<true|false>

where ``hydration_vs_duckdb`` is our hydration time over DuckDB's, ``write_p50_ms`` the median
of all single-row writes and ``write_speedup_vs_recompute`` DuckDB's median recompute time
over ours.

    python bench/views.py [--sf 0.04] [--writes 20] [--batch 10000] [--skip-http]
                          [--http-writes 100] [--http-seconds 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import itertools
import math
import multiprocessing
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402
import http_load  # noqa: E402
import httpx  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from support import free_port, peak_rss_mb, reset_peak_rss, same  # noqa: E402

from engine import Dataflow  # noqa: E402
from engine.sources import FileSource  # noqa: E402
from planner import Catalog, Column, TableSchema, compile_view  # noqa: E402
from planner.preload import preload  # noqa: E402
from server.scan_filters import where_clause  # noqa: E402
from server.statistics import DistinctCache, TableStatistics  # noqa: E402
from server.store import TableRecord, read_columns  # noqa: E402

# name -> [(column, SQL type)]; the SQL type is DuckDB's, and (lower-cased, VARCHAR as string)
# the FileSource type the engine reads the Parquet column as.
TABLES: dict[str, list[tuple[str, str]]] = {
    "nation": [("n_nationkey", "INTEGER"), ("n_name", "VARCHAR"), ("n_regionkey", "INTEGER")],
    "supplier": [("s_suppkey", "INTEGER"), ("s_name", "VARCHAR"), ("s_nationkey", "INTEGER"),
                 ("s_acctbal", "DOUBLE")],
    "part": [("p_partkey", "INTEGER"), ("p_name", "VARCHAR"), ("p_type", "VARCHAR"),
             ("p_size", "INTEGER"), ("p_retailprice", "DOUBLE")],
    "customer": [("c_custkey", "INTEGER"), ("c_name", "VARCHAR"), ("c_nationkey", "INTEGER"),
                 ("c_acctbal", "DOUBLE"), ("c_mktsegment", "VARCHAR")],
    "orders": [("o_orderkey", "BIGINT"), ("o_custkey", "INTEGER"), ("o_orderstatus", "VARCHAR"),
               ("o_totalprice", "DOUBLE"), ("o_orderdate", "DATE"),
               ("o_orderpriority", "VARCHAR"), ("o_shippriority", "INTEGER")],
    "lineitem": [("l_orderkey", "BIGINT"), ("l_partkey", "INTEGER"), ("l_suppkey", "INTEGER"),
                 ("l_linenumber", "INTEGER"), ("l_quantity", "DOUBLE"),
                 ("l_extendedprice", "DOUBLE"), ("l_discount", "DOUBLE"), ("l_tax", "DOUBLE"),
                 ("l_returnflag", "VARCHAR"), ("l_linestatus", "VARCHAR"),
                 ("l_shipdate", "DATE"), ("l_commitdate", "DATE"), ("l_receiptdate", "DATE"),
                 ("l_shipmode", "VARCHAR")],
}

VIEWS: dict[str, str] = {
    "q1": (
        "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,"
        " sum(l_extendedprice) AS sum_base_price,"
        " sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,"
        " sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,"
        " avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price,"
        " avg(l_discount) AS avg_disc, count(*) AS count_order"
        " FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY"
        " GROUP BY l_returnflag, l_linestatus"
    ),
    "q3": (
        "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate,"
        " o_shippriority FROM customer, orders, lineitem"
        " WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey"
        " AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'"
        " GROUP BY l_orderkey, o_orderdate, o_shippriority"
        " ORDER BY revenue DESC, o_orderdate, l_orderkey LIMIT 10"
    ),
    "q5": (
        "SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue"
        " FROM customer, orders, lineitem, supplier, nation, part"
        " WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey"
        " AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND l_partkey = p_partkey"
        " AND n_regionkey = 2 AND p_size <= 40"
        " AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'"
        " GROUP BY n_name"
    ),
    "q18": (
        "SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice,"
        " sum(l_quantity) AS total_qty"
        " FROM customer JOIN orders ON c_custkey = o_custkey"
        " JOIN lineitem ON o_orderkey = l_orderkey"
        " WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey"
        " HAVING sum(l_quantity) > 250)"
        " GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice"
        " ORDER BY o_totalprice DESC, o_orderdate, o_orderkey LIMIT 100"
    ),
    "minmax": (
        "SELECT l_suppkey, min(l_extendedprice) AS min_price, max(l_extendedprice) AS max_price,"
        " min(l_shipdate) AS first_ship, max(l_shipdate) AS last_ship, count(*) AS n"
        " FROM lineitem GROUP BY l_suppkey"
    ),
    "topk": (
        "SELECT p.o_orderpriority, t.o_orderkey, t.o_totalprice"
        " FROM (SELECT DISTINCT o_orderpriority FROM orders) p,"
        " LATERAL (SELECT o_orderkey, o_totalprice FROM orders o"
        " WHERE o.o_orderpriority = p.o_orderpriority"
        " ORDER BY o_totalprice DESC, o_orderkey LIMIT 3) t"
    ),
}

CATALOG = Catalog(tables={t: TableSchema(t, [Column(c, ty) for c, ty in cols])
                          for t, cols in TABLES.items()})

NATIONS = [("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
           ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
           ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0), ("MOROCCO", 0),
           ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3), ("SAUDI ARABIA", 4),
           ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3), ("UNITED STATES", 1)]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
SHIPMODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
PTYPES = [f"{a} {b} {c}" for a in ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
          for b in ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
          for c in ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")]
START = dt.date(1992, 1, 1)
ORDER_DAYS = (dt.date(1998, 8, 2) - START).days + 1
CURRENT = dt.date(1995, 6, 17)  # TPC-H's "current date": flags and statuses depend on it


def retail_price(partkey: int) -> float:
    return (90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)) / 100


# -- data -----------------------------------------------------------------------------------------

class Data:
    """The generated tables (as Arrow tables) and the generator of new rows for writes."""

    def __init__(self, sf: float, seed: int, generate: bool = True) -> None:
        """With `generate` False, only the sizes: the tables are made by `write_tables`."""
        self.rng = np.random.default_rng(seed)
        self.n_supp = max(10, round(10_000 * sf))
        self.n_part = max(20, round(200_000 * sf))
        self.n_cust = max(15, round(150_000 * sf))
        self.n_orders = max(150, round(1_500_000 * sf))
        self.tables = self._generate() if generate else {}
        self.num_rows = {t: table.num_rows for t, table in self.tables.items()}

    def _generate(self) -> dict[str, pa.Table]:
        rng = self.rng
        out: dict[str, dict[str, Any]] = {}
        out["nation"] = {"n_nationkey": np.arange(25), "n_name": [n for n, _ in NATIONS],
                         "n_regionkey": [r for _, r in NATIONS]}
        s = np.arange(1, self.n_supp + 1)
        out["supplier"] = {"s_suppkey": s, "s_name": [f"Supplier#{k:09d}" for k in s],
                           "s_nationkey": rng.integers(0, 25, len(s)),
                           "s_acctbal": np.round(rng.uniform(-999.99, 9999.99, len(s)), 2)}
        p = np.arange(1, self.n_part + 1)
        out["part"] = {"p_partkey": p, "p_name": [f"part {k}" for k in p],
                       "p_type": [PTYPES[i] for i in rng.integers(0, len(PTYPES), len(p))],
                       "p_size": rng.integers(1, 51, len(p)),
                       "p_retailprice": [retail_price(int(k)) for k in p]}
        c = np.arange(1, self.n_cust + 1)
        out["customer"] = {"c_custkey": c, "c_name": [f"Customer#{k:09d}" for k in c],
                           "c_nationkey": rng.integers(0, 25, len(c)),
                           "c_acctbal": np.round(rng.uniform(-999.99, 9999.99, len(c)), 2),
                           "c_mktsegment": [SEGMENTS[i] for i in rng.integers(0, 5, len(c))]}
        o = np.arange(1, self.n_orders + 1)
        odate = np.datetime64(START) + rng.integers(0, ORDER_DAYS - 151, len(o)).astype(
            "timedelta64[D]")
        nlines = rng.integers(1, 8, len(o))
        lo = np.repeat(o, nlines)
        n = len(lo)
        linenumber = np.concatenate([np.arange(1, k + 1) for k in nlines])
        partkey = rng.integers(1, self.n_part + 1, n)
        qty = rng.integers(1, 51, n).astype(float)
        price = np.round(qty * ((90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)) / 100), 2)
        disc = rng.integers(0, 11, n) / 100
        tax = rng.integers(0, 9, n) / 100
        ship = np.repeat(odate, nlines) + rng.integers(1, 122, n).astype("timedelta64[D]")
        commit = np.repeat(odate, nlines) + rng.integers(30, 91, n).astype("timedelta64[D]")
        receipt = ship + rng.integers(1, 31, n).astype("timedelta64[D]")
        current = np.datetime64(CURRENT)
        ra = np.where(rng.integers(0, 2, n) == 0, "R", "A")
        rflag = np.where(receipt <= current, ra, "N")
        lstatus = np.where(ship > current, "O", "F")
        out["lineitem"] = {
            "l_orderkey": lo, "l_partkey": partkey, "l_suppkey": rng.integers(1, self.n_supp + 1, n),
            "l_linenumber": linenumber, "l_quantity": qty, "l_extendedprice": price,
            "l_discount": disc, "l_tax": tax, "l_returnflag": rflag.tolist(),
            "l_linestatus": lstatus.tolist(), "l_shipdate": ship, "l_commitdate": commit,
            "l_receiptdate": receipt, "l_shipmode": [SHIPMODES[i] for i in rng.integers(0, 7, n)]}
        # an order's total and status from its lines, as TPC-H computes them
        charge = price * (1 + tax) * (1 - disc)
        total = np.round(np.bincount(lo, weights=charge, minlength=len(o) + 1)[1:], 2)
        n_open = np.bincount(lo, weights=(lstatus == "O"), minlength=len(o) + 1)[1:]
        status = np.where(n_open == nlines, "O", np.where(n_open == 0, "F", "P"))
        out["orders"] = {"o_orderkey": o, "o_custkey": rng.integers(1, self.n_cust + 1, len(o)),
                         "o_orderstatus": status.tolist(), "o_totalprice": total,
                         "o_orderdate": odate,
                         "o_orderpriority": [PRIORITIES[i] for i in rng.integers(0, 5, len(o))],
                         "o_shippriority": np.zeros(len(o), dtype=np.int64)}
        return {t: pa.table({c: pa.array(out[t][c], type=arrow_type(ty)) for c, ty in TABLES[t]})
                for t in TABLES}

    # new rows, from a Python Random (the writes' own stream)
    @staticmethod
    def lineitem_row(rng: random.Random, orderkey: int, linenumber: int, odate: dt.date,
                     n_part: int, n_supp: int) -> tuple[Any, ...]:
        partkey = rng.randint(1, n_part)
        qty = float(rng.randint(1, 50))
        ship = odate + dt.timedelta(days=rng.randint(1, 121))
        commit = odate + dt.timedelta(days=rng.randint(30, 90))
        receipt = ship + dt.timedelta(days=rng.randint(1, 30))
        flag = rng.choice("RA") if receipt <= CURRENT else "N"
        return (orderkey, partkey, rng.randint(1, n_supp), linenumber, qty,
                round(qty * retail_price(partkey), 2), rng.randint(0, 10) / 100,
                rng.randint(0, 8) / 100, flag, "O" if ship > CURRENT else "F", ship, commit,
                receipt, rng.choice(SHIPMODES))

    @staticmethod
    def order_row(rng: random.Random, orderkey: int, n_cust: int) -> tuple[Any, ...]:
        odate = START + dt.timedelta(days=rng.randrange(ORDER_DAYS - 151))
        return (orderkey, rng.randint(1, n_cust), rng.choice("OFP"),
                round(rng.uniform(1000, 500_000), 2), odate, rng.choice(PRIORITIES), 0)


def generate_tables(sf: float, seed: int, directory: Path) -> dict[str, int]:
    """`write_tables` in a child process (its memory then leaves with it): the rows of each
    table written to `directory`."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        return child.submit(write_tables, sf, seed, str(directory)).result()


def write_tables(sf: float, seed: int, directory: str) -> dict[str, int]:
    """Generate the tables and write each as `<directory>/<table>.parquet`; the rows of
    each. `generate_tables` runs this in a child process: the generator's memory (2-3 GB of Python and
    Arrow objects at sf 1, most of it kept by the allocators after it is freed, and the
    tables themselves) then never counts in the peak RSS measured of the engine and DuckDB."""
    data = Data(sf, seed)
    for t, table in data.tables.items():
        pq.write_table(table, Path(directory) / f"{t}.parquet")
    return data.num_rows


def arrow_type(sql: str) -> pa.DataType:
    return {"INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
            "VARCHAR": pa.string(), "DATE": pa.date32()}[sql]


def source_type(sql: str) -> str:
    return "string" if sql == "VARCHAR" else sql.lower()


def to_arrow(table: str, rows: list[tuple[Any, ...]]) -> pa.Table:
    cols = TABLES[table]
    return pa.table({c: pa.array([r[i] for r in rows], type=arrow_type(ty))
                     for i, (c, ty) in enumerate(cols)})


def sql_literal(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return repr(v)


def ddl(table: str) -> str:
    return f"CREATE TABLE {table} (" + ", ".join(f"{c} {t}" for c, t in TABLES[table]) + ")"


# -- checks and statistics ------------------------------------------------------------------------

def fuzzy_key(row: tuple[Any, ...]) -> str:
    return repr(tuple(round(x, 6) if isinstance(x, float) else x for x in row))


def explain_mismatch(name: str, got: Counter[Any], want: Counter[Any]) -> None:
    g, w = +got, +want
    only_g = [r for r in g if fuzzy_key(r) not in {fuzzy_key(x) for x in w}]
    only_w = [r for r in w if fuzzy_key(r) not in {fuzzy_key(x) for x in g}]
    print(f"  MISMATCH {name}: {sum(g.values())} rows vs DuckDB {sum(w.values())};"
          f" only ours {only_g[:3]}; only DuckDB {only_w[:3]}", flush=True)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


# -- in process -----------------------------------------------------------------------------------

class View:
    """One view's own dataflow, with an input per table it reads."""

    def __init__(self, name: str, files: dict[str, Path], catalog: Catalog,
                 store: duckdb.DuckDBPyConnection | None = None) -> None:
        """Hydrate from `store`'s tables as the server hydrates a view from its store
        (`server.store.read_columns`: DuckDB scans the columns the view reads, and only the rows
        its filters on the table keep, `server.scan_filters`, as Arrow), or
        without it from the tables' Parquet files (`FileSource`)."""
        self.name = name
        cv = compile_view(VIEWS[name], catalog)
        self.df = Dataflow()
        self.handles: dict[str, Any] = {}
        sources = {}
        for t in cv.dependencies:
            self.handles[t], sources[t] = self.df.new_input(t)
        self.cap = cv.build(self.df, sources).capture(history=False, drain=False)
        read = cv.columns_read()
        kept = cv.scan_filters()
        for t, h in self.handles.items():
            # as the server hydrates a view: only the columns the view reads
            names = tuple(c for c, _ in TABLES[t])
            if store is not None:
                rec = TableRecord(t, 0, [{"name": c, "type": ty, "nullable": True}
                                         for c, ty in TABLES[t]], [], 0)
                # as the server does: DuckDB applies the view's filters it decides exactly
                columns = read_columns(store, rec, read[t], where_clause(rec, kept.get(t, ())))
                assert columns is not None  # every type here converts exactly
                h.send_columns(columns)
            else:
                h.load(FileSource((str(files[t]),), "parquet", columns=names,
                                  types=tuple(source_type(ty) for _, ty in TABLES[t]),
                                  unread=frozenset(names) - {names[i] for i in read[t]}))
            h.advance_to(1)
        self.df.run()
        self.epoch = 1

    def apply(self, changes: dict[str, list[tuple[tuple[Any, ...], int]]], epoch: int) -> bool:
        """Send the changes to the tables this view reads, all at one epoch, and run; False if
        the view reads none of them."""
        touched = [t for t in changes if t in self.handles and changes[t]]
        if not touched:
            return False
        for t in touched:
            self.handles[t].send(changes[t])
        for h in self.handles.values():
            h.advance_to(epoch + 1)
        self.df.run()
        self.epoch = epoch
        return True

    def contents(self) -> Counter[Any]:
        return Counter(self.cap.current())

    def arrangements(self) -> tuple[int, int]:
        stats = self.df.arrangement_stats()
        return sum(int(s["records"]) for s in stats), sum(int(s["bytes"]) for s in stats)


def recompute(con: duckdb.DuckDBPyConnection) -> tuple[float, dict[str, Counter[Any]]]:
    """DuckDB running every view's SELECT: (seconds, answers)."""
    t0 = time.perf_counter()
    out = {n: con.execute(q).fetchall() for n, q in VIEWS.items()}
    elapsed = time.perf_counter() - t0
    return elapsed, {n: Counter(map(tuple, rows)) for n, rows in out.items()}


def duck_batch(con: duckdb.DuckDBPyConnection,
               changes: dict[str, list[tuple[tuple[Any, ...], int]]]) -> float:
    """A batch of changes in DuckDB, one transaction: delete the old rows by key, insert the
    new; the seconds it took."""
    t0 = time.perf_counter()
    keys = {"lineitem": ("l_orderkey", "l_linenumber"), "orders": ("o_orderkey",)}
    con.execute("BEGIN")
    for table, ups in changes.items():
        idx = [i for i, (c, _) in enumerate(TABLES[table]) if c in keys[table]]
        gone = [tuple(r[i] for i in idx) for r, d in ups if d < 0]
        if gone:
            cols = ", ".join(keys[table])
            # a DuckDB relation from a Python list of key tuples
            kt = pa.table({c: pa.array([g[j] for g in gone]) for j, c in enumerate(keys[table])})
            con.register("gone_keys", kt)
            con.execute(f"DELETE FROM {table} WHERE ({cols}) IN (SELECT ({cols}) FROM"
                        " gone_keys)")
            con.unregister("gone_keys")
        added = [r for r, d in ups if d > 0]
        if added:
            con.register("added_rows", to_arrow(table, added))
            con.execute(f"INSERT INTO {table} SELECT * FROM added_rows")
            con.unregister("added_rows")
    con.execute("COMMIT")
    return time.perf_counter() - t0


# The oracle's own DuckDB, in its child process (`Oracle`).
_ORACLE: duckdb.DuckDBPyConnection | None = None


def _oracle_open(files: dict[str, str]) -> None:
    global _ORACLE
    _ORACLE = duckdb.connect()
    for t in TABLES:
        _ORACLE.execute(ddl(t))
        _ORACLE.execute(f"COPY {t} FROM '{files[t]}' (FORMAT parquet)")


def _oracle_recompute() -> tuple[float, dict[str, Counter[Any]]]:
    assert _ORACLE is not None
    return recompute(_ORACLE)


def _oracle_times(tries: int) -> tuple[float, dict[str, float]]:
    """The best of `tries` of all the views' SELECTs together, and of each one alone."""
    assert _ORACLE is not None
    whole = min(recompute(_ORACLE)[0] for _ in range(tries))
    each: dict[str, float] = {}
    for name, q in VIEWS.items():
        each[name] = math.inf
        for _ in range(tries):
            t0 = time.perf_counter()
            _ORACLE.execute(q).fetchall()
            each[name] = min(each[name], time.perf_counter() - t0)
    return whole, each


def _oracle_execute(stmt: str, params: list[Any]) -> None:
    assert _ORACLE is not None
    _ORACLE.execute(stmt, params)


def _oracle_batch(changes: dict[str, list[tuple[tuple[Any, ...], int]]]) -> float:
    assert _ORACLE is not None
    return duck_batch(_ORACLE, changes)


class Oracle:
    """DuckDB recomputing the views, in a child process holding its own copy of the tables
    and applying the same writes: the answers every result is checked against, and DuckDB's
    times. In a process of its own, so the peak RSS measured here is the engine's and its
    store's (this process's DuckDB, holding the tables and taking the writes, as the server's
    does), not the oracle's: its queries' working memory came and went with every recompute
    (100-200 MB at sf 1) and its allocator kept about 200 MB after the first ones."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_oracle_open,
                                        initargs=({t: str(p) for t, p in files.items()},))

    def recompute(self) -> tuple[float, dict[str, Counter[Any]]]:
        return self.pool.submit(_oracle_recompute).result()

    def times(self, tries: int) -> tuple[float, dict[str, float]]:
        return self.pool.submit(_oracle_times, tries).result()

    def execute(self, stmt: str, params: list[Any]) -> None:
        self.pool.submit(_oracle_execute, stmt, params).result()

    def batch(self, changes: dict[str, list[tuple[tuple[Any, ...], int]]]) -> float:
        return self.pool.submit(_oracle_batch, changes).result()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        # also on an error, so a failed run leaves no child process behind
        self.pool.shutdown(cancel_futures=True)


class Checker:
    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self.ok = True
        self.failures: Counter[str] = Counter()

    def recompute(self) -> tuple[float, dict[str, Counter[Any]]]:
        """DuckDB running every view's SELECT (in the oracle's process): (seconds, answers)."""
        return self.oracle.recompute()

    def check(self, views: dict[str, View], want: dict[str, Counter[Any]], when: str) -> bool:
        good = True
        for name, v in views.items():
            got = v.contents()
            if not same(got, want[name]):
                good = False
                self.failures[name] += 1
                if self.failures[name] <= 3:
                    print(f"  ({when})", end="")
                    explain_mismatch(name, got, want[name])
        self.ok = self.ok and good
        return good


class Writer:
    """Single-row and batch changes to lineitem and orders, applied to the views and DuckDB."""

    def __init__(self, data: Data, con: duckdb.DuckDBPyConnection, seed: int) -> None:
        self.data = data
        self.con = con
        self.rng = random.Random(seed)
        self.next_orderkey = data.n_orders + 1
        self.next_linenumber = 100  # inserted lines never collide with generated ones (1-7)
        self.epoch = 1

    def some_lines(self, k: int) -> list[tuple[Any, ...]]:
        """`k` distinct current lineitem rows from random orders."""
        rows: list[tuple[Any, ...]] = []
        seen: set[tuple[int, int]] = set()
        while len(rows) < k:
            keys = [self.rng.randint(1, self.next_orderkey - 1) for _ in range(max(4, k // 3))]
            found = self.con.execute("SELECT * FROM lineitem WHERE list_contains(?, l_orderkey)"
                                     " ORDER BY l_orderkey, l_linenumber", [keys]).fetchall()
            self.rng.shuffle(found)
            for r in found:
                if (r[0], r[3]) not in seen and len(rows) < k:
                    seen.add((r[0], r[3]))
                    rows.append(tuple(r))
        return rows

    def some_orders(self, k: int) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        seen: set[int] = set()
        while len(rows) < k:
            keys = list({self.rng.randint(1, self.next_orderkey - 1) for _ in range(k - len(rows))})
            found = self.con.execute("SELECT * FROM orders WHERE list_contains(?, o_orderkey)"
                                     " ORDER BY o_orderkey", [keys]).fetchall()
            for r in found:
                if r[0] not in seen:
                    seen.add(r[0])
                    rows.append(tuple(r))
        return rows

    def new_line(self, orderkey: int | None = None, odate: dt.date | None = None) -> tuple[Any, ...]:
        if orderkey is None or odate is None:
            orderkey = self.rng.randint(1, self.data.n_orders)
            odate = START + dt.timedelta(days=self.rng.randrange(ORDER_DAYS - 151))
        self.next_linenumber += 1
        return Data.lineitem_row(self.rng, orderkey, self.next_linenumber, odate,
                                 self.data.n_part, self.data.n_supp)

    def changed_line(self, old: tuple[Any, ...]) -> tuple[Any, ...]:
        qty = float(self.rng.randint(1, 50))
        new = list(old)
        new[4] = qty
        new[5] = round(qty * retail_price(old[1]), 2)
        new[6] = self.rng.randint(0, 10) / 100
        return tuple(new)

    def changed_order(self, old: tuple[Any, ...]) -> tuple[Any, ...]:
        new = list(old)
        new[3] = round(old[3] * self.rng.uniform(0.5, 1.5), 2)
        new[4] = START + dt.timedelta(days=self.rng.randrange(ORDER_DAYS - 151))
        return tuple(new)

    def single(self, kind: str) -> tuple[str, list[tuple[tuple[Any, ...], int]], str, list[Any]]:
        """One single-row change: (table, engine updates, DuckDB statement, parameters)."""
        op, table = kind.split()
        if table == "lineitem":
            if op == "INSERT":
                row = self.new_line()
                return table, [(row, 1)], "INSERT INTO lineitem VALUES (" + ", ".join(
                    "?" * len(row)) + ")", list(row)
            (old,) = self.some_lines(1)
            if op == "DELETE":
                return table, [(old, -1)], ("DELETE FROM lineitem WHERE l_orderkey = ? AND "
                                            "l_linenumber = ?"), [old[0], old[3]]
            new = self.changed_line(old)
            return table, [(old, -1), (new, 1)], (
                "UPDATE lineitem SET l_quantity = ?, l_extendedprice = ?, l_discount = ?"
                " WHERE l_orderkey = ? AND l_linenumber = ?"), [new[4], new[5], new[6], old[0],
                                                                old[3]]
        if op == "INSERT":
            row = Data.order_row(self.rng, self.next_orderkey, self.data.n_cust)
            self.next_orderkey += 1
            return table, [(row, 1)], "INSERT INTO orders VALUES (" + ", ".join(
                "?" * len(row)) + ")", list(row)
        (old,) = self.some_orders(1)
        if op == "DELETE":
            return table, [(old, -1)], "DELETE FROM orders WHERE o_orderkey = ?", [old[0]]
        new = self.changed_order(old)
        return table, [(old, -1), (new, 1)], (
            "UPDATE orders SET o_totalprice = ?, o_orderdate = ? WHERE o_orderkey = ?"), [
            new[3], new[4], old[0]]

    def batch(self, n: int) -> dict[str, list[tuple[tuple[Any, ...], int]]]:
        """`n` changed rows: 60% lineitem UPDATE (2/3) or DELETE (1/3), 20% lineitem INSERT,
        20% orders UPDATE/DELETE/INSERT (a third each)."""
        n_li_old = n * 6 // 10
        n_li_new = n * 2 // 10
        n_o = n - n_li_old - n_li_new
        lines = self.some_lines(n_li_old)
        li: list[tuple[tuple[Any, ...], int]] = []
        for i, old in enumerate(lines):
            li.append((old, -1))
            if i % 3 != 2:
                li.append((self.changed_line(old), 1))
        li += [(self.new_line(), 1) for _ in range(n_li_new)]
        olds = self.some_orders(n_o - n_o // 3)
        od: list[tuple[tuple[Any, ...], int]] = []
        for i, old in enumerate(olds):
            od.append((old, -1))
            if i % 2 == 0:
                od.append((self.changed_order(old), 1))
        for _ in range(n_o // 3):
            od.append((Data.order_row(self.rng, self.next_orderkey, self.data.n_cust), 1))
            self.next_orderkey += 1
        return {"lineitem": li, "orders": od}

    def duck_batch(self, changes: dict[str, list[tuple[tuple[Any, ...], int]]]) -> None:
        """The batch in this process's DuckDB (the store)."""
        duck_batch(self.con, changes)


def in_process(args: argparse.Namespace, data: Data, files: dict[str, Path]) -> dict[str, Any]:
    # the peak RSS from here on: DuckDB's copy and the engine, not the imports
    gc.collect()
    fresh_peak = reset_peak_rss()
    con = duckdb.connect()
    try:
        with Oracle(files) as oracle:
            return _in_process(args, data, files, con, oracle, fresh_peak)
    finally:
        con.close()


def _in_process(args: argparse.Namespace, data: Data, files: dict[str, Path],
                con: duckdb.DuckDBPyConnection, oracle: Oracle, fresh_peak: bool) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for t in TABLES:
        con.execute(ddl(t))
        con.execute(f"COPY {t} FROM '{files[t]}' (FORMAT parquet)")
    # DuckDB's in-memory size of the loaded tables (what issue 11 compares peak RSS with)
    duck_mb = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()"
                          " WHERE tag = 'IN_MEMORY_TABLE'").fetchone()[0] / 2**20
    checker = Checker(oracle)
    duck_h, duck_v = oracle.times(3)
    _, want = checker.recompute()
    print("rows: " + ", ".join(f"{t}={data.num_rows[t]:,}" for t in TABLES), flush=True)

    # hydration, view by view; the planner reads the tables' statistics from DuckDB's copy, as
    # the server's planner reads them from its store (the reads are timed with the view)
    views: dict[str, View] = {}
    hyd: dict[str, float] = {}
    # the server reads its store on a connection of its own
    store = con.cursor() if args.hydrate_from == "store" else None
    # A server that bulk-loaded these tables has loaded the hydration's compiled kernels since
    # (planner.preload, in the background): so does this process, before the first view.
    t0 = time.perf_counter()
    preload()
    print(f"preload (as a server after a bulk load: planner.preload, not timed with the"
          f" views): {time.perf_counter() - t0:.2f} s", flush=True)
    # The kernel's share of each view's hydration: system CPU time and minor page faults (on
    # this kind of virtual machine a page of memory the VM never touched before costs several
    # microseconds to fault in, so a view's new state costs about 1.5 s a GB the first time;
    # DuckDB's SELECTs reuse memory its load already touched). Printed, not subtracted.
    faults: dict[str, tuple[float, int]] = {}
    # distinct counts kept from one view's planning to the next, as the server keeps them
    distinct = DistinctCache()
    for name in VIEWS:
        gc.collect()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        stats = TableStatistics(con, {t: dict(cols) for t, cols in TABLES.items()}, distinct)
        catalog = Catalog(tables=CATALOG.tables, statistics=stats)
        views[name] = View(name, files, catalog, store)
        hyd[name] = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        faults[name] = (r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt)
    ours_h = sum(hyd.values())
    checker.check(views, want, "hydration")
    res["hydration"] = (ours_h, duck_h)
    arr_h = {n: v.arrangements() for n, v in views.items()}
    print(f"\nhydration: ours {ours_h:.2f} s, DuckDB {duck_h:.3f} s (all six SELECTs once, best"
          f" of 3): {ours_h / duck_h:.1f}x   match={checker.ok}", flush=True)
    print(f"  of ours: {sum(s for s, _ in faults.values()):.2f} s of system CPU time, with"
          f" {sum(f for _, f in faults.values()):,} minor page faults"
          f" ({sum(f for _, f in faults.values()) * 4 / 1024:,.0f} MB of pages first touched)",
          flush=True)
    rows_h = {n: sum(want[n].values()) for n in VIEWS}

    # single-row writes
    w = Writer(data, con, args.seed + 1)
    kinds = [f"{op} {t}" for t in ("lineitem", "orders") for op in ("INSERT", "UPDATE", "DELETE")]
    ours_t: dict[str, list[float]] = {k: [] for k in kinds}
    duck_t: dict[str, list[float]] = {k: [] for k in kinds}
    ok_kind: dict[str, bool] = dict.fromkeys(kinds, True)
    order = [k for _ in range(args.writes) for k in kinds]
    slowest: tuple[str, float, tuple[str, float]] | None = None
    for kind in order:
        table, ups, stmt, params = w.single(kind)
        w.epoch += 1
        per_view = {}
        for name, v in views.items():
            t0 = time.perf_counter()
            v.apply({table: ups}, w.epoch)
            per_view[name] = time.perf_counter() - t0
        ours_t[kind].append(sum(per_view.values()))
        if slowest is None or ours_t[kind][-1] > slowest[1]:
            slowest = (kind, ours_t[kind][-1], max(per_view.items(), key=lambda x: x[1]))
        con.execute(stmt, params)
        oracle.execute(stmt, params)
        elapsed, want = checker.recompute()
        duck_t[kind].append(elapsed)
        ok_kind[kind] = checker.check(views, want, kind) and ok_kind[kind]
    all_ours = [x for k in kinds for x in ours_t[k]]
    all_duck = [x for k in kinds for x in duck_t[k]]
    res["write"] = (pct(all_ours, 0.5), pct(all_ours, 0.99), pct(all_duck, 0.5))
    print(f"\nsingle-row writes ({args.writes} of each; ms until every view is updated, DuckDB:"
          " recomputing every view)")
    print(f"{'write':16} {'ours p50':>9} {'p99':>8} | {'DuckDB p50':>10} {'p99':>8} | "
          f"{'speedup':>7}")
    for k in [*kinds, "all"]:
        o = all_ours if k == "all" else ours_t[k]
        d = all_duck if k == "all" else duck_t[k]
        good = all(ok_kind.values()) if k == "all" else ok_kind[k]
        print(f"{k:16} {pct(o, .5) * 1e3:>9.2f} {pct(o, .99) * 1e3:>8.2f} | "
              f"{pct(d, .5) * 1e3:>10.2f} {pct(d, .99) * 1e3:>8.2f} | "
              f"{pct(d, .5) / pct(o, .5):>6.1f}x  match={good}")
    if slowest is not None:
        print(f"slowest single-row write: {slowest[0]}, {slowest[1] * 1e3:.1f} ms, of which view"
              f" {slowest[2][0]} {slowest[2][1] * 1e3:.1f} ms")

    # one large transaction
    n_li = data.num_rows["lineitem"]
    n = min(args.batch, max(100, n_li // 10))
    changes = w.batch(n)
    n_rows = sum(len(u) for u in changes.values())
    w.epoch += 1
    batch_t: dict[str, float] = {}
    for name, v in views.items():
        t0 = time.perf_counter()
        v.apply(changes, w.epoch)
        batch_t[name] = time.perf_counter() - t0
    ours_b = sum(batch_t.values())
    w.duck_batch(changes)
    duck_dml = oracle.batch(changes)
    duck_b, want = checker.recompute()
    good = checker.check(views, want, "batch")
    res["batch"] = (n, ours_b, duck_b)
    print(f"\none transaction of {n:,} changed rows ({n_rows:,} updates): ours {ours_b * 1e3:.1f} ms,"
          f" DuckDB recompute {duck_b * 1e3:.1f} ms (ours {ours_b / duck_b:.1f}x DuckDB's; its DELETE+INSERT"
          f" took {duck_dml * 1e3:.1f} ms more)   match={good}")

    arr = {name: v.arrangements() for name, v in views.items()}
    res["peak_rss"] = peak_rss_mb(os.getpid()) if fresh_peak else peak_rss_mb()
    print(f"\nper view: hydration (DuckDB: the view's SELECT, best of 3), the batch, arrangements"
          f" (records and approximate MB, from arrangement_stats()) after hydration and after all"
          f" {len(order) + 1} transactions")
    print(f"{'view':7} {'rows':>5} {'hydrate s':>9} {'sys s':>6} {'faults':>8} {'DuckDB ms':>9}"
          f" {'batch ms':>9} | {'records':>10} {'MB':>7}"
          f" | {'records end':>11} {'MB end':>7}")
    for name, (recs, b) in arr.items():
        print(f"{name:7} {rows_h[name]:>5} {hyd[name]:>9.2f} {faults[name][0]:>6.2f}"
              f" {faults[name][1]:>8,} {duck_v[name] * 1e3:>9.1f}"
              f" {batch_t[name] * 1e3:>9.1f} |"
              f" {arr_h[name][0]:>10,} {arr_h[name][1] / 2**20:>7.1f} | {recs:>11,}"
              f" {b / 2**20:>7.1f}")
    print(f"{'all':7} {'':>5} {ours_h:>9.2f} {sum(s for s, _ in faults.values()):>6.2f}"
          f" {sum(f for _, f in faults.values()):>8,} {duck_h * 1e3:>9.1f} {ours_b * 1e3:>9.1f} |"
          f" {sum(r for r, _ in arr_h.values()):>10,} {sum(b for _, b in arr_h.values()) / 2**20:>7.1f}"
          f" | {sum(r for r, _ in arr.values()):>11,} {sum(b for _, b in arr.values()) / 2**20:>7.1f}")
    print(f"peak RSS of this process (the engine and its store, DuckDB; the tables were"
          f" generated, and DuckDB's answers recomputed, in child processes"
          f"{'' if fresh_peak else '; and the imports: the peak could not be reset'}"
          f"): {res['peak_rss']:.0f} MB; DuckDB's tables in memory: {duck_mb:.0f} MB"
          f" ({res['peak_rss'] / duck_mb:.1f}x)")
    res["ok"] = checker.ok
    return res


# -- through the server ---------------------------------------------------------------------------

def http(args: argparse.Namespace, data: Data, parquet_dir: Path, tmp: Path) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("DIFFSQL_TOKEN", None)
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(tmp / "data"), "--import-dir", str(parquet_dir), "--log-level",
         "warning", "--write-timeout", "3600", "--query-timeout", "600"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    res: dict[str, Any] = {"ok": False}
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {tmp / 'server.log'}")
            try:
                if httpx.get(f"{url}/health", timeout=2).json().get("ready"):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        client = httpx.Client(base_url=url, timeout=3600)

        def sql(text: str, c: httpx.Client = client) -> Any:
            r = c.post("/sql", json={"sql": text})
            if r.status_code != 200:
                raise RuntimeError(f"{text[:80]}...: {r.status_code} {r.text[:300]}")
            return r.json()

        t0 = time.perf_counter()
        sql(";".join(ddl(t) for t in TABLES) + ";" + ";".join(
            f"COPY {t} FROM '{t}.parquet' (FORMAT parquet)" for t in TABLES))
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        for name, q in VIEWS.items():
            sql(f"CREATE VIEW {name} AS {q}")
        create = time.perf_counter() - t0
        print(f"\nHTTP server: COPY of the six tables {load:.2f} s, creating the six views"
              f" {create:.2f} s", flush=True)

        rng = random.Random(args.seed + 2)
        linenumbers = itertools.count(1_000_000)
        lock = threading.Lock()

        def insert_sql() -> str:
            with lock:
                row = Data.lineitem_row(rng, rng.randint(1, data.n_orders), next(linenumbers),
                                        START + dt.timedelta(days=rng.randrange(ORDER_DAYS - 151)),
                                        data.n_part, data.n_supp)
            return "INSERT INTO lineitem VALUES (" + ", ".join(map(sql_literal, row)) + ")"

        lat = []
        raw = http_load.Client(port)
        for _ in range(args.http_writes):
            text = insert_sql()
            t0 = time.perf_counter()
            raw.post("/sql", {"sql": text})
            lat.append(time.perf_counter() - t0)
        raw.close()
        res["p50"], res["p99"] = pct(lat, 0.5), pct(lat, 0.99)
        print(f"single-row INSERT into lineitem, {args.http_writes} one after another: p50"
              f" {res['p50'] * 1e3:.1f} ms, p99 {res['p99'] * 1e3:.1f} ms", flush=True)
        writes = args.http_writes
        for n in (1, 8):
            began = time.monotonic()
            done = http_load.closed_loop(port, "/sql", lambda: {"sql": insert_sql()}, n,
                                    args.http_seconds)
            res[f"rate{n}"] = done / (time.monotonic() - began)
            writes += done
            print(f"clients={n}: {done} writes, {res[f'rate{n}']:.1f} writes/s", flush=True)

        ok = True
        for name, q in VIEWS.items():
            got = client.get(f"/views/{name}/rows").json()["rows"]
            want = client.post("/query", json={"sql": q}).json()["rows"]
            g = Counter(tuple(r) for r in got)
            w = Counter(tuple(r) for r in want)
            if not same(g, w):
                ok = False
                explain_mismatch(f"http {name}", g, w)
        n_li = client.post("/query", json={"sql": "SELECT count(*) FROM lineitem"}).json()["rows"]
        expected = data.num_rows["lineitem"] + writes
        ok = ok and n_li[0][0] == expected
        res["rss"] = peak_rss_mb(proc.pid)
        res["ok"] = ok
        print(f"after {writes} writes: lineitem has {n_li[0][0]:,} rows (expected {expected:,}),"
              f" views equal DuckDB: {ok}; server peak RSS {res['rss']:.0f} MB")
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=0.04)
    ap.add_argument("--writes", type=int, default=20, help="single-row writes of each kind")
    ap.add_argument("--batch", type=int, default=10_000, help="rows changed in one transaction")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--http-writes", type=int, default=100)
    ap.add_argument("--http-seconds", type=float, default=5.0)
    ap.add_argument("--hydrate-from", choices=("store", "parquet"), default="store",
                    help="in process, read the tables from DuckDB as the server reads its store"
                         " (default), or from their Parquet files")
    args = ap.parse_args()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="diffsql-views-") as d:
        tmp = Path(d)
        parquet_dir = tmp / "parquet"
        parquet_dir.mkdir()
        t0 = time.perf_counter()
        num_rows = generate_tables(args.sf, args.seed, parquet_dir)
        data = Data(args.sf, args.seed, generate=False)
        data.num_rows = num_rows
        files = {t: parquet_dir / f"{t}.parquet" for t in TABLES}
        print(f"sf={args.sf}: generated in {time.perf_counter() - t0:.1f} s", flush=True)
        res = in_process(args, data, files)
        hres: dict[str, Any] = {"ok": True, "p50": 0.0, "rate8": 0.0}
        if not args.skip_http:
            try:
                hres = http(args, data, parquet_dir, tmp)
            except Exception as exc:  # noqa: BLE001 - reported, and the run is not ok
                print(f"HTTP part failed: {exc}")
                hres = {"ok": False, "p50": 0.0, "rate8": 0.0}
    ok = bool(res["ok"] and hres["ok"])
    ours_h, duck_h = res["hydration"]
    p50, _, duck_p50 = res["write"]
    print(f"\n(total run time {time.perf_counter() - began:.0f} s)")
    print(f"summary: sf={args.sf:g} hydration_vs_duckdb={ours_h / duck_h:.1f} "
          f"write_p50_ms={p50 * 1e3:.2f} write_speedup_vs_recompute={duck_p50 / p50:.1f} "
          f"http_write_p50_ms={hres['p50'] * 1e3:.1f} "
          f"http_writes_per_s_8={hres['rate8']:.0f} peak_rss_mb={res['peak_rss']:.0f} "
          f"ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
