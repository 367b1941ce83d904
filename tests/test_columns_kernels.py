"""The vectorised kernels against their per-row references, on seeded random tables.

- planner.mfp_columns: `columns_mfp(m)(table)` gives exactly the rows `lower.compile_mfp(m)`
  gives row by row (values, classes, order), or None; None only where the subset must leave
  the table to the rows (an error the reference raises, or a value it cannot decide), and
  the vectorised answer is taken on most tables.
- planner.aggregate_columns: every group's state built from columns equals the state the
  per-row path builds from the group's rows (counts, values, index, sums) and has the same
  output.
- A dataflow fed a table as columns (`send_columns`) equals one fed the same rows.
"""

from __future__ import annotations

import datetime
import decimal
import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engine.rows_at import rows_by_key_reference
from engine.sources import rows_of
from planner.aggregate import IncrementalAggregates
from planner.aggregate_columns import SORTED_CHECK, _stable_order, build_groups, build_states
from planner.errors import EvaluationError
from planner.ir import Agg, Call, Col, Get, Lit, Mfp
from planner.lower import compile_mfp
from planner.mfp_columns import columns_mfp

TYPES = {0: ("BIGINT", pa.int64()), 1: ("INTEGER", pa.int32()), 2: ("DOUBLE", pa.float64()),
         3: ("BOOLEAN", pa.bool_()), 4: ("VARCHAR", pa.string()), 5: ("SMALLINT", pa.int16()),
         6: ("DATE", pa.date32()), 7: ("TIMESTAMP", pa.timestamp("us"))}
DATES = [datetime.date(1, 1, 1), datetime.date(2024, 2, 29), datetime.date(9999, 12, 31),
         datetime.date(2024, 3, 1)]
STAMPS = [datetime.datetime(2024, 2, 29), datetime.datetime(2024, 2, 29, 0, 0, 0, 1),
          datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)]
STRS = ["a", "b", "", "éé", "é", "\U0001f600", "ab"]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e300, -1e300, math.inf, -math.inf, 3.0]
BIG = [2 ** 62, -(2 ** 62), 2 ** 63 - 1, -(2 ** 63)]


def _value(rng: random.Random, col: int) -> Any:
    if rng.random() < 0.2:
        return None
    if col == 0:
        return rng.choice(BIG) if rng.random() < 0.05 else rng.randint(-9, 9)
    if col == 1:
        return rng.choice([2 ** 31 - 1, -(2 ** 31)]) if rng.random() < 0.05 else rng.randint(-9, 9)
    if col == 2:
        return math.nan if rng.random() < 0.03 else rng.choice(FLOATS)
    if col == 3:
        return rng.random() < 0.5
    if col == 4:
        return rng.choice(STRS)
    if col == 6:
        return rng.choice(DATES)
    if col == 7:
        return rng.choice(STAMPS)
    return rng.randint(-5, 5)


def _table(rng: random.Random, n: int) -> pa.Table:
    cols = [[_value(rng, c) for _ in range(n)] for c in TYPES]
    return pa.table([pa.array(v, type=TYPES[c][1]) for c, v in enumerate(cols)],
                    names=[f"c{c}" for c in TYPES])


INTS = [0, 1, 5]  # columns of integer types


