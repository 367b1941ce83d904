"""An executor that runs operators' bulk work on Apache Spark (see `engine/executor.py`).

Invariant: for every method, the result denotes exactly the same multiset of updates (or the same
batch contents and description) as `InProcessExecutor` would return for the same inputs, so a
dataflow driven by the unchanged scheduler produces the same results at every complete time.

Representation. A *Spark payload* is a `SparkPayload`: a DataFrame `(data binary, time
array<bigint>, diff bigint)` whose `data` is the canonical encoding (`encode`) of the Python
value, plus its summary `times` ({time: rows}) computed while it was materialised. A *Spark batch*
is a `SparkBatch`: a DataFrame `(key binary, val binary, time, diff)`, consolidated,
hash-partitioned by `key`, with its lineage cut (`localCheckpoint`, or Parquet files in `data_dir`)
and its records/bytes/times cached, so trace statistics never start a job. Parquet files are a
`Level`, deleted once no payload or batch that may read it is alive (so a trace's files follow
its merges and compaction); `localCheckpoint` blocks are freed by Spark's cleaner likewise.

Tiny-payload fast path. Payloads and batches with at most `local_rows` rows stay in the driver in
the in-process representation (lists, `trace.Batch`) and are handled by `InProcessExecutor`.
Whenever an operation involves a Spark-resident input, every input goes to Spark as Arrow
(`createDataFrame` of an Arrow table), and a Spark result with at most `local_rows` rows comes
back as Arrow (`toArrow`). Nothing moves between the driver and Spark row by row.
`local_rows=0` runs every payload and batch on Spark.

One Spark job per materialisation: each result that the scheduler must inspect (is it empty, what
are its times) is produced by a `mapInArrow` stage that counts rows per time into an accumulator
while Spark materialises it, so the summary costs no second job. Accumulator counts can only be
inflated by task retries, so emptiness and times (what the scheduler needs) stay exact.
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
import shutil
import socket
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from engine.executor import InProcessExecutor, Updates, counting_step
from engine.kernels import Logic, reduce_key
from engine.lattice import Antichain, Time
from engine.sources import FileSource
from engine.trace import Batch, consolidate_entries

# Per-entry bytes beyond the encoded key and value: time coordinates, diff and row overhead.
_ROW_OVERHEAD = 48
# From about this many rows, a result is counted by a JVM aggregation instead of in Python.
JVM_COUNT_ROWS = 200_000


def encode(value: Any) -> bytes:
    """Canonical bytes of a value: equal values of the same types give equal bytes.

    Plain `pickle.dumps` is not canonical: it memoises by object identity, so a tuple holding
    the same string object twice pickles differently from one holding two equal strings. Fast
    mode turns the memo off. (Values equal across types, 1 == 1.0 == True or Decimal('1.0') ==
    Decimal('1.00'), still encode differently; the planner never mixes them within a column.)
    """
    buf = io.BytesIO()
    p = pickle.Pickler(buf, 5)
    p.fast = True
    p.dump(value)
    return buf.getvalue()


decode = pickle.loads


# -- summaries and accumulators -------------------------------------------------------------------


class _Summary:
    """What a materialisation learned: rows per time, bytes, and deferred (key, time) pairs."""

    __slots__ = ("times", "nbytes", "deferred", "levels")

    def __init__(self) -> None:
        self.times: dict[Time, int] = {}
        self.nbytes = 0
        self.deferred: set[tuple[bytes, Time]] = set()
        # Set in the driver only: the levels the materialised result reads.
        self.levels: tuple[Level, ...] = ()

    def merge(self, other: _Summary) -> _Summary:
        for t, n in other.times.items():
            self.times[t] = self.times.get(t, 0) + n
        self.nbytes += other.nbytes
        self.deferred |= other.deferred
        return self


def _acc_param() -> Any:
    from pyspark.accumulators import AccumulatorParam

    class SummaryParam(AccumulatorParam):
        def zero(self, value: _Summary) -> _Summary:
            return _Summary()

        def addInPlace(self, a: _Summary, b: _Summary) -> _Summary:  # noqa: N802 - Spark's name
            return a.merge(b)

    return SummaryParam()


def _count_batch(summary: _Summary, times: list[list[int]], nbytes: int) -> None:
    st = summary.times
    for t in times:
        tt = tuple(t)
        st[tt] = st.get(tt, 0) + 1
    summary.nbytes += nbytes + _ROW_OVERHEAD * len(times)


# -- payload and batch objects --------------------------------------------------------------------


class Level:
    """Parquet files holding one materialised result in the data directory.

    The files are deleted when the last object that reads them is garbage: every payload or
    batch whose DataFrame reads a level (directly, or lazily through a plan over it) holds it in
    `levels`, so a level outlives exactly the plans that may still read it, whether its batch
    was merged away, compacted, or dropped.
    """

    __slots__ = ("path", "__weakref__")

    def __init__(self, path: str) -> None:
        self.path = path
        weakref.finalize(self, shutil.rmtree, path, True)


class SparkPayload:
    """Updates held by Spark: a DataFrame `(data, time, diff)` and its known summary."""

    __slots__ = ("df", "times", "nbytes", "depth", "levels")

    def __init__(
        self,
        df: Any,
        times: dict[Time, int],
        nbytes: int,
        depth: int = 0,
        levels: tuple[Level, ...] = (),
    ) -> None:
        self.df = df
        self.times = times
        self.nbytes = nbytes
        # Operations since the lineage was last cut (filters of a buffer re-split many times).
        self.depth = depth
        self.levels = levels

    @property
    def rows(self) -> int:
        return sum(self.times.values())

    def __repr__(self) -> str:
        return "SparkPayload(rows=%d, times=%d)" % (self.rows, len(self.times))


class SparkBatch:
    """A consolidated, key-partitioned batch held by Spark, with the attributes `Trace` uses."""

    __slots__ = ("df", "lower", "upper", "since", "seq", "records", "nbytes", "times", "levels")

    def __init__(
        self,
        df: Any,
        lower: Antichain,
        upper: Antichain,
        since: Antichain,
        records: int,
        nbytes: int,
        times: dict[Time, int],
        seq: int = 0,
        levels: tuple[Level, ...] = (),
    ) -> None:
        self.df = df
        self.levels = levels
        self.lower = lower
        self.upper = upper
        self.since = since
        self.seq = seq
        self.records = records
        self.nbytes = nbytes
        self.times = times

    def approx_bytes(self) -> int:
        """Cached at materialisation: never starts a Spark job."""
        return self.nbytes

    def __len__(self) -> int:
        return self.records

    def with_upper(self, upper: Antichain, seq: int) -> SparkBatch:
        """The same updates with a description extended to `upper` (absorbing an empty batch)."""
        return SparkBatch(self.df, self.lower, upper, self.since, self.records, self.nbytes,
                          self.times, seq, self.levels)

    def __repr__(self) -> str:
        return "SparkBatch(seq=%d, records=%d, lower=%s, upper=%s)" % (
            self.seq,
            self.records,
            self.lower,
            self.upper,
        )


# -- functions shipped to Spark's Python workers (cloudpickled closures) ------------------------


def _apply_fn(logic: Callable[[Updates], Updates], acc: Any) -> Callable[[Iterator[Any]], Any]:
    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        summary = _Summary()
        for b in batches:
            ups = list(
                zip(
                    map(decode, b.column("data").to_pylist()),
                    map(tuple, b.column("time").to_pylist()),
                    b.column("diff").to_pylist(),
                    strict=True,
                )
            )
            out = logic(ups)
            if not out:
                continue
            data = [encode(d) for d, _, _ in out]
            times = [t for _, t, _ in out]
            if acc is not None:
                _count_batch(summary, times, sum(map(len, data)))
            yield pa.record_batch(
                [
                    pa.array(data, pa.binary()),
                    pa.array(times, pa.list_(pa.int64())),
                    pa.array([r for _, _, r in out], pa.int64()),
                ],
                names=["data", "time", "diff"],
            )
        if acc is not None:
            acc.add(summary)

    return fn


def _count_fn(acc: Any, byte_cols: tuple[str, ...]) -> Callable[[Iterator[Any]], Any]:
    """A pass-through stage that only records the summary of what flows through it."""

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        summary = _Summary()
        for b in batches:
            nbytes = 0
            for c in byte_cols:
                if b.num_rows:
                    nbytes += int(pc.sum(pc.binary_length(b.column(c))).as_py() or 0)
            _count_batch(summary, b.column("time").to_pylist(), nbytes)
            yield b
        acc.add(summary)

    return fn


def _read_fn(ncols: int, time: Time, with_diff: bool, acc: Any) -> Callable[[Iterator[Any]], Any]:
    """Rows of a bulk source (see `engine.sources`) as encoded payload rows at `time`."""
    from engine.sources import rows_of

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        summary = _Summary()
        tl = list(time)
        for b in batches:
            rows = rows_of(b, ncols)
            if with_diff:
                diffs = b.column(ncols).to_pylist()
                kept = [(r, d) for r, d in zip(rows, diffs, strict=True) if d]
                data = [encode(r) for r, _ in kept]
                diff = [d for _, d in kept]
            else:
                data = [encode(r) for r in rows]
                diff = [1] * len(data)
            if not data:
                continue
            summary.times[time] = summary.times.get(time, 0) + len(data)
            summary.nbytes += sum(map(len, data)) + _ROW_OVERHEAD * len(data)
            yield pa.record_batch(
                [pa.array(data, pa.binary()), pa.array([tl] * len(data), pa.list_(pa.int64())),
                 pa.array(diff, pa.int64())],
                names=["data", "time", "diff"],
            )
        acc.add(summary)

    return fn


def _keying_fn(by_self: bool) -> Callable[[Iterator[Any]], Any]:
    unit = encode(())

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for b in batches:
            data = b.column("data").to_pylist()
            if by_self:
                keys, vals = data, [unit] * len(data)
            else:
                pairs = [decode(d) for d in data]
                keys = [encode(p[0]) for p in pairs]
                vals = [encode(p[1]) for p in pairs]
            yield pa.record_batch(
                [pa.array(keys, pa.binary()), pa.array(vals, pa.binary()), b.column("time"),
                 b.column("diff")],
                names=["key", "val", "time", "diff"],
            )

    return fn


def _unarrange_fn(f: Callable[[Any, Any], Any] | None) -> Callable[[Iterator[Any]], Any]:
    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for b in batches:
            ks = map(decode, b.column("key").to_pylist())
            vs = map(decode, b.column("val").to_pylist())
            if f is None:
                data = [encode((k, v)) for k, v in zip(ks, vs, strict=True)]
            else:
                data = [encode(f(k, v)) for k, v in zip(ks, vs, strict=True)]
            yield pa.record_batch(
                [pa.array(data, pa.binary()), b.column("time"), b.column("diff")],
                names=["data", "time", "diff"],
            )

    return fn


def _join_fn(f: Callable[[Any, Any, Any], Any], acc: Any) -> Callable[[Iterator[Any]], Any]:
    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        summary = _Summary()
        for b in batches:
            if not b.num_rows:
                continue
            ks = map(decode, b.column("key").to_pylist())
            v1 = map(decode, b.column("v1").to_pylist())
            v2 = map(decode, b.column("v2").to_pylist())
            data = [encode(f(k, a, c)) for k, a, c in zip(ks, v1, v2, strict=True)]
            _count_batch(summary, b.column("time").to_pylist(), sum(map(len, data)))
            yield pa.record_batch(
                [pa.array(data, pa.binary()), b.column("time"), b.column("diff")],
                names=["data", "time", "diff"],
            )
        acc.add(summary)

    return fn


def _reduce_fn(
    logic: Logic, lower: list[Time], upper: list[Time], acc: Any
) -> Callable[[Iterator[Any]], Any]:
    """Runs `reduce_key` per key over rows sorted by key: side 0 input, 1 output, 2 seed."""

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        up = Antichain(upper)
        compact = Antichain(lower) if lower else None
        summary = _Summary()
        out_k: list[bytes] = []
        out_v: list[bytes] = []
        out_t: list[Time] = []
        out_r: list[int] = []

        counting = getattr(logic, "counting", None)
        fast: list[tuple[Any, Any, Time, int]] = []

        def flush_key(kb: bytes, ins: list, outs: list, seeds: set[Time]) -> None:
            if counting is not None and len(seeds) == 1:
                # The same inlined count-only step as InProcessExecutor.reduce_round.
                (t0,) = seeds
                if counting_step(kb, ins, outs, t0, counting, fast):
                    for _, v, t, r in fast:
                        out_k.append(kb)
                        out_v.append(encode(v))
                        out_t.append(t)
                        out_r.append(r)
                    fast.clear()
                    return
            # The same compaction rule as InProcessExecutor.reduce_round.
            if compact is not None and (len(ins) > 4 or len(outs) > 4):
                ins = consolidate_entries(ins, compact)
                outs = consolidate_entries(outs, compact)
            emitted, deferred = reduce_key(decode(kb), ins, outs, seeds, up, logic)
            for v, t, r in emitted:
                out_k.append(kb)
                out_v.append(encode(v))
                out_t.append(t)
                out_r.append(r)
            for t in deferred:
                summary.deferred.add((kb, t))

        def emit() -> Any:
            _count_batch(summary, out_t, sum(map(len, out_k)) + sum(map(len, out_v)))
            rb = pa.record_batch(
                [pa.array(out_k, pa.binary()), pa.array(out_v, pa.binary()),
                 pa.array(out_t, pa.list_(pa.int64())), pa.array(out_r, pa.int64())],
                names=["key", "val", "time", "diff"],
            )
            out_k.clear()
            out_v.clear()
            out_t.clear()
            out_r.clear()
            return rb

        cur: bytes | None = None
        ins: list = []
        outs: list = []
        seeds: set[Time] = set()
        for b in batches:
            cols = (b.column("key").to_pylist(), b.column("side").to_pylist(),
                    b.column("val").to_pylist(), b.column("time").to_pylist(),
                    b.column("diff").to_pylist())
            for k, side, v, t, r in zip(*cols, strict=True):
                if k != cur:
                    if cur is not None:
                        flush_key(cur, ins, outs, seeds)
                    cur, ins, outs, seeds = k, [], [], set()
                if side == 2:
                    seeds.add(tuple(t))
                elif side == 0:
                    ins.append((decode(v), tuple(t), r))
                else:
                    outs.append((decode(v), tuple(t), r))
            if len(out_k) >= 10_000:
                yield emit()
        if cur is not None:
            flush_key(cur, ins, outs, seeds)
        if out_k:
            yield emit()
        acc.add(summary)

    return fn


# -- the executor ---------------------------------------------------------------------------------


class SparkExecutor:
    """Runs operators' bulk work on Spark (see the module docstring)."""

    name = "spark"

    def __init__(
        self,
        master: str = "local[2]",
        data_dir: str | None = None,
        local_rows: int = 0,
        partitions: int | None = None,
        spark: Any = None,
        conf: dict[str, str] | None = None,
        app_name: str = "diffsql",
    ) -> None:

        self.local = InProcessExecutor()
        self.local_rows = local_rows
        self.master = master
        self.jobs = 0  # materialisations and transfers: the Spark round trips this executor made
        self._own_session = spark is None
        self._data_dir = data_dir
        self._tmp: str | None = None
        self._next_file = itertools.count()
        if spark is None:
            spark = _build_session(master, partitions, conf or {}, app_name)
        self.spark = spark
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        self._acc = _acc_param()
        self._rules = _time_rules()
        from pyspark.sql import types as T

        times = T.ArrayType(T.LongType())
        self.payload_schema = T.StructType(
            [T.StructField("data", T.BinaryType()), T.StructField("time", times),
             T.StructField("diff", T.LongType())]
        )
        self.batch_schema = T.StructType(
            [T.StructField("key", T.BinaryType()), T.StructField("val", T.BinaryType()),
             T.StructField("time", times), T.StructField("diff", T.LongType())]
        )
        self.history_schema = T.StructType(
            [T.StructField("key", T.BinaryType()), T.StructField("side", T.IntegerType()),
             T.StructField("val", T.BinaryType()), T.StructField("time", times),
             T.StructField("diff", T.LongType())]
        )

    def close(self) -> None:
        if self._own_session:
            self.spark.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # -- plumbing -------------------------------------------------------------------------------
    def _accumulator(self) -> Any:
        return self.spark.sparkContext.accumulator(_Summary(), self._acc)

    @staticmethod
    def _release(acc: Any) -> _Summary:
        """The accumulated summary, as a fresh object, with the accumulator forgotten.

        PySpark keeps every accumulator in a process-wide registry for the life of the
        process; one per materialisation would hold every summary (times, deferred keys)
        forever in a long-running server."""
        from pyspark import accumulators

        out = _Summary().merge(acc.value)
        accumulators._accumulatorRegistry.pop(acc.aid, None)
        return out

    def _cut(self, df: Any) -> tuple[Any, tuple[Level, ...]]:
        """Materialise `df` and cut its lineage (one Spark job).

        Returns the new DataFrame and the levels it reads: with a data directory, one `Level` of
        Parquet files, which the payload or batch built on it must hold; none with
        `localCheckpoint`."""
        self.jobs += 1
        if self._data_dir is None:
            return df.localCheckpoint(eager=True), ()
        if self._tmp is None:
            os.makedirs(self._data_dir, exist_ok=True)
            _remove_orphan_levels(self._data_dir)
            # Named by host and process, so a later process can tell an orphan from a live one.
            prefix = "levels-%s-%d-" % (socket.gethostname(), os.getpid())
            self._tmp = tempfile.mkdtemp(prefix=prefix, dir=self._data_dir)
        path = os.path.join(self._tmp, "level-%d.parquet" % next(self._next_file))
        df.write.parquet(path)
        level = Level(path)
        return self.spark.read.parquet(path), (level,)

    def _materialise(
        self, df: Any, counted: bool, acc: Any, byte_cols: tuple[str, ...], rows: int = 0
    ) -> tuple:
        """Cut `df`; when its last stage did not count rows yet, count them. The summary
        returned carries the result's `levels`.

        Counting is a pass-through Python stage in the same job, or, when about `rows` (an
        estimate from the inputs) is large, an aggregation in the JVM over the materialised
        result: a second job, but shipping millions of rows through Python only to count them
        costs more than the job (a 4M-row merge: 23 s counted in Python against 15 s)."""
        if counted or rows < JVM_COUNT_ROWS:
            if not counted:
                df = df.mapInArrow(_count_fn(acc, byte_cols), df.schema)
            out, levels = self._cut(df)
            summary = self._release(acc)
            summary.levels = levels
            return out, summary
        from pyspark.sql import functions as F

        out, levels = self._cut(df)
        self._release(acc)  # unused: the JVM counts
        self.jobs += 1
        nbytes = None
        for c in byte_cols:
            nbytes = F.length(c) if nbytes is None else nbytes + F.length(c)
        summary = _Summary()
        summary.levels = levels
        for r in out.groupBy("time").agg(
            F.count(F.lit(1)).alias("n"), F.sum(nbytes if nbytes is not None else F.lit(0))
        ).collect():
            n = int(r[1])
            summary.times[tuple(r[0])] = n
            summary.nbytes += int(r[2] or 0) + _ROW_OVERHEAD * n
        return out, summary

    def _payload_df(self, updates: Updates) -> tuple[Any, dict[Time, int], int]:
        import pyarrow as pa

        data = [encode(d) for d, _, _ in updates]
        times: dict[Time, int] = {}
        for _, t, _ in updates:
            times[t] = times.get(t, 0) + 1
        table = pa.table(
            {
                "data": pa.array(data, pa.binary()),
                "time": pa.array([t for _, t, _ in updates], pa.list_(pa.int64())),
                "diff": pa.array([r for _, _, r in updates], pa.int64()),
            }
        )
        df = self.spark.createDataFrame(table, schema=self.payload_schema)
        return df, times, sum(map(len, data)) + _ROW_OVERHEAD * len(data)

    def _to_spark(self, p: Any) -> SparkPayload:
        if isinstance(p, SparkPayload):
            return p
        df, times, nbytes = self._payload_df(p)
        return SparkPayload(df, times, nbytes)

    def _to_local(self, p: SparkPayload) -> Updates:
        if not p.times:
            return []
        self.jobs += 1
        t = p.df.toArrow()
        return list(
            zip(
                map(decode, t.column("data").to_pylist()),
                map(tuple, t.column("time").to_pylist()),
                t.column("diff").to_pylist(),
                strict=True,
            )
        )

    def _settle(self, p: SparkPayload) -> Any:
        """A small result comes back to the driver (as Arrow) for the fast path."""
        if p.rows <= self.local_rows:
            return self._to_local(p)
        return p

    def _batch_df(self, b: Any) -> Any:
        """A batch's DataFrame `(key, val, time, diff)`; an in-process batch goes as Arrow."""
        if isinstance(b, SparkBatch):
            return b.df
        import pyarrow as pa

        ks: list[bytes] = []
        vs: list[bytes] = []
        ts: list[Time] = []
        rs: list[int] = []
        for k, entries in b.updates.items():
            kb = encode(k)
            for v, t, r in entries:
                ks.append(kb)
                vs.append(encode(v))
                ts.append(t)
                rs.append(r)
        table = pa.table(
            {"key": pa.array(ks, pa.binary()), "val": pa.array(vs, pa.binary()),
             "time": pa.array(ts, pa.list_(pa.int64())), "diff": pa.array(rs, pa.int64())}
        )
        return self.spark.createDataFrame(table, schema=self.batch_schema)

    def _make_batch(
        self, df: Any, s: _Summary, lower: Antichain, upper: Antichain, since: Antichain
    ) -> Any:
        records = sum(s.times.values())
        if records <= self.local_rows:
            return self._batch_to_local(df, records, lower, upper, since)
        return SparkBatch(df, lower, upper, since, records, s.nbytes, dict(s.times),
                          levels=s.levels)

    def _batch_to_local(
        self, df: Any, records: int, lower: Antichain, upper: Antichain, since: Antichain
    ) -> Batch:
        out: dict[Any, list[tuple[Any, Time, int]]] = {}
        if records:
            self.jobs += 1
            t = df.toArrow()
            for k, v, tm, r in zip(
                map(decode, t.column("key").to_pylist()),
                map(decode, t.column("val").to_pylist()),
                map(tuple, t.column("time").to_pylist()),
                t.column("diff").to_pylist(),
                strict=True,
            ):
                out.setdefault(k, []).append((v, tm, r))
        return Batch(out, lower, upper, since)

    def _union(self, dfs: list[Any]) -> Any:
        out = dfs[0]
        for d in dfs[1:]:
            out = out.union(d)
        return out

    # -- payloads -------------------------------------------------------------------------------
    def from_updates(self, updates: Updates) -> Any:
        if len(updates) <= self.local_rows:
            return updates
        return self._to_spark(updates)

    def collect(self, payload: Any) -> Updates:
        if isinstance(payload, SparkPayload):
            return self._to_local(payload)
        return payload

    def read(self, source: FileSource, time: Time) -> Any:
        """A bulk source read by Spark's own readers on the cluster, cast there, and encoded by
        its Python workers: no row passes through the driver."""
        r = self.spark.read
        for k, v in source.options.items():
            r = r.option(k, v)
        if source.format == "parquet":
            df = r.parquet(*source.paths)
        else:
            names = source.file_columns()
            r = r.option("header", "true" if source.header else "false").option(
                "sep", source.delimiter
            )
            # Pinned types make inference moot; without them both executors infer.
            r = r.option("inferSchema", "true" if source.types is None else "false")
            df = r.csv(list(source.paths))
            if names is not None:
                df = df.toDF(*names)
        cols = source.selected(df.columns)

        def typed(i: int, c: str) -> Any:
            col = df[c]  # by name, even with dots in it
            if source.types is None:
                return col
            t = source.types[i].strip().lower()
            # Spark's plain timestamp has a session time zone; ours (and Arrow's) has none.
            return col.cast("timestamp_ntz" if t == "timestamp" else t)

        sel = [typed(i, c) for i, c in enumerate(cols)]
        if source.diff_column:
            sel.append(df[source.diff_column].cast("bigint"))
        acc = self._accumulator()
        out = df.select(*sel).mapInArrow(
            _read_fn(len(cols), time, source.diff_column is not None, acc), self.payload_schema
        )
        out, s = self._materialise(out, True, acc, ())
        return self._settle(SparkPayload(out, dict(s.times), s.nbytes, levels=s.levels))

    def apply(self, logic: Callable[[Updates], Updates], payload: Any) -> Any:
        if not isinstance(payload, SparkPayload):
            return logic(payload)
        rule = self._rules.get(logic)
        if rule is not None:
            # The loop plumbing only rewrites times or diffs: a SQL expression, and the summary
            # follows in the driver, so no job is needed here.
            rewrite, tmap = rule
            times: dict[Time, int] = {}
            for t, n in payload.times.items():
                tt = tmap(t)
                times[tt] = times.get(tt, 0) + n
            return self._lazy(SparkPayload(rewrite(payload.df), times, payload.nbytes,
                                           payload.depth + 1, payload.levels))
        if _is_map(logic):
            # `Collection.map` is one output per input at the same time: the summary is known,
            # so the Python stage stays lazy and fuses into whichever job reads it next.
            df = payload.df.mapInArrow(_apply_fn(logic, None), self.payload_schema)
            return self._lazy(SparkPayload(df, dict(payload.times), payload.nbytes,
                                           payload.depth + 1, payload.levels))
        acc = self._accumulator()
        df = payload.df.mapInArrow(_apply_fn(logic, acc), self.payload_schema)
        df, s = self._materialise(df, True, acc, ())
        return self._settle(SparkPayload(df, dict(s.times), s.nbytes, levels=s.levels))

    def _lazy(self, p: SparkPayload) -> SparkPayload:
        if p.depth > 4:
            # Cut long chains of lazy stages so plans (and recomputation) stay bounded.
            df, levels = self._cut(p.df)
            return SparkPayload(df, p.times, p.nbytes, 0, levels)
        return p

    def is_empty(self, payload: Any) -> bool:
        if isinstance(payload, SparkPayload):
            return not payload.times
        return not payload

    def consolidate(self, payload: Any) -> Any:
        if isinstance(payload, SparkPayload) and payload.rows <= self.local_rows:
            payload = self._to_local(payload)
        if not isinstance(payload, SparkPayload):
            return self.local.consolidate(payload)
        from pyspark.sql import functions as F

        df = (
            payload.df.groupBy("data", "time")
            .agg(F.sum("diff").alias("diff"))
            .where(F.col("diff") != 0)
            .select("data", "time", "diff")
        )
        df, s = self._materialise(df, False, self._accumulator(), ("data",), payload.rows)
        return self._settle(SparkPayload(df, dict(s.times), s.nbytes, levels=s.levels))

    def lower(self, payload: Any) -> Antichain:
        if isinstance(payload, SparkPayload):
            return Antichain(payload.times)
        return self.local.lower(payload)

    def split(self, payloads: list[Any], frontier: Antichain) -> tuple[Any, Any]:
        """Updates at complete times (not beyond `frontier`), and the rest.

        A Spark payload's times are known, so which of its rows are ready is decided per time in
        the driver; a payload with both kinds is filtered by the Spark SQL `beyond` expression.
        """
        if not any(isinstance(p, SparkPayload) for p in payloads):
            return self.local.split(payloads, frontier)
        beyond = frontier.less_equal
        ready: list[Any] = []
        rest: list[Any] = []
        for p in payloads:
            if not isinstance(p, SparkPayload):
                r, q = self.local.split([p], frontier)
                ready.append(r)
                rest.append(q)
                continue
            rt = {t: n for t, n in p.times.items() if not beyond(t)}
            if len(rt) == len(p.times):
                ready.append(p)
            elif not rt:
                rest.append(p)
            else:
                cond = beyond_expr(frontier)
                qt = {t: n for t, n in p.times.items() if beyond(t)}
                share = p.nbytes // max(p.rows, 1)
                ready.append(SparkPayload(p.df.where(~cond), rt, share * sum(rt.values()),
                                          p.depth + 1, p.levels))
                rest.append(SparkPayload(p.df.where(cond), qt, share * sum(qt.values()),
                                         p.depth + 1, p.levels))
        return self._concat(ready), self._concat(rest)

    def _concat(self, parts: list[Any]) -> Any:
        parts = [p for p in parts if not self.is_empty(p)]
        if not parts:
            return []
        if not any(isinstance(p, SparkPayload) for p in parts):
            return [u for p in parts for u in p]
        total = sum(p.rows if isinstance(p, SparkPayload) else len(p) for p in parts)
        if total <= self.local_rows:
            return [u for p in parts for u in self.collect(p)]
        sp = [self._to_spark(p) for p in parts]
        times: dict[Time, int] = {}
        for p in sp:
            for t, n in p.times.items():
                times[t] = times.get(t, 0) + n
        depth = max(p.depth for p in sp) + 1
        df = self._union([p.df for p in sp])
        levels = tuple({id(lv): lv for p in sp for lv in p.levels}.values())
        if depth > 4:
            # A buffer re-split at every frontier change would otherwise grow its plan forever.
            (df, levels), depth = self._cut(df), 0
        return SparkPayload(df, times, sum(p.nbytes for p in sp), depth, levels)

    # -- batches --------------------------------------------------------------------------------
    def seal(self, ready: Any, by_self: bool, lower: Antichain, upper: Antichain, dims: int) -> Any:
        if isinstance(ready, SparkPayload) and ready.rows <= self.local_rows:
            ready = self._to_local(ready)  # one transfer instead of a Spark seal plus a transfer
        if not isinstance(ready, SparkPayload):
            return self.local.seal(ready, by_self, lower, upper, dims)
        from pyspark.sql import functions as F

        since = Antichain([(0,) * dims])
        keyed = ready.df.mapInArrow(_keying_fn(by_self), self.batch_schema)
        df = (
            keyed.groupBy("key", "val", "time")
            .agg(F.sum("diff").alias("diff"))
            .where(F.col("diff") != 0)
            .repartition(self.partitions, "key")
            .select("key", "val", "time", "diff")
        )
        df, s = self._materialise(df, False, self._accumulator(), ("key", "val"), ready.rows)
        return self._make_batch(df, s, lower, upper, since)

    def merge(self, older: Any, newer: Any, frontier: Antichain) -> Any:
        if not isinstance(older, SparkBatch) and not isinstance(newer, SparkBatch):
            return self.local.merge(older, newer, frontier)
        from pyspark.sql import functions as F

        # The same description as trace.merge_batches.
        since = older.since.join(newer.since)
        since = since.join(frontier) if frontier.elements else since
        both = self._batch_df(older).union(self._batch_df(newer))
        if since.elements:
            both = both.withColumn("time", advance_expr(since))
        df = (
            both.groupBy("key", "val", "time")
            .agg(F.sum("diff").alias("diff"))
            .where(F.col("diff") != 0)
            .repartition(self.partitions, "key")
            .select("key", "val", "time", "diff")
        )
        df, s = self._materialise(df, False, self._accumulator(), ("key", "val"),
                                  len(older) + len(newer))
        out = self._make_batch(df, s, older.lower, newer.upper, since)
        out.seq = max(older.seq, newer.seq)
        return out

    def unarrange(self, batch: Any, f: Callable[[Any, Any], Any] | None) -> Any:
        if not isinstance(batch, SparkBatch):
            return self.local.unarrange(batch, f)
        # One output row per entry: the summary is the batch's, and the plan stays lazy.
        df = batch.df.mapInArrow(_unarrange_fn(f), self.payload_schema)
        return SparkPayload(df, dict(batch.times), batch.nbytes, 1, batch.levels)

    # -- stateful kernels -----------------------------------------------------------------------
    def join(
        self, new: Any, others: list[Any], f: Callable[[Any, Any, Any], Any], new_is_left: bool
    ) -> Any:
        if not others:
            return []
        if not isinstance(new, SparkBatch) and not any(isinstance(b, SparkBatch) for b in others):
            return self.local.join(new, others, f, new_is_left)
        from pyspark.sql import functions as F

        ndf = self._batch_df(new)
        if not isinstance(new, SparkBatch) or new.records < 100_000:
            # A small delta against a large trace: ship the delta, not the trace.
            ndf = F.broadcast(ndf)
        odf = self._union([self._batch_df(b) for b in others])
        a = ndf.select("key", F.col("val").alias("nv"), F.col("time").alias("nt"),
                       F.col("diff").alias("nr"))
        b = odf.select("key", F.col("val").alias("ov"), F.col("time").alias("ot"),
                       F.col("diff").alias("or_"))
        v1, v2 = ("nv", "ov") if new_is_left else ("ov", "nv")
        j = a.join(b, "key").select(
            "key",
            F.col(v1).alias("v1"),
            F.col(v2).alias("v2"),
            F.zip_with("nt", "ot", lambda x, y: F.greatest(x, y)).alias("time"),
            (F.col("nr") * F.col("or_")).alias("diff"),
        )
        acc = self._accumulator()
        df = j.mapInArrow(_join_fn(f, acc), self.payload_schema)
        df, s = self._materialise(df, True, acc, ())
        return self._settle(SparkPayload(df, dict(s.times), s.nbytes, levels=s.levels))

    def reduce_round(
        self,
        new: list[Any],
        pending: dict[Any, set[Time]],
        inputs: list[Any],
        outputs: list[Any],
        lower: Antichain,
        upper: Antichain,
        logic: Logic,
        dims: int,
    ) -> tuple[Any, dict[Any, set[Time]]]:
        """As `InProcessExecutor.reduce_round`; with Spark inputs, the keys `new` touches and the
        pending keys now complete go, with their input and output histories, to `reduce_key` in
        Spark's Python workers, grouped by key."""
        if not any(isinstance(b, SparkBatch) for b in itertools.chain(new, inputs, outputs)):
            return self.local.reduce_round(
                new, pending, inputs, outputs, lower, upper, logic, dims
            )
        import pyarrow as pa
        from pyspark.sql import functions as F

        beyond = upper.less_equal
        left: dict[Any, set[Time]] = {}
        seed_rows: list[tuple[bytes, Time]] = []
        for key, times in pending.items():
            ready = {p for p in times if not beyond(p)}
            if ready:
                kb = encode(key)
                seed_rows.extend((kb, t) for t in ready)
            rest = times - ready
            if rest:
                left[key] = rest
        null_bin = F.lit(None).cast("binary")
        seed_dfs = [
            self._batch_df(b).select("key", F.lit(2).alias("side"), null_bin.alias("val"), "time",
                                     F.lit(0).cast("bigint").alias("diff"))
            for b in new
        ]
        if seed_rows:
            table = pa.table(
                {"key": pa.array([k for k, _ in seed_rows], pa.binary()),
                 "side": pa.array([2] * len(seed_rows), pa.int32()),
                 "val": pa.array([None] * len(seed_rows), pa.binary()),
                 "time": pa.array([t for _, t in seed_rows], pa.list_(pa.int64())),
                 "diff": pa.array([0] * len(seed_rows), pa.int64())}
            )
            seed_dfs.append(self.spark.createDataFrame(table, schema=self.history_schema))
        if not seed_dfs:
            return None, left
        seeds = self._union(seed_dfs)
        keys = seeds.select("key").distinct()
        small = sum(b.records if isinstance(b, SparkBatch) else b.records for b in new) + len(
            seed_rows
        )
        if small < 100_000:
            keys = F.broadcast(keys)
        parts = [seeds]
        for side, bs in ((0, inputs), (1, outputs)):
            if bs:
                h = self._union([self._batch_df(b) for b in bs]).join(keys, "key", "left_semi")
                parts.append(h.select("key", F.lit(side).alias("side"), "val", "time", "diff"))
        hist = self._union(parts).repartition(self.partitions, "key").sortWithinPartitions("key")
        acc = self._accumulator()
        df = hist.mapInArrow(
            _reduce_fn(logic, list(lower.elements), list(upper.elements), acc), self.batch_schema
        )
        df, s = self._materialise(df, True, acc, ())
        for kb, t in s.deferred:
            left.setdefault(decode(kb), set()).add(t)
        if not s.times:
            return None, left
        since = Antichain([(0,) * dims])
        return self._make_batch(df, s, lower, upper, since), left


