"""The Spark executor against the in-process executor on the engine's API.

Invariant checked: the same dataflow, fed the same random updates, captures exactly the same
updates per time on `SparkExecutor` (real Spark, local[2]) as on the in-process executor, after
every epoch. `local_rows=0` puts every payload and batch on Spark; the mixed runs let small
payloads take the driver fast path while larger ones stay in Spark, which exercises the
promotion and demotion between the two.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import engine
from engine import Collection, Dataflow

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark_ex() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from engine.executors.spark import SparkExecutor

    ex = SparkExecutor("local[2]", local_rows=0)
    yield ex
    ex.close()


def executor_like(base: Any, **kw: Any) -> Any:
    """Another executor on the same SparkSession (one session per module)."""
    from engine.executors.spark import SparkExecutor

    return SparkExecutor(spark=base.spark, **kw)


Build = Callable[[Dataflow], tuple[dict[str, Any], list[Any]]]
Changes = Callable[[random.Random, int], dict[str, list[tuple[Any, int]]]]


def run_both(ex: Any, build: Build, changes: Changes, epochs: int, seed: int = 1) -> None:
    """Feed identical changes to both executors; compare every capture after every epoch."""
    dfs = [Dataflow(), Dataflow(executor=ex)]
    built = [build(d) for d in dfs]
    rng = random.Random(seed)
    for epoch in range(epochs):
        batch = changes(rng, epoch)
        for handles, _ in built:
            for name, ups in batch.items():
                handles[name].send(ups)
            for h in handles.values():
                h.advance_to(epoch + 1)
        for d in dfs:
            d.run()
        for i, (a, b) in enumerate(zip(built[0][1], built[1][1], strict=True)):
            assert b.done(epoch)
            got, want = b.consolidated_by_time(), a.consolidated_by_time()
            assert got == want, (epoch, i, got, want)


# -- reachability: iterate + join + distinct -------------------------------------------------------


def reach_build(df: Dataflow) -> tuple[dict[str, Any], list[Any]]:
    eh, edges = df.new_input("edges")
    rh, roots = df.new_input("roots")

    def body(inner: Collection) -> Collection:
        e = edges.enter(inner.scope)
        return (
            inner.map(lambda p: (p[1], p[0]))
            .join_map(e, lambda n, root, d: (root, d))
            .concat(inner)
            .distinct()
        )

    reach = roots.map(lambda r: (r, r)).iterate(body)
    return {"edges": eh, "roots": rh}, [reach.capture(), reach.map(lambda p: p[0]).count().capture()]


def reach_changes(nodes: int, initial: int) -> Changes:
    edges: list[tuple[int, int]] = []

    def changes(rng: random.Random, epoch: int) -> dict[str, list[tuple[Any, int]]]:
        if epoch == 0:
            edges.extend((rng.randrange(nodes), rng.randrange(nodes)) for _ in range(initial))
            return {"edges": [(e, 1) for e in edges], "roots": [(0, 1), (3, 1)]}
        out = []
        for _ in range(2):
            out.append((edges.pop(rng.randrange(len(edges))), -1))
            e = (rng.randrange(nodes), rng.randrange(nodes))
            edges.append(e)
            out.append((e, 1))
        roots = [(1, 1)] if epoch == 2 else []
        return {"edges": out, "roots": roots}

    return changes


def test_reachability_all_on_spark(spark_ex: Any) -> None:
    run_both(spark_ex, reach_build, reach_changes(8, 10), epochs=3)
    assert spark_ex.jobs > 0


def test_reachability_mixed_fast_path(spark_ex: Any) -> None:
    ex = executor_like(spark_ex, local_rows=6)
    run_both(ex, reach_build, reach_changes(12, 20), epochs=3, seed=2)
    assert ex.jobs > 0


# -- min / max under deletes, top-k ----------------------------------------------------------------


def agg_build(df: Dataflow) -> tuple[dict[str, Any], list[Any]]:
    h, kv = df.new_input("kv")
    return {"kv": h}, [
        kv.min().capture(),
        kv.max().capture(),
        kv.top_k(2).capture(),
        kv.top_k(2, offset=1, order=lambda v: -v).capture(),
        kv.count().capture(),
    ]


def agg_changes() -> Changes:
    live: list[tuple[int, int]] = []

    def changes(rng: random.Random, epoch: int) -> dict[str, list[tuple[Any, int]]]:
        out: list[tuple[Any, int]] = []
        if epoch == 0:
            for _ in range(24):
                r = (rng.randrange(4), rng.randrange(20))
                live.append(r)
                out.append((r, 1))
            return {"kv": out}
        for k in range(4):
            # Delete the current minimum and maximum of some keys: the hard case for min/max.
            vals = sorted(v for kk, v in live if kk == k)
            if vals and rng.random() < 0.7:
                for v in {vals[0], vals[-1]}:
                    live.remove((k, v))
                    out.append(((k, v), -1))
        for _ in range(3):
            r = (rng.randrange(4), rng.randrange(20))
            live.append(r)
            out.append((r, 1))
        return {"kv": out}

    return changes


def test_min_max_top_k_under_deletes_all_on_spark(spark_ex: Any) -> None:
    run_both(spark_ex, agg_build, agg_changes(), epochs=3, seed=3)


def test_min_max_top_k_parquet_levels(spark_ex: Any, tmp_path: Any) -> None:
    ex = executor_like(spark_ex, local_rows=0, data_dir=str(tmp_path / "levels"))
    run_both(ex, agg_build, agg_changes(), epochs=2, seed=4)
    assert any((tmp_path / "levels").rglob("*.parquet"))
    ex.close()


def test_parquet_levels_are_deleted_when_nothing_reads_them(spark_ex: Any, tmp_path: Any) -> None:
    """Levels of merged-away batches and consumed payloads are deleted as soon as no plan can
    read them (a premature deletion would fail the run, which reads every live level), and
    none is left once the dataflows are gone."""
    import gc

    ex = executor_like(spark_ex, local_rows=0, data_dir=str(tmp_path / "levels"))
    run_both(ex, reach_build, reach_changes(10, 16), epochs=3, seed=5)
    on_disk = len(list((tmp_path / "levels").rglob("level-*.parquet")))
    assert ex.jobs > 20
    gc.collect()
    assert list((tmp_path / "levels").rglob("level-*.parquet")) == []
    # While the dataflow was alive, far fewer levels existed than were ever written.
    assert on_disk < ex.jobs // 2
    ex.close()


# -- a doubly nested iterate ---------------------------------------------------------------------


def nested_build(df: Dataflow) -> tuple[dict[str, Any], list[Any]]:
    h, nums = df.new_input("nums")

    def inner(z: Collection) -> Collection:
        return z.concat(z.map(lambda n: n // 2)).distinct()

    def outer(x: Collection) -> Collection:
        y = x.iterate(inner)
        return y.concat(y.map(lambda n: (n * 3 + 1) % 13)).distinct()

    out = nums.iterate(outer)
    return {"nums": h}, [out.capture()]


def nested_changes() -> Changes:
    live: list[int] = []

    def changes(rng: random.Random, epoch: int) -> dict[str, list[tuple[Any, int]]]:
        out: list[tuple[Any, int]] = []
        if live and epoch:
            v = live.pop(rng.randrange(len(live)))
            out.append((v, -1))
        v = rng.randrange(40)
        live.append(v)
        out.append((v, 1))
        return {"nums": out}

    return changes


def test_doubly_nested_iterate_all_on_spark(spark_ex: Any) -> None:
    run_both(spark_ex, nested_build, nested_changes(), epochs=2, seed=5)


def test_approx_bytes_starts_no_job(spark_ex: Any) -> None:
    ex = executor_like(spark_ex, local_rows=0)
    df = Dataflow(executor=ex)
    h, c = df.new_input("c")
    arranged = c.map(lambda x: (x % 3, x)).arrange_by_key()
    h.send([(i, 1) for i in range(30)])
    h.advance_to(1)
    df.run()
    jobs = ex.jobs
    stats = df.arrangement_stats()
    assert ex.jobs == jobs
    assert stats[0]["records"] == 30 and stats[0]["bytes"] > 0
    assert isinstance(arranged, engine.Arranged)


def test_bulk_sources_read_on_spark_equal_in_process(spark_ex: Any, tmp_path: Any) -> None:
    """Spark's own readers give the same rows, types and diffs as the in-process reading, and a
    dataflow loaded from files on Spark equals the in-process one."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.sources import FileSource, updates_of

    rng = random.Random(9)
    n = 3000
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": pa.array([None if i % 7 == 0 else "n%d" % (i % 13) for i in range(n)]),
        "price": pa.array([Decimal(rng.randrange(-999, 999)) / 100 for _ in range(n)],
                          pa.decimal128(8, 2)),
        "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 40) for i in range(n)]),
        "diff": pa.array([rng.choice([1, 1, 2, -1, 0]) for _ in range(n)], pa.int64()),
    })
    pq.write_table(table, tmp_path / "t.parquet")
    csv = tmp_path / "t.csv"
    csv.write_text("".join("%d|%s|%d\n" % (i, "x%d" % (i % 5), i % 3 - 1) for i in range(n)))
    tcsv = tmp_path / "typed.csv"
    tcsv.write_text('code,n,at\n007,1,2024-01-02 03:04:05\nNA,,\n"",2,2020-02-29 00:00:00\n')
    sources = [
        FileSource((str(tmp_path / "t.parquet"),), columns=("id", "name", "price", "day"),
                   diff_column="diff"),
        FileSource((str(tmp_path / "t.parquet"),), columns=("name", "id"),
                   types=("string", "integer")),
        FileSource((str(csv),), "csv", columns=("k", "v"), types=("bigint", "string"),
                   diff_column="d", header=False, delimiter="|"),
        FileSource((str(tcsv),), "csv", columns=("code", "n", "at"),
                   types=("string", "bigint", "timestamp")),
        # columns a view does not read: NULL on both, and not read
        FileSource((str(tmp_path / "t.parquet"),), columns=("id", "name", "price", "day"),
                   diff_column="diff", unread=frozenset({"name", "day"})),
        FileSource((str(tcsv),), "csv", columns=("code", "n", "at"),
                   types=("string", "bigint", "timestamp"), unread=frozenset({"at"})),
    ]
    for src in sources:
        want = sorted(updates_of(src, (4,)), key=repr)
        got = sorted(spark_ex.collect(spark_ex.read(src, (4,))), key=repr)
        assert got == want
        assert {type(v) for u in got for v in u[0]} == {type(v) for u in want for v in u[0]}

    def build(d: Dataflow) -> tuple[Any, Any]:
        h, c = d.new_input("t")
        return h, c.map(lambda r: (r[1], r[0])).count().capture()

    (h1, c1), (h2, c2) = build(d1 := Dataflow()), build(d2 := Dataflow(executor=spark_ex))
    for h in (h1, h2):
        h.load(sources[0])
        h.advance_to(1)
    d1.run()
    d2.run()
    assert c1.current() == c2.current() and c1.current()


