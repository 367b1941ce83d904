"""The Spark executor's representation on Spark, and the Arrow stages its workers run.

Values travel as canonical bytes (`encode`): equal values of the same types give equal bytes
(-0.0 travels as 0.0, and every NaN decodes as the one NaN), so Spark can group, join and
consolidate on them without decoding. A `SparkPayload` is a DataFrame
`(data, time, diff)` plus its summary (rows per time, bytes); a `SparkBatch` is a consolidated,
key-partitioned DataFrame `(key, val, time, diff)` plus the cached attributes `Trace` reads.

The functions ending in `_fn` build closures that Spark ships (cloudpickled) to its Python
workers and runs in `mapInArrow` stages: each decodes Arrow record batches, runs the same
per-record logic and kernels as the in-process executor, encodes the results as Arrow again,
and counts rows per time into an accumulator (`_Summary`) while Spark materialises them.
Invariant: a stage's output denotes the same updates as `InProcessExecutor` computes from the
same input, and its summary counts exactly the rows it yields. The underscored names are shared
with `driver` only, within the Spark executor's package; they are not the engine's API.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections.abc import Callable, Iterator
from typing import Any

from engine.canonical import canonical
from engine.executors.base import Updates
from engine.executors.inprocess import counting_step
from engine.executors.spark.cluster import Level
from engine.kernels import Logic, reduce_key
from engine.lattice import Antichain, Time
from engine.trace import consolidate_entries

# Per-entry bytes beyond the encoded key and value: time coordinates, diff and row overhead.
_ROW_OVERHEAD = 48


def encode(value: Any) -> bytes:
    """Canonical bytes of a value: equal values of the same types give equal bytes.

    Plain `pickle.dumps` is not canonical: it memoises by object identity, so a tuple holding
    the same string object twice pickles differently from one holding two equal strings. Fast
    mode turns the memo off. -0.0 equals 0.0 (it joins, groups and cancels with it, as in the
    in-process executor and in DuckDB), so it is encoded as 0.0 (and decodes as 0.0). NaN has
    many bit patterns: `decode` makes each the one `NAN`. (Values equal across types, 1 == 1.0
    == True or Decimal('1.0') == Decimal('1.00'), still encode differently; the planner never
    mixes them within a column.)
    """
    data = _pickled(value)
    if _NEGATIVE_ZERO in data:  # or those bytes inside another value: then nothing changes
        data = _pickled(_positive_zeros(value))
    return data


def _pickled(value: Any) -> bytes:
    buf = io.BytesIO()
    p = pickle.Pickler(buf, 5)
    p.fast = True
    p.dump(value)
    return buf.getvalue()


# -0.0 pickled: BINFLOAT ("G") and its 8 bytes, big-endian.
_NEGATIVE_ZERO = b"G\x80" + bytes(7)


def _positive_zeros(value: Any) -> Any:
    """`value` with every -0.0, also inside (nested) tuples, replaced by 0.0."""
    if value.__class__ is float:
        return 0.0 if value == 0.0 else value
    if value.__class__ is tuple:
        return tuple(_positive_zeros(v) for v in value)
    return value


# A pickled float is BINFLOAT ("G") and its 8 bytes, big-endian: a NaN's (or an infinity's)
# first two are 7f or ff, then f0 or more. Bytes that hold none hold no NaN.
_MAYBE_NAN = re.compile(rb"G[\x7f\xff][\xf0-\xff]")


def decode(data: bytes) -> Any:
    """The value `encode` made `data` from, with every NaN the one `NAN`, as everywhere in the
    engine (`engine.canonical`): a NaN decoded by itself is unequal to every other NaN, so a
    row holding one would not meet its retraction (in a worker's consolidation, or in the
    driver's output). Only bytes that may hold a NaN are looked into (`canonical` cost 1.5 to
    5 times as much as unpickling a row)."""
    value = pickle.loads(data)
    return canonical(value) if _MAYBE_NAN.search(data) else value


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


# The mark before the one-line JSON (type, code, message) of an exception a worker's stage
# raised: Spark hands the driver the worker's whole traceback as the text of a PythonException,
# and a view's error (a division by zero) is to read as it does in process, not as that.
WORKER_ERROR = "diffsql-worker-error:"


def _carrying_errors(fn: Callable[[Iterator[Any]], Iterator[Any]]
                     ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A worker's stage `fn`, raising what it raises as `WORKER_ERROR` and its JSON."""
    def carried(batches: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from fn(batches)
        except Exception as e:  # noqa: BLE001 - carried to the driver whatever it is
            raise RuntimeError(WORKER_ERROR + json.dumps({
                "type": type(e).__name__, "code": getattr(e, "code", None),
                "message": str(getattr(e, "message", None) or e)})) from None
    return carried


def worker_error(e: BaseException) -> dict[str, Any] | None:
    """The type, code and message of the worker's exception a driver's error `e` carries
    (`_carrying_errors`), or None when it carries none. Only PySpark's and Py4J's errors
    carry one: another's text (a value the user wrote, quoted in an error) is not read."""
    if not type(e).__module__.startswith(("pyspark", "py4j")):
        return None
    text = str(e)
    at = text.find(WORKER_ERROR)
    if at < 0:
        return None
    try:
        got, _ = json.JSONDecoder().raw_decode(text, at + len(WORKER_ERROR))
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)


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

    return _carrying_errors(fn)