# -- Spark SQL expressions over times -------------------------------------------------------------


def beyond_expr(frontier: Antichain) -> Any:
    """`time` is beyond `frontier`: some f in it is <= time coordinate-wise."""
    from pyspark.sql import functions as F

    t = F.col("time")
    out = None
    for f in frontier.elements:
        conj = None
        for i, x in enumerate(f):
            c = t.getItem(i) >= F.lit(x)
            conj = c if conj is None else conj & c
        conj = conj if conj is not None else F.lit(True)
        out = conj if out is None else out | conj
    return out if out is not None else F.lit(False)


def advance_expr(frontier: Antichain) -> Any:
    """advance_by(time, F): per coordinate, the least over f of greatest(time[i], f[i])."""
    from pyspark.sql import functions as F

    els = frontier.elements
    t = F.col("time")
    coords = []
    for i in range(len(els[0])):
        js = [F.greatest(t.getItem(i), F.lit(f[i])) for f in els]
        coords.append(js[0] if len(js) == 1 else F.least(*js))
    return F.array(*coords)


def _time_rules() -> dict[Any, tuple[Callable[[Any], Any], Callable[[Time], Time]]]:
    """The engine's time-only logic functions, as DataFrame rewrites plus their time maps."""
    from pyspark.sql import functions as F

    from engine.operators.iterate import enter_logic, feedback_logic, leave_logic
    from engine.operators.stateless import negate_logic

    t = F.col("time")
    init = F.slice(t, F.lit(1), F.size(t) - 1)
    return {
        enter_logic: (
            lambda df: df.withColumn("time", F.concat(t, F.array(F.lit(0).cast("bigint")))),
            lambda tm: tm + (0,),
        ),
        leave_logic: (lambda df: df.withColumn("time", init), lambda tm: tm[:-1]),
        feedback_logic: (
            lambda df: df.withColumn("time", F.concat(init, F.array(F.element_at(t, -1) + 1))),
            lambda tm: tm[:-1] + (tm[-1] + 1,),
        ),
        negate_logic: (lambda df: df.withColumn("diff", -F.col("diff")), lambda tm: tm),
    }


