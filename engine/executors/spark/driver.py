"""An executor that runs operators' bulk work on Apache Spark (see `engine.executors.base`).

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

This module is the driver: `SparkExecutor` and the Spark SQL expressions over times. The
representation on Spark and the Arrow stages its workers run are in `arrow`; the session and
the data directory's files in `cluster`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from typing import Any

from engine.executors.base import Updates
from engine.executors.inprocess import InProcessExecutor
from engine.executors.spark.arrow import (
    _ROW_OVERHEAD,
    SparkBatch,
    SparkPayload,
    _acc_param,
    _apply_fn,
    _count_fn,
    _join_fn,
    _keying_fn,
    _read_fn,
    _reduce_fn,
    _Summary,
    _unarrange_fn,
    decode,
    encode,
)
from engine.executors.spark.cluster import Level, _build_session, _remove_orphan_levels
from engine.kernels import Logic
from engine.lattice import Antichain, Time
from engine.sources import FileSource
from engine.trace import Batch

# From about this many rows, a result is counted by a JVM aggregation instead of in Python.
JVM_COUNT_ROWS = 200_000


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

    def from_rows(self, rows: list[Any], time: Time, diff: int) -> Any:
        return self.from_updates([(d, time, diff) for d in rows])

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
            t = source.types[i].strip().lower() if source.types is not None else "string"
            if c in source.unread:
                from pyspark.sql import functions as F

                return F.lit(None).cast("timestamp_ntz" if t == "timestamp" else t).alias(
                    f"__unread{i}")  # named: two such columns are not ambiguous
            col = df[c]  # by name, even with dots in it
            if source.types is None:
                return col
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