def test_jvm_counting_path(spark_ex: Any, monkeypatch: Any) -> None:
    """Large results are counted by a JVM aggregation instead of a Python stage: force that
    path for every result; the summaries (and so the scheduling) must stay exact."""
    import engine.executors.spark.driver as se

    monkeypatch.setattr(se, "JVM_COUNT_ROWS", 0)
    ex = executor_like(spark_ex, local_rows=0)
    run_both(ex, agg_build, agg_changes(), epochs=2, seed=6)
    df = Dataflow(executor=ex)
    h, c = df.new_input("x")
    c.count()
    h.send([((i % 7, i % 3), 1) for i in range(50)])
    h.advance_to(1)
    df.run()
    stats = {s["name"]: s["records"] for s in df.arrangement_stats()}
    assert stats and sorted(stats.values()) == [21, 21]


def test_orphan_level_directories_are_removed(tmp_path: Any) -> None:
    """Level directories of a dead process of this host are removed when a new executor starts
    writing levels; live processes' and other hosts' directories are kept."""
    import os
    import socket
    import subprocess

    from engine.executors.spark.cluster import _remove_orphan_levels

    host = socket.gethostname()
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / ("levels-%s-%d-abc" % (host, gone.pid))
    live = tmp_path / ("levels-%s-%d-def" % (host, os.getpid()))
    other = tmp_path / ("levels-elsewhere-%d-ghi" % gone.pid)
    for d in (dead, live, other):
        (d / "level-0.parquet").mkdir(parents=True)
    _remove_orphan_levels(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