def _is_map(logic: Any) -> bool:
    # `map_logic(f)` marks its function: one output per input, times unchanged.
    return bool(getattr(logic, "one_to_one", False))


def _remove_orphan_levels(data_dir: str) -> None:
    """Delete level directories left by a process of this host that is gone (a crash or a kill
    skips `close()`); directories of other hosts sharing `data_dir` are theirs to clean."""
    host = socket.gethostname()
    for name in os.listdir(data_dir):
        parts = name.rsplit("-", 2)
        if not name.startswith("levels-") or len(parts) != 3 or not parts[1].isdigit():
            continue
        if parts[0] != "levels-" + host:
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, another user's
        shutil.rmtree(os.path.join(data_dir, name), ignore_errors=True)


def _repo_root() -> str:
    import engine

    return os.path.dirname(os.path.dirname(os.path.abspath(engine.__file__)))


def _build_session(master: str, partitions: int | None, conf: dict[str, str], app: str) -> Any:
    from pyspark.sql import SparkSession

    root = _repo_root()
    # Python workers must import engine/ and planner/ (closures refer to their modules) and run
    # the driver's Python, so cloudpickled functions load.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    pp = os.environ.get("PYTHONPATH", "")
    if root not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
    if partitions is None:
        partitions = 2
    # 127.0.0.1 only, unless workers on other hosts must reach the driver by name (containers).
    host = os.environ.get("DIFFSQL_SPARK_DRIVER_HOST", "127.0.0.1")
    bind = "127.0.0.1" if host == "127.0.0.1" else "0.0.0.0"
    if bind == "127.0.0.1":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", host)
        .config("spark.driver.bindAddress", bind)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        # Stable partition counts: batches stay hash-partitioned by key into `partitions`.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        # Merged-away batches' checkpoint blocks are freed when the JVM collects their RDDs.
        .config("spark.cleaner.periodicGC.interval", "5min")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
