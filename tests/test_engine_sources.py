"""Bulk sources on the in-process executor: files read into an input as one payload.

Invariant checked: the rows a `FileSource` delivers (values, types, diffs) are exactly the rows
written to the file, however the file is laid out (Parquet, CSV with or without a header, with a
delimiter, pinned types), and a dataflow fed through `InputHandle.load` gives the same results
at every epoch as the same rows sent one by one.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Dataflow
from engine.sources import FileSource, read_arrow, updates_of

ROWS = [
    (1, "a", 1.5, Decimal("1.25"), dt.date(2024, 1, 2), True),
    (2, None, -0.5, Decimal("-3.00"), dt.date(1999, 12, 31), False),
    (3, "c,d", None, None, None, None),
]
COLS = ("id", "name", "x", "price", "day", "flag")
TYPES = ("bigint", "string", "double", "decimal(10,2)", "date", "boolean")


def write_rows(path: Path) -> str:
    arrays = [pa.array([r[i] for r in ROWS], type=t) for i, t in enumerate(
        [pa.int64(), pa.string(), pa.float64(), pa.decimal128(10, 2), pa.date32(), pa.bool_()])]
    pq.write_table(pa.table(arrays, names=list(COLS)), path)
    return str(path)


def test_parquet_rows_and_types(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "t.parquet")
    got = updates_of(FileSource((path,)), (0,))
    assert [u[0] for u in got] == ROWS
    assert all(t == (0,) and r == 1 for _, t, r in got)
    # Selecting reorders; pinned types cast.
    got = updates_of(FileSource((path,), columns=("name", "id"), types=("string", "integer")),
                     (3,))
    assert [u[0] for u in got] == [(r[1], r[0]) for r in ROWS]


def test_csv_header_delimiter_and_types(tmp_path: Path) -> None:
    p1 = tmp_path / "h.csv"
    p1.write_text("id;name;amount\n1;x;2.5\n2;y;-1\n")
    src = FileSource((str(p1),), "csv", columns=("id", "name", "amount"),
                     types=("bigint", "string", "double"), delimiter=";")
    assert [u[0] for u in updates_of(src, (0,))] == [(1, "x", 2.5), (2, "y", -1.0)]
    p2 = tmp_path / "n.csv"
    p2.write_text("7,q,1\n8,r,-2\n9,s,0\n")
    src = FileSource((str(p2),), "csv", columns=("id", "name"), types=("bigint", "string"),
                     diff_column="d", header=False)
    # Diff 0 rows are dropped; negative diffs are deletions.
    assert updates_of(src, (1,)) == [((7, "q"), (1,), 1), ((8, "r"), (1,), -2)]
    with pytest.raises(ValueError, match="without a header"):
        FileSource((str(p2),), "csv", header=False)
    with pytest.raises(ValueError, match="not in"):
        read_arrow(FileSource((str(p1),), "csv", columns=("nope",), delimiter=";"))
    with pytest.raises(ValueError, match="format"):
        FileSource((str(p1),), "json")


def test_csv_pinned_types_keep_text_and_empty_is_null(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text('code,n,at\n007,1,2024-01-02 03:04:05\nNA,,\n"",2,2020-02-29 00:00:00\n')
    src = FileSource((str(p),), "csv", columns=("code", "n", "at"),
                     types=("string", "bigint", "timestamp"))
    assert [u[0] for u in updates_of(src, (0,))] == [
        ("007", 1, dt.datetime(2024, 1, 2, 3, 4, 5)),
        ("NA", None, None),
        (None, 2, dt.datetime(2020, 2, 29)),
    ]


def test_load_equals_send_under_changes(tmp_path: Path) -> None:
    """Three epochs of file loads (with deletions) against the same updates sent by hand."""
    rng = random.Random(5)
    facts: list[tuple[int, int]] = []
    epochs = []
    for e in range(3):
        ins = [(rng.randrange(50), rng.randrange(10)) for _ in range(200)]
        dels = rng.sample(facts, min(len(facts), 60))
        for d in dels:
            facts.remove(d)
        facts.extend(ins)
        ups = [(r, 1) for r in ins] + [(r, -1) for r in dels]
        path = tmp_path / ("e%d.parquet" % e)
        pq.write_table(pa.table({"k": [r[0] for r, _ in ups], "v": [r[1] for r, _ in ups],
                                 "diff": [d for _, d in ups]}), path)
        expect: dict[int, int] = {}
        for k, v in facts:
            expect[k] = expect.get(k, 0) + v
        epochs.append((str(path), ups, {(k, n): 1 for k, n in expect.items()}))

    def build(df: Dataflow):  # noqa: ANN202 - test helper
        h, c = df.new_input("facts")
        return h, c.reduce(lambda k, vals: [(sum(v * n for v, n in vals), 1)]).capture()

    (h1, c1), (h2, c2) = build(d1 := Dataflow()), build(d2 := Dataflow())
    for e, (path, ups, expected) in enumerate(epochs):
        h1.load(FileSource((path,), columns=("k", "v"), diff_column="diff"))
        h2.send(ups)
        for h in (h1, h2):
            h.advance_to(e + 1)
        d1.run()
        d2.run()
        assert c1.current() == c2.current() == expected


def testcolumn_values_equal_arrow_to_pylist() -> None:
    """`column_values` (NumPy for dates and timestamps, Arrow's NaN scan for floats) gives
    what Arrow's own `to_pylist` gives, canonicalised: same values, same types, NULLs."""
    import math
    import random

    import pyarrow as pa

    from engine.canonical import NAN, canonical_column
    from engine.sources import column_values

    rng = random.Random(5)
    days = [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 2, 29)]
    stamps = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
              dt.datetime(2024, 2, 29, 12, 30, 1, 5)]
    columns = [
        pa.array([rng.choice(days + [None]) for _ in range(300)], pa.date32()),
        pa.array([rng.choice(days) for _ in range(300)], pa.date32()),
        pa.array([rng.choice(stamps + [None]) for _ in range(300)], pa.timestamp("us")),
        pa.array([rng.choice([1.5, -0.0, math.inf, None, math.nan]) for _ in range(300)]),
        pa.array([rng.choice([1.5, 2.0, None]) for _ in range(300)]),
        pa.array([None] * 5, pa.float64()),
        pa.array([rng.choice([1, None, -(2**63)]) for _ in range(300)], pa.int64()),
        pa.array([rng.choice(["a", "", None]) for _ in range(300)]),
        pa.chunked_array([pa.array(days, pa.date32()), pa.array([None], pa.date32())]),
    ]
    for col in columns:
        got, want = column_values(col), canonical_column(col.to_pylist())
        assert [type(v) for v in got] == [type(v) for v in want], col.type
        assert [("nan" if v is NAN else v) for v in got] == [
            ("nan" if v is NAN else v) for v in want], col.type
