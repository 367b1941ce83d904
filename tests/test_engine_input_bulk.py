"""`InputHandle.insert_many`: a bulk insert means exactly the per-row inserts it replaces.

Under both executors, rows inserted in bulk (mixed with single inserts, removals and several
epochs) must give the same collection at every epoch as inserting them one at a time, NaN rows
must be one key (they retract), and bad diffs are refused.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from engine import Dataflow
from engine.executors.columnar import ColumnarExecutor


def make(executor: str) -> Dataflow:
    return Dataflow(executor=ColumnarExecutor() if executor == "columnar" else None)


def rows_and_first_field_counts(executor: str) -> tuple[Dataflow, Any, Any, Any]:
    """A dataflow with one input of rows, capturing the rows and the count of each first field."""
    df = make(executor)
    h, xs = df.new_input("xs")
    return df, h, xs.map(lambda r: r).capture(), xs.map(lambda r: r[0]).count().capture()


def run(executor: str, bulk: bool, batches: list[tuple[list[Any], list[Any]]]) -> list[dict[Any, int]]:
    df = make(executor)
    h, xs = df.new_input("xs")
    cap = xs.map(lambda r: r).distinct().capture()
    counted = xs.count().capture()
    out = []
    for epoch, (ins, rem) in enumerate(batches, start=1):
        if bulk:
            h.insert_many(ins)
            h.insert_many(rem, diff=-1)
        else:
            for r in ins:
                h.insert(r)
            for r in rem:
                h.remove(r)
        h.advance_to(epoch)
        df.run()
        out.append((dict(cap.current()), dict(counted.current())))
    return out


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("seed", range(4))
def test_bulk_equals_row_by_row(executor: str, seed: int) -> None:
    rng = random.Random(seed)
    pool: list[Any] = [1, 2, 3, (1, 2), (2, 1), (1 << 40, 3), ("a", None), (True, 1), 2.5, "x"]
    live: list[Any] = []
    batches = []
    for _ in range(8):
        ins = [rng.choice(pool) for _ in range(rng.randint(0, 12))]
        rem = [live.pop(rng.randrange(len(live))) for _ in range(min(len(live), rng.randint(0, 4)))]
        live.extend(ins)
        batches.append((ins, rem))
    assert run(executor, True, batches) == run(executor, False, batches)


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
def test_bulk_nan_rows_are_one_key_and_retract(executor: str) -> None:
    df = make(executor)
    h, xs = df.new_input("xs")
    cap = xs.count().capture()
    h.insert_many([(1, float("nan")), (1, float("nan")), (2, 0.5)])
    h.advance_to(1)
    df.run()
    cur = cap.current()
    nan_keys = [k for k in cur if isinstance(k, tuple) and math.isnan(k[0][1])]
    assert len(nan_keys) == 1 and nan_keys[0][1] == 2
    h.insert_many([(1, float("nan"))] * 2, diff=-1)
    h.advance_to(2)
    df.run()
    assert cap.current() == {((2, 0.5), 1): 1}


def test_bulk_refuses_bad_diffs_and_ignores_nothing() -> None:
    df = Dataflow()
    h, xs = df.new_input("xs")
    with pytest.raises(TypeError):
        h.insert_many([1], diff=True)
    with pytest.raises(TypeError):
        h.insert_many([1], diff=1.5)  # type: ignore[arg-type]
    h.insert_many([])
    h.insert_many([1, 2], diff=0)
    cap = xs.capture()
    h.advance_to(1)
    df.run()
    assert cap.current() == {}


def test_send_is_all_or_nothing() -> None:
    df = Dataflow()
    h, xs = df.new_input("xs")
    cap = xs.capture()
    with pytest.raises(TypeError):
        h.send([(1, 1), (2, 1), (3, "x")])  # type: ignore[list-item]
    h.send([(4, 1)])
    h.advance_to(1)
    df.run()
    assert cap.current() == {4: 1}


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("seed", range(4))
def test_send_rows_equals_pairs(executor: str, seed: int) -> None:
    """`send_rows(rows, diff)` (a table's contents: rows with one diff, as rows when there are
    many) gives the collection `send` of the `(row, diff)` pairs gives, at every epoch, and the
    caller's list is not shared with the dataflow."""
    pool = [(i % 37, float(i % 5)) for i in range(300)]

    def result(rows_api: bool) -> list[dict[Any, int]]:
        df, h, cap, counted = rows_and_first_field_counts(executor)
        out = []
        r2 = random.Random(seed)
        live: list[Any] = []
        for epoch in range(1, 6):
            ins = r2.sample(pool, r2.choice([3, 64, 200]))
            rem = live[: r2.choice([0, 2, 70])]
            live = live[len(rem):] + ins
            if rows_api:
                h.send_rows(ins, 1)
                h.send_rows(rem, -1)
                ins.clear()  # the dataflow took its own copy
            else:
                h.send([(r, 1) for r in ins] + [(r, -1) for r in rem], canonical_data=True)
            h.advance_to(epoch)
            df.run()
            out.append((dict(cap.current()), dict(counted.current())))
        return out

    assert result(True) == result(False)


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("seed", range(4))
def test_send_columns_equals_rows(executor: str, seed: int) -> None:
    """`send_columns(table)` gives the collection that inserting its rows gives, whatever the
    columns: two integer columns in the pair range (the columnar executor packs them without
    making rows), out of it, with NULLs, of mixed widths, or of other types."""
    import pyarrow as pa

    rng = random.Random(seed)
    tables = [
        pa.table({"a": pa.array([rng.randrange(50) for _ in range(80)], pa.int64()),
                  "b": pa.array([rng.randrange(9) for _ in range(80)], pa.int32())}),
        pa.table({"a": pa.array([rng.choice([1, 1 << 31, -2]) for _ in range(20)], pa.int64()),
                  "b": pa.array([rng.randrange(9) for _ in range(20)], pa.int64())}),
        pa.table({"a": pa.array([rng.choice([1, None]) for _ in range(20)], pa.int64()),
                  "b": pa.array([rng.randrange(3) for _ in range(20)], pa.int64())}),
        pa.table({"a": pa.array([rng.choice([True, False]) for _ in range(20)]),
                  "b": pa.array([rng.randrange(3) for _ in range(20)], pa.int64())}),
        pa.table({"a": pa.array([rng.randrange(5) for _ in range(20)], pa.int64())}),
    ]

    def result(columns: bool) -> list[dict[Any, int]]:
        df, h, cap, counted = rows_and_first_field_counts(executor)
        out = []
        for epoch, table in enumerate(tables, start=1):
            diff = 1 if epoch % 2 or epoch == 4 else -1
            if columns:
                h.send_columns(table, diff)
            else:
                for row in zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True):
                    h.update(row, diff)
            h.advance_to(epoch)
            df.run()
            out.append((dict(cap.current()), dict(counted.current())))
        return out

    assert result(True) == result(False)