def _int_expr(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.3:
        return Col(rng.choice(INTS)) if rng.random() < 0.7 else Lit(rng.randint(-3, 7), "INTEGER")
    if rng.random() < 0.2:
        return _choice(rng, depth, _int_expr, "BIGINT")
    f = rng.choice(["add", "sub", "mul", "mod"])
    return Call(f, (_int_expr(rng, depth - 1), _int_expr(rng, depth - 1)),
                rng.choice(["BIGINT", "INTEGER"]))


def _choice(rng: random.Random, depth: int, result: Any, type_: str) -> Any:
    """A CASE (searched, with or without ELSE) or a COALESCE of `result` expressions, some
    of them NULL literals (cast, as the binder types them)."""
    def arg() -> Any:
        if rng.random() < 0.2:
            return Lit(None, "NULL") if rng.random() < 0.5 else \
                Call("cast", (Lit(None, "NULL"),), type_)
        return result(rng, depth - 1)

    if rng.random() < 0.3:
        return Call("coalesce", tuple(arg() for _ in range(rng.randint(1, 3))), type_)
    args: list[Any] = []
    for _ in range(rng.randint(1, 2)):
        args += [_predicate(rng, depth - 1), arg()]
    args.append(arg())
    return Call("case", tuple(args), type_)


def _float_expr(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.3:
        r = rng.random()
        if r < 0.5:
            return Col(2)
        if r < 0.8:
            return Call("cast", (_int_expr(rng, 1),), "DOUBLE")
        return Lit(rng.choice([0.5, -1.0, 2.0]), "DOUBLE")
    if rng.random() < 0.2:
        return _choice(rng, depth, _float_expr, "DOUBLE")
    f = rng.choice(["add", "sub", "mul"])
    return Call(f, (_float_expr(rng, depth - 1), _float_expr(rng, depth - 1)), "DOUBLE")


def _predicate(rng: random.Random, depth: int) -> Any:
    r = rng.random()
    if depth > 0 and r < 0.25:
        f = rng.choice(["and", "or"])
        return Call(f, (_predicate(rng, depth - 1), _predicate(rng, depth - 1)), "BOOLEAN")
    if depth > 0 and r < 0.35:
        return Call("not", (_predicate(rng, depth - 1),), "BOOLEAN")
    if r < 0.45:
        return Call("is_null", (Col(rng.randrange(len(TYPES))),), "BOOLEAN")
    if r < 0.5:
        return Col(3)
    op = rng.choice(["eq", "ne", "lt", "le", "gt", "ge"])
    r = rng.random()
    if r < 0.4:
        return Call(op, (_int_expr(rng, 1), _int_expr(rng, 1)), "BOOLEAN")
    if r < 0.55:
        return Call(op, (_float_expr(rng, 1), _float_expr(rng, 1)), "BOOLEAN")
    if r < 0.6:  # an int with a float: Python's exact comparison (exact as doubles below 2**53)
        return Call(op, rng.choice([(Col(0), Col(2)), (Col(2), Col(1)),
                                    (Col(2), Lit(rng.choice([3, -2, 2 ** 60]), "INTEGER")),
                                    (Lit(rng.choice([0, 2 ** 53 + 1]), "BIGINT"), Col(2))]),
                    "BOOLEAN")
    if r < 0.62:  # a CASE that is a condition
        return _choice(rng, depth, lambda g, d: _predicate(g, max(d, 0)), "BOOLEAN")
    if r < 0.7:
        return Call(op, (Col(4), rng.choice([Col(4), Lit(rng.choice(STRS), "VARCHAR")])),
                    "BOOLEAN")
    if r < 0.8:
        return Call(op, (Col(6), rng.choice([Col(6), Lit(rng.choice(DATES), "DATE")])), "BOOLEAN")
    stamp = Call("cast", (Col(6),), "TIMESTAMP")
    return Call(op, (stamp, rng.choice([Col(7), Lit(rng.choice(STAMPS), "TIMESTAMP")])),
                "BOOLEAN")


def _random_mfp(rng: random.Random) -> Mfp:
    n = len(TYPES)
    maps = tuple(_int_expr(rng, 2) if rng.random() < 0.5 else _float_expr(rng, 2)
                 for _ in range(rng.randint(0, 2)))
    filters = tuple(_predicate(rng, 2) for _ in range(rng.randint(0, 2)))
    width = n + len(maps)
    project = tuple(rng.randrange(width) for _ in range(rng.randint(1, 4)))
    return Mfp(Get("t", n), maps, filters, project)


def _reference(m: Mfp, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
    f = compile_mfp(m)
    try:
        return [out for row in rows for out in f(row)]
    except EvaluationError:
        return None


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return len(a) == len(b) and all(
        repr(x) == repr(y) and [v.__class__ for v in x] == [v.__class__ for v in y]
        for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_columns_mfp_equals_the_row_kernel(seed: int) -> None:
    rng = random.Random(seed)
    taken = tried = 0
    for _ in range(60):
        m = _random_mfp(rng)
        kernel = columns_mfp(m)
        assert kernel is not None, m  # every expression generated here is in the subset
        table = _table(rng, rng.choice([1, 7, 40]))
        rows = list(rows_of(table, table.num_columns))
        want = _reference(m, rows)
        got = kernel(table)
        tried += 1
        if got is None:
            continue  # the rows decide (the reference ran above, raising or not)
        taken += 1
        assert want is not None, ("vectorised past an error", m)
        have = list(rows_of(got, got.num_columns))
        assert _same(have, want), (m, have, want)
    assert taken >= tried // 2, (taken, tried)


DEC_TYPES = {0: ("DECIMAL(15,2)", pa.decimal128(15, 2)), 1: ("DECIMAL(6,3)", pa.decimal128(6, 3)),
             2: ("INTEGER", pa.int32()), 3: ("BIGINT", pa.int64()),
             4: ("DECIMAL(18,2)", pa.decimal128(18, 2)), 5: ("DECIMAL(38,2)", pa.decimal128(38, 2))}


def _dec_value(rng: random.Random, col: int) -> Any:
    if rng.random() < 0.2:
        return None
    if col == 3 and rng.random() < 0.2:  # int64's ends (NumPy's abs of -2**63 is negative)
        return rng.choice([-(2 ** 63), 2 ** 63 - 1, 10 ** 18, -(10 ** 18) + 1])
    if col in (2, 3):
        return rng.randint(-9, 9)
    scale = 3 if col == 1 else 2
    if col == 4 and rng.random() < 0.3:  # past what a product or a sum keeps in 18 digits
        return decimal.Decimal(rng.choice([1, -1]) * 999_999_999_999_999_9).scaleb(-scale)
    if col == 5 and rng.random() < 0.5:  # within int64 unscaled, but two of them are not
        return decimal.Decimal(rng.choice([1, -1]) * 9 * 10 ** 18).scaleb(-scale)
    return decimal.Decimal(rng.randint(-2000, 2000)).scaleb(-scale)


def _dec_expr(rng: random.Random, depth: int) -> tuple[Any, str]:
    """A DECIMAL expression (or an int one) and its type as the binder gives it."""
    from planner.scalar import decimal_result

    if depth == 0 or rng.random() < 0.3:
        r = rng.random()
        if r < 0.6:
            c = rng.choice(list(DEC_TYPES))
            return Col(c), DEC_TYPES[c][0]
        if r < 0.8:
            v = rng.choice(["1.5", "0.05", "2", "-0.25", "100.000", "0", "0.000000000000000001"])
            d = decimal.Decimal(v)
            return Lit(d, f"DECIMAL({max(len(d.as_tuple().digits), -d.as_tuple().exponent, 1)},"
                          f"{-d.as_tuple().exponent})"), ""
        return Lit(rng.randint(-3, 7), "INTEGER"), "INTEGER"
    (a, ta), (b, tb) = _dec_expr(rng, depth - 1), _dec_expr(rng, depth - 1)
    ta, tb = ta or a.type, tb or b.type
    f = rng.choice(["add", "sub", "mul"])
    if ta.startswith("DECIMAL") or tb.startswith("DECIMAL"):
        t = decimal_result(f, ta, tb)
    else:
        t = "BIGINT"
    return Call(f, (a, b), t), t


def _random_dec_mfp(rng: random.Random) -> Mfp:
    n = len(DEC_TYPES)
    maps = tuple(_dec_expr(rng, 2)[0] for _ in range(rng.randint(1, 2)))
    filters = tuple(Call(rng.choice(["eq", "ne", "lt", "le", "gt", "ge"]),
                         (_dec_expr(rng, 1)[0], _dec_expr(rng, 1)[0]), "BOOLEAN")
                    for _ in range(rng.randint(0, 1)))
    width = n + len(maps)
    project = tuple(rng.randrange(width) for _ in range(rng.randint(1, 4)))
    return Mfp(Get("t", n), maps, filters, project)


@pytest.mark.parametrize("seed", range(6))
def test_columns_mfp_decimals_equal_the_row_kernel(seed: int) -> None:
    """DECIMAL +, -, * (with ints and literals) and comparisons over columns give exactly the
    per-row Decimals (digits, exponent, no -0), or leave the table to the rows: a result of 18
    digits or more (the wide columns' values, int64's ends) is never computed over columns;
    tables of no rows too."""
    rng = random.Random(100 + seed)
    taken = tried = 0
    for _ in range(60):
        m = _random_dec_mfp(rng)
        kernel = columns_mfp(m)
        assert kernel is not None, m
        n = rng.choice([0, 1, 7, 40])
        table = pa.table([pa.array([_dec_value(rng, c) for _ in range(n)], type=t)
                          for c, (_, t) in DEC_TYPES.items()], names=[f"c{c}" for c in DEC_TYPES])
        rows = list(rows_of(table, table.num_columns))
        want = _reference(m, rows)
        got = kernel(table)
        tried += 1
        if got is None:
            continue
        taken += 1
        assert want is not None, ("vectorised past an error", m)
        have = list(rows_of(got, got.num_columns))
        assert _same(have, want), (m, have, want)
    assert taken >= tried // 3, (taken, tried)


def test_rows_of_a_table_of_no_columns() -> None:
    """A table's first 0 columns are one empty row per row (not none: `zip` of no columns
    stops at once), as a table selected down to no columns keeps its row count."""
    table = pa.table({"a": [1, 2, 3], "b": ["x", None, "z"]})
    assert list(rows_of(table.select([]), 0)) == [(), (), ()]
    assert list(rows_of(table, 0)) == [(), (), ()]
    assert list(rows_of(table, 1)) == [(1,), (2,), (3,)]


def test_columns_mfp_decimals_at_int64s_ends() -> None:
    """Operands whose unscaled values fit int64 but whose sum or rescaling would not (two
    DECIMAL(38,2) of 9e16, a BIGINT of -2**63 beside 0.00, whose NumPy abs is negative):
    the rows decide, so the answers are the per-row Decimals and the comparison keeps what
    Python's does; a table of no rows, and a literal of more digits than int64 holds."""
    big = decimal.Decimal(9 * 10 ** 18).scaleb(-2)
    table = pa.table([pa.array([big, decimal.Decimal("1.00")], pa.decimal128(38, 2)),
                      pa.array([-(2 ** 63), 5], pa.int64())], names=["d", "i"])
    zero = Lit(decimal.Decimal("0.00"), "DECIMAL(2,2)")
    long = Lit(decimal.Decimal("0.1234567890123456789012"), "DECIMAL(22,22)")
    rows = list(rows_of(table, 2))
    for maps, filters in (((Call("add", (Col(0), Col(0)), "DECIMAL(38,2)"),), ()),
                          ((Call("sub", (Col(0), Call("neg", (Col(0),), "DECIMAL(38,2)")),
                                 "DECIMAL(38,2)"),), ()),
                          ((Call("add", (Col(1), zero), "DECIMAL(22,2)"),), ()),
                          ((), (Call("ge", (Col(1), zero), "BOOLEAN"),)),
                          ((Call("mul", (Col(1), zero), "DECIMAL(18,2)"),), ()),
                          ((Call("add", (Col(0), long), "DECIMAL(38,22)"),), ())):
        m = Mfp(Get("t", 2), maps, filters, tuple(range(2 + len(maps))))
        want = _reference(m, rows)
        kernel = columns_mfp(m)
        for t in (table, table.slice(0, 0)):
            got = kernel(t) if kernel is not None else None
            if got is not None:
                assert _same(list(rows_of(got, got.num_columns)),
                             _reference(m, list(rows_of(t, 2))) or []), m
        # (9e16 + the long literal has 17 integer digits, past DECIMAL(38,22)'s 16: the rows
        # raise DuckDB's overflow, so the kernel must have declined it above)
        assert (want is None) == (maps[:1] == (Call("add", (Col(0), long), "DECIMAL(38,22)"),))


def test_columns_mfp_leaves_errors_to_the_rows() -> None:
    """A zero divisor and an INTEGER overflow: the rows raise, the columns decline."""
    table = pa.table([pa.array([4, 0], pa.int64()), pa.array([2 ** 31 - 1, 1], pa.int32())],
                     names=["a", "b"])
    get = Get("t", 2)
    mod = Mfp(get, (Call("mod", (Col(1), Col(0)), "BIGINT"),), (), (2,))
    over = Mfp(get, (Call("add", (Col(1), Lit(1, "INTEGER")), "INTEGER"),), (), (2,))
    for m in (mod, over):
        rows = list(rows_of(table, 2))
        assert _reference(m, rows) is None
        assert columns_mfp(m)(table) is None  # type: ignore[misc]


def test_truncating_remainder_and_nan_comparisons() -> None:
    table = pa.table([pa.array([-7, 7, -7, None, 7], pa.int64()),
                      pa.array([2, -2, -2, 3, None], pa.int64()),
                      pa.array([math.nan, 1.0, -0.0, 0.0, None], pa.float64())],
                     names=["a", "b", "c"])
    get = Get("t", 3)
    mod = Mfp(get, (Call("mod", (Col(0), Col(1)), "BIGINT"),), (), (3,))
    rows = list(rows_of(table, 3))
    got = columns_mfp(mod)(table)  # type: ignore[misc]
    assert got is not None and list(rows_of(got, 1)) == _reference(mod, rows) == [
        (-1,), (1,), (-1,), (None,), (None,)]
    eq = Mfp(get, (), (Call("eq", (Col(2), Lit(0.0, "DOUBLE")), "BOOLEAN"),), (2,))
    assert columns_mfp(eq)(table) is None  # type: ignore[misc]  # a NaN: the rows decide
    no_nan = table.slice(1)
    got = columns_mfp(eq)(no_nan)  # type: ignore[misc]
    assert got is not None and _same(list(rows_of(got, 1)),
                                     _reference(eq, list(rows_of(no_nan, 3))))  # type: ignore[arg-type]


def test_ints_compared_with_floats_exactly() -> None:
    """An int beside a float compares exactly (Python's rule): as doubles where the int is
    one exactly, else the rows decide. 2**53 + 1 is no double: as one it would equal 2**53."""
    table = pa.table([pa.array([2.0 ** 53, 1.5, -3.0, None], pa.float64()),
                      pa.array([2 ** 53, 1, -3, 5], pa.int64()),
                      pa.array([2 ** 53 + 1, 1, -3, 5], pa.int64())], names=["f", "i", "j"])
    get = Get("t", 3)
    rows = list(rows_of(table, 3))
    for op in ("eq", "lt", "ge"):
        for other, decided in ((Lit(2 ** 53, "BIGINT"), True), (Col(1), True),
                               (Lit(2 ** 53 + 1, "BIGINT"), False), (Col(2), False)):
            m = Mfp(get, (Call(op, (Col(0), other), "BOOLEAN"),), (), (3,))
            got = columns_mfp(m)(table)  # type: ignore[misc]
            assert (got is not None) == decided, (op, other)
            if got is not None:
                assert _same(list(rows_of(got, 1)), _reference(m, rows))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(3))
def test_calendar_functions_over_columns_equal_the_rows(seed: int) -> None:
    """extract of every part and date_trunc of every part, of DATE and TIMESTAMP columns
    (days before 1970, year 1, year 9999, leap days, ISO weeks across a new year, NULLs), equal
    the rows' (`planner.scalar._extract`, `_date_trunc`) value for value and type for type."""
    from planner.mfp_columns import _EXTRACT, _TRUNC

    rng = random.Random(80 + seed)
    days = [datetime.date(1, 1, 1), datetime.date(9999, 12, 31), datetime.date(1969, 12, 31),
            datetime.date(2024, 2, 29), datetime.date(2020, 12, 31), datetime.date(2021, 1, 3),
            datetime.date(2027, 1, 1), datetime.date(1900, 3, 1)]
    dates = [None if rng.random() < 0.1 else rng.choice(days) if rng.random() < 0.3 else
             datetime.date(1, 1, 1) + datetime.timedelta(days=rng.randrange(3_652_058))
             for _ in range(400)]
    stamps = [None if d is None else datetime.datetime(d.year, d.month, d.day) +
              datetime.timedelta(microseconds=rng.randrange(86_400_000_000)) for d in dates]
    near = [None if rng.random() < 0.1 else datetime.datetime(1970, 1, 1) +
            datetime.timedelta(microseconds=rng.randint(-2 ** 52, 2 ** 52)) for _ in range(400)]
    table = pa.table([pa.array(dates, pa.date32()), pa.array(stamps, pa.timestamp("us")),
                      pa.array(near, pa.timestamp("us"))], names=["d", "t", "n"])
    rows = list(rows_of(table, 3))
    get = Get("t", 3)
    declined = set()
    for f, parts, typ in (("extract", _EXTRACT, "BIGINT"), ("date_trunc", _TRUNC, "TIMESTAMP")):
        for part in sorted(parts):
            for col in (0, 1, 2):
                m = Mfp(get, (Call(f, (Lit(part, "VARCHAR"), Col(col)), typ),), (), (3,))
                kernel = columns_mfp(m)
                assert kernel is not None, (f, part)
                got = kernel(table)
                if got is None:
                    declined.add((f, part, col))
                    continue
                want = _reference(m, rows)
                assert want is not None
                assert _same(list(rows_of(got, 1)), want), (f, part, col)
    assert not declined
    assert columns_mfp(Mfp(get, (Call("extract", (Lit("millisecond", "VARCHAR"), Col(0)),
                                      "BIGINT"),), (), (3,))) is None


def test_like_and_case_mappings_over_columns_equal_the_rows() -> None:
    """LIKE with `%`, `_`, RE2's syntax characters, a newline and characters past ASCII, of
    strings and NULLs, equals the rows' match; LOWER and UPPER too ('ß' upper-cased is 'ẞ' in
    both, a word-final Σ lowers to σ in both), and a column holding a character Arrow maps
    otherwise than the rows (`planner.case_mapping`, DuckDB's: Arrow's newer Unicode tables
    upper-case 'ƛ') is left to the rows."""
    values = ["", "a", "abc", "a.c", "a+c", "a\nc", "é", "éa", "x%y", "x_y", "(a)", "[a]",
              "a\\b", "ß", "$^", "ab{2}", "a|b", "ABC", "mixed Case 9", None]
    table = pa.table([pa.array(values, pa.string())], names=["s"])
    rows = list(rows_of(table, 1))
    get = Get("t", 1)
    patterns = ["%", "_", "a%", "%c", "a_c", "a.c", "a+c", "a_%", "%_%", "x%y", "x_y", "(a)",
                "[a]", "a\\b", "$^", "ab{2}", "a|b", "é%", "_a", "", "%a%", "a\nc", "ß"]
    for p in patterns:
        m = Mfp(get, (), (Call("like", (Col(0), Lit(p, "VARCHAR")), "BOOLEAN"),), (0,))
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None
        assert _same(list(rows_of(got, 1)), _reference(m, rows)), p  # type: ignore[arg-type]
    for f in ("lower", "upper"):
        m = Mfp(get, (Call(f, (Col(0),), "VARCHAR"),), (), (1,))
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None
        assert _same(list(rows_of(got, 1)), _reference(m, rows))  # type: ignore[arg-type]
        newer = pa.table([pa.array(["xƛ", "é"])], names=["s"])
        assert (columns_mfp(m)(newer) is None) == (f == "upper")  # type: ignore[misc]
        sigma = pa.table([pa.array(["ΟΔΟΣ", "é"])], names=["s"])
        got = columns_mfp(m)(sigma)  # type: ignore[misc]
        assert got is not None
        assert _same(list(rows_of(got, 1)),
                     _reference(m, list(rows_of(sigma, 1))))  # type: ignore[arg-type]
        ascii_table = pa.table([pa.array(["", "aBc", "X Y-z", None, "mixed Case 9"])],
                               names=["s"])
        got = columns_mfp(m)(ascii_table)  # type: ignore[misc]
        assert got is not None
        assert _same(list(rows_of(got, 1)),
                     _reference(m, list(rows_of(ascii_table, 1))))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(3))
def test_case_mappings_of_unicode_strings_over_columns_equal_the_rows(seed: int) -> None:
    """LOWER and UPPER of strings past ASCII (accents, Cyrillic, Greek, Deseret, titlecase
    letters such as 'ǅ') by Arrow's mapping equal the rows wherever the column holds no
    character Arrow maps otherwise than the rows (DuckDB's mapping, `planner.case_mapping`);
    a column holding one (Arrow's newer tables: 'ƛ' for UPPER, U+A7CB for LOWER) goes to the
    rows, and 'ß', 'İ', 'ŉ' and Σ, which Python alone maps otherwise, are decided by Arrow."""
    rng = random.Random(seed)
    letters = "aZéÉüÜñÑçÇøØåÅжЖяЯλΛωΩσ ǅǈǋ\U00010400\U00010428xyz-09 "
    values = [None if rng.random() < 0.1 else "".join(rng.choices(letters, k=rng.randrange(8)))
              for _ in range(60)]
    table = pa.table([pa.array(values, pa.string())], names=["s"])
    rows = list(rows_of(table, 1))
    for f in ("lower", "upper"):
        m = Mfp(Get("t", 1), (Call(f, (Col(0),), "VARCHAR"),), (), (1,))
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None, f
        assert _same(list(rows_of(got, 1)), _reference(m, rows)), f  # type: ignore[arg-type]
        for odd in ("ß", "İ", "ŉ", "Σ", "ƛ", "\ua7cb"):
            tab = table.set_column(0, "s", pa.array(["x" + odd + "y"] + values[1:], pa.string()))
            decided = columns_mfp(m)(tab)  # type: ignore[misc]
            want = _reference(m, list(rows_of(tab, 1)))
            if decided is not None:  # only where Arrow's mapping of it is the rows'
                assert _same(list(rows_of(decided, 1)), want), (f, odd)  # type: ignore[arg-type]
            assert (decided is None) == ((f, odd) in (("upper", "ƛ"), ("lower", "\ua7cb"))), \
                (f, odd)


def test_case_mappings_unlike_python_are_found_below_the_cased_end() -> None:
    """Every character whose Arrow case mapping differs from the rows'
    (`planner.case_mapping`) lies below `_CASED_END`, so the check scans only that range."""
    import planner.mfp_columns as mc
    from planner.case_mapping import sql_lower, sql_upper

    chars = [chr(c) for c in range(mc._CASED_END, 0x110000)]
    for f, rows in (("lower", sql_lower), ("upper", sql_upper)):
        arrow = getattr(pa.compute, "utf8_" + f)(pa.array(chars)).to_pylist()
        assert all(rows(c) == a for c, a in zip(chars, arrow, strict=True)), f


def test_division_casts_abs_and_joins_over_columns_equal_the_rows() -> None:
    """`/` (IEEE, zero divisors included), CAST to integer types (floats half to even), of a
    TIMESTAMP to DATE, of an int to VARCHAR, ABS, `||` and CONCAT over columns equal the
    rows', value for value and type for type; where the rows raise (a NaN or an out-of-range
    value cast, the ABS of an INTEGER's minimum) or an int is no double, the columns decline."""
    ints = [0, 7, -7, None, 3, 2 ** 40, -1]
    small = [2, 0, -3, 5, None, -(2 ** 31) + 1, -2]
    floats = [0.5, -0.0, 2.5, -2.5, 1.5, None, 1e15 + 0.5]
    strs = ["a", None, "", "é", "x y", "b", "c"]
    stamps = [datetime.datetime(1969, 12, 31, 23, 59), datetime.datetime(1, 1, 1),
              datetime.datetime(2024, 2, 29, 12), None, datetime.datetime(1970, 1, 1),
              datetime.datetime(9999, 12, 31, 23, 59, 59, 999999), datetime.datetime(1969, 1, 1)]
    table = pa.table([pa.array(ints, pa.int64()), pa.array(small, pa.int32()),
                      pa.array(floats, pa.float64()), pa.array(strs, pa.string()),
                      pa.array(stamps, pa.timestamp("us"))], names=list("ijfst"))
    get = Get("t", 5)
    rows = list(rows_of(table, 5))
    i, j, f, s, t = (Col(c) for c in range(5))
    decided = [
        Call("div", (i, j), "DOUBLE"), Call("div", (f, i), "DOUBLE"),
        Call("div", (i, Lit(0, "INTEGER")), "DOUBLE"), Call("div", (Lit(1.0, "DOUBLE"), f), "DOUBLE"),
        Call("div", (f, f), "DOUBLE"), Call("cast", (f,), "BIGINT"),
        Call("cast", (j,), "INTEGER"),
        Call("cast", (j,), "SMALLINT"), Call("cast", (i,), "VARCHAR"),
        Call("cast", (t,), "DATE"), Call("cast", (s,), "VARCHAR"), Call("abs", (i,), "BIGINT"),
        Call("abs", (f,), "DOUBLE"), Call("dpipe", (s, Lit("!", "VARCHAR")), "VARCHAR"),
        Call("dpipe", (s, s), "VARCHAR"), Call("concat", (s, Lit("-", "VARCHAR"), s), "VARCHAR"),
        Call("concat", (s,), "VARCHAR")]
    for e in decided:
        m = Mfp(get, (e,), (), (5,))
        kernel = columns_mfp(m)
        assert kernel is not None, e
        want = _reference(m, rows[:5] if e.args[0] == j and e.type == "SMALLINT" else rows)
        got = kernel(table.slice(0, 5) if e.args[0] == j and e.type == "SMALLINT" else table)
        assert got is not None, e
        assert want is not None and _same(list(rows_of(got, 1)), want), (e, want)
    # the rows raise (or an int is no double): the columns decline
    nan = table.set_column(2, "f", pa.array([0.5, math.nan] + floats[2:], pa.float64()))
    wide = table.set_column(0, "i", pa.array(ints[:-1] + [2 ** 53 + 1], pa.int64()))
    for e, tab, raises in (
            (Call("cast", (f,), "BIGINT"), nan, True),  # NaN to an int
            (Call("cast", (f,), "SMALLINT"), table, True),  # 1e15 + 0.5 past SMALLINT
            (Call("cast", (j,), "SMALLINT"), table, True),  # -2**31 + 1 past SMALLINT
            (Call("abs", (Call("sub", (j, Lit(1, "INTEGER")), "INTEGER"),), "INTEGER"), table,
             True),  # abs(-2**31) past INTEGER
            (Call("div", (i, f), "DOUBLE"), wide, False)):  # 2**53 + 1 is no double
        m = Mfp(get, (e,), (), (5,))
        assert columns_mfp(m)(tab) is None, e  # type: ignore[misc]
        assert (_reference(m, list(rows_of(tab, 5))) is None) == raises, e


@pytest.mark.parametrize("seed", range(2))
def test_round_over_columns_equals_the_rows(seed: int) -> None:
    """ROUND(x, n) of doubles over columns equals `round_double` (halves away from zero
    decided on the exact product: round(1.005, 2) is 1.0, round(-483.445, 2) -483.44, a
    negative value rounding to zero -0.0, NaN and infinities themselves, products past 2**52
    already integral) and of ints (themselves), for n from 0 to 15."""
    rng = random.Random(100 + seed)
    special = [2.5, -2.5, 0.5, -0.5, 1.5, 1.005, -483.445, 0.125, 1.25, -0.3, 4.4999999999999,
               1e16 + 2, -1e300, 5e-324, 0.0, -0.0, math.nan, math.inf, -math.inf, 2.675]
    floats = [None if rng.random() < 0.05 else rng.choice(special) if rng.random() < 0.4 else
              round(rng.uniform(-1000, 1000), rng.randint(0, 6)) for _ in range(500)]
    table = pa.table([pa.array(floats, pa.float64()),
                      pa.array([rng.randint(-99, 99) for _ in floats], pa.int64())],
                     names=["f", "i"])
    rows = list(rows_of(table, 2))
    get = Get("t", 2)
    for n in (None, 0, 1, 2, 3, 4, 15):
        for col, typ in ((0, "DOUBLE"), (1, "BIGINT")):
            args = (Col(col),) if n is None else (Col(col), Lit(n, "INTEGER"))
            m = Mfp(get, (Call("round", args, typ),), (), (2,))
            kernel = columns_mfp(m)
            assert kernel is not None
            got = kernel(table)
            assert got is not None
            assert _same(list(rows_of(got, 1)), _reference(m, rows)), (n, col)  # type: ignore[arg-type]
    assert columns_mfp(Mfp(get, (Call("round", (Col(0), Lit(16, "INTEGER")), "DOUBLE"),),
                           (), (2,))) is None


def test_substrings_past_int64_and_inputs_of_no_columns() -> None:
    """SUBSTR bounds past any string, up to DuckDB's largest (2**32 - 1: a length from a start
    past 1 once overflowed Arrow's int64 bounds) equal the rows; past it the rows raise
    DuckDB's error and the columns decline; an input of no columns declines."""
    table = pa.table({"s": ["hello", "", None, "héllo wörld"]})
    rows = list(rows_of(table, 1))
    big = 2 ** 32 - 1
    for bounds in ((2, big), (big,), (big, big), (1, big), (3, 2 ** 31)):
        e = Call("substr", (Col(0), *(Lit(b, "BIGINT") for b in bounds)), "VARCHAR")
        m = Mfp(Get("t", 1), (e,), (), (1,))
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None and _same(list(rows_of(got, 1)), _reference(m, rows)), bounds  # type: ignore[arg-type]
    for bounds in ((2, 2 ** 63 - 1), (2 ** 32,)):
        e = Call("substr", (Col(0), *(Lit(b, "BIGINT") for b in bounds)), "VARCHAR")
        assert columns_mfp(Mfp(Get("t", 1), (e,), (), (1,))) is None, bounds
    assert columns_mfp(Mfp(Get("t", 0), (Lit(1, "INTEGER"),), (), (0,))) is None


def test_literal_divisors_stay_scalars(monkeypatch: pytest.MonkeyPatch) -> None:
    """`%` and `//` with a literal operand broadcast it (no column of copies of the literal),
    equal the rows, decline where the rows raise or C's remainder is undefined (the least
    BIGINT by -1), and a NULL dividend over a zero divisor is NULL, not a decline."""
    import planner.mfp_columns as mc

    def no_column(e: Any, length: int) -> Any:
        raise AssertionError(f"a column of the literal {e}")

    monkeypatch.setattr(mc, "_literal", no_column)
    table = pa.table([pa.array([-7, 7, None, 0, 9], pa.int32()), pa.array([2, -3, 0, 5, None], pa.int64()),
                      pa.array([7.5, -7.5, None, 0.0, 1.0], pa.float64()),
                      pa.array([2, -3, None, 4, 1], pa.int32())], names=["a", "b", "f", "d"])
    rows = list(rows_of(table, 4))
    get = Get("t", 4)
    for f, t in (("mod", "INTEGER"), ("intdiv", "BIGINT")):
        for lit in (3, -3, 1, -1):
            for args in ((Col(0), Lit(lit, "INTEGER")), (Lit(lit * 5, "INTEGER"), Col(3))):
                m = Mfp(get, (Call(f, args, t),), (), (4,))
                got, want = columns_mfp(m)(table), _reference(m, rows)  # type: ignore[misc]
                assert want is not None and got is not None, m
                assert _same(list(rows_of(got, 1)), want), (m, want)
    fmod = Mfp(get, (Call("mod", (Col(2), Lit(2.0, "DOUBLE")), "DOUBLE"),), (), (4,))
    got = columns_mfp(fmod)(table)  # type: ignore[misc]
    assert got is not None and _same(list(rows_of(got, 1)), _reference(fmod, rows))  # type: ignore[arg-type]
    # a zero literal divisor, and the least BIGINT % -1: the rows decide
    least = pa.table([pa.array([-(2 ** 63), 4], pa.int64())], names=["a"])
    for e, tab in ((Call("mod", (Col(0), Lit(0, "INTEGER")), "INTEGER"), table),
                   (Call("mod", (Col(0), Lit(-1, "INTEGER")), "BIGINT"), least)):
        assert columns_mfp(Mfp(Get("t", tab.num_columns), (e,), (), (tab.num_columns,)))(tab) is None  # type: ignore[misc]
    # // by the least BIGINT (whose absolute value NumPy cannot take), literal or column:
    # the rows' answer, 0 (-7 // -2**63 truncates to 0), or the rows decide
    small = pa.table([pa.array([7, -7], pa.int64()), pa.array([-(2 ** 63)] * 2, pa.int64())],
                     names=["a", "b"])
    for divisor in (Lit(-(2 ** 63), "BIGINT"), Col(1)):
        m = Mfp(Get("t", 2), (Call("intdiv", (Col(0), divisor), "BIGINT"),), (), (2,))
        got = columns_mfp(m)(small)  # type: ignore[misc]
        assert _reference(m, list(rows_of(small, 2))) == [(0,), (0,)]
        assert got is None or list(rows_of(got, 1)) == [(0,), (0,)]
    # NULL % 0 is NULL (the zero divisor sits under a NULL dividend)
    nulls = pa.table([pa.array([None, 5], pa.int64()), pa.array([0, 2], pa.int64())], names=["a", "b"])
    m = Mfp(Get("t", 2), (Call("mod", (Col(0), Col(1)), "BIGINT"),), (), (2,))
    got = columns_mfp(m)(nulls)  # type: ignore[misc]
    assert got is not None and list(rows_of(got, 1)) == _reference(m, list(rows_of(nulls, 2))) == [(None,), (1,)]


def test_signs_floors_int_division_and_string_calls_over_columns_equal_the_rows() -> None:
    """-x, FLOOR, CEIL (no negative zero: Python's float(math.floor(x))), `//` of ints
    (towards zero), LENGTH in code points, STARTS_WITH, ENDS_WITH, CONTAINS, SUBSTR and REPLACE
    over columns equal the rows' value for value and type for type; a zero divisor, the
    minimum's negation or absolute value and a result past the SQL type go to the rows."""
    strs = ["", "a", "abc", "éé", "\U0001f600x", "name1", None, "aaa", "héllo wörld", "cab"]
    ints = [0, 7, -7, None, 2 ** 63 - 1, -(2 ** 63) + 1, 3, -1, 5, 9]
    small = [2, -3, 5, 1, None, -1, -2, 4, 7, -(2 ** 31) + 1]
    floats = [0.5, -0.5, -0.0, 1.5, -1.5, math.nan, math.inf, None, 2.0, -2.5]
    table = pa.table([pa.array(strs, pa.string()), pa.array(ints, pa.int64()),
                      pa.array(small, pa.int32()), pa.array(floats, pa.float64())],
                     names=list("sijf"))
    get = Get("t", 4)
    s, i, j, f = (Col(c) for c in range(4))

    def lit(v: Any) -> Lit:
        return Lit(v, "VARCHAR" if isinstance(v, str) else "BIGINT")

    decided = [
        Call("neg", (i,), "BIGINT"), Call("neg", (f,), "DOUBLE"), Call("floor", (f,), "DOUBLE"),
        Call("ceil", (f,), "DOUBLE"), Call("floor", (i,), "BIGINT"),
        Call("intdiv", (i, j), "BIGINT"), Call("intdiv", (i, lit(-3)), "BIGINT"),
        Call("length", (s,), "BIGINT"), Call("starts_with", (s, lit("a")), "BOOLEAN"),
        Call("ends_with", (s, lit("c")), "BOOLEAN"), Call("contains", (s, lit("é")), "BOOLEAN"),
        Call("contains", (s, lit("")), "BOOLEAN"), Call("substr", (s, lit(1), lit(2)), "VARCHAR"),
        Call("substr", (s, lit(2)), "VARCHAR"), Call("substr", (s, lit(3), lit(0)), "VARCHAR"),
        Call("substr", (s, lit(10), lit(2)), "VARCHAR"),
        Call("replace", (s, lit("a"), lit("xy")), "VARCHAR"),
        Call("replace", (s, lit("é"), lit("")), "VARCHAR")]
    _decided_as_the_rows(table, decided)
    low = table.set_column(1, "i", pa.array([-(2 ** 63)] + ints[1:], pa.int64()))
    zero = table.set_column(2, "j", pa.array([0] + small[1:], pa.int32()))
    for e, tab, raises in ((Call("intdiv", (i, j), "BIGINT"), zero, True),  # a zero divisor
                           (Call("neg", (i,), "BIGINT"), low, True),
                           # the minimum has no absolute value: the rows divide it
                           (Call("intdiv", (i, j), "BIGINT"), low, False),
                           (Call("neg", (j,), "SMALLINT"), table, True)):  # past SMALLINT
        m = Mfp(get, (e,), (), (4,))
        assert columns_mfp(m)(tab) is None, e  # type: ignore[misc]
        assert (_reference(m, list(rows_of(tab, 4))) is None) == raises, e
    for e in (Call("substr", (s, lit(0), lit(2)), "VARCHAR"),
              Call("replace", (s, lit(""), lit("x")), "VARCHAR")):
        assert columns_mfp(Mfp(get, (e,), (), (4,))) is None, e


def _decided_as_the_rows(table: pa.Table, exprs: list[Any]) -> None:
    """Each of `exprs` as the only map of an Mfp over `table`: in the subset, decided over the
    columns, and equal to the rows value for value and class for class."""
    get = Get("t", table.num_columns)
    rows = list(rows_of(table, table.num_columns))
    for e in exprs:
        m = Mfp(get, (e,), (), (table.num_columns,))
        kernel = columns_mfp(m)
        assert kernel is not None, e
        got = kernel(table)
        assert got is not None, e
        want = _reference(m, rows)
        assert want is not None and _same(list(rows_of(got, 1)), want), (e, want)


@pytest.mark.parametrize("seed", range(3))
def test_null_safe_comparisons_extremes_trims_and_float_remainders_equal_the_rows(seed: int) -> None:
    """IS DISTINCT FROM, NULLIF (the first argument's value and type), GREATEST and LEAST
    (NULLs skipped), TRIM, LTRIM and RTRIM (Python's whitespace, U+001C and U+3000 among it,
    or literal characters) and % of doubles (C's fmod: NaN for a zero divisor, the dividend's
    sign) over columns equal the rows; a NaN among GREATEST's floats, a NaN compared, and
    an infinite dividend go to the rows. A -0.0 is read as 0.0, by the rows and over columns
    (`engine.canonical`), so LEAST of one and 0.0 is decided over columns."""
    rng = random.Random(seed)
    n = 60
    ints = [rng.choice([None, 0, 1, -1, 7, 2 ** 40, rng.randrange(-9, 9)]) for _ in range(n)]
    other = [rng.choice([None, 0, 1, -1, 7, rng.randrange(-9, 9)]) for _ in range(n)]
    floats = [rng.choice([None, 0.5, -2.25, 3.0, 1e300, 7.0, rng.uniform(-9, 9)]) for _ in range(n)]
    divs = [rng.choice([None, 0.0, -0.0, 2.0, -3.5, 0.25, math.inf, math.nan]) for _ in range(n)]
    pad = ["", " ", "\t", "\x1c", "\u3000", "\n ", "xy", "x"]
    strs = [None if rng.random() < 0.1 else rng.choice(pad) + rng.choice(STRS) + rng.choice(pad)
            for _ in range(n)]
    names = rng.choices(["a", "b", "é"], k=n)
    table = pa.table([pa.array(ints, pa.int64()), pa.array(other, pa.int32()),
                      pa.array(floats, pa.float64()), pa.array(divs, pa.float64()),
                      pa.array(strs, pa.string()), pa.array(names, pa.string())],
                     names=list("ijfdsn"))
    i, j, f, d, st, nm = (Col(c) for c in range(6))
    _decided_as_the_rows(table, [
        Call("is_distinct", (i, j), "BOOLEAN"), Call("is_distinct", (st, nm), "BOOLEAN"),
        Call("is_distinct", (i, f), "BOOLEAN"), Call("is_distinct", (i, Lit(1, "BIGINT")), "BOOLEAN"),
        Call("nullif", (i, j), "BIGINT"), Call("nullif", (j, f), "INTEGER"),
        Call("nullif", (st, Lit("a", "VARCHAR")), "VARCHAR"),
        Call("greatest", (i, j), "BIGINT"), Call("least", (i, j, Lit(3, "BIGINT")), "BIGINT"),
        Call("greatest", (f, Lit(2.5, "DOUBLE")), "DOUBLE"), Call("least", (st, nm), "VARCHAR"),
        Call("greatest", (i,), "BIGINT"),
        Call("trim", (st,), "VARCHAR"), Call("ltrim", (st,), "VARCHAR"),
        Call("rtrim", (st,), "VARCHAR"), Call("trim", (st, Lit("x y", "VARCHAR")), "VARCHAR"),
        Call("rtrim", (st, Lit("", "VARCHAR")), "VARCHAR"),
        Call("mod", (f, d), "DOUBLE"), Call("mod", (Lit(-7.5, "DOUBLE"), d), "DOUBLE"),
    ])
    get = Get("t", 6)
    nan = table.set_column(2, "f", pa.array([math.nan] + floats[1:], pa.float64()))
    neg_zero = table.set_column(2, "f", pa.array([-0.0] + floats[1:], pa.float64()))
    inf = table.set_column(2, "f", pa.array([-math.inf] + floats[1:], pa.float64()))
    zeros = Mfp(get, (Call("least", (f, Lit(0.0, "DOUBLE")), "DOUBLE"),), (), (6,))
    # a -0.0 in a later chunk, and in a chunk sliced past its first values
    later = pa.Table.from_batches(table.slice(0, 30).to_batches() + neg_zero.slice(0, 1).to_batches()
                                  + table.slice(30).to_batches())
    sliced = pa.Table.from_batches(table.slice(0, 30).to_batches() + pa.concat_tables(
        [table.slice(0, 2), neg_zero.slice(0, 1), table.slice(30)]).combine_chunks().slice(2).to_batches())
    for tab in (neg_zero, later, sliced):
        got = columns_mfp(zeros)(tab)  # type: ignore[misc]
        assert got is not None and _same(list(rows_of(got, 1)),
                                         _reference(zeros, list(rows_of(tab, 6))))  # type: ignore[arg-type]
    for e, tab in ((Call("greatest", (f, d), "DOUBLE"), table),  # NaN and -0.0 among d
                   (Call("nullif", (f, Lit(1.0, "DOUBLE")), "DOUBLE"), nan),
                   (Call("is_distinct", (f, d), "BOOLEAN"), table),
                   (Call("mod", (f, d), "DOUBLE"), inf)):
        m = Mfp(get, (e,), (), (6,))
        assert columns_mfp(m)(tab) is None, e  # type: ignore[misc]
        rows = list(rows_of(tab, 6))
        try:
            want = _reference(m, rows)
        except ValueError:  # math.fmod of an infinity
            continue
        assert want is not None, e


def test_a_float_column_without_negative_zero_is_read_in_place() -> None:
    """A float column is copied (-0.0 made 0.0) only when it holds a -0.0: a large input column
    without one is passed on as it is, so reading it costs no memory."""
    from planner.mfp_columns import _no_negative_zero

    clean = pa.chunked_array([pa.array([1.0, None, 0.0]), pa.array([-0.0, 2.5]).slice(1)])
    assert _no_negative_zero(clean) is clean
    for col in (pa.chunked_array([pa.array([1.0]), pa.array([2.0, None, -0.0])]),
                pa.array([0.5, -0.0], pa.float32()).slice(1)):
        out = _no_negative_zero(col)
        assert out is not col and not any(math.copysign(1, v) < 0 for v in out.to_pylist() if v == 0)


@pytest.mark.parametrize("seed", range(3))
def test_casts_of_plain_strings_over_columns_equal_the_rows(seed: int) -> None:
    """CAST of strings in plain form (digits, decimal numbers, YYYY-MM-DD, with a time of
    hours, minutes, seconds and a fraction of up to 6 digits) to integer types, DOUBLE, DATE
    and TIMESTAMP over columns equal the rows (Python's int() and float(), DuckDB's date forms
    by `scalar.parse_date_text`); a string in any other form, one past the type, a year 0, a
    February 30th, 24:00, an hour without minutes or a zone go to the rows, which parse (or
    refuse) it themselves."""
    rng = random.Random(seed)
    n = 50
    ints = [None if rng.random() < 0.1 else rng.choice(["-0", "007", "-12", "32767", "0"]) if rng.random() < 0.3
            else str(rng.randrange(-10 ** 12, 10 ** 12)) for _ in range(n)]
    floats = [None if rng.random() < 0.1 else rng.choice(
        ["1.", ".5", "-2.5e3", "1E5", "1e400", "4.9e-324", "0.1", "-0.0", "00.25", "7"])
        if rng.random() < 0.5 else repr(rng.uniform(-1e6, 1e6)) for _ in range(n)]
    dates = [None if rng.random() < 0.1 else (datetime.date(1, 1, 1) + datetime.timedelta(
        days=rng.randrange(3_652_059))).isoformat() for _ in range(n)]
    stamps = [None if d is None else d + rng.choice(
        ["", " 03:04", "T23:59", " 00:00:00", " 12:34:56.7", " 12:34:56.123456", "T01:02:03.120"])
        for d in dates]
    table = pa.table([pa.array(ints, pa.string()), pa.array(floats, pa.string()),
                      pa.array(dates, pa.string()), pa.array(stamps, pa.string())],
                     names=list("ifdt"))
    i, f, d, ts = Col(0), Col(1), Col(2), Col(3)
    _decided_as_the_rows(table, [Call("cast", (i,), "BIGINT"), Call("cast", (f,), "DOUBLE"),
                                 Call("cast", (i,), "DOUBLE"), Call("cast", (d,), "DATE"),
                                 Call("cast", (d,), "TIMESTAMP"), Call("cast", (ts,), "TIMESTAMP")])
    get = Get("t", 4)
    for col, t, bad in ((0, "BIGINT", "1_000"), (0, "BIGINT", " 5"), (0, "BIGINT", "+5"),
                        (0, "BIGINT", "1.5"), (0, "BIGINT", "\u0663"), (0, "SMALLINT", "40000"),
                        (0, "BIGINT", "9223372036854775808"), (1, "DOUBLE", "inf"),
                        (1, "DOUBLE", "1_0.5"), (2, "DATE", "0000-01-01"),
                        (2, "DATE", "2024-02-30"), (2, "DATE", "2024-1-05"),
                        (3, "TIMESTAMP", "0000-01-01 00:00:00"), (3, "TIMESTAMP", "2024-01-02 24:00:00"),
                        (3, "TIMESTAMP", "2024-01-02 03:04:05Z"),
                        (3, "TIMESTAMP", "2024-01-02 03:04:05.1234567"),
                        (3, "TIMESTAMP", "2024-01-02 03")):
        vals = [ints, floats, dates, stamps][col]
        tab = table.set_column(col, "ifdt"[col], pa.array([bad] + vals[1:], pa.string()))
        m = Mfp(get, (Call("cast", (Col(col),), t),), (), (4,))
        assert columns_mfp(m)(tab) is None, (t, bad)  # type: ignore[misc]
        _reference(m, list(rows_of(tab, 4)))  # the rows decide: a value or their error


def test_trim_removes_what_duckdb_removes() -> None:
    """TRIM's default characters are DuckDB's: every Unicode space separator, no tab, line
    break or other control that Python's `str.strip()` takes (a join on `trim(s)` matched
    rows DuckDB does not), by the rows and over columns."""
    import unicodedata

    import duckdb

    from planner.scalar import SPACE

    con = duckdb.connect()
    spaces = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and (
        chr(c).isspace() or unicodedata.category(chr(c)) == "Zs")]
    assert set(SPACE) == {c for c in spaces if unicodedata.category(c) == "Zs"}
    texts = [f"{c}a{c}" for c in spaces]
    table = pa.table({"s": texts})
    for f in ("trim", "ltrim", "rtrim"):
        want = [r[0] for r in con.execute(f"SELECT {f}(s) FROM (SELECT unnest(?) AS s)",
                                          [texts]).fetchall()]
        m = Mfp(Get("t", 1), (Call(f, (Col(0),), "VARCHAR"),), (), (1,))
        assert [out[0] for row in rows_of(table, 1) for out in compile_mfp(m)(row)] == want
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None and [r[0] for r in rows_of(got, 1)] == want


@pytest.mark.parametrize("seed", range(3))
def test_date_diffs_and_intervals_over_columns_equal_the_rows(seed: int) -> None:
    """date_diff of every part it computes over columns (calendar years, months, quarters,
    decades, centuries, millennia; hours to microseconds, floored; days and weeks, towards
    zero, between the dates of timestamps; an ISO year goes by the rows), and DATE or TIMESTAMP
    plus or minus an INTERVAL (months first, the day clamped to the month's end: Jan 31 plus
    a month is Feb 28 or 29; then days and microseconds) over columns equal the rows, before
    1970 and after; a result outside years 1 to 9999 goes to the rows, which raise."""
    from planner.scalar import Interval

    rng = random.Random(seed)
    n = 80

    def day() -> datetime.date:
        return datetime.date(1, 1, 1) + datetime.timedelta(days=rng.randrange(3_652_059))

    def stamp() -> datetime.datetime:
        d = rng.choice([day(), datetime.date(2024, 1, 31), datetime.date(1969, 12, 31),
                        datetime.date(2023, 3, 31)])
        return datetime.datetime(d.year, d.month, d.day) + datetime.timedelta(
            microseconds=rng.randrange(86_400_000_000))

    a = [None if rng.random() < 0.1 else rng.choice(
        [day(), datetime.date(2024, 2, 29), datetime.date(1970, 1, 1), datetime.date(1960, 5, 31)])
        for _ in range(n)]
    b = [None if rng.random() < 0.1 else stamp() for _ in range(n)]
    mid = [None if x is None else x.replace(year=rng.randrange(1900, 2100)) if x.year > 1 and not (
        x.month == 2 and x.day == 29) else x for x in a]
    table = pa.table([pa.array(a, pa.date32()), pa.array(b, pa.timestamp("us")),
                      pa.array(mid, pa.date32())], names=list("abm"))
    da, tb, dm = Col(0), Col(1), Col(2)

    def part(p: str) -> Lit:
        return Lit(p, "VARCHAR")

    diffs = [Call("date_diff", (part(p), x, y), "BIGINT")
             for p in ("year", "months", "quarter", "week", "day", "days", "hour", "m", "s",
                       "epoch", "ms", "us", "decade", "century", "millennium", "yearweek", "dow")
             for x, y in ((da, tb), (tb, da), (dm, Lit(datetime.date(2000, 3, 15), "DATE")))]
    ivs = [Interval(1, 0, 0), Interval(-1, 0, 0), Interval(13, 2, 5), Interval(0, 40, 3_600_000_000),
           Interval(-25, -1, -1), Interval(0, 0, 86_399_999_999)]
    moved = [Call(f, (dm, Lit(iv, "INTERVAL")), "TIMESTAMP") for iv in ivs
             for f in ("add_interval", "sub_interval")]
    month_ends = pa.table([pa.array([datetime.date(2024, 1, 31), datetime.date(2023, 1, 31),
                                     datetime.date(2024, 3, 31), None], pa.date32()),
                           pa.array([datetime.datetime(2024, 1, 31, 23, 59), datetime.datetime(
                               2000, 12, 31, 1), datetime.datetime(1900, 3, 30), None],
                               pa.timestamp("us"))], names=["d", "t"])
    _decided_as_the_rows(table, diffs + moved)
    _decided_as_the_rows(month_ends, [Call(f, (Col(c), Lit(iv, "INTERVAL")), "TIMESTAMP")
                                      for iv in ivs for c in (0, 1)
                                      for f in ("add_interval", "sub_interval")])
    iso = Mfp(Get("t", 3), (Call("date_diff", (part("isoyear"), da, tb), "BIGINT"),), (), (3,))
    assert columns_mfp(iso) is None  # an ISO year: by the rows
    # past the range: 9999-12-31 plus a day, 0001-01-01 less a month
    for v, iv in ((datetime.date(9999, 12, 31), Interval(0, 1, 0)),
                  (datetime.date(1, 1, 1), Interval(-1, 0, 0)),
                  (datetime.date(9999, 12, 31), Interval(0, 0, 86_400_000_000))):
        tab = pa.table([pa.array([datetime.date(2024, 1, 1), v], pa.date32())], names=["d"])
        m = Mfp(Get("t", 1), (Call("add_interval", (Col(0), Lit(iv, "INTERVAL")), "TIMESTAMP"),), (), (1,))
        assert columns_mfp(m)(tab) is None, (v, iv)  # type: ignore[misc]
        assert _reference(m, list(rows_of(tab, 1))) is None, (v, iv)


def test_case_and_coalesce_over_columns() -> None:
    """CASE takes the first TRUE condition (a NULL one is not), else its ELSE (NULL when it
    has none); COALESCE the first non-NULL argument; both equal the rows', and a CASE of
    results of two kinds is left to the rows."""
    table = pa.table([pa.array([True, None, False, True], pa.bool_()),
                      pa.array([1, 2, None, 4], pa.int32()),
                      pa.array([None, 20, 30, 40], pa.int64()),
                      pa.array([0.5, 1.5, None, 2.5], pa.float64())], names=list("bxyf"))
    get = Get("t", 4)
    rows = list(rows_of(table, 4))
    null = Call("cast", (Lit(None, "NULL"),), "BIGINT")
    cases = [
        Call("case", (Col(0), Lit(1, "INTEGER"), Lit(0, "INTEGER")), "INTEGER"),
        Call("case", (Col(0), Col(1), Call("gt", (Col(2), Lit(25, "INTEGER")), "BOOLEAN"),
                      Col(2), null), "BIGINT"),
        Call("coalesce", (Col(2), Col(1), Lit(-1, "INTEGER")), "BIGINT"),
        Call("coalesce", (null, Col(1)), "BIGINT"),
    ]
    for e in cases:
        m = Mfp(get, (e,), (), (4,))
        got = columns_mfp(m)(table)  # type: ignore[misc]
        assert got is not None, e
        assert _same(list(rows_of(got, 1)), _reference(m, rows)), e  # type: ignore[arg-type]
    mixed = Call("case", (Col(0), Col(1), Col(3)), "DOUBLE")  # an int or a float, per row
    assert columns_mfp(Mfp(get, (mixed,), (), (4,)))(table) is None  # type: ignore[misc]


# -- aggregate states from columns ------------------------------------------------------------

AGGS = (Agg("count_star", None, False, "BIGINT"), Agg("count", 1, False, "BIGINT"),
        Agg("sum", 1, False, "HUGEINT"), Agg("avg", 2, False, "DOUBLE"),
        Agg("min", 1, False, "BIGINT"), Agg("max", 2, False, "DOUBLE"),
        Agg("sum", 2, False, "DOUBLE"), Agg("min", 3, False, "SMALLINT"),
        Agg("max", 3, False, "SMALLINT"), Agg("min", 5, False, "DATE"),
        Agg("max", 5, False, "DATE"), Agg("count", 5, False, "BIGINT"))


def _state_view(st: Any) -> Any:
    return (st.rows, {a: dict(v) for a, v in st.values.items()},
            {a: list(i) for a, i in st.index.items()},
            [(a.n, a.n_float, a.scaled, a.pinf, a.ninf, a.nan, repr(a.exact))
             if hasattr(a, "scaled") else list(a) for a in st.accs],
            repr(st.output()[0]))  # the rows (not the records read: instrumentation)


def _canon_state(st: Any) -> str:
    """`_state_view` with each value map in key order (its insertion order is the rows'),
    compared by repr (NaN is not == NaN)."""
    rows, values, index, accs, out = _state_view(st)
    return repr((rows, {a: sorted(v.items(), key=repr) for a, v in values.items()},
                 index, accs, out))


def _row_states(plan: IncrementalAggregates, table: pa.Table) -> dict[Any, Any]:
    """The reference: each group's per-row state (keyed by column 0) after its rows."""
    want = {}
    for k, group in rows_by_key_reference(list(rows_of(table, table.num_columns)),
                                          (0,)).items():
        st = plan(k)
        st.apply_vals(group, 1)
        want[k] = st
    return want


@pytest.mark.parametrize("chunks", [0, 1, 3])
@pytest.mark.parametrize("ty", [pa.int64(), pa.float64(), pa.int32()])
def test_numpy_of_a_column_equals_arrows_own(chunks: int, ty: pa.DataType) -> None:
    """`_numpy_of` (a column's values joined by NumPy, not in Arrow's pool) gives what
    `to_numpy` gives: the values in order, of the same dtype, for a chunked column of 0, 1 or
    several chunks and for an array."""
    from planner.aggregate_columns import _numpy_of

    parts = [pa.array([i * 7 - 3, i, -i * 1000], ty) for i in range(chunks)]
    col = pa.chunked_array(parts, ty)
    for c in (col, col.combine_chunks()):
        got, want = _numpy_of(c), c.to_numpy()
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("counting", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_aggregate_states_from_columns_equal_from_rows(seed: int, counting: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """... by every path: with `counting`, codes below 2**16 that are not in order already
    move each column to its group by the counting scatter (engine.counting_sort)."""
    import planner.aggregate_columns as ac

    scattered = []
    if counting:
        import engine.counting_sort as cs

        monkeypatch.setattr(ac, "COUNTING_SORT", 0)
        real_scatter = cs.counting_scatter

        def spy(*args: Any) -> Any:
            scattered.append(1)
            return real_scatter(*args)

        monkeypatch.setattr(cs, "counting_scatter", spy)
    rng = random.Random(seed)
    n = rng.choice([50, 400, 3000])
    keys_a = [rng.choice([None, 1, 2, 3, -4]) for _ in range(n)]
    keys_b = [rng.choice(["x", "y", None, ""]) for _ in range(n)]
    ints = [None if rng.random() < 0.1 else rng.randint(-10 ** 6, 10 ** 6) for _ in range(n)]
    # odd seeds: exponents far apart and subnormals; even: a few exponents and an infinity
    choices = [0.1, 2.5, -3.75, 1e-300, 7.0, 1e300, 5e-324, -1.5e-320] if seed % 2 else [
        0.1, 2.5, -3.75, 7.0, 1234.56, 0.0, math.inf, 1e-12]
    if seed % 3 == 2:  # integer values only (summed as int64), and infinities
        choices = [1.0, 2.0, -7.0, 0.0, 1e15, -3e14, math.inf, -math.inf]
    floats = [None if rng.random() < 0.1 else rng.choice(choices) for _ in range(n)]
    small = [rng.randint(-3, 3) for _ in range(n)]
    dates = [None if rng.random() < 0.1 else rng.choice(DATES) for _ in range(n)]
    # int keys without NULL: spanning more than 2**16 (two radix passes) and more than 2**32
    # (dictionary codes)
    wide = [rng.choice([-(2 ** 20), 0, 5, 70_000, 2 ** 20]) for _ in range(n)]
    extreme = [rng.choice([-(2 ** 63), 2 ** 63 - 1, 0, 1]) for _ in range(n)]
    table = pa.table([pa.array(keys_a, pa.int32()), pa.array(ints, pa.int64()),
                      pa.array(floats, pa.float64()), pa.array(small, pa.int16()),
                      pa.array(keys_b, pa.string()), pa.array(dates, pa.date32()),
                      pa.array(wide, pa.int64()), pa.array(extreme, pa.int64())],
                     names=list("abcdefgh"))
    plan = IncrementalAggregates(AGGS)
    columns_taken = 0
    # ... and the table in (a, e) order, whose keys (0,) and (0, 4) are grouped already
    # (`_stable_order`'s identity, from 1,024 rows)
    in_order = table.sort_by([("a", "ascending"), ("e", "ascending")])
    # ... and in three chunks, the first without NULL keys (dictionaries unified: `_dictionary`)
    third = n // 3
    chunked = pa.concat_tables([in_order.slice(0, third), table.slice(third, third),
                                table.slice(2 * third)])
    for table, key in [(table, k) for k in ((0,), (4,), (0, 4), (3,), (5,), (), (6,), (7,),
                                           (6, 3), (7, 6), (3, 4), (2,), (4, 2),
                                           # a mixed radix past 2**62: a compacted prefix
                                           (6, 1, 6, 1, 4, 6))] + [
            (in_order, (0,)), (in_order, (0, 4)), (chunked, (4,)), (chunked, (0, 4)),
            (chunked, (7, 4))]:
        built = build_states(plan, table, key)
        assert built is not None
        rows = list(rows_of(table, table.num_columns))
        want = {}
        for k, group in rows_by_key_reference(rows, key).items():
            st = plan(k)
            st.apply_vals(group, 1)
            want[k] = st
        assert set(built) == set(want)
        for k, st in want.items():
            assert _state_view(built[k]) == _state_view(st), k
        # the lazy form: every group's output by whole columns, and the records held
        groups = build_groups(plan, table, key)
        assert groups is not None
        rows, _ = groups.rows()
        assert [repr([(r, 1)]) for r in rows] == [repr(want[k].output()[0]) for k in groups.keys]
        assert groups.records() == sum(groups.records_of(g) for g in range(len(groups.keys)))
        # ... and as columns, each row the key then the output row (engine.columns_at's
        # PairColumnsAt): the same values, classes included, where it does not decline
        cols = groups.columns()
        if cols is not None:
            out, split, _ = cols
            assert split == len(key)
            got = list(rows_of(out, out.num_columns))
            assert repr(got) == repr([tuple(k) + r for k, r in zip(groups.keys, rows,
                                                                      strict=True)])
            columns_taken += 1
        # and each built state keeps working: a change applies as to the per-row state
        k0 = next(iter(want))
        change = [(rows[0][:1] + (5,) + rows[0][2:], 1), (rows[0], -1)]
        built[k0].apply(change)
        want[k0].apply(change)
        assert _state_view(built[k0]) == _state_view(want[k0])
    assert columns_taken >= 6
    assert bool(scattered) == counting


@pytest.mark.parametrize("seed", range(4))
def test_states_made_together_equal_the_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`BuiltGroups.states` (MIN/MAX values of many groups sorted in one compiled pass,
    `planner.group_parts`) gives each group the state the per-row evaluation gives, and
    `state(g)` one at a time: groups below `_SMALL_GROUP`, above it, past ARRAY_INDEX_MIN
    distinct values, floats, dates, and a column with NULLs (not sorted together)."""
    import numba  # noqa: F401 - `states` sorts together only in a process that has numba

    import planner.aggregate_columns as ac
    import planner.group_parts as gp

    sorted_together = []
    real = gp.sort_parts

    def spy(*args: Any) -> Any:
        sorted_together.append(1)
        return real(*args)

    monkeypatch.setattr(gp, "sort_parts", spy)
    rng = random.Random(700 + seed)
    sizes = [rng.choice([1, 5, 63, 64, 65, 300, 700]) for _ in range(rng.randint(20, 40))]
    keys = [k for k, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(keys)
    n = len(keys)
    # (NaN and -0.0 make `build_groups` leave the MIN/MAX to rows: `test_sort_parts...`)
    floats = [float(rng.randint(-500, 500)) / (4 if seed % 2 else 1) for _ in range(n)]
    ints = [rng.randint(-10 ** 9, 10 ** 9) if seed < 2 else rng.randint(0, 9) for _ in range(n)]
    dates = [DATES[rng.randrange(len(DATES))] for _ in range(n)]
    nullable = [None if rng.random() < 0.05 else rng.randint(0, 1000) for _ in range(n)]
    table = pa.table([pa.array(keys, pa.int64()), pa.array(ints, pa.int64()),
                      pa.array(floats, pa.float64()), pa.array(nullable, pa.int64()),
                      pa.array(dates, pa.date32())], names=list("kifnd"))
    plan = IncrementalAggregates((
        Agg("count_star", None, False, "BIGINT"), Agg("min", 1, False, "BIGINT"),
        Agg("max", 2, False, "DOUBLE"), Agg("min", 3, False, "BIGINT"),
        Agg("max", 4, False, "DATE")))
    want = _row_states(plan, table)
    together = build_groups(plan, table, (0,))
    alone = build_groups(plan, table, (0,))
    assert together is not None and alone is not None
    picked = sorted(rng.sample(range(len(together.keys)), rng.randint(ac.BULK_STATES, len(sizes))))
    made = together.states(picked)

    for g, st in zip(picked, made, strict=True):
        k = together.keys[g]
        assert _canon_state(st) == _canon_state(want[k]), k
        assert _canon_state(alone.state(g)) == _canon_state(st), k
        assert repr(st.output()[0]) == repr(want[k].output()[0])
    assert sorted_together


@pytest.mark.parametrize("seed", range(4))
def test_sort_parts_equals_distinct(seed: int) -> None:
    """`group_parts.sort_parts` sorts each listed group's part in place and gives its
    distinct values and counts as `_distinct` does; a float part with a NaN, or with both
    zeros, is flagged for the caller instead (and no other is)."""
    from planner.aggregate_columns import _distinct
    from planner.group_parts import sort_parts

    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 90, 30)
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    for dtype in (np.int64, np.float64):
        vals = rng.integers(-20, 20, int(bounds[-1])).astype(dtype)
        for g in range(0, 30, 3):  # every third part's values all distinct
            vals[bounds[g]:bounds[g + 1]] = rng.permutation(int(sizes[g])) - 40
        if dtype is np.float64:
            vals[rng.random(len(vals)) < 0.01] = np.nan
            vals[rng.random(len(vals)) < 0.02] = -0.0
        before = vals.copy()
        groups = np.sort(rng.choice(30, 12, replace=False)).astype(np.int64)
        uniq, counts, offsets, apart, whole = sort_parts(vals, bounds, groups)
        for k, g in enumerate(groups.tolist()):
            a, b = bounds[g], bounds[g + 1]
            part = before[a:b].copy()
            # as sorted (NumPy's vectorised sort may write either zero for a run of both)
            s = np.sort(part)
            odd = bool(np.isnan(s).any() or (np.signbit(s) & (s == 0)).any()
                       and (~np.signbit(s) & (s == 0)).any())
            assert bool(apart[k]) == (dtype is np.float64 and odd)
            if apart[k]:
                assert offsets[k] == offsets[k + 1]  # no span: taken apart by the caller
                continue
            want_u, want_c = _distinct(part)
            # every value distinct: no span, the sorted part is the values; else the span
            assert bool(whole[k]) == (want_c is None)
            got_u = vals[a:b] if whole[k] else uniq[offsets[k]:offsets[k + 1]]
            got_c = [1] * len(got_u) if whole[k] else counts[offsets[k]:offsets[k + 1]].tolist()
            assert (offsets[k + 1] - offsets[k]) == (0 if whole[k] else len(want_u))
            assert got_u.tolist() == want_u.tolist()
            assert got_c == ([1] * len(want_u) if want_c is None else want_c.tolist())
            assert vals[a:b].tolist() == np.sort(before[a:b]).tolist()
        # the arrays hold the spans alone; both kinds of part were listed
        assert len(uniq) == len(counts) == offsets[-1]
        assert whole.any() and not whole.all()
        others = np.setdiff1d(np.arange(30), groups)
        for g in others.tolist():  # untouched
            a, b = bounds[g], bounds[g + 1]
            assert np.array_equal(vals[a:b], before[a:b], equal_nan=True)


@pytest.mark.parametrize("seed", range(3))
def test_built_columns_from_arrays_equal_the_rows(seed: int) -> None:
    """`BuiltGroups.columns()` takes each aggregate's column from the arrays where its values
    are exactly the per-row ones (counts, MIN/MAX, SUM and AVG of ints, of integer-valued
    floats): the table's rows equal `rows()` and the per-row states' output, value for
    value and type for type, with groups where every value is NULL and AVG of ints that
    Python's int / int rounds (up to 2**53)."""
    rng = random.Random(seed)
    n = 2000
    key = [rng.randrange(40) for _ in range(n)]
    big = 2 ** 53 // n  # sums of up to 2**53: int / int rounds as float / float
    ints = [None if k == 7 or rng.random() < 0.05 else rng.randint(-big, big) for k in key]
    floats = [float(rng.randint(-10 ** 6, 10 ** 6)) for _ in key]  # integer-valued, no NULL
    dates = [None if k == 7 else rng.choice(DATES) for k in key]
    table = pa.table([pa.array(key, pa.int64()), pa.array(ints, pa.int64()),
                      pa.array(floats, pa.float64()), pa.array(dates, pa.date32())],
                     names=list("kifd"))
    aggs = (Agg("count_star", None, False, "BIGINT"), Agg("count", 1, False, "BIGINT"),
            Agg("sum", 1, False, "HUGEINT"), Agg("avg", 1, False, "DOUBLE"),
            Agg("sum", 2, False, "DOUBLE"), Agg("avg", 2, False, "DOUBLE"),
            Agg("min", 1, False, "BIGINT"), Agg("max", 2, False, "DOUBLE"),
            Agg("min", 3, False, "DATE"), Agg("max", 3, False, "DATE"))
    plan = IncrementalAggregates(aggs)
    groups = build_groups(plan, table, (0,))
    assert groups is not None
    assert all(groups._array(a, slot) is not None
               for a, slot in zip(plan.aggs, plan.slots, strict=True))
    rows, _ = groups.rows()
    cols = groups.columns()
    assert cols is not None
    out, _, _ = cols
    got = list(rows_of(out, out.num_columns))
    want = []
    for k, group in sorted(rows_by_key_reference(list(rows_of(table, 4)), (0,)).items()):
        st = plan(k)
        st.apply_vals(group, 1)
        [(row, _)] = st.output()[0]
        want.append(tuple(k) + row)
    assert repr(got) == repr([tuple(k) + r for k, r in zip(groups.keys, rows, strict=True)])
    assert repr(got) == repr(want)
    assert any(r[2] == 0 and r[3] is None for r in got)  # the group of NULLs: COUNT 0, SUM NULL
    # `output_rows` (a batch's made states' previous output): the rows sent, any groups
    picked = rng.sample(range(len(groups.keys)), 12) + [0, 0]
    assert repr(groups.output_rows(picked)) == repr([r[1:] for r in (got[g] for g in picked)])
    assert repr(groups.output_rows(picked)) == repr(
        [groups.state(g).output()[0][0][0] for g in picked])
    assert groups.output_rows([]) == []
    # past 2**53, float(sum) / n rounds twice: (2**53 + 1) / 3 is 3002399751580331.0 exactly,
    # float(2**53 + 1) / 3 is 3002399751580330.5. The AVG of ints then comes from the rows.
    table = pa.table([pa.array([1, 1, 1, 2], pa.int64()),
                      pa.array([2 ** 52, 2 ** 52, 1, 5], pa.int64())], names=list("ki"))
    # (grouped, as the planner marks an AVG of a Reduce with keys: `as_grouped`; ungrouped,
    # DuckDB's AVG is float(sum) / n, rounding twice)
    for grouped, first in ((True, 3002399751580331.0), (False, 3002399751580330.5)):
        plan = IncrementalAggregates((Agg("avg", 1, False, "DOUBLE", grouped=grouped),))
        groups = build_groups(plan, table, (0,))
        assert groups is not None and groups._array(plan.aggs[0], plan.slots[0]) is None
        cols = groups.columns()
        assert cols is not None
        assert list(rows_of(cols[0], 2)) == [(1, first), (2, 5.0)]


@pytest.mark.parametrize("seed", range(4))
def test_stable_order_equals_a_stable_argsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for n in (0, 1, 5, SORTED_CHECK, SORTED_CHECK + 1, 5000):
        for radix in (3, 1 << 16, 1 << 20, 1 << 40):
            codes = rng.integers(0, radix, n)
            in_order = np.sort(codes)
            late = in_order.copy()  # sorted but for its last value
            if n > 2:
                late[-1] = 0 if late[-2] else 1
            for c in (codes, in_order, late, in_order[::-1].copy()):
                got = _stable_order(c, radix)
                if c is in_order and n > SORTED_CHECK:
                    assert got is None  # the identity, found
                want = np.argsort(c, kind="stable")
                assert np.array_equal(np.arange(n) if got is None else got, want)


@pytest.mark.parametrize("seed", range(3))
def test_counting_order_equals_a_stable_argsort(seed: int, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    """engine.counting_sort against NumPy's stable sort, directly and as `_stable_order`
    takes it (from `COUNTING_SORT` codes, with numba loaded)."""
    import planner.aggregate_columns as ac
    from engine.counting_sort import counting_order

    rng = np.random.default_rng(seed)
    for n in (0, 1, 7, 3000):
        for radix in (1, 2, 300, 1 << 16):
            codes = rng.integers(0, radix, n)
            want = np.argsort(codes, kind="stable")
            assert np.array_equal(counting_order(codes, radix), want)
            assert np.array_equal(counting_order(codes.astype(np.uint16), radix), want)
    monkeypatch.setattr(ac, "COUNTING_SORT", 0)
    codes = rng.integers(0, 5000, 20_000)
    got = ac._stable_order(codes, 5000)
    assert got is not None and np.array_equal(got, np.argsort(codes, kind="stable"))


@pytest.mark.parametrize("seed", range(3))
def test_counting_scatter_equals_a_gather_by_the_stable_order(seed: int) -> None:
    """engine.counting_sort's bounds and scatter against NumPy: the values of chunks of any
    dtype, in the stable order of the codes; each code's first row; and chunks that do not
    cover the codes refused."""
    from engine.counting_sort import counting_bounds, counting_scatter

    rng = np.random.default_rng(seed)
    for n in (0, 1, 7, 3000):
        for radix in (1, 2, 300, 1 << 16):
            codes = rng.integers(0, radix, n)
            order = np.argsort(codes, kind="stable")
            bounds, firsts = counting_bounds(codes, radix)
            assert np.array_equal(bounds, np.concatenate(
                ([0], np.cumsum(np.bincount(codes, minlength=radix)))))
            present = np.unique(codes)
            assert np.array_equal(firsts[present], [np.argmax(codes == c) for c in present])
            cuts = np.sort(rng.integers(0, n + 1, 3))
            for values, dtype in ((rng.random(n), np.float64),
                                  (rng.integers(-2 ** 31, 2 ** 31, n).astype(np.int32), np.int64),
                                  (rng.integers(-2 ** 62, 2 ** 62, n), np.int64),
                                  (rng.random(n) < 0.5, np.bool_)):
                chunks = np.split(values, cuts)
                chunks[0].flags.writeable = False  # a NumPy view of an Arrow buffer
                got = counting_scatter(codes, bounds, chunks, dtype)
                assert got.dtype == dtype
                assert np.array_equal(got, values[order].astype(dtype))
            if n:
                with pytest.raises(ValueError):
                    counting_scatter(codes, bounds, [np.zeros(n - 1)], np.float64)


def _topk_view(st: Any) -> tuple[Any, ...]:
    return (repr(sorted(st.counts.items(), key=repr)), repr(list(st.index)), st.rows,
            repr(st.bound), repr(st.bound_val), repr(sorted(st.reserve[st.next:], key=repr)),
            st.reserve_live, repr(sorted(st.dead.items(), key=repr)))


@pytest.mark.parametrize("seed", range(8))
def test_topk_states_from_columns_equal_from_rows(seed: int) -> None:
    """planner.topk_columns: each group's top-k state built from columns equals the one the
    per-row path builds from the group's rows (counts, index, reserve, output), and both
    give the same outputs through the same random changes afterwards (rows entering and
    leaving the window, reserved rows deleted and refilled). Odd seeds put -0.0 beside 0.0
    (equal rows that print apart: the reserve is then made of rows, as the per-row path
    makes it), even seeds do not (the reserve stays in the table). A DECIMAL first ORDER BY
    column ranks by its unscaled ints, at its scale (`reserve_scale`)."""
    from planner.aggregate import IncrementalTopK, topk_rows
    from planner.ir import SortKey
    from planner.topk_columns import TableRows, build_topk

    rng = random.Random(seed)
    n = rng.choice([300, 2000, 6000])
    group = [rng.choice(["x", "y", None, "z"]) for _ in range(n)]
    ints = [rng.randint(-50, 50) for _ in range(n)]  # many ties on the first ORDER BY value
    zeros = [-0.0, 0.0] if seed % 2 else [0.0]
    floats = [rng.choice([0.5, -2.0, 1e300, 3.25, math.inf, *zeros]) for _ in range(n)]
    ids = [rng.randrange(n // 2) for _ in range(n)]  # some rows twice

    def cents() -> decimal.Decimal:
        return decimal.Decimal(rng.randint(-300, 300)).scaleb(-2)

    decs = [cents() for _ in range(n)]
    table = pa.table([pa.array(group, pa.string()), pa.array(ints, pa.int64()),
                      pa.array(floats, pa.float64()), pa.array(ids, pa.int32()),
                      pa.array(decs, pa.decimal128(10, 2))], names=list("gifkm"))
    rows = list(rows_of(table, table.num_columns))
    for first, desc, limit, offset in ((1, True, 3, 0), (2, False, 5, 2), (1, False, 1, 0),
                                       (2, True, 10, 7), (4, True, 4, 1), (4, False, 2, 0)):
        order = (SortKey(first, desc, not desc), SortKey(3, False, False))
        plan = IncrementalTopK(order, limit, offset)
        built = build_topk(plan, table, (0,))
        assert built is not None
        want = {}
        for k, group_rows in rows_by_key_reference(rows, (0,)).items():
            st = plan(k)
            st.apply([(r, 1) for r in group_rows])
            want[k] = st
        assert built.keys and set(built.keys) == set(want)
        in_table = any(isinstance(st.reserve, TableRows) for st in built.states)
        large = any(len(g) > 4 * (offset + limit) + 64
                    for g in rows_by_key_reference(rows, (0,)).values())
        assert in_table == (seed % 2 == 0 and large), (seed, n)
        if first == 4 and large:
            assert {st.reserve_scale for st in built.states if st.reserve_live} == {2}
        outs, _ = built.outputs()
        for i, k in enumerate(built.keys):
            assert _topk_view(built.state(i)) == _topk_view(want[k]), k
            assert repr(outs[i]) == repr(want[k].output()[0])
        assert sum(built.state(i).size() for i in range(len(built.keys))) == sum(
            want[k].size() for k in want)
        # the same changes to both: deletes of the best rows (the reserve refills) and of
        # random ones (most of them reserved), inserts of new rows; both equal the reference
        # over the group's rows counted here
        truth = {k: Counter(g) for k, g in rows_by_key_reference(rows, (0,)).items()}
        for _ in range(60):
            i = rng.randrange(len(built.keys))
            k = built.keys[i]
            st_b, st_w = built.state(i), want[k]
            present = list(st_w.contents())
            if present and rng.random() < 0.6:
                best = st_w.output()[0]
                row = best[0][0] if best and rng.random() < 0.5 else rng.choice(present)
                change = [(row, -1)]
            else:
                change = [((k[0], rng.randint(-60, 60), rng.choice(floats),
                            rng.randrange(n), cents()), 1)]
            st_b.apply(change)
            st_w.apply(change)
            truth[k].update(dict(change))
            assert repr(st_b.output()[0]) == repr(st_w.output()[0]) == repr(
                topk_rows(list((+truth[k]).items()), order, limit, offset))
            assert _topk_view(st_b) == _topk_view(st_w)
            assert st_b.contents() == +truth[k]
            # TopKState's invariant: `counts` is the index's rows, and `reserve_live` the
            # reserved entries not yet reached less the dead ones
            assert sorted(map(repr, st_b.counts)) == sorted(repr(r) for _, r in st_b.index)
            assert all(c > 0 for c in st_b.counts.values())
            assert st_b.reserve_live == len(st_b.reserve[st_b.next:]) - sum(st_b.dead.values())
            assert st_b.empty() == (not truth[k])
    # what the rows must decide: a NULL or NaN first ORDER BY value, a date key column
    plan = IncrementalTopK((SortKey(1, True, False),), 3, 0)
    for bad in (pa.array([None, 1.0], pa.float64()), pa.array([math.nan, 1.0], pa.float64())):
        t = pa.table([pa.array(["a", "b"]), bad], names=["g", "v"])
        assert build_topk(plan, t, (0,)) is None
    assert build_topk(IncrementalTopK((SortKey(1, True, False),), None, 0),
                      pa.table([pa.array(["a"]), pa.array([1.0])], names=["g", "v"]),
                      (0,)) is None


def test_aggregate_states_decline_what_rows_must_decide() -> None:
    plan = IncrementalAggregates((Agg("min", 1, False, "DOUBLE"),))
    floats = pa.table([pa.array([1, 1, 2]), pa.array([0.0, -0.0, 1.0])], names=["k", "v"])
    assert build_states(plan, floats, (0,)) is None  # -0.0 and 0.0: the row path's rules
    for keys in ([1.0, -0.0], [math.nan, 2.0], [0.0, None, -0.0]):  # the row path's rules
        float_key = pa.table([pa.array(keys), pa.array(range(len(keys)))], names=["k", "v"])
        assert build_states(plan, float_key, (0,)) is None, keys
    ints = pa.table([pa.array([1, 1]), pa.array([3, 3])], names=["k", "v"])
    halves = pa.table([pa.array([1, 1]), pa.array([0.5, 0.5])], names=["k", "v"])
    for f in ("sum", "avg"):  # of DISTINCT sums and averages, of ints only
        assert build_states(IncrementalAggregates((Agg(f, 1, True, "DOUBLE"),)), halves,
                            (0,)) is None
    distinct = IncrementalAggregates((Agg("count", 1, True, "BIGINT"),))
    assert build_states(distinct, ints, (0,)) is not None
    assert build_states(distinct, floats, (0,)) is None  # -0.0 and 0.0 one value or two


@pytest.mark.parametrize("by_code", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_decimal_sums_from_columns_equal_the_rows(seed: int, by_code: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """SUM and AVG of a DECIMAL of at most 18 digits built from columns (the unscaled values
    summed as ints, by runs or, with few groups, by code): every state and output equals the
    per-row one digit for digit (Decimal('0.00') where values cancel, NULL for a group of
    NULLs), chunked or not; a DECIMAL of more digits is left to the rows (and its MIN too)."""
    import decimal

    import pyarrow.compute as pc

    import planner.aggregate_columns as ac
    import planner.float_sums  # noqa: F401 - numba loaded: the by-code path may be taken
    from tests.planner_support import record_declines

    by_codes = record_declines(monkeypatch, ac, "_build_by_code")
    rng = random.Random(40 + seed)
    n = ac.COMPILED_FLOAT_SUMS + 500 if by_code else rng.choice([40, 900])
    groups = 5 if by_code else 60
    keys = [rng.randrange(groups) for _ in range(n)]
    for scale_type in (pa.decimal128(18, 2), pa.decimal128(12, 2)):
        # sums within int64 and (by code) float64's exact integers; values within the type
        big = min(10 ** 15 // n, 10 ** scale_type.precision - 1)
        cents = [None if k == 3 or rng.random() < 0.1 else
                 rng.choice([rng.randint(-big, big), 0, 150, -150]) for k in keys]
        vals = [None if c is None else decimal.Decimal(c).scaleb(-2) for c in cents]
        table = pa.table([pa.array(keys, pa.int64()), pa.array(vals, scale_type)],
                         names=["k", "d"])
        # ... in chunks, a slice of one and an empty one among them
        batches = table.to_batches(max_chunksize=max(1, n // 3))
        chunked = pa.Table.from_batches([batches[0].slice(0, 0), batches[0].slice(0, 1),
                                         batches[0].slice(1), *batches[1:]])
        # ... and with values under its NULLs (an array's NULL slots may hold anything: here
        # the type's largest, which, not read as 0, would fail the sums' int64 bound)
        col = table.column(1).combine_chunks()
        largest = decimal.Decimal(10 ** scale_type.precision - 1).scaleb(-2)
        filled = pc.fill_null(col, pa.scalar(largest, scale_type))
        dirty = table.set_column(1, "d", pa.Array.from_buffers(
            scale_type, len(col), [col.buffers()[0], filled.buffers()[1]],
            null_count=col.null_count))
        plan = IncrementalAggregates((Agg("count_star", None, False, "BIGINT"),
                                      Agg("count", 1, False, "BIGINT"),
                                      Agg("sum", 1, False, "DECIMAL(38,2)"),
                                      Agg("avg", 1, False, "DOUBLE")))
        want = _row_states(plan, table)
        for t in (table, chunked, dirty):
            built = build_groups(plan, t, (0,))
            assert built is not None
            rows, _ = built.rows()
            for g, k in enumerate(built.keys):
                assert repr(rows[g]) == repr(want[k].output()[0][0][0]), k
                assert repr(_state_view(built.state(g))) == repr(_state_view(want[k])), k
        assert any(w.output()[0][0][0][2] is None for w in want.values())  # the NULLs
        assert (True in by_codes) == by_code  # the path asked for
    # a DECIMAL past 18 digits: the rows
    table = pa.table([pa.array([1, 1], pa.int64()),
                      pa.array([decimal.Decimal("1.50"), decimal.Decimal("2.25")],
                               pa.decimal128(12, 2))], names=["k", "d"])
    wide = table.set_column(1, "d", table.column(1).cast(pa.decimal128(38, 2)))
    for f in ("sum", "min"):
        assert build_groups(IncrementalAggregates((Agg(f, 1, False, "DECIMAL(38,2)"),)),
                            wide, (0,)) is None


def _built_as_the_rows(plan: IncrementalAggregates, tables: list[Any],
                       want: dict[Any, Any]) -> None:
    """Each of `tables` built from columns by key (0,), alone and with every state made
    together (`BuiltGroups.states`): every group's output, the records read, every aggregate
    sent as an array, the group's row among the columns sent, and its state equal the
    per-row `want`."""
    import planner.aggregate_columns as ac

    for t in tables:
        alone = build_groups(plan, t, (0,))
        together = build_groups(plan, t, (0,))
        assert alone is not None and together is not None
        rows, read = alone.rows()
        assert read == sum(want[k].output()[1] for k in alone.keys)
        assert all(alone._array(a, slot) is not None
                   for a, slot in zip(plan.aggs, plan.slots, strict=True))
        cols = alone.columns()
        assert cols is not None
        sent = list(rows_of(cols[0], cols[0].num_columns))
        made = together.states(list(range(len(together.keys))))
        assert len(made) >= ac.BULK_STATES
        for g, k in enumerate(alone.keys):
            assert repr(rows[g]) == repr(want[k].output()[0][0][0]), k
            assert repr(sent[g]) == repr(tuple(k) + rows[g]), k
            assert _canon_state(alone.state(g)) == _canon_state(want[k]), k
            assert _canon_state(made[g]) == _canon_state(want[k]), k


@pytest.mark.parametrize("seed", range(3))
def test_timestamp_extremes_from_columns_equal_the_rows(seed: int) -> None:
    """MIN and MAX of a TIMESTAMP built from columns (microseconds in arrays, datetimes where
    they leave): every group's output, and its state made alone or with others
    (`BuiltGroups.states`, the parts sorted together), equal the per-row ones, for groups of a
    few values, of many, of repeated values and of NULLs only, in chunks; a value past
    Python's datetime range is left to the rows."""

    rng = random.Random(60 + seed)
    sizes = [rng.choice([1, 5, 63, 64, 65, 300, 700]) for _ in range(30)]
    keys = [k for k, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(keys)
    base = datetime.datetime(2024, 2, 29)
    pool = [base + datetime.timedelta(microseconds=rng.randint(-10 ** 12, 10 ** 12))
            for _ in range((5000, 5000, 20)[seed])] + [STAMPS[2], STAMPS[3]]
    stamps = [None if k == 4 or rng.random() < 0.05 else rng.choice(pool) for k in keys]
    table = pa.table([pa.array(keys, pa.int64()), pa.array(stamps, pa.timestamp("us"))],
                     names=["k", "t"])
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=len(keys) // 3 + 1))
    plan = IncrementalAggregates((Agg("count_star", None, False, "BIGINT"),
                                  Agg("min", 1, False, "TIMESTAMP"),
                                  Agg("max", 1, False, "TIMESTAMP"),
                                  Agg("count", 1, False, "BIGINT")))
    want = _row_states(plan, table)
    _built_as_the_rows(plan, [table, chunked], want)
    assert any(w.output()[0][0][0][1] is None for w in want.values())  # the NULLs' group
    # 10000-01-01, a TIMESTAMP DuckDB holds and Python's datetime does not
    past = pa.array([253402300800000000], pa.int64()).cast(pa.timestamp("us"))
    assert build_groups(plan, pa.table([pa.array([1], pa.int64()), past], names=["k", "t"]),
                        (0,)) is None


@pytest.mark.parametrize("seed", range(3))
def test_string_extremes_and_distinct_counts_from_columns_equal_the_rows(seed: int) -> None:
    """MIN and MAX of a VARCHAR (ranks of its sorted distinct values in the arrays, strings
    where they leave) and COUNT(DISTINCT x) of strings, ints (a span past 2**62 a group
    too), floats, dates and timestamps built from columns: every group's output, the records
    read, the columns sent and each state made alone or with others equal the per-row ones;
    for groups of a few values, of many (past ARRAY_INDEX_MIN distinct), of NULLs only, in
    chunks whose dictionaries differ, and a column of NULLs only."""
    import planner.aggregate_columns as ac

    rng = random.Random(70 + seed)
    sizes = [rng.choice([1, 5, 63, 64, 65, 300, 700]) for _ in range(30)]
    keys = [k for k, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(keys)
    # code point order is not "natural": "Z" < "a" < "é" < "\uffff" < "\U0001f600"
    pool = STRS + ["Z", "z", "\uffff", "a\x00", "aa", "A"] + [
        f"w{i}" for i in range((2000, 400, 3)[seed])]
    strs = [None if k == 4 or rng.random() < 0.05 else rng.choice(pool) for k in keys]
    ints = [None if rng.random() < 0.05 else rng.randint(-3, 3) * (2 ** 61 if k == 2 else 1)
            for k in keys]
    floats = [rng.choice([0.5, 1.0, -2.25, 1e300, math.inf]) for _ in keys]
    dates = [None if rng.random() < 0.05 else rng.choice(DATES) for _ in keys]
    stamps = [rng.choice(STAMPS) for _ in keys]
    table = pa.table([pa.array(keys, pa.int64()), pa.array(strs, pa.string()),
                      pa.array(ints, pa.int64()), pa.array(floats, pa.float64()),
                      pa.array(dates, pa.date32()), pa.array(stamps, pa.timestamp("us"))],
                     names=list("ksifdt"))
    # each chunk its own dictionary (unified by `_string_ranks`)
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=len(keys) // 3 + 1))
    aggs = (Agg("count_star", None, False, "BIGINT"), Agg("min", 1, False, "VARCHAR"),
            Agg("max", 1, False, "VARCHAR"), Agg("count", 1, True, "BIGINT"),
            Agg("count", 1, False, "BIGINT"), Agg("count", 2, True, "BIGINT"),
            Agg("count", 3, True, "BIGINT"), Agg("count", 4, True, "BIGINT"),
            Agg("count", 5, True, "BIGINT"))
    plan = IncrementalAggregates(aggs)
    want = _row_states(plan, table)
    _built_as_the_rows(plan, [table, chunked], want)
    outs = [w.output()[0][0][0] for w in want.values()]
    assert any(o[1] is None and o[3] == 0 for o in outs)  # the group of NULL strings
    assert max(o[3] for o in outs) >= ac.ARRAY_INDEX_MIN or seed > 0
    # strings that are all NULL: no distinct value to rank
    nulls = pa.table([pa.array([1, 1, 2], pa.int64()), pa.array([None] * 3, pa.string())],
                     names=["k", "s"])
    plan = IncrementalAggregates(aggs[:5])
    built = build_groups(plan, nulls, (0,))
    assert built is not None
    cols = built.columns()
    assert cols is not None
    assert list(rows_of(cols[0], cols[0].num_columns)) == [(1, 2, None, None, 0, 0),
                                                           (2, 1, None, None, 0, 0)]


@pytest.mark.parametrize("seed", range(3))
def test_distinct_sums_and_averages_from_columns_equal_the_rows(seed: int) -> None:
    """SUM and AVG(DISTINCT x) of ints and DECIMALs built from columns (each group's distinct
    values summed and counted), beside SUM, AVG and COUNT(DISTINCT) of the same column: every group's
    output, the records read, the columns sent and each state made alone or with others
    equal the per-row ones, for groups of repeated values, of NULLs only, of a span past 2**62
    (values ranked first); a sum that could pass int64, and DISTINCT of floats, go to the
    rows."""
    rng = random.Random(90 + seed)
    sizes = [rng.choice([1, 5, 63, 64, 65, 300, 700]) for _ in range(30)]
    keys = [k for k, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(keys)
    ints = [None if k == 4 or rng.random() < 0.05 else
            rng.randint(-3, 3) * (2 ** 58 if k == 2 else 1) + (k % 3) for k in keys]
    small = [rng.choice([1, 2, 2, 3, 7, None]) for _ in keys]
    cents = [None if k == 5 else decimal.Decimal(rng.choice([-150, 0, 5, 5, 999, 12345])).scaleb(-2)
             for k in keys]
    table = pa.table([pa.array(keys, pa.int64()), pa.array(ints, pa.int64()),
                      pa.array(small, pa.int32()), pa.array(cents, pa.decimal128(12, 2))],
                     names=list("kisd"))
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=len(keys) // 3 + 1))
    # (an AVG of sums past 2**53 is made by Python, not as an array: `_built_as_the_rows`
    # wants arrays, so the wide column's AVG(DISTINCT) is in the second plan's outputs only)
    wide = IncrementalAggregates((Agg("sum", 1, True, "HUGEINT"), Agg("count", 1, True, "BIGINT"),
                                  Agg("count_star", None, False, "BIGINT")))
    # a DECIMAL's distinct sums and averages: made Decimals (Python's), not arrays
    dec = IncrementalAggregates((Agg("sum", 3, True, "DECIMAL(38,2)"), Agg("avg", 3, True, "DOUBLE"),
                                 Agg("sum", 3, False, "DECIMAL(38,2)")))
    want_dec = _row_states(dec, table)
    for t in (table, chunked):
        built = build_groups(dec, t, (0,))
        assert built is not None
        rows, read = built.rows()
        assert read == sum(want_dec[k].output()[1] for k in built.keys)
        made = built.states(list(range(len(built.keys))))
        for g, k in enumerate(built.keys):
            assert repr(rows[g]) == repr(want_dec[k].output()[0][0][0]), k
            assert _canon_state(made[g]) == _canon_state(want_dec[k]), k
    assert any(w.output()[0][0][0][0] is None for w in want_dec.values())  # a group of NULLs
    _built_as_the_rows(wide, [table, chunked], _row_states(wide, table))
    plan = IncrementalAggregates((
        Agg("sum", 2, True, "BIGINT"), Agg("avg", 2, True, "DOUBLE"), Agg("sum", 2, False, "HUGEINT"),
        Agg("avg", 2, False, "DOUBLE"), Agg("avg", 1, True, "DOUBLE")))
    want = _row_states(plan, table)
    built = build_groups(plan, table, (0,))
    assert built is not None
    rows, _ = built.rows()
    for g, k in enumerate(built.keys):
        assert repr(rows[g]) == repr(want[k].output()[0][0][0]), k
        assert _canon_state(built.state(g)) == _canon_state(want[k]), k
    four = IncrementalAggregates(plan.aggs[:4])
    _built_as_the_rows(four, [table, chunked], _row_states(four, table))
    outs = [w.output()[0][0][0] for w in want.values()]
    assert any(o[4] is None for o in outs)  # the group of NULLs
    assert any(o[0] is not None and o[0] != o[2] for o in outs)  # repeats counted once
    huge = pa.table([pa.array([1, 1, 2], pa.int64()),
                     pa.array([2 ** 62, 2 ** 62 + 1, 5], pa.int64())], names=["k", "i"])
    assert build_groups(IncrementalAggregates((Agg("sum", 1, True, "HUGEINT"),)), huge, (0,)) is None
    floats = pa.table([pa.array([1, 1], pa.int64()), pa.array([0.5, 0.5])], names=["k", "f"])
    assert build_groups(IncrementalAggregates((Agg("sum", 1, True, "DOUBLE"),)), floats, (0,)) is None


@pytest.mark.parametrize("seed", range(2))
def test_decimal_extremes_from_columns_equal_the_rows(seed: int) -> None:
    """MIN, MAX and COUNT(DISTINCT) of a DECIMAL(12,2) built from columns (unscaled int64 in
    the arrays, Decimals at the column's scale where they leave): outputs, the columns sent
    and states made alone or together equal the per-row ones, zeros and negatives, a group of
    NULLs only, one past ARRAY_INDEX_MIN distinct values, in chunks."""
    import decimal

    import planner.aggregate_columns as ac

    rng = random.Random(90 + seed)
    sizes = [rng.choice([1, 5, 63, 64, 65, 700]) for _ in range(24)] + [900]
    keys = [k for k, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(keys)
    decs = [None if k == 4 or rng.random() < 0.05 else
            decimal.Decimal(rng.randint(-(10 ** 11), 10 ** 11) if k == 24 else
                            rng.choice([0, 1, -1, 250, -99_999, 10 ** 11])).scaleb(-2)
            for k in keys]
    table = pa.table([pa.array(keys, pa.int64()), pa.array(decs, pa.decimal128(12, 2))],
                     names=["k", "d"])
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=len(keys) // 3 + 1))
    plan = IncrementalAggregates((Agg("min", 1, False, "DECIMAL(12,2)"),
                                  Agg("max", 1, False, "DECIMAL(12,2)"),
                                  Agg("count", 1, True, "BIGINT")))
    want = _row_states(plan, table)
    _built_as_the_rows(plan, [table, chunked], want)
    outs = [w.output()[0][0][0] for w in want.values()]
    assert any(o[0] is None for o in outs) and max(o[2] for o in outs) >= ac.ARRAY_INDEX_MIN


@pytest.mark.parametrize("own_dictionaries", [False, True])
def test_encoded_chunks_decode_to_the_column(own_dictionaries: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`_encoded`'s one dictionary and indices give back every row of the column, NULLs
    included: one array, chunks (which Arrow encodes with one dictionary, taken as it is), no
    chunk; and chunks encoded each with a dictionary of its own (as an Arrow that does not
    share one would), which must be unified."""
    import pyarrow.compute as pc

    import planner.aggregate_columns as ac

    encode = pc.dictionary_encode
    if own_dictionaries:
        def separately(col: Any) -> Any:
            if isinstance(col, pa.ChunkedArray):
                return pa.chunked_array([encode(c) for c in col.chunks],
                                        pa.dictionary(pa.int32(), col.type))
            return encode(col)

        monkeypatch.setattr(pc, "dictionary_encode", separately)
    rng = random.Random(5)
    values = [None if rng.random() < 0.1 else rng.choice(STRS + ["x", "y"]) for _ in range(300)]
    whole = pa.array(values, pa.string())
    chunks = pa.chunked_array([whole[:100], whole[100:101], whole[101:]])
    for col in (whole, chunks, pa.chunked_array([], pa.string())):
        dictionary, indices = ac._encoded(col)
        assert len(set(dictionary.to_pylist())) == len(dictionary)
        decoded = [None if i is None else dictionary[i].as_py() for i in indices.to_pylist()]
        assert decoded == col.to_pylist()
    own = pc.dictionary_encode(chunks)
    shared = [c.dictionary for c in own.chunks]
    assert ac._one_dictionary(shared[0], shared) != own_dictionaries
    assert not ac._one_dictionary(shared[0], [pa.array(shared[0].to_pylist())])


def test_timestamp_and_decimal_keys_group_as_the_rows() -> None:
    """GROUP BY a TIMESTAMP, a DECIMAL, both, or either with an int (NULL a group, in
    chunks): every group's state and output, and the columns sent, equal the per-row ones."""
    import decimal

    rng = random.Random(21)
    n = 2000
    stamps = [None if rng.random() < 0.05 else rng.choice(STAMPS + [
        datetime.datetime(2024, 1, 1, rng.randrange(24))]) for _ in range(n)]
    decs = [None if rng.random() < 0.05 else decimal.Decimal(rng.randint(-500, 500)).scaleb(-2)
            for _ in range(n)]
    table = pa.table([pa.array([rng.randrange(5) for _ in range(n)], pa.int64()),
                      pa.array(stamps, pa.timestamp("us")), pa.array(decs, pa.decimal128(9, 2)),
                      pa.array([rng.random() for _ in range(n)], pa.float64())],
                     names=["k", "t", "m", "v"])
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=700))
    plan = IncrementalAggregates((Agg("count_star", None, False, "BIGINT"),
                                  Agg("sum", 3, False, "DOUBLE"), Agg("max", 1, False, "TIMESTAMP")))
    rows = list(rows_of(table, table.num_columns))
    for key in ((1,), (2,), (1, 2), (0, 1), (2, 0)):
        want = {}
        for k, group in rows_by_key_reference(rows, key).items():
            st = plan(k)
            st.apply_vals(group, 1)
            want[k] = st
        for t in (table, chunked):
            built = build_groups(plan, t, key)
            assert built is not None, key
            assert sorted(map(repr, built.keys)) == sorted(map(repr, want))
            out, _ = built.rows()
            cols = built.columns()
            assert cols is not None
            sent = list(rows_of(cols[0], cols[0].num_columns))
            for g, k in enumerate(built.keys):
                assert repr(out[g]) == repr(want[k].output()[0][0][0]), k
                assert repr(sent[g]) == repr(tuple(k) + out[g]), k
                assert _canon_state(built.state(g)) == _canon_state(want[k]), k


def test_string_extremes_and_distinct_counts_fed_columns_equal_fed_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A view of MIN/MAX of a VARCHAR and COUNT(DISTINCT) of a VARCHAR and an int, fed
    columns (built from them) or rows, then the same changes (each group's first and last
    string retracted, a new first one, a group emptied): equal."""
    import planner.aggregate_columns as ac
    from planner import Catalog, Column, TableSchema
    from tests.planner_support import record_declines

    built = record_declines(monkeypatch, ac, "build_groups")
    rng = random.Random(11)
    n = 3000
    pool = STRS + [f"n{i}" for i in range(300)]
    table = pa.table([pa.array([rng.randint(0, 30) for _ in range(n)], pa.int64()),
                      pa.array([None if rng.random() < 0.1 else rng.choice(pool)
                                for _ in range(n)], pa.string()),
                      pa.array([rng.randint(0, 50) for _ in range(n)], pa.int64())],
                     names=["k", "s", "v"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("k", "BIGINT"), Column("s", "VARCHAR"),
                                                 Column("v", "BIGINT")])})
    sqls = ["SELECT k, min(s) AS lo, max(s) AS hi, count(DISTINCT s) AS names,"
            " count(DISTINCT v) AS vs FROM t GROUP BY k"]

    def changes(rows: list[Any]) -> list[Any]:
        gone = [r for r in rows if r[0] == 7]
        ends = {r for k in range(31) if k != 7 for r in (
            min((r for r in rows if r[0] == k and r[1] is not None), key=lambda r: r[1]),
            max((r for r in rows if r[0] == k and r[1] is not None), key=lambda r: r[1]))}
        return ([((1, "", 99), 1), ((99, None, 1), 1)] + [(r, -1) for r in gone]
                + [(r, -1) for r in ends])

    _fed_both(table, cat, sqls, changes, built, [True])


def test_decimal_sums_fed_columns_equal_fed_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Views of SUM, AVG, MIN and MAX of a DECIMAL column, MIN/MAX of a TIMESTAMP, a GROUP BY
    of date_trunc and extract, and a projection of `/`, ROUND, CAST and ABS, fed columns
    (built from them) or rows, then the same changes (a value retracted, new ones, a group
    emptied): equal."""
    import decimal

    import planner.aggregate_columns as ac
    from planner import Catalog, Column, TableSchema
    from tests.planner_support import record_declines

    built = record_declines(monkeypatch, ac, "build_groups")
    rng = random.Random(9)
    n = 3000
    day = datetime.datetime(2024, 2, 29)
    table = pa.table([pa.array([rng.randint(0, 30) for _ in range(n)], pa.int64()),
                      pa.array([None if rng.random() < 0.1 else
                                decimal.Decimal(rng.randint(-10 ** 6, 10 ** 6)).scaleb(-2)
                                for _ in range(n)], pa.decimal128(15, 2)),
                      pa.array([None if rng.random() < 0.1 else
                                day + datetime.timedelta(seconds=rng.randint(0, 10 ** 5))
                                for _ in range(n)], pa.timestamp("us"))], names=["k", "m", "s"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("k", "BIGINT"),
                                                 Column("m", "DECIMAL(15,2)"),
                                                 Column("s", "TIMESTAMP")])})
    sqls = ["SELECT k, sum(m) AS total, avg(m) AS mean, count(m) AS n FROM t GROUP BY k",
            "SELECT k, min(s) AS first, max(s) AS last FROM t GROUP BY k",
            "SELECT k, min(m) AS lo, max(m) AS hi, count(DISTINCT m) AS nm FROM t GROUP BY k",
            # a timestamp key, made by functions over columns
            "SELECT date_trunc('hour', s) AS h, extract('dow' FROM s) AS dw, count(*) AS n"
            " FROM t GROUP BY 1, 2",
            "SELECT k, round(k / 3, 2) AS r, CAST(s AS DATE) AS day, abs(k - 15) AS a"
            " FROM t WHERE k % 2 = 0"]
    def changes(rows: list[Any]) -> list[Any]:
        gone = [r for r in rows if r[0] == 7]
        # each group's first and last time retracted, and a new one before them all
        ends = {r for k in range(30) for r in (
            min((r for r in rows if r[0] == k and r[2] is not None), key=lambda r: r[2]),
            max((r for r in rows if r[0] == k and r[2] is not None), key=lambda r: r[2]))}
        return ([(rows[0], -1), ((1, decimal.Decimal("0.01"), day), 1), ((99, None, None), 1)]
                + [(r, -1) for r in gone if r != rows[0]]
                + [(r, -1) for r in ends if r != rows[0] and r[0] != 7])

    _fed_both(table, cat, sqls, changes, built, [True, True, True, True])


def _fed_both(table: Any, cat: Any, sqls: list[str],
              changes: Any, built: list[bool] | None = None,
              expect: list[bool] | None = None) -> None:
    """The views `sqls` fed `table` as columns and as rows (`_hydrated`), then the updates
    `changes(rows)` at time 1: both equal after each, and hydrated to something. Fed columns,
    the builds recorded in `built` (`record_declines`) must be `expect`."""
    from tests.planner_support import norm

    outs = []
    for columns in (True, False):
        if built is not None:
            built.clear()
        df, h, caps, rows = _hydrated(table, cat, sqls, columns)
        if columns and built is not None:
            assert built == expect
        snaps = [Counter(norm(c.snapshot())) for c in caps]
        h.send(changes(rows))
        h.advance_to(2)
        df.run()
        outs.append((snaps, [Counter(norm(c.snapshot())) for c in caps]))
    assert outs[0] == outs[1]
    assert all(outs[0][0])


def _hydrated(table: Any, cat: Any, sqls: list[str], columns: bool) -> tuple[Any, ...]:
    """A dataflow of the views `sqls` over table t, fed `table` at time 0 as columns or as
    rows and run: (dataflow, t's input handle, the views' captures, the table's rows)."""
    import engine
    from planner import compile_view

    df = engine.Dataflow()
    h, src = df.new_input("t")
    caps = [compile_view(s, cat).build(df, {"t": src}).capture() for s in sqls]
    rows = list(rows_of(table, table.num_columns))
    if columns:
        h.send_columns(table)
    else:
        h.send([(r, 1) for r in rows])
    h.advance_to(1)
    df.run()
    return df, h, caps, rows


def test_a_dataflow_fed_columns_equals_one_fed_rows() -> None:
    """Through the planner's lowering: filter, map, GROUP BY with every aggregate, over a
    table sent as columns and as rows, then the same changes to both."""
    from planner import Catalog, Column, TableSchema

    rng = random.Random(7)
    n = 5000
    table = pa.table([pa.array([rng.randint(0, 40) for _ in range(n)], pa.int64()),
                      pa.array([None if rng.random() < 0.1 else rng.randint(-100, 100)
                                for _ in range(n)], pa.int32()),
                      pa.array([rng.choice([0.5, 1.25, -2.0]) for _ in range(n)], pa.float64())],
                     names=["id", "k", "v"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("id", "BIGINT"), Column("k", "INTEGER"),
                                                 Column("v", "DOUBLE")])})
    sqls = ["SELECT k % 7 AS b, count(*), count(k), sum(v), avg(id), min(id), max(v) FROM t "
            "WHERE id > 3 AND (k < 50 OR k IS NULL) GROUP BY k % 7",
            "SELECT id, k * 2 AS k2, v * 2.0 AS v2 FROM t WHERE v > 0"]
    _fed_both(table, cat, sqls,
              lambda rows: [(rows[0], -1), ((1, None, 0.5), 1), ((2, 99, -2.0), 1)])


def test_lazy_calls_keep_the_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Mfp holding a lazy call (CASE, COALESCE, OR: the generated kernels leave it to the
    reference) still runs over columns, so the GROUP BY after it is built from columns; fed
    columns or rows, and then the same changes, the views are equal."""
    import planner.aggregate_columns as ac
    from planner import Catalog, Column, TableSchema
    from tests.planner_support import record_declines

    built = record_declines(monkeypatch, ac, "build_groups")
    rng = random.Random(8)
    n = 5000
    table = pa.table([pa.array([rng.randint(0, 40) for _ in range(n)], pa.int64()),
                      pa.array([None if rng.random() < 0.1 else rng.randint(-100, 100)
                                for _ in range(n)], pa.int32()),
                      pa.array([rng.choice([0.5, 12.0, -2.0]) for _ in range(n)], pa.float64()),
                      pa.array([None if rng.random() < 0.1 else rng.random() < 0.5
                                for _ in range(n)], pa.bool_())],
                     names=["id", "k", "v", "b"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("id", "BIGINT"), Column("k", "INTEGER"),
                                                 Column("v", "DOUBLE"), Column("b", "BOOLEAN")])})
    sqls = ["SELECT id % 5 AS g, sum(CASE WHEN b THEN 1 ELSE 0 END) AS yes, count(*) FROM t "
            "WHERE k < 50 OR v > 10 GROUP BY id % 5",
            "SELECT id, coalesce(k, -1) AS k1, CASE WHEN v > 10 THEN 'big' END AS size FROM t "
            "WHERE b AND v > 1 OR id < 3"]
    # the CASE's sum built from columns
    _fed_both(table, cat, sqls,
              lambda rows: [(rows[0], -1), ((1, None, 12.0, True), 1), ((2, 99, -2.0, None), 1)],
              built, [True])


def _summed_reference(rows: list[tuple[Any, ...]], diff: int) -> list[tuple[str, int]]:
    """Equal rows summed as a Counter sums them (Python's equality), each row by its repr."""
    return sorted((repr(r), c * diff) for r, c in Counter(rows).items())


@pytest.mark.parametrize("seed", range(3))
def test_counted_columns_equal_the_rows_summed(seed: int) -> None:
    """`ColumnsAt.counted` (a by-self arrangement's distinct rows and counts, by Arrow) equals
    the rows counted in Python: values and their classes, NULLs, strings beyond ASCII, dates,
    timestamps, booleans, several columns, rows all distinct and rows repeated; and it
    declines what it must leave to the rows."""
    from engine.columns_at import COUNTED_MIN_ROWS, ColumnsAt

    rng = random.Random(seed)
    n = COUNTED_MIN_ROWS + rng.randint(0, 5000)
    few = {
        "i": pa.array([rng.choice([None, 0, -7, 2 ** 40]) for _ in range(n)], pa.int64()),
        "s": pa.array([rng.choice([None, "", "a", "é", "a\x00", "日本"]) for _ in range(n)]),
        "d": pa.array([rng.choice([None] + DATES) for _ in range(n)], pa.date32()),
        "t": pa.array([rng.choice([None] + STAMPS) for _ in range(n)], pa.timestamp("us")),
        "b": pa.array([rng.choice([None, True, False]) for _ in range(n)], pa.bool_()),
        "h": pa.array([rng.randint(0, 3) for _ in range(n)], pa.int16()),
        "u": pa.array(range(n), pa.int64()),
    }
    for names in (["i"], ["s"], ["d"], ["t"], ["b"], ["i", "s", "b"], ["h", "d", "t", "s"],
                  ["u"], ["u", "s"]):
        table = pa.table({c: few[c] for c in names})
        rows = list(rows_of(table, table.num_columns))
        for diff in (1, -2):
            got = ColumnsAt(table, (0,), diff).counted()
            assert got is not None, names
            distinct, counts = got
            assert counts.dtype == np.int64 and len(counts) == distinct.num_rows
            pairs = list(zip(rows_of(distinct, distinct.num_columns), counts.tolist(),
                             strict=True))
            assert sorted((repr(r), d) for r, d in pairs) == _summed_reference(rows, diff)
            assert sorted((repr(r), [v.__class__.__name__ for v in r]) for r, _ in pairs) == \
                sorted((repr(r), [v.__class__.__name__ for v in r]) for r in set(rows))
    # declined: floats (Python's -0.0 == 0.0), few rows, keyed payloads, no columns
    floats = pa.table({"f": pa.array([rng.choice([0.0, -0.0, 1.5]) for _ in range(n)])})
    small = pa.table({"i": few["i"].slice(0, COUNTED_MIN_ROWS - 1)})
    for payload in (ColumnsAt(floats, (0,), 1), ColumnsAt(small, (0,), 1),
                    ColumnsAt(pa.table({"i": few["i"]}), (0,), 1, key=(0,)),
                    ColumnsAt(pa.table({"i": few["i"]}).select([]), (0,), 1)):
        assert payload.counted() is None


def test_a_distinct_of_few_values_fed_columns_equals_one_fed_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """DISTINCT and UNION over a large table of few distinct rows: the by-self arrangement
    built from `counted()` gives the same views as rows, then after the same changes."""
    from engine.columns_at import COUNTED_MIN_ROWS, ColumnsAt
    from planner import Catalog, Column, TableSchema
    from tests.planner_support import norm

    used = []
    real = ColumnsAt.counted

    def counted(self: ColumnsAt) -> Any:
        out = real(self)
        used.append(out is not None)
        return out

    monkeypatch.setattr(ColumnsAt, "counted", counted)
    rng = random.Random(11)
    n = COUNTED_MIN_ROWS + 100
    table = pa.table([pa.array([rng.choice(["x", "y", None]) for _ in range(n)]),
                      pa.array([rng.randint(0, 4) for _ in range(n)], pa.int64()),
                      pa.array(range(n), pa.int64())], names=["s", "k", "id"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("s", "VARCHAR"), Column("k", "BIGINT"),
                                                 Column("id", "BIGINT")])})
    sqls = ["SELECT DISTINCT s, k FROM t", "SELECT k FROM t UNION SELECT k + 3 FROM t",
            "SELECT s, count(*) FROM (SELECT DISTINCT s, k FROM t) GROUP BY s",
            # mostly distinct rows; all distinct; set operations; EXISTS and NOT IN's keys
            "SELECT DISTINCT id % 700 AS a, s FROM t", "SELECT DISTINCT id FROM t",
            "SELECT id % 9 AS a FROM t EXCEPT SELECT k FROM t WHERE s = 'x'",
            "SELECT id % 6 AS a FROM t INTERSECT SELECT k FROM t WHERE s = 'y'",
            "SELECT id FROM t WHERE id % 3 = 0 AND EXISTS (SELECT 1 FROM t t2 "
            "WHERE t2.k = t.id % 5)",
            "SELECT count(*) AS n FROM t WHERE k NOT IN (SELECT id FROM t WHERE id < 2)"]
    outs = []
    for columns in (True, False):
        df, h, caps, rows = _hydrated(table, cat, sqls, columns)
        snaps = [Counter(norm(c.snapshot())) for c in caps]
        # the last row of each of a few (s, k) pairs goes, and a new pair comes
        gone = {}
        for r in rows:
            gone[r[:2]] = r
        h.send([(r, -1) for r in gone.values()] + [(("z", 9, -1), 1)])
        h.advance_to(2)
        df.run()
        outs.append((snaps, [Counter(norm(c.snapshot())) for c in caps]))
    assert outs[0] == outs[1]
    assert all(outs[0][0]) and any(used)


def test_states_held_as_arrays_are_made_when_their_group_changes() -> None:
    """A GROUP BY hydrated from columns holds its groups in arrays; a change to a group makes
    its state, the records it reports become the states' own sizes, and the view equals the
    same view fed rows."""
    from engine.operators.reduce_total import APPROX_BYTES_PER_RECORD, ReduceTotalOp
    from planner import Catalog, Column, TableSchema
    from tests.planner_support import norm

    rng = random.Random(3)
    n = 4000
    table = pa.table([pa.array([rng.randint(0, 30) for _ in range(n)], pa.int64()),
                      pa.array([None if rng.random() < 0.05 else rng.randint(-9, 9)
                                for _ in range(n)], pa.int64()),
                      pa.array([rng.random() for _ in range(n)], pa.float64())],
                     names=["k", "a", "f"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("k", "BIGINT"), Column("a", "BIGINT"),
                                                 Column("f", "DOUBLE")])})
    sql = "SELECT k, count(*), min(a), max(f), sum(f), max(a) FROM t GROUP BY k"
    rows = list(rows_of(table, 3))
    change = [(rows[i], -1) for i in range(0, n, 7)] + [((k, 5, 0.5), 1) for k in range(40)]
    results = []
    for columns in (True, False):
        df, h, (cap,), _ = _hydrated(table, cat, [sql], columns)
        (op,) = [o for o in df.ops if isinstance(o, ReduceTotalOp)]
        (stats,) = [s for s in df.arrangement_stats() if s["name"] == op.name]
        if columns:
            assert len(op.unbuilt) == 31 and not op.states  # held as arrays
            # ... and counted at the arrays' size, far below the states' estimate
            assert op.built_records == op.state_records
            assert 0 < stats["bytes"] < op.state_records * APPROX_BYTES_PER_RECORD / 4
        else:
            assert stats["bytes"] == op.state_records * APPROX_BYTES_PER_RECORD
        h.send(change)
        h.advance_to(2)
        df.run()
        # every group changed: every state made, and the arrays gone
        assert not op.unbuilt and op.built is None and len(op.states) == 40
        assert op.state_records == sum(st.size() for st in op.states.values())
        assert op.built_records == 0
        (stats,) = [s for s in df.arrangement_stats() if s["name"] == op.name]
        assert stats["bytes"] == op.state_records * APPROX_BYTES_PER_RECORD
        results.append(Counter(norm(cap.snapshot())))
    assert results[0] == results[1]


def test_states_in_arrays_are_counted_at_their_size_after_they_change() -> None:
    """A MIN/MAX group with many distinct values keeps them in arrays (planner.sorted_counts)
    when it first changes: `arrangement_stats` counts such a state at its arrays' bytes (not
    its records at APPROX_BYTES_PER_RECORD, many times more), kept exact change by change
    (`state_excess` is the states' own excess), and back to 0 when every group is gone."""
    from engine.operators.reduce_total import APPROX_BYTES_PER_RECORD, ReduceTotalOp, _excess
    from planner import Catalog, Column, TableSchema

    rng = random.Random(5)
    n = 20_000
    table = pa.table([pa.array([rng.randint(0, 9) for _ in range(n)], pa.int64()),
                      pa.array([rng.random() for _ in range(n)], pa.float64())],
                     names=["k", "f"])
    cat = Catalog(tables={"t": TableSchema("t", [Column("k", "BIGINT"), Column("f", "DOUBLE")])})
    df, h, _, rows = _hydrated(table, cat, ["SELECT k, min(f), max(f), count(*) FROM t GROUP BY k"],
                               True)
    (op,) = [o for o in df.ops if isinstance(o, ReduceTotalOp)]

    def stats_bytes() -> int:
        (stats,) = [s for s in df.arrangement_stats() if s["name"] == op.name]
        return int(stats["bytes"])

    hydrated = stats_bytes()
    h.send([(rows[i], -1) for i in range(0, 200)])  # every group changes
    h.advance_to(2)
    df.run()
    assert op.built is None and len(op.states) == 10
    assert op.state_excess == sum(_excess(st) for st in op.states.values()) < 0
    # the arrays of the sorted index (values, counts, tree: 24 bytes a value) against the
    # hydration's (8): far below 2 records a value at the per-record estimate
    assert stats_bytes() < 4 * hydrated
    assert stats_bytes() < op.state_records * APPROX_BYTES_PER_RECORD / 8
    h.send([(r, -1) for r in rows[200:]])
    h.advance_to(3)
    df.run()
    assert not op.states and op.state_excess == 0 and stats_bytes() == 0


def test_int_keys_find_groups_as_a_dict_does() -> None:
    """planner.aggregate_columns.IntKeys (one int key column's groups as an array): its
    `unbuilt()` answers `in`, `pop` and `len` exactly as the dict {key: position} would,
    under Python's equality, key after key."""
    from planner.aggregate_columns import IntKeys

    rng = random.Random(11)
    values = np.array(sorted(rng.sample(range(-10**6, 10**6), 500)) + [2 ** 63 - 1],
                      dtype=np.int64)
    keys = IntKeys(values)
    assert list(keys) == [(v,) for v in values.tolist()] and keys[3] == (int(values[3]),)
    unbuilt = keys.unbuilt()
    want = {k: i for i, k in enumerate(keys)}
    probes = [*(k for k in keys), (1.5,), (math.nan,), (math.inf,), (2 ** 63,), (-(2 ** 64),),
              ((1,),), (), (1, 2), ("1",), (None,), 7]
    probes += [(float(v),) for v in values[:20].tolist()] + [(True,), (False,)]
    rng.shuffle(probes)
    for k in probes:
        assert (k in unbuilt) == (k in want), k
        if k not in want:
            assert unbuilt.pop(k, -1) == -1
        if k in want:
            assert unbuilt.pop(k) == want.pop(k)
            assert k not in unbuilt
        assert len(unbuilt) == len(want)
    assert not unbuilt and not want


def test_int_sums_past_int64_are_exact() -> None:
    """Sums whose int64 total would wrap: declined to rows, or exact."""
    plan = IncrementalAggregates((Agg("sum", 1, False, "HUGEINT"),))
    table = pa.table([pa.array([1, 1, 1, 2]), pa.array([2 ** 62, 2 ** 62, 2 ** 62, -(2 ** 63)])],
                     names=["k", "v"])
    built = build_states(plan, table, (0,))
    if built is not None:
        assert built[(1,)].output()[0] == [((3 * 2 ** 62,), 1)]
        assert built[(2,)].output()[0] == [((-(2 ** 63),), 1)]


def test_a_sum_past_its_integer_type_raises_as_the_rows_do() -> None:
    """A SUM typed INTEGER (a plan made directly: SQL's is a HUGEINT) whose total leaves the
    type: the columns' output raises the per-row path's error; within the type it is the
    total, and a group without a value is NULL."""
    plan = IncrementalAggregates((Agg("sum", 1, False, "INTEGER"),))
    table = pa.table([pa.array([1, 1, 2, 3]), pa.array([2 ** 30, 2 ** 30, 5, None], pa.int64())],
                     names=["k", "v"])
    st = plan((1,))
    with pytest.raises(EvaluationError) as want:
        st.apply_vals([(1, 2 ** 30), (1, 2 ** 30)], 1)
        st.output()
    groups = build_groups(plan, table, (0,))
    assert groups is not None
    with pytest.raises(EvaluationError) as got:
        groups.rows()
    assert str(got.value) == str(want.value)
    fits = build_groups(plan, table.slice(2), (0,))
    assert fits is not None and fits.rows()[0] == [(5,), (None,)]


def test_an_int_compared_with_a_float_is_exact() -> None:
    """2**53 + 1 > 2.0**53 in Python (and SQL); a double conversion would make them equal."""
    table = pa.table([pa.array([2 ** 53 + 1], pa.int64()), pa.array([2.0 ** 53])],
                     names=["i", "f"])
    m = Mfp(Get("t", 2), (), (Call("gt", (Col(0), Col(1)), "BOOLEAN"),), (0,))
    got = columns_mfp(m)(table)  # type: ignore[misc]
    want = _reference(m, list(rows_of(table, 2)))
    assert want == [(2 ** 53 + 1,)]
    assert got is None or list(rows_of(got, 1)) == want


def _run_views(sqls: list[str], cat: Any, tables: dict[str, pa.Table], columns: bool,
               changes: list[dict[str, list[tuple[tuple[Any, ...], int]]]]) -> list[Any]:
    """Every view's snapshot after hydration (tables sent as columns or as rows) and after
    each change set, one epoch each."""
    import engine
    from planner import compile_view
    from tests.planner_support import norm

    df = engine.Dataflow()
    handles, sources = {}, {}
    for name in tables:
        handles[name], sources[name] = df.new_input(name)
    caps = [compile_view(s, cat).build(df, sources).capture() for s in sqls]
    for name, table in tables.items():
        if columns:
            handles[name].send_columns(table)
        else:
            handles[name].send([(r, 1) for r in rows_of(table, table.num_columns)])
    snaps = []
    for epoch, change in enumerate([{}, *changes], start=1):
        for name, updates in change.items():
            handles[name].send(updates)
        for h in handles.values():
            h.advance_to(epoch)
        df.run()
        snaps.append([Counter(norm(c.snapshot())) for c in caps])
    return snaps


@pytest.mark.parametrize("seed", range(6))
def test_int_key_matches_equal_a_nested_loop(seed: int) -> None:
    """`columns_join._sorted_matches`: the pairs of equal keys, in the order the join emits
    them (by left row, then by right row among equal keys), whether the right keys are
    dense (counted per value), sparse (binary search), in order already or not, with keys
    outside the other side's range and at int64's extremes."""
    from engine.columns_join import DENSE_SPAN, _ranges_dense, _sorted_matches

    rng = np.random.default_rng(seed)
    extremes = np.array([-(2 ** 63), 2 ** 63 - 1], dtype=np.int64)
    for m, n, span in ((0, 5, 10), (5, 0, 10), (300, 200, 50), (300, 200, 10 ** 12),
                       (1000, 50, 3000), (40, 2000, 100)):
        left = rng.integers(-span // 2, span // 2 + 1, m) if m else np.zeros(0, np.int64)
        right = rng.integers(-span // 3, span // 3 + 1, n) if n else np.zeros(0, np.int64)
        for r in (right, np.sort(right)):
            for lft in (left, np.concatenate((left, extremes))):
                where: dict[int, list[int]] = {}
                for j, v in enumerate(r.tolist()):
                    where.setdefault(v, []).append(j)
                want = [(i, j) for i, v in enumerate(lft.tolist()) for j in where.get(v, [])]
                got = _sorted_matches(lft, r)
                assert got is not None
                assert list(zip(got[0].tolist(), got[1].tolist(), strict=True)) == want
        dense = n and (int(right.max()) - int(right.min()) + 1) <= DENSE_SPAN * (m + n)
        assert (_ranges_dense(left, right) is not None) == bool(dense)


def test_delta_joins_of_columns_equal_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three-way (delta) joins on int and string keys, NULL keys, an IN subquery (a reduce's
    output, joined by the semi-join on columns), binary joins on two keys and a cross join,
    hydrated as columns and as rows, then changed: equal after every epoch, and the columns
    were joined as columns."""
    import engine.operators.half_join as half_join
    from planner import Catalog, Column, TableSchema

    calls = Counter()
    real = half_join.join_columns

    def counted(*args: Any) -> Any:
        out = real(*args)
        calls["columns" if out is not None and out[0] else "rows"] += 1
        return out

    monkeypatch.setattr(half_join, "join_columns", counted)
    import engine.executors.inprocess as inprocess

    real_tables = inprocess.join_tables

    def counted_tables(*args: Any) -> Any:
        out = real_tables(*args)
        calls["tables" if out is not None and len(out) else "table_rows"] += 1
        new, others, _ = args
        if out is not None and len(out) and any(getattr(b, "table", None) is None
                                                 and b.records for b in (new, *others)):
            calls["key_sets"] += 1
        return out

    monkeypatch.setattr(inprocess, "join_tables", counted_tables)
    rng = random.Random(3)
    nc, no, nl = 300, 2000, 8000
    segs = ["A", "B", "C"]
    tables = {
        "c": pa.table([pa.array(range(nc), pa.int32()),
                       pa.array([rng.choice(segs) for _ in range(nc)])], names=["ck", "seg"]),
        "o": pa.table([pa.array(range(no), pa.int64()),
                       pa.array([None if rng.random() < 0.02 else rng.randrange(nc + 5)
                                 for _ in range(no)], pa.int32()),
                       pa.array([rng.choice(segs) for _ in range(no)])],
                      names=["ok", "ck", "pri"]),
        "l": pa.table([pa.array([rng.randrange(no + 10) for _ in range(nl)], pa.int64()),
                       pa.array([float(rng.randint(1, 50)) for _ in range(nl)]),
                       pa.array([rng.choice(segs) for _ in range(nl)])],
                      names=["ok", "qty", "flag"]),
    }
    cat = Catalog(tables={
        "c": TableSchema("c", [Column("ck", "INTEGER"), Column("seg", "VARCHAR")]),
        "o": TableSchema("o", [Column("ok", "BIGINT"), Column("ck", "INTEGER"),
                               Column("pri", "VARCHAR")]),
        "l": TableSchema("l", [Column("ok", "BIGINT"), Column("qty", "DOUBLE"),
                               Column("flag", "VARCHAR")])})
    sqls = [
        "SELECT c.seg, o.pri, sum(l.qty), count(*) FROM c, o, l "
        "WHERE c.ck = o.ck AND o.ok = l.ok GROUP BY c.seg, o.pri",
        "SELECT o.ok, l.qty, c.seg FROM c, o, l WHERE c.ck = o.ck AND o.ok = l.ok "
        "AND c.seg = l.flag",
        "SELECT o.ok, o.pri, sum(l.qty) FROM o, l WHERE o.ok = l.ok AND o.ok IN "
        "(SELECT ok FROM l GROUP BY ok HAVING sum(qty) > 120) GROUP BY o.ok, o.pri",
        # binary joins: two keys (an int and a string), and a cross join
        "SELECT c.ck, o.ok FROM c, o WHERE c.ck = o.ck AND c.seg = o.pri",
        "SELECT c.seg, p.pri, count(*) FROM c, (SELECT DISTINCT pri FROM o) p "
        "GROUP BY c.seg, p.pri",
        # binary joins with a set of keys (a reduce's output): a decorrelated LATERAL's outer
        # keys (strings), and an IN subquery (ints)
        "SELECT p.pri, t.ok FROM (SELECT DISTINCT pri FROM o) p, LATERAL (SELECT ok FROM o x "
        "WHERE x.pri = p.pri ORDER BY ok DESC LIMIT 2) t",
        "SELECT o.ok, o.pri FROM o WHERE o.ok IN (SELECT ok FROM l GROUP BY ok "
        "HAVING sum(qty) > 100)",
    ]
    changes = [
        {"l": [((5, 60.0, "A"), 1), ((7, 99.0, "B"), 1)], "o": [((5, 1, "C"), 1)]},
        {"c": [((1, "B"), 1)], "l": [((5, 60.0, "A"), -1)]},
    ]
    with_columns = _run_views(sqls, cat, tables, True, changes)
    assert calls["columns"] >= 2 and calls["tables"] >= 1 and calls["key_sets"] >= 2, calls
    with_rows = _run_views(sqls, cat, tables, False, changes)
    assert with_columns == with_rows
    assert all(all(s) for s in with_rows[0])


def _join_tables_equals_rows(new: Any, other: Any, new_is_left: bool) -> bool | None:
    """None if `join_tables` declines `new` joined with `other`, else whether its rows, times,
    diffs and the classes of its values equal the row kernel's (`join_batches`)."""
    from engine.columns_join import join_tables
    from engine.kernels import join_batches

    got = join_tables(new, [other], new_is_left)
    if got is None:
        return None
    want: list[Any] = []
    join_batches(new, [other], lambda _k, a, b: a + b, new_is_left, want)
    mine: Counter = Counter()
    for r in rows_of(got.table, got.table.num_columns):
        mine[(r, got.time)] += got.diff
    ref: Counter = Counter()
    for r, t, w in want:
        ref[(r, t)] += w
    classes = [[type(v) for v in r] for r, _ in sorted(+mine, key=repr)] == \
        [[type(v) for v in r] for r, _ in sorted(+ref, key=repr)]
    return +mine == +ref and -mine == -ref and classes


@pytest.mark.parametrize("seed", range(10))
def test_a_key_set_joins_as_columns_as_rows(seed: int, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """A batch of columns joined with a set of keys (a batch whose every row is its one-column
    key, at one time with one diff) on columns equals the row kernel's join, whichever side
    is new and whichever is left; a batch of rows that is not such a set joins as a table
    (here at any size) or goes to the rows."""
    import engine.columns_join as columns_join

    monkeypatch.setattr(columns_join, "ROWS_AS_TABLE", 1)
    monkeypatch.setattr(columns_join, "TABLE_PER_ROW", 10 ** 9)
    from engine.lattice import Antichain
    from engine.rows_batch import KeyedRowsBatch
    from engine.trace import arrange_updates

    rng = random.Random(seed)
    kind = ["int", "str", "date"][seed % 3]

    def value(i: int) -> Any:
        return {"int": i - 20, "str": f"k{i}", "date": datetime.date(2000, 1, 1 + i)}[kind]

    n = rng.choice([5, 300])
    keys = [value(rng.randrange(25)) for _ in range(n)]
    arrow = {"int": pa.int32(), "str": pa.string(), "date": pa.date32()}[kind]
    table = pa.table([pa.array([rng.randrange(9) for _ in range(n)], pa.int64()),
                      pa.array(keys, arrow)], names=["v", "k"])
    lo, hi = Antichain([(0,)]), Antichain([(5,)])
    rows_batch = KeyedRowsBatch(None, (1,), (2,), rng.choice([1, -1]), lo, hi, lo, table=table)
    wanted = [value(i) for i in rng.sample(range(30), 12)]
    extra = [2 ** 70] if kind == "int" else []  # equal to no int64 value
    d = rng.choice([1, 2])
    key_set = arrange_updates([(((k,), (k,)), (3,), d) for k in wanted + extra], False, lo, hi,
                              lo)

    same_as_rows = _join_tables_equals_rows

    for new, other in ((rows_batch, key_set), (key_set, rows_batch)):
        for new_is_left in (True, False):
            # declined only for more keys than rows (the row path's lookups are as cheap),
            # one of them an int beyond int64 (no Arrow column of them)
            got = same_as_rows(new, other, new_is_left)
            assert got is True or (got is None and extra and key_set.records >
                                   rows_batch.records), (kind, new is key_set, new_is_left)
    # not a set of keys: a float equal to an int key and two times go to the rows; a batch
    # of rows wider than their key joins as a table
    day = datetime.date(2000, 1, 2)
    odd = {"int": [[(((1.0,), (1.0,)), (3,), 1)], [(((1,), (1.0,)), (3,), 1)]],
           "str": [[((("k1",), ("k1", 0)), (3,), 1)]],
           "date": [[(((day,), (day,)), (3,), 1), (((day,), (day,)), (4,), 1)]]}
    # insertions and retractions together: to the rows
    k0 = keys[0]
    mixed = arrange_updates([(((k0,), (k0, 1)), (3,), 1), (((k0,), (k0, 2)), (3,), -1)], False,
                            lo, hi, lo)
    assert same_as_rows(rows_batch, mixed, True) is None
    assert same_as_rows(mixed, rows_batch, False) is None
    for updates in odd[kind]:
        bad = arrange_updates(updates, False, lo, hi, lo)
        if kind == "str":  # joined as a table (None: nothing matched, new not a table)
            assert same_as_rows(rows_batch, bad, True) is True
            assert same_as_rows(bad, rows_batch, False) in (True, None)
        else:
            assert same_as_rows(rows_batch, bad, True) is None
            assert same_as_rows(bad, rows_batch, False) is None


def test_a_few_rows_against_a_large_table_stay_rows() -> None:
    """A batch of rows joins a batch of columns as a table only from `ROWS_AS_TABLE` rows and
    a `TABLE_PER_ROW`th of the table: a write's row against a hydrated table is one probe by
    rows, not a pass over the table's key column."""
    from engine.columns_join import ROWS_AS_TABLE, TABLE_PER_ROW, join_tables
    from engine.lattice import Antichain
    from engine.rows_batch import KeyedRowsBatch
    from engine.trace import arrange_updates

    lo, hi = Antichain([(0,)]), Antichain([(5,)])
    n = ROWS_AS_TABLE * TABLE_PER_ROW
    table = pa.table([pa.array(np.arange(n) % 997, pa.int64()), pa.array(np.arange(n))],
                     names=["k", "v"])
    big = KeyedRowsBatch(None, (0,), (2,), 1, lo, hi, lo, table=table)

    def rows(m: int) -> Any:
        return arrange_updates([(((k,), (k, -k)), (3,), 1) for k in range(m)], False, lo, hi, lo)

    assert join_tables(big, [rows(1)], True) is None
    assert join_tables(big, [rows(ROWS_AS_TABLE - 1)], True) is None
    assert _join_tables_equals_rows(big, rows(ROWS_AS_TABLE), True) is True
    assert _join_tables_equals_rows(rows(ROWS_AS_TABLE), big, False) is True


@pytest.mark.parametrize("seed", range(8))
def test_a_cross_join_with_few_rows_joins_as_columns_as_rows(seed: int) -> None:
    """A batch of columns under the empty key crossed with a batch of a few rows (a scalar
    subquery's value: at one time with one diff) on columns equals the row kernel's join,
    whichever side is new and whichever is left; more rows, two diffs or a value Arrow would
    not give back exactly go to the rows."""
    from decimal import Decimal

    from engine.columns_join import CROSS_ROWS, join_tables
    from engine.lattice import Antichain
    from engine.rows_batch import KeyedRowsBatch
    from engine.trace import arrange_updates

    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 200])
    table = pa.table([pa.array([rng.randrange(9) for _ in range(n)], pa.int64()),
                      pa.array([rng.choice(["a", None, "bc"]) for _ in range(n)])],
                     names=["v", "s"])
    lo, hi = Antichain([(0,)]), Antichain([(5,)])
    rows_batch = KeyedRowsBatch(None, (), (2,), rng.choice([1, -1]), lo, hi, lo, table=table)
    pool = [(4994.98, None, "x", None), (None, Decimal("1.50"), None, datetime.date(2001, 2, 3)),
            (-0.5, Decimal("-7.25"), "yz", datetime.date(1999, 1, 1)), (2.0, None, "", None)]
    few_rows = rng.sample(pool, rng.randint(1, 3))
    d = rng.choice([1, 2, -1])
    few = arrange_updates([(((), r), (3,), d) for r in few_rows], False, lo, hi, lo)

    for new, other in ((rows_batch, few), (few, rows_batch)):
        for new_is_left in (True, False):
            got = _join_tables_equals_rows(new, other, new_is_left)
            if got is None:  # an empty batch of columns as the other side: nothing to join
                assert n == 0 and new is few
                continue
            assert got, (new is few, new_is_left)
    # to the rows: more than CROSS_ROWS rows, two diffs, an int beyond int64, -0.00
    many = arrange_updates([(((), (i,)), (3,), 1) for i in range(CROSS_ROWS + 1)], False, lo,
                           hi, lo)
    two = arrange_updates([(((), (1,)), (3,), 1), (((), (2,)), (3,), 2)], False, lo, hi, lo)
    wide = arrange_updates([(((), (2 ** 70,)), (3,), 1)], False, lo, hi, lo)
    signed = arrange_updates([(((), (Decimal("-0.00"),)), (3,), 1)], False, lo, hi, lo)
    mixed = arrange_updates([(((), (1,)), (3,), 1), (((), ("1",)), (3,), 1)], False, lo, hi, lo)
    surrogate = arrange_updates([(((), ("\ud800",)), (3,), 1)], False, lo, hi, lo)
    for bad in (many, two, wide, signed, mixed, surrogate):
        assert join_tables(rows_batch, [bad], True) is None
        assert join_tables(bad, [rows_batch], False) is None
    # two batches at one time whose columns Arrow types otherwise (a decimal's precision): the
    # rows, not a failed concatenation
    if n:
        narrow, wide_dec = (arrange_updates([(((), (Decimal(v),)), (3,), 1)], False, lo, hi, lo)
                            for v in ("1.50", "123.25"))
        assert join_tables(rows_batch, [narrow, wide_dec], True) is None


# -- GROUP BY few codes, summed in the rows' own order ------------------------------------------

BY_CODE_AGGS = (Agg("count_star", None, False, "BIGINT"), Agg("count", 1, False, "BIGINT"),
                Agg("sum", 1, False, "HUGEINT"), Agg("avg", 2, False, "DOUBLE"),
                Agg("sum", 2, False, "DOUBLE"), Agg("sum", 3, False, "DOUBLE"),
                Agg("count", 5, False, "BIGINT"))


def _by_code_table(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    flags = np.array(["A", "N", "R", "é"[:1] if seed % 2 else "F"])[rng.integers(0, 4, n)]
    pairs = np.array(["ab", "é", "zz", "\x00b"])[rng.integers(0, 4, n)]  # 2 bytes each
    ints = rng.integers(-10 ** 6, 10 ** 6, n)
    prices = np.round(rng.uniform(-1e5, 1e5, n), 2)
    prices[rng.integers(0, n, 20)] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 5e-324], 20)
    quantities = rng.integers(1, 50, n).astype(np.float64)  # integral: the int64 sums
    dates = rng.integers(0, 20_000, n).astype("datetime64[D]")
    nulls = rng.random(n) < 0.1
    mixed = np.array(["x", "yy", "", "zzz"])[rng.integers(0, 4, n)]  # widths vary: Arrow's
    table = pa.table([
        pa.array(flags), pa.array(ints, mask=nulls), pa.array(prices, mask=nulls[::-1]),
        pa.array(quantities), pa.array(pairs), pa.array(dates, mask=nulls),
        pa.array(rng.integers(0, 3, n).astype(np.int32)), pa.array(mixed),
        pa.array(np.where(nulls, None, flags).tolist(), pa.string())],
        names=list("abcdefghi"))
    # several chunks, one of them a slice with an offset into its buffers
    third = n // 3
    return pa.concat_tables([table.slice(0, third), table.slice(third, third),
                             table.slice(2 * third)])


@pytest.mark.parametrize("seed", range(3))
def test_states_by_code_equal_states_by_runs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`build_groups` of few codes and no MIN/MAX (each column summed in the rows' order by
    code: `_build_by_code`) builds exactly the states and output of the sorted runs' path,
    for 1- and 2-byte string keys (`_fixed_width_codes`), mixed widths and NULL keys
    (Arrow's dictionary), int keys, several key columns and none; and for one key both
    equal the per-row states."""
    import planner.aggregate_columns as ac
    import planner.float_sums  # noqa: F401 - numba loaded: the compiled path is taken
    from tests.planner_support import record_declines

    n = ac.COMPILED_FLOAT_SUMS + 1000
    table = _by_code_table(seed, n)
    plan = IncrementalAggregates(BY_CODE_AGGS)
    taken = record_declines(monkeypatch, ac, "_build_by_code")
    for key in ((0,), (4,), (0, 4), (6,), (), (7,), (8,), (0, 6, 4)):
        taken.clear()
        by_code = build_states(plan, table, key)
        assert taken == [True], key
        monkeypatch.setattr(ac, "BY_CODE_RADIX", 0)
        by_runs = build_states(plan, table, key)
        monkeypatch.setattr(ac, "BY_CODE_RADIX", 256)
        assert by_code is not None and by_runs is not None
        assert list(by_code) == list(by_runs), key
        for k, st in by_runs.items():
            assert _state_view(by_code[k]) == _state_view(st), (key, k)
        groups = build_groups(plan, table, key)
        assert groups is not None
        rows, _ = groups.rows()
        assert [repr([(r, 1)]) for r in rows] == [repr(by_runs[k].output()[0])
                                                  for k in groups.keys]
        # ... and as columns: each group's key (from its first row) and output row
        cols = groups.columns()
        assert cols is not None
        out, _, _ = cols
        assert repr(list(rows_of(out, out.num_columns))) == repr(
            [tuple(k) + r for k, r in zip(groups.keys, rows, strict=True)])
    flags = build_states(plan, table, (0,))
    assert flags is not None
    rows = list(rows_of(table, table.num_columns))
    want = rows_by_key_reference(rows, (0,))
    assert set(want) == set(flags)
    for k, group in want.items():
        st = plan(k)
        st.apply_vals(group, 1)
        assert _state_view(st) == _state_view(flags[k]), k


def test_fixed_width_codes_equal_the_dictionary() -> None:
    """Each row's value through `_fixed_width_codes` is the row's string, for 1- and 2-byte
    values, chunks and slices, large strings; any other column is left to Arrow."""
    from planner.aggregate_columns import _fixed_width_codes

    one = pa.chunked_array([["b", "a", "b"], ["c"], [], ["a", "z"]])
    two = pa.chunked_array([pa.array(["ab", "é", "zz", "ab"]).slice(1), ["ba"]])
    large = pa.chunked_array([pa.array(["x", "y"], pa.large_string())])
    for col in (one, two, large, pa.array(["q", "r", "q"])):
        got = _fixed_width_codes(col)
        assert got is not None
        codes, values = got
        assert [values[c] for c in codes.tolist()] == col.to_pylist()
        assert values == sorted(set(col.to_pylist()))
    for col in (pa.array(["a", "bb"]), pa.chunked_array([["a"], ["bb"]]), pa.array(["a", None]),
                pa.array(["abc"]), pa.array([""]), pa.array([b"a"], pa.binary()),
                pa.array(["a long value of many bytes"]),
                pa.chunked_array([], pa.string())):
        assert _fixed_width_codes(col) is None, col


def _string_chunks(rng: random.Random, values: list[str], kind: Any) -> pa.ChunkedArray:
    """A chunked string column of `values` drawn at random: chunks of random lengths (some
    empty), some sliced, of Arrow type `kind`."""
    chunks = []
    for _ in range(rng.randint(1, 5)):
        arr = pa.array([rng.choice(values) for _ in range(rng.randint(0, 300))], kind)
        if len(arr) > 2 and rng.random() < 0.5:
            arr = arr.slice(rng.randint(0, 2), len(arr) - rng.randint(0, 2) - 2)
        chunks.append(arr)
    return pa.chunked_array(chunks, kind)


@pytest.mark.parametrize("seed", range(4))
def test_offset_codes_equal_the_int64_column_less_its_minimum(seed: int) -> None:
    """An integer key's offsets from its minimum, subtracted chunk by chunk
    (`_offset_codes`), equal the column as int64 (`int_column`) less its minimum, for every
    integer width, signed or not, chunked and sliced; a column with NULL, a span of 2**32 or
    more, or a uint64 value of 2**63 or more is left to the dictionary (None)."""
    from engine.rows_batch import int_column
    from planner.aggregate_columns import _offset_codes

    rng = random.Random(seed)
    ranges = {pa.int8(): (-128, 127), pa.int16(): (-300, 300), pa.int32(): (-2 ** 31, 2 ** 31 - 1),
              pa.int64(): (-2 ** 40, 2 ** 40), pa.uint8(): (0, 255), pa.uint32(): (0, 2 ** 32 - 1),
              pa.uint64(): (2 ** 62, 2 ** 63 - 1)}
    for kind, (lo, hi) in ranges.items():
        span = rng.choice([1, 7, 1000, hi - lo])
        base = rng.randint(lo, max(lo, hi - span))
        chunks = []
        for _ in range(rng.randint(1, 4)):
            arr = pa.array([base + rng.randint(0, min(span, hi - base))
                            for _ in range(rng.randint(0, 200))], kind)
            chunks.append(arr.slice(1) if len(arr) > 1 and rng.random() < 0.5 else arr)
        col = pa.chunked_array(chunks, kind)
        got = _offset_codes(col)
        ints = int_column(col)
        if not len(col):
            assert got is None
            continue
        assert ints is not None
        if int(ints.max()) - int(ints.min()) >= 2 ** 32:
            assert got is None, kind
            continue
        assert got is not None, kind
        part, low, size = got
        assert part.dtype == np.int64 and low == int(ints.min())
        assert size == int(ints.max()) - low + 1
        assert part.tolist() == (ints - low).tolist(), kind
    for col in (pa.array([1, None, 3]), pa.array([0, 2 ** 63], pa.uint64()),
                pa.array([-2 ** 40, 2 ** 40]), pa.chunked_array([], pa.int64()),
                pa.array([5, 5 + 2 ** 32])):
        assert _offset_codes(col) is None, col
    edge = _offset_codes(pa.array([5, 4 + 2 ** 32]))  # a span just below 2**32
    assert edge is not None and edge[0].tolist() == [0, 2 ** 32 - 1] and edge[2] == 2 ** 32


@pytest.mark.parametrize("seed", range(4))
def test_byte_codes_onto_combine_as_the_reference(seed: int) -> None:
    """`byte_codes_onto` turns each prefix code p into p * size + the row's own code, in
    place, exactly as combining `byte_codes` by mixed radix does; refusing a column (or an
    overflowing radix) leaves the prefix untouched."""
    from planner.byte_codes import byte_codes, byte_codes_onto

    rng = random.Random(seed)
    for pool in (["A", "N", "R"], ["ab", "é", "zz", "q~"], ["a", "bb"], ["long value"]):
        col = _string_chunks(rng, pool, rng.choice([pa.string(), pa.large_string()]))
        radix = rng.randint(1, 1000)
        prefix = np.array([rng.randrange(radix) for _ in range(len(col))], dtype=np.int64)
        before = prefix.copy()
        alone = byte_codes(col)
        values = byte_codes_onto(col, prefix, radix)
        if alone is None:
            assert values is None and prefix.tolist() == before.tolist()
            continue
        assert values == alone[1]
        assert prefix.tolist() == (before * max(len(values), 1) + alone[0]).tolist()
        big = before.copy()
        assert byte_codes_onto(col, big, 2 ** 61) is None and big.tolist() == before.tolist()


def test_large_group_keys_code_alike_compiled_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_codes` with the compiled string codes (a flag first, an int, then flags combined in
    place onto the codes before them), as a table of `_compiled_codes` rows gets them, equals
    `_codes` with every key column coded by the NumPy reference: the same codes, radix and
    decoders."""
    import planner.aggregate_columns as ac

    rng = np.random.default_rng(7)
    n = 20_000
    flags = np.array(["A", "N", "R"])[rng.integers(0, 3, n)]
    pairs = np.array(["ab", "é", "zz"])[rng.integers(0, 3, n)]
    table = pa.table({
        "f": pa.chunked_array([flags[: n // 3].tolist(), flags[n // 3:].tolist()]),
        "k": rng.integers(0, 50, n),
        "g": pa.array(pairs.tolist(), pa.large_string()),
        "h": pa.array(flags[::-1].tolist()),
    })
    for key in ((0, 1, 2, 3), (1, 0), (0, 2), (2,)):
        with monkeypatch.context() as m:
            m.setattr(ac, "_compiled_codes", lambda n: True)
            compiled = ac._codes(table, key)
        with monkeypatch.context() as m:
            m.setattr(ac, "_compiled_codes", lambda n: False)
            reference = ac._codes(table, key)
        assert compiled is not None and reference is not None
        assert compiled[0].tolist() == reference[0].tolist(), key
        assert compiled[1:] == reference[1:], key


@pytest.mark.parametrize("seed", range(6))
def test_byte_codes_equal_the_reference(seed: int) -> None:
    """The compiled codes of a 1- or 2-byte string column (`planner.byte_codes`) equal
    `_fixed_width_codes_reference`'s, codes and values alike, and both refuse the same
    columns (mixed widths, NULL, longer values, a multi-byte character's partial width)."""
    from planner.aggregate_columns import _fixed_width_codes_reference
    from planner.byte_codes import byte_codes

    rng = random.Random(seed)
    pools = [["A", "N", "R", "F", "O"], ["ab", "é", "zz", "~~", "Ab"], ["a", "bb"],
             ["x", "é"], ["longer", "x"], ["\x00", "\x7f", "q"]]
    for pool in pools:
        for kind in (pa.string(), pa.large_string()):
            col = _string_chunks(rng, pool, kind)
            got, want = byte_codes(col), _fixed_width_codes_reference(col)
            if want is None:
                assert got is None, (pool, col)
                continue
            assert got is not None, (pool, col)
            assert got[0].dtype == np.int64 and got[0].tolist() == want[0].tolist()
            assert got[1] == want[1]
            assert [got[1][c] for c in got[0].tolist()] == col.to_pylist()
    with_null = pa.chunked_array([pa.array(["a", None, "b"])])
    assert byte_codes(with_null) is None and _fixed_width_codes_reference(with_null) is None


@pytest.mark.parametrize("seed", range(4))
def test_dense_order_equals_a_stable_argsort(seed: int) -> None:
    """engine.counting_sort.dense_order against NumPy's stable sort on ids with duplicates,
    negative and offset values; None where the values are few or sparse."""
    from engine.counting_sort import DENSE_MIN, DENSE_SPAN, dense_order

    rng = np.random.default_rng(seed)
    n = DENSE_MIN + 17
    for low in (0, -(10 ** 12), 2 ** 40):
        values = rng.integers(low, low + n, n)
        values[: n // 10] = values[n // 2]  # a run of duplicates
        got = dense_order(values)
        assert got is not None and np.array_equal(got, np.argsort(values, kind="stable"))
    assert dense_order(rng.integers(0, 10, DENSE_MIN - 1)) is None
    sparse = np.arange(n) * (DENSE_SPAN + 1)
    assert dense_order(sparse) is None


def _denoted(payloads: list[Any]) -> Counter[Any]:
    """The collection some `ColumnsAt` denote: each (time, key, row) with its summed diff."""
    out: Counter[Any] = Counter()
    for p in payloads:
        for row in rows_of(p.table, p.table.num_columns):
            out[(p.time, p.key, repr(row), tuple(v.__class__.__name__ for v in row))] += p.diff
    return +out if all(v > 0 for v in out.values()) else Counter(
        {k: v for k, v in out.items() if v})


@pytest.mark.parametrize("seed", range(8))
def test_summed_columns_denote_the_sum_of_the_payloads(seed: int) -> None:
    """`summed_columns`: several `ColumnsAt` of one time and key as one denoting their sum
    (concatenated when of one diff, summed by Arrow when of several: rows retracted by another
    payload cancel, repeats come back as copies), over ints, strings, dates, timestamps,
    booleans and NULLs, column names that differ; None for sums of both signs, floats of
    several diffs, other column types, other times or keys, and a single payload."""
    from engine.columns_at import ColumnsAt, summed_columns

    rng = random.Random(seed)

    def table(n: int, names: tuple[str, ...] = ("a", "b", "c", "d")) -> Any:
        return pa.table({
            names[0]: pa.array([rng.choice([None, 1, 2, -3]) for _ in range(n)], pa.int64()),
            names[1]: pa.array([rng.choice([None, "x", "é", ""]) for _ in range(n)], pa.string()),
            names[2]: pa.array([rng.choice([None] + DATES[:2]) for _ in range(n)], pa.date32()),
            names[3]: pa.array([rng.choice([True, False]) for _ in range(n)], pa.bool_()),
        })

    key = rng.choice([None, (0,), (1, 2)])
    big = table(rng.randint(50, 300))
    # a part of `big` retracted, others inserted: the sum is non-negative
    gone = big.take(sorted(rng.sample(range(big.num_rows), rng.randint(0, big.num_rows))))
    payloads = [ColumnsAt(big, (1,), 1, key), ColumnsAt(gone, (1,), -1, key),
                ColumnsAt(table(rng.randint(0, 40), ("p", "q", "r", "s")), (1,), 2, key)]
    got = summed_columns(payloads)
    assert got is not None and got.diff == 1 and got.key == key and got.time == (1,)
    assert _denoted([got]) == _denoted(payloads)
    # all retractions: the sum is of diff -1
    got = summed_columns([ColumnsAt(gone, (1,), -1, key), ColumnsAt(big, (1,), -1, key)])
    assert got is not None and got.diff == -1
    assert _denoted([got]) == _denoted([ColumnsAt(gone, (1,), -1, key),
                                        ColumnsAt(big, (1,), -1, key)])
    # one diff: concatenated as they are
    same = [ColumnsAt(big, (1,), 3, key), ColumnsAt(gone, (1,), 3, key)]
    got = summed_columns(same)
    assert got is not None and got.diff == 3 and len(got) == len(big) + len(gone)
    assert _denoted([got]) == _denoted(same)
    # a row inserted and the same row retracted: nothing left
    got = summed_columns([ColumnsAt(big, (1,), 1, key), ColumnsAt(big, (1,), -1, key)])
    assert got is not None and len(got) == 0
    # declined
    def one(a: int, b: str) -> Any:
        return pa.table({"a": pa.array([a], pa.int64()), "b": [b],
                         "c": pa.array([None], pa.date32()), "d": [True]})

    floats = pa.table({"f": pa.array([0.0, -0.0, 1.5])})
    for declined in (
        [ColumnsAt(one(7, "n"), (1,), 1, key), ColumnsAt(one(8, "m"), (1,), -1, key)],
        [ColumnsAt(floats, (1,), 1), ColumnsAt(floats, (1,), -1)],
        [ColumnsAt(big, (1,), 1, key), ColumnsAt(big.select([1, 0, 2, 3]), (1,), 1, key)],
        [ColumnsAt(big, (1,), 1, key), ColumnsAt(big, (2,), -1, key)],
        [ColumnsAt(big, (1,), 1, (0,)), ColumnsAt(big, (1,), -1, (3,))],
        [ColumnsAt(big, (1,), 1, key)],
        [ColumnsAt(big, (1,), 1, key), RowsAtLike()],
        # a column NOT NULL in one and nullable in the other (Arrow would not concatenate
        # them); tables without columns (Arrow concatenates no rows of them)
        [ColumnsAt(big, (1,), 1, key), ColumnsAt(big.cast(pa.schema(
            [f.with_nullable(False) if f.name == "d" else f for f in big.schema])), (1,), 1,
            key)],
        [ColumnsAt(big.select([]), (1,), 1), ColumnsAt(gone.select([]), (1,), 1)],
    ):
        assert summed_columns(declined) is None


class RowsAtLike(list):
    """A payload that is not columns (a list of updates)."""


@pytest.mark.parametrize("seed", range(6))
def test_counted_rows_batch_equals_its_dict_form(seed: int) -> None:
    """`CountedRowsBatch` and a counting reduce's first round over it (`counted_round`, via
    `reduce_round`) equal the same batch as a plain dict `Batch` through the general round:
    counts of both signs and several sizes; distinct, thresholds that drop some counts and
    scale others; a count's `(n, 1)` outputs go the general way. Its rows read back as a
    collection are columns with their one count (`unarrange`), or rows when counts differ."""
    from engine import reducers
    from engine.columns_at import ColumnsAt
    from engine.counted_batch import CountedRowsBatch
    from engine.executors.inprocess import InProcessExecutor
    from engine.fields import ArrangedFields
    from engine.lattice import Antichain
    from engine.trace import Batch

    rng = random.Random(seed)
    n = rng.randint(1, 60)
    table = pa.table({"a": pa.array(rng.sample(range(1000), n), pa.int64()),
                      "s": pa.array([rng.choice(["x", None, "é"]) for _ in range(n)])})
    counts = np.array([rng.choice([-2, -1, 1, 1, 2, 3]) for _ in range(n)], dtype=np.int64)
    zero, upper = Antichain([(0,)]), Antichain([(1,)])
    batch = CountedRowsBatch(table, counts, (0,), zero, upper, zero)
    rows = list(rows_of(table, 2))
    assert batch.updates == {r: [((), (0,), c)] for r, c in zip(rows, counts.tolist(), strict=True)}
    assert batch.key_count() == len(batch) == n
    # extended to a later upper (a trace absorbing an empty batch, at every write), it keeps
    # its dict: not made again from the table by the next write's lookup
    later = batch.with_upper(Antichain([(5,)]), 3)
    assert later.upper == Antichain([(5,)]) and later.seq == 3 and later.lower == zero
    assert later.updates is batch.updates
    ex = InProcessExecutor()
    for logic in (reducers.distinct, reducers.threshold(lambda m: m - 1),
                  reducers.threshold(lambda m: 2 * m if m > 1 else 0), reducers.count):
        got, left = ex.reduce_round([batch], {}, [batch], [], zero, upper, logic, 1)
        plain = Batch(batch.updates, zero, upper, zero)
        want, _ = ex.reduce_round([plain], {}, [plain], [], zero, upper, logic, 1)
        assert ({} if got is None else got.updates) == ({} if want is None else want.updates)
        assert left == {}
        if logic is reducers.count:
            assert got.__class__ is Batch  # a count's outputs are values: the dict way
        elif got is not None:
            assert got.__class__ is CountedRowsBatch
    # settled when the run ends: the dict made, the table dropped; a reduce's first round
    # over it (an imported trace) then goes the dict way, with the same answer
    settled = CountedRowsBatch(table, counts, (0,), zero, upper, zero)
    columns_bytes = settled.approx_bytes()
    assert settled.settle() and settled.table is None and not settled.settle()
    assert settled.updates == batch.updates and settled.as_columns() is None
    assert settled.approx_bytes() > columns_bytes
    got, _ = ex.reduce_round([settled], {}, [settled], [], zero, upper, reducers.distinct, 1)
    plain = Batch(batch.updates, zero, upper, zero)
    want, _ = ex.reduce_round([plain], {}, [plain], [], zero, upper, reducers.distinct, 1)
    assert ({} if got is None else got.updates) == ({} if want is None else want.updates)
    assert got is None or got.__class__ is Batch
    same = CountedRowsBatch(table, np.full(n, 3, dtype=np.int64), (0,), zero, upper, zero)
    cols = ex.unarrange(same, ArrangedFields("key"))
    assert cols.__class__ is ColumnsAt and cols.diff == 3 and cols.table.equals(table)
    if len(set(counts.tolist())) > 1:
        got = ex.unarrange(batch, ArrangedFields("key"))
        assert sorted(got, key=repr) == sorted(
            [(r, (0,), c) for r, c in zip(rows, counts.tolist(), strict=True)], key=repr)


def _view_rows(sql: str, table: pa.Table, types: list[str], columns: bool) -> list[Any]:
    """`sql`'s rows over `table` as t, the table fed as columns (one batch) or row by row."""
    import engine
    from planner import Catalog, Column, TableSchema, compile_view

    cat = Catalog(tables={"t": TableSchema("t", [Column(c, ty) for c, ty in
                                                 zip(table.column_names, types, strict=True)])})
    df = engine.Dataflow()
    h, src = df.new_input("t")
    cap = compile_view(sql, cat).build(df, {"t": src}).capture()
    if columns:
        h.send_columns(table)
    else:
        for row in rows_of(table, table.num_columns):
            h.insert(row)
    h.advance_to(1)
    df.run()
    return sorted(Counter(cap.snapshot()).elements(), key=repr)


LEAST = -(2 ** 63)
_TIES = pa.table({"v": pa.array([9] + [0] * 99, pa.int64()), "id": pa.array(range(100), pa.int64())})
_LEAST = pa.table({"k": pa.array([1, 1, 2, 2, 3], pa.int64()),
                   "v": pa.array([LEAST, -1, LEAST, LEAST, 5], pa.int64())})
_LEAST_FLAGS = pa.table({"k": pa.array(["A", "B"] * 50_000),
                         "v": pa.array([LEAST] + [1] * 99_999, pa.int64())})


@pytest.mark.parametrize(("sql", "table"), [
    # a top-k whose window's last value ties through to the group's last row, and LIMIT 0,
    # over a group past the size whose copies beyond the window wait in a reserve
    ("SELECT id, v FROM t ORDER BY v DESC, id LIMIT 3", _TIES),
    ("SELECT id, v FROM t ORDER BY v, id LIMIT 0", _TIES),
    # sums past int64 from its least value (NumPy's abs of it is itself), small groups and
    # a large table summed by group code
    ("SELECT k, sum(v) AS s, avg(v) AS a, sum(DISTINCT v) AS d, avg(DISTINCT v) AS e "
     "FROM t GROUP BY k", _LEAST),
    ("SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k", _LEAST_FLAGS),
])
def test_hydration_edges_from_columns_equal_the_rows_and_duckdb(sql: str, table: pa.Table) -> None:
    import duckdb

    types = ["VARCHAR" if pa.types.is_string(t) else "BIGINT" for t in table.schema.types]
    con = duckdb.connect()
    con.register("src", table)
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    want = sorted(map(tuple, con.execute(sql).fetchall()), key=repr)
    got = _view_rows(sql, table, types, columns=True)
    assert got == _view_rows(sql, table, types, columns=False)
    assert [tuple(float(v) if isinstance(v, float) else v for v in r) for r in got] == want


def test_real_arithmetic_over_columns_equals_the_rows() -> None:
    """REAL (single-precision) arithmetic as the binder builds it, `to_single(op(CAST(x AS
    REAL), CAST(y AS REAL)))`, over a FLOAT column (float32), an int and a double column:
    the columns compute it and equal the rows' values (16777216 + 1 stays 16777216; a result
    past FLOAT's range is infinite); a double CAST to REAL past its range leaves the table to
    the rows, which raise."""
    r = [16777216.0, 0.1, -2.5, None, 3.4e38, -0.0, 1.0]
    i = [1, 3, None, 7, 2, -5, 2 ** 40]
    d = [0.3, 1e300, 2.0, None, 0.1, -1.5, 1e-50]
    table = pa.table([pa.array(r, pa.float32()), pa.array(i, pa.int64()),
                      pa.array(d, pa.float64())], names=list("rid"))
    rows = list(rows_of(table, 3))
    get = Get("t", 3)

    def real(e: Any) -> Any:
        return Call("cast", (e,), "REAL")

    def single(f: str, x: Any, y: Any) -> Any:
        return Call("to_single", (Call(f, (real(x), real(y)), "DOUBLE"),), "REAL")

    rc, ic, dc = Col(0), Col(1), Col(2)
    decided = [single("add", rc, Lit(1, "INTEGER")), single("mul", rc, rc),
               single("sub", ic, rc), single("mod", rc, Lit(0.3, "DOUBLE")),
               single("add", rc, rc), real(ic), real(rc), Call("cast", (rc,), "DOUBLE")]
    for e in decided:
        m = Mfp(get, (e,), (), (3,))
        kernel = columns_mfp(m)
        assert kernel is not None, e
        got, want = kernel(table), _reference(m, rows)
        assert got is not None, e
        assert want is not None and _same(list(rows_of(got, 1)), want), (e, want)
    assert [row[0] for row in rows_of(columns_mfp(Mfp(get, (decided[0],), (), (3,)))(table), 1)][0] \
        == 16777216.0  # type: ignore[misc]
    m = Mfp(get, (single("add", dc, rc),), (), (3,))  # 1e300 is past FLOAT's range
    assert columns_mfp(m)(table) is None  # type: ignore[misc]
    assert _reference(m, rows) is None
