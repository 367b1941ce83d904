"""An Mfp over whole Arrow columns: filter, map and project a table's rows at C speed.

`columns_mfp(m)` returns `over_columns(table) -> table | None` for an Mfp whose expressions are
all in the subset below, else None. Invariant: when `over_columns` returns a table, its rows
(`engine.sources.rows_of`) are exactly `lower.compile_mfp(m)` applied to the input table's rows,
in order; when the columns hold anything the subset cannot decide exactly (a type outside it,
an integer result outside its SQL type's range, a zero divisor, a NaN compared), it returns
None and the caller runs the per-row kernel over the rows, which then computes (or raises)
what the reference does. So a vectorised answer is never an approximation, and every error
and its message stay the per-row path's.

The subset: columns of Arrow integer, float64, boolean, string, date32, timestamp[us] and
decimal128 types; literals of those types (a Decimal at an exponent at most 0, not -0); comparisons of two values of one kind: ints, NaN-free floats,
strings (UTF-8 byte order is code point order, Python's), dates, timestamps, and of an int with
a NaN-free float (the int made a double where that is exact, below 2**53: Python's exact
comparison then gives the same answer; else Arrow refuses and the rows decide); AND, OR (Kleene
logic, which is SQL's), NOT, IS NULL; +, -, * of ints into an integer SQL type and of floats
into DOUBLE; REAL arithmetic as the binder builds it (a CAST to REAL of an int, a float64
or a FLOAT (float32) column, and `to_single` of its double result: single precision); +, -, *
of DECIMALs (and ints) of at most 18 digits, exactly, on their
unscaled int64 values (`_decimal_arith`: the result at the exponent Python's Decimal gives, no
-0; a value of 18 digits or more leaves the table to the rows), and comparisons of them at a
common scale; % of ints; / of ints and floats into DOUBLE (IEEE, as the reference divides); ABS
of ints within their type and of floats; ROUND(x, n) for a literal n from 0 to 15 (a double's
halves decided exactly, one by one where the product lies within an ulp of one); CAST of an
int to DOUBLE (exact below 2**53, else Arrow refuses and the rows decide), of a date to
TIMESTAMP (its midnight), of an int or float to an integer type (half to even, within the
type), of a timestamp to DATE (its day), of an int or string to VARCHAR, and of a string in
plain form (digits; a decimal number; YYYY-MM-DD, with a time for a TIMESTAMP) to an
integer type, DOUBLE, DATE or TIMESTAMP; extract of the
calendar's parts and date_trunc of a DATE or TIMESTAMP; LIKE with a literal pattern (as an RE2
expression); LOWER and UPPER of strings (Arrow's Unicode mapping where no character maps
otherwise in Python); || and CONCAT of strings; -x, FLOOR and CEIL;
// of ints (towards zero); LENGTH, STARTS_WITH, ENDS_WITH, CONTAINS, SUBSTR from a literal
position >= 1 and REPLACE of a literal non-empty pattern; IS DISTINCT FROM and NULLIF of
two values compared as above; GREATEST and LEAST of ints, floats (no NaN or -0.0: Python's max
picks among ties by position), strings, dates or timestamps; TRIM, LTRIM and RTRIM of Python's
whitespace or of literal characters; % of doubles (C's fmod, as math.fmod); date_diff in years,
months, quarters, weeks or days; a DATE or TIMESTAMP plus or minus a constant INTERVAL (months
first, the day clamped to the month's end); CASE and COALESCE whose results (NULL aside) are of
one kind. Every other value may be projected through untouched.

The Mfp's order (maps, then filters after the maps they read) does not matter here: nothing
in the subset raises, and any would-be error makes the whole table go to the per-row path. So
CASE and COALESCE, which the rows evaluate lazily (a branch not taken is never computed), may
compute every branch over every row here: a branch that could fail on a row it is not taken for
sends the table to the rows, which then decide.
"""

from __future__ import annotations

import datetime
import decimal
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.columns_at import value_kind
from engine.sources import decimal_unscaled
from planner.ir import Call, Col, Lit, Mfp, Scalar
from planner.scalar import (
    DIFF_MICROS,
    DIFF_PARTS,
    DIFF_SPANS,
    INT_RANGE,
    SPACE,
    Interval,
    norm_type,
)

_CMP = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
        "gt": "greater", "ge": "greater_equal"}
_ARITH = {"add": "add_checked", "sub": "subtract_checked", "mul": "multiply_checked"}
_FLOAT_ARITH = {"add": "add", "sub": "subtract", "mul": "multiply"}
# Besides comparisons and `_ARITH`, the calls that take a literal argument as a scalar (`k % 10`
# made a column of a million tens, then filled its NULLs and tested it for zeros).
_SCALAR_ARGS = frozenset({"div", "mod", "intdiv"})
_LITERALS = (int, float, bool, str, datetime.date, datetime.datetime, decimal.Decimal)
# A DECIMAL computed over columns holds fewer than this many digits (int64's 18): past it the
# rows decide (the per-row path's exact Decimals, or its error).
_DECIMAL_LIMIT = 10 ** 18


class _Undecided(Exception):
    """The columns hold something the subset cannot compute exactly: use the rows."""


def _is_null(e: Scalar) -> bool:
    """Whether `e` is a NULL literal (possibly cast, as the binder types a CASE's ELSE NULL)."""
    if isinstance(e, Lit):
        return e.value is None
    return isinstance(e, Call) and e.func == "cast" and len(e.args) == 1 and _is_null(e.args[0])


def _supported(e: Scalar) -> bool:
    """Whether `e` is in the subset by its shape (types are checked on the columns)."""
    if isinstance(e, Col):
        return True
    if isinstance(e, Lit):
        v = e.value
        if v.__class__ is decimal.Decimal:
            # at the exponent an Arrow decimal keeps (1E+2 would come back as 100), without a
            # sign Arrow has not (-0.0), and of 18 digits at most (an int64 unscaled)
            parts = v.as_tuple()
            return v.is_finite() and -18 <= parts.exponent <= 0 and \
                len(parts.digits) <= 18 and not (v.is_signed() and not v)
        return v is not None and v.__class__ in _LITERALS and not (
            v.__class__ is datetime.datetime and v.tzinfo is not None)
    if isinstance(e, Call) and e.func in ("case", "coalesce"):
        # results may be NULL literals; a CASE's conditions may not
        n = len(e.args)
        if e.func == "case" and (n < 3 or n % 2 == 0):
            return False
        conds = e.args[0:-1:2] if e.func == "case" else ()
        results = [*e.args[1:-1:2], e.args[-1]] if e.func == "case" else list(e.args)
        return bool(results) and all(_supported(c) for c in conds) and all(
            _is_null(v) or _supported(v) for v in results)
    if isinstance(e, Call) and e.func in ("add_interval", "sub_interval"):
        # a DATE or TIMESTAMP and a constant INTERVAL (the binder allows no other)
        return len(e.args) == 2 and _supported(e.args[0]) and isinstance(e.args[1], Lit) \
            and isinstance(e.args[1].value, Interval)
    if not isinstance(e, Call) or not all(_supported(a) for a in e.args):
        return False
    f = e.func
    if f in _CMP or f in ("and", "or"):
        return len(e.args) >= 2 if f in ("and", "or") else len(e.args) == 2
    if f in ("not", "is_null"):
        return len(e.args) == 1
    if f in _ARITH or f == "mod":
        t = norm_type(e.type)
        return len(e.args) == 2 and (t in INT_RANGE or t == "DOUBLE" or (
            f in _ARITH and t.startswith("DECIMAL")))
    if f == "cast":
        return norm_type(e.type) in ("DOUBLE", "REAL", "TIMESTAMP", "DATE", "VARCHAR") or \
            norm_type(e.type) in INT_RANGE
    if f == "to_single":
        return len(e.args) == 1
    if f == "div":
        return len(e.args) == 2 and norm_type(e.type) == "DOUBLE"
    if f == "abs":
        return len(e.args) == 1
    if f == "round":
        # round(x) or round(x, n) for a literal n from 0 to 15 (10**n a double exactly)
        return len(e.args) == 1 or (len(e.args) == 2 and isinstance(e.args[1], Lit)
                                    and e.args[1].value.__class__ is int
                                    and 0 <= e.args[1].value <= 15)
    if f in ("dpipe", "concat"):
        return len(e.args) >= 1
    if f in ("neg", "floor", "ceil", "length"):
        return len(e.args) == 1
    if f == "intdiv":
        return len(e.args) == 2 and norm_type(e.type) in INT_RANGE
    if f in ("starts_with", "ends_with", "contains"):
        return len(e.args) == 2 and isinstance(e.args[1], Lit)
    if f == "substr":  # from a literal position 1 on, for a literal length if any (past
        # DuckDB's largest, an error: by the rows)
        bounds = e.args[1:]
        return 1 <= len(bounds) <= 2 and all(
            isinstance(a, Lit) and a.value.__class__ is int for a in bounds) and \
            bounds[0].value >= 1 and bounds[-1].value >= 0 and \
            all(a.value <= 4_294_967_295 for a in bounds)  # type: ignore[union-attr]
    if f == "replace":
        return len(e.args) == 3 and all(isinstance(a, Lit) and a.value.__class__ is str
                                        for a in e.args[1:]) and e.args[1].value != ""  # type: ignore[union-attr]
    if f in ("extract", "date_trunc"):
        part = e.args[0]
        return (len(e.args) == 2 and isinstance(part, Lit) and part.value.__class__ is str
                and part.value.lower() in (_EXTRACT if f == "extract" else _TRUNC))
    if f == "like":
        return len(e.args) == 2 and isinstance(e.args[1], Lit)
    if f in ("lower", "upper"):
        return len(e.args) == 1
    if f in ("is_distinct", "nullif"):
        return len(e.args) == 2
    if f in ("greatest", "least"):
        return len(e.args) >= 1
    if f in ("trim", "ltrim", "rtrim"):  # Python's whitespace, or literal characters
        return len(e.args) == 1 or (len(e.args) == 2 and isinstance(e.args[1], Lit))
    if f == "date_diff":
        part = e.args[0]
        return len(e.args) == 3 and isinstance(part, Lit) and part.value.__class__ is str \
            and part.value.lower() in _DIFF
    return False


def columns_mfp(m: Mfp) -> Callable[[Any], Any] | None:
    """`over_columns` for `m` (see the module doc), or None when an expression of m is outside
    the subset, or m projects no column or reads an input of none (a table of no columns
    has no rows to count)."""
    n = m.input.arity
    if not m.project or not n or not all(_supported(e) for e in (*m.map, *m.filter)):
        return None

    def over_columns(table: Any) -> Any:
        import pyarrow as pa

        try:
            # a float column's -0.0 read as 0.0, as the rows read it (`engine.canonical`):
            # 1.0 / x is then +inf by both
            cols: list[Any] = [_no_negative_zero(table.column(i)) for i in range(n)]
            for e in m.map:
                cols.append(_eval(e, cols))
            keep = None
            for p in m.filter:
                v = _eval(p, cols)
                if not pa.types.is_boolean(v.type):
                    raise _Undecided
                keep = v if keep is None else _pc().and_kleene(keep, v)
        except (_Undecided, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        out = pa.table([cols[i] for i in m.project],
                       names=[f"c{j}" for j in range(len(m.project))])
        if keep is not None and (keep.null_count or not _pc().all(keep).as_py()):
            # (a filter every row passes, such as a join key's NOT NULL, copies nothing)
            out = out.filter(keep, null_selection_behavior="drop")
        return out

    return over_columns


def _no_negative_zero(col: Any) -> Any:
    """A floating column with every -0.0 made 0.0 (IEEE's -0.0 + 0.0); any other as it is."""
    import pyarrow as pa

    if not pa.types.is_floating(col.type) or not _holds_negative_zero(col):
        return col
    return _pc().add(col, pa.scalar(0.0, col.type))


def _holds_negative_zero(col: Any) -> bool:
    """Whether a floating column's data holds a -0.0: read in place, so that a column
    without one (nearly all) is passed on rather than copied. A null's slot may hold
    anything; one holding -0.0 costs only the copy."""
    import numpy as np

    chunks = col.chunks if hasattr(col, "chunks") else [col]
    for chunk in chunks:
        data = chunk.buffers()[1]
        if data is None or len(chunk) == 0:
            continue
        dtype = np.dtype(chunk.type.to_pandas_dtype())
        values = np.frombuffer(data, dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)
        if bool(((values == 0) & np.signbit(values)).any()):
            return True
    return False


def _pc() -> Any:
    import pyarrow.compute as pc

    return pc


def _kind(v: Any) -> str:
    return value_kind(v.type)


def _has_nan(v: Any) -> bool:
    import pyarrow as pa

    if isinstance(v, pa.Scalar):
        return v.is_valid and v.as_py() != v.as_py()
    pc = _pc()
    return v.null_count < len(v) and bool(pc.any(pc.is_nan(v)).as_py())


def _scalar(e: Lit) -> Any:
    import pyarrow as pa

    v = e.value
    if v.__class__ is int and not -(2 ** 63) <= v < 2 ** 63:
        raise _Undecided
    return pa.scalar(v, _literal_type(v))


def _literal(e: Lit, length: int) -> Any:
    import pyarrow as pa

    return pa.repeat(_scalar(e), length)


def _literal_type(v: Any) -> Any:
    import pyarrow as pa

    if v.__class__ is decimal.Decimal:
        digits = v.as_tuple()
        scale = -digits.exponent
        return pa.decimal128(max(len(digits.digits), scale, 1), scale)
    return {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string(),
            datetime.date: pa.date32(), datetime.datetime: pa.timestamp("us")}[v.__class__]


def _eval(e: Scalar, cols: list[Any]) -> Any:
    """The column of `e`'s values over the table whose columns (inputs, then maps) are
    `cols`; raises _Undecided where the subset cannot decide."""
    pc = _pc()
    if isinstance(e, Col):
        return cols[e.index]  # of any type: each operation below checks its arguments' kinds
    length = len(cols[0])
    if isinstance(e, Lit):
        return _literal(e, length)
    assert isinstance(e, Call)
    f = e.func
    if f in ("case", "coalesce"):
        return _choice(e, cols)
    if f == "like":
        return _like(_eval(e.args[0], cols), _scalar(e.args[1]))  # type: ignore[arg-type]
    if f in ("add_interval", "sub_interval"):
        iv = e.args[1].value  # type: ignore[union-attr]
        return _plus_interval(_eval(e.args[0], cols), iv if f == "add_interval" else -iv)
    if (f in _CMP or f in _ARITH or f in _SCALAR_ARGS) and not all(isinstance(a, Lit) for a in e.args):
        # a literal beside a column stays a scalar: Arrow broadcasts it (no column of copies)
        args = [_scalar(a) if isinstance(a, Lit) else _eval(a, cols) for a in e.args]
    else:
        args = [_eval(a, cols) for a in e.args]
    kinds = [_kind(a) for a in args]
    if f in _CMP:
        return getattr(pc, _CMP[f])(*_comparable(args, kinds))
    if f in ("and", "or"):
        if any(k != "bool" for k in kinds):
            raise _Undecided
        out = args[0]
        for a in args[1:]:
            out = (pc.and_kleene if f == "and" else pc.or_kleene)(out, a)
        return out
    if f == "not":
        if kinds[0] != "bool":
            raise _Undecided
        return pc.invert(args[0])
    if f == "is_null":
        return pc.is_null(args[0])
    if f in ("extract", "date_trunc"):
        return _calendar(f, e.args[0].value.lower(), args[1])  # type: ignore[union-attr]
    if f in ("lower", "upper"):
        return _case_of(f, args[0])
    if f == "is_distinct":
        return _is_distinct(*_comparable(args, kinds))
    if f == "nullif":
        return _nullif(args[0], _comparable(args, kinds))
    if f in ("greatest", "least"):
        return _extreme(f, args, kinds)
    if f in ("trim", "ltrim", "rtrim"):
        return _trim(f, args[0], kinds[0], e.args[1].value if len(e.args) == 2 else None)  # type: ignore[union-attr]
    if f == "date_diff":
        return _date_diff(e.args[0].value.lower(), args[1], args[2])  # type: ignore[union-attr]
    t = norm_type(e.type)
    if f in _ARITH and t.startswith("DECIMAL"):
        return _decimal_arith(f, args)
    if f == "to_single":
        return _single(args[0], kinds[0], overflow=True)
    if f == "cast":
        import pyarrow as pa

        if pa.types.is_float32(args[0].type) and t in ("DOUBLE", "REAL"):
            return pc.cast(args[0], pa.float64())  # exact: every single is a double
        if t == "REAL" and kinds[0] in ("int", "float"):
            return _single(_as_double(args[0]) if kinds[0] == "int" else args[0], "float",
                           overflow=False)
        if (kinds[0], t) in (("float", "DOUBLE"), ("timestamp", "TIMESTAMP")):
            return args[0]
        if (kinds[0], t) == ("int", "DOUBLE"):
            return pc.cast(args[0], pa.float64())  # safe: refuses an int a double cannot hold
        if (kinds[0], t) == ("date", "TIMESTAMP"):
            return pc.cast(args[0], pa.timestamp("us"))  # the date's midnight
        if t in INT_RANGE and kinds[0] in ("int", "float"):
            return _to_int(args[0], kinds[0], t)
        if (kinds[0], t) == ("timestamp", "DATE"):
            return _day_of(args[0])
        if (kinds[0], t) == ("str", "VARCHAR"):
            return args[0]
        if (kinds[0], t) == ("int", "VARCHAR"):
            return pc.cast(args[0], pa.string())  # str(int): its decimal digits
        if kinds[0] == "str" and (t in INT_RANGE or t in ("DOUBLE", "DATE", "TIMESTAMP")):
            return _parsed(args[0], t)
        raise _Undecided
    if f == "div":
        return _divide(args, kinds)
    if f == "abs":
        return _abs(args[0], kinds[0], t)
    if f == "round":
        return _round(args[0], kinds[0], e.args[1].value if len(e.args) == 2 else 0)  # type: ignore[union-attr]
    if f in ("dpipe", "concat"):
        return _join(f, args, kinds)
    if f in ("neg", "floor", "ceil", "intdiv"):
        return _numeric_call(f, args, kinds, t)
    if f in ("length", "starts_with", "ends_with", "contains", "substr", "replace"):
        return _string_call(f, args[0], kinds[0],
                            [a.value for a in e.args[1:]])  # type: ignore[union-attr]
    if kinds != ["int", "int"] and not (kinds == ["float", "float"] and t == "DOUBLE"):
        raise _Undecided
    if kinds[0] == "float":
        if f == "mod":
            return _float_mod(args[0], args[1])
        if f not in _FLOAT_ARITH:
            raise _Undecided
        return getattr(pc, _FLOAT_ARITH[f])(args[0], args[1])  # IEEE, as Python's floats
    if f == "mod":
        out = _int_mod(args[0], args[1])
    else:
        out = getattr(pc, _ARITH[f])(args[0], args[1])  # raises ArrowInvalid past int64
    return _within(out, t)


def _comparable(args: list[Any], kinds: list[str]) -> tuple[Any, Any]:
    """Two values to compare as Python compares them: of one kind, an int with a float both
    as doubles where that is exact (Python's exact comparison then agrees; a literal past
    2**53 or a column Arrow refuses to cast exactly sends the table to the rows), and no NaN."""
    if sorted(kinds) == ["float", "int"]:
        args = [_as_double(a) if k == "int" else a for a, k in zip(args, kinds, strict=True)]
        kinds = ["float", "float"]
    if "other" in kinds and all(_is_fixed(a) for a in args):
        return _common_scale(args)
    if kinds[0] != kinds[1] or kinds[0] in ("bool", "other"):
        raise _Undecided
    if kinds[0] == "float" and (_has_nan(args[0]) or _has_nan(args[1])):
        raise _Undecided
    return args[0], args[1]


def _is_fixed(v: Any) -> bool:
    """Whether `v` (a column or a scalar) is a decimal128 or an integer."""
    import pyarrow as pa

    return pa.types.is_decimal128(v.type) or pa.types.is_integer(v.type)


def _fixed(v: Any) -> tuple[Any, np.ndarray | None, int]:
    """A decimal128 or integer column as `(unscaled int64 values, validity or None, scale)`
    (NULLs as 0), or a scalar as `(its unscaled int, None, scale)`; raises _Undecided for a
    NULL scalar and for a value past int64 (a decimal of more than 18 digits)."""
    import pyarrow as pa

    pc = _pc()
    t = v.type
    scale = t.scale if pa.types.is_decimal128(t) else 0
    if isinstance(v, pa.Scalar):
        x = v.as_py()
        if x is None:
            raise _Undecided
        x = int(x.scaleb(scale)) if scale or x.__class__ is decimal.Decimal else int(x)
        if _beyond(x, _DECIMAL_LIMIT):
            raise _Undecided
        return x, None, scale
    valid = None if not v.null_count else _numpy(pc.is_valid(v))
    if pa.types.is_integer(t):
        vals = _numpy(pc.fill_null(pc.cast(v, pa.int64()), 0)) if v.null_count else \
            _numpy(pc.cast(v, pa.int64()))
        scale = 0
    else:
        chunks = v.chunks if isinstance(v, pa.ChunkedArray) else [v]
        parts = [decimal_unscaled(c) for c in chunks]
        if any(p is None for p in parts):
            raise _Undecided
        vals = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    # every operand below 10**18: a sum of two, or one made up to 18 digits finer, is
    # computed within int64
    if _beyond(vals, _DECIMAL_LIMIT):
        raise _Undecided
    return vals, valid, scale


def _beyond(x: Any, limit: int) -> bool:
    """Whether some value of int64 `x` (an array or an int) is not strictly between -limit
    and limit. (Not `abs(x) >= limit`: NumPy's abs of -2**63 is -2**63.)"""
    return bool(np.any((x >= limit) | (x <= -limit)))


def _rescaled(x: Any, by: int) -> Any:
    """Unscaled values `x` (each below `_DECIMAL_LIMIT`) made `by` digits finer, each still
    below it; raises _Undecided where one would not be."""
    if not by:
        return x
    if by >= 18:  # (10**18 itself is past any value's room; 10**19 is past int64)
        raise _Undecided
    factor = 10 ** by
    if _beyond(x, _DECIMAL_LIMIT // factor):
        raise _Undecided
    return x * factor


def _both_valid(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a & b


def _decimal_arith(f: str, args: list[Any]) -> Any:
    """`a + b`, `a - b` or `a * b` of DECIMALs (or a DECIMAL and an int) exactly as the per-row
    path's Decimals give it: at scale max(sa, sb) for + and -, sa + sb for * (the exponent of
    Python's exact result), NULL where either is, and 0 for a zero (DuckDB's DECIMAL, like
    Arrow's, has no -0). A result of 18 digits or more, or an operand that is not a decimal of
    at most 18 digits or an int, leaves the table to the rows."""
    import pyarrow as pa

    if not all(_is_fixed(a) for a in args) or not any(
            pa.types.is_decimal128(a.type) for a in args):
        raise _Undecided  # ints alone are not DECIMAL arithmetic: Python would give an int
    (a, va, sa), (b, vb, sb) = _fixed(args[0]), _fixed(args[1])
    if f == "mul":
        scale = sa + sb
        # |a * b| < 10**18, decided on doubles with a margin (a product past int64 must not
        # be computed at all)
        if np.any(np.abs(np.asarray(a, dtype=np.float64)) * np.abs(
                np.asarray(b, dtype=np.float64)) >= 0.9 * _DECIMAL_LIMIT):
            raise _Undecided
        out = np.multiply(a, b, dtype=np.int64)
    else:
        scale = max(sa, sb)
        a, b = _rescaled(a, scale - sa), _rescaled(b, scale - sb)
        out = np.add(a, b, dtype=np.int64) if f == "add" else np.subtract(a, b, dtype=np.int64)
        if _beyond(out, _DECIMAL_LIMIT):
            raise _Undecided
    if np.ndim(out) == 0 or scale > 18:  # (two literals alone are folded by the binder)
        raise _Undecided
    from planner.aggregate_columns import _decimals

    valid = _both_valid(va, vb)
    return _decimals(out, scale, np.ones(len(out), dtype=bool) if valid is None else valid)


def _common_scale(args: list[Any]) -> tuple[Any, Any]:
    """Two DECIMALs (or a DECIMAL and an int) as int64 values at their common scale, to
    compare exactly as Python compares Decimals (a scalar stays a scalar)."""
    import pyarrow as pa

    parts = [_fixed(a) for a in args]
    scale = max(s for _, _, s in parts)
    out = []
    for (x, valid, s), a in zip(parts, args, strict=True):
        x = _rescaled(x, scale - s)
        if isinstance(a, pa.Scalar):
            out.append(pa.scalar(int(x), pa.int64()))
        else:
            out.append(pa.array(x, pa.int64(), mask=None if valid is None else ~valid))
    return out[0], out[1]


def _is_distinct(a: Any, b: Any) -> Any:
    """a IS DISTINCT FROM b: two NULLs are not distinct, a NULL and a value are, two values
    are when unequal."""
    pc = _pc()
    return pc.if_else(pc.is_null(a), pc.is_valid(b), pc.fill_null(pc.not_equal(a, b), True))


def _nullif(a: Any, compared: tuple[Any, Any]) -> Any:
    """NULLIF(a, b): NULL where a and b are both values and equal (`compared`: the two as
    `_comparable` makes them), else a, of a's type."""
    import pyarrow as pa

    pc = _pc()
    same = pc.fill_null(pc.equal(*compared), False)
    return pc.if_else(same, pa.scalar(None, a.type), a)


def _extreme(f: str, args: list[Any], kinds: list[str]) -> Any:
    """GREATEST and LEAST of values of one kind, NULLs skipped (NULL when all are), as
    Python's max and min of the values pick them. Equal values are the same value, except a
    float's zeros: max(0.0, -0.0) is whichever comes first, so a -0.0 (or a NaN, which Python
    orders by position) sends the table to the rows."""
    import pyarrow as pa

    pc = _pc()
    kind = kinds[0]
    if any(k != kind for k in kinds) or kind not in ("int", "float", "str", "date", "timestamp"):
        raise _Undecided
    if kind == "int":
        args = [pc.cast(a, pa.int64()) for a in args]
    if kind == "float":
        for a in args:
            x = _numpy(pc.fill_null(a, 1.0))
            if np.isnan(x).any() or ((x == 0) & np.signbit(x)).any():
                raise _Undecided
    fn = pc.max_element_wise if f == "greatest" else pc.min_element_wise
    return fn(*args, skip_nulls=True)


def _trim(f: str, v: Any, kind: str, chars: str | None) -> Any:
    """TRIM, LTRIM and RTRIM of strings: DuckDB's spaces (`scalar.SPACE`), or each of literal
    `chars`."""
    if kind != "str":
        raise _Undecided
    pc = _pc()
    fn = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[f]
    return v if chars == "" else fn(v, characters=SPACE if chars is None else chars)


def _day_numbers(v: Any, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A DATE or TIMESTAMP column's days since 1970-01-01 (floored) and microseconds since
    then (a date's midnight), NULLs as 0."""
    import pyarrow as pa

    pc = _pc()
    if kind == "date":
        days = _numpy(pc.fill_null(pc.cast(v, pa.int32()), 0)).astype(np.int64)
        return days, days * _US_DAY
    stamps = _numpy(pc.fill_null(pc.cast(v, pa.int64()), 0))
    return stamps // _US_DAY, stamps


def _months(days: np.ndarray) -> np.ndarray:
    """Months since 1970-01 of days since 1970-01-01, floored."""
    return days.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)


def _month_start(months: np.ndarray) -> np.ndarray:
    """The first day (days since 1970-01-01) of months since 1970-01."""
    return months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)


# The parts `date_diff` computes over columns, by `planner.scalar.DIFF_PARTS`' names
# (`planner.scalar._date_diff` is the reference; an ISO year goes by the rows).
_DIFF = frozenset(k for k, p in DIFF_PARTS.items() if p != "isoyear")


def _date_diff(part: str, a: Any, b: Any) -> Any:
    """date_diff(part, a, b) of DATE or TIMESTAMP columns: the calendar's years, months,
    quarters, decades, centuries or millennia between them; the microseconds since 1970
    floored to hours, minutes, seconds...; or whole days (weeks: the days over 7, towards
    zero) between their dates."""
    import pyarrow as pa

    kinds = (_kind(a), _kind(b))
    if any(k not in ("date", "timestamp") for k in kinds):
        raise _Undecided
    (da, ua), (db, ub) = _day_numbers(a, kinds[0]), _day_numbers(b, kinds[1])
    nulls = _nulls_of_columns(a, b)
    p = DIFF_PARTS[part]
    if p == "year":
        out = _months(db) // 12 - _months(da) // 12
    elif p in DIFF_SPANS:
        # a year y is 1970 + months // 12 (floored): (y // span) needs the year itself
        out = (_months(db) // 12 + 1970) // DIFF_SPANS[p] - (_months(da) // 12 + 1970) // DIFF_SPANS[p]
    elif p == "month":
        out = _months(db) - _months(da)
    elif p == "quarter":
        # (year * 12 + month - 1) // 3, less 1970 * 12 // 3 (a whole number of quarters)
        out = _months(db) // 3 - _months(da) // 3
    elif p in DIFF_MICROS:
        out = ub // DIFF_MICROS[p] - ua // DIFF_MICROS[p]
    else:
        out = db - da
        if p == "week":
            out = np.sign(out) * (np.abs(out) // 7)
    return pa.array(out, pa.int64(), mask=nulls)


# TIMESTAMP's range, in microseconds since 1970: 0001-01-01 to 9999-12-31 23:59:59.999999.
_US_MIN, _US_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999


def _plus_interval(v: Any, iv: Interval) -> Any:
    """A DATE or TIMESTAMP column plus a constant INTERVAL, as `planner.scalar._add_interval`
    adds it: the months first (the day clamped to the new month's last), then the days and
    microseconds. A result past years 1 to 9999 leaves the rows to raise."""
    import pyarrow as pa

    kind = _kind(v)
    if kind not in ("date", "timestamp") or isinstance(v, pa.Scalar) or \
            abs(iv.months) > 120_000 or abs(iv.days) > 3_700_000 or abs(iv.micros) > 2 ** 62:
        raise _Undecided
    nulls = _nulls(v)
    days, stamps = _day_numbers(v, kind)
    of_day = stamps - days * _US_DAY
    if iv.months:
        months = _months(days)
        into = days - _month_start(months)  # days into the month
        months = months + iv.months
        if len(months) and not (-1969 * 12 <= months.min() and months.max() < 8030 * 12):
            raise _Undecided  # a year outside 1 to 9999
        start = _month_start(months)
        days = start + np.minimum(into, _month_start(months + 1) - start - 1)
    out = (days + iv.days) * _US_DAY + of_day + iv.micros
    if len(out) and (out.min() < _US_MIN or out.max() > _US_MAX):
        raise _Undecided
    return pa.array(out, pa.timestamp("us"), mask=nulls)


def _int_operands(a: Any, b: Any) -> tuple[Any, Any, np.ndarray | None]:
    """The int64 values of `a` and `b` (columns, or a literal's scalar: a NumPy scalar, which
    broadcasts), and where either is NULL (None: nowhere); a column `b` (a divisor) is 1 there.
    (A literal divisor stays a scalar: a zero one leaves the table to the rows, NULLs or not.)"""
    x, y = _filled(a, 0), _filled(b, 1)
    nulls = _nulls_of_columns(a, b)
    if nulls is not None and np.ndim(y):
        y = np.where(nulls, 1, y)
    return x, y, nulls


def _filled(v: Any, fill: int | float) -> Any:
    """A numeric column's values with its NULLs `fill`, as int64 for an int `fill` (its own
    doubles for a float one); a literal's as a NumPy scalar of that kind (never NULL:
    `_supported`)."""
    import pyarrow as pa

    kind = np.int64 if isinstance(fill, int) else np.float64
    if isinstance(v, pa.Scalar):
        return kind(v.as_py())
    if kind is np.int64:
        v = _pc().cast(v, pa.int64())
    return _numpy(_pc().fill_null(v, fill) if v.null_count else v)


def _nulls_of_columns(*vs: Any) -> np.ndarray | None:
    """Where any of the columns among `vs` is NULL (literals never are), as `_nulls` gives it."""
    import pyarrow as pa

    cols = [v for v in vs if not isinstance(v, pa.Scalar)]
    if not any(c.null_count for c in cols):
        return None
    valid = cols[0].is_valid()
    for c in cols[1:]:
        valid = _pc().and_(valid, c.is_valid())
    return ~_numpy(valid)


def _float_mod(a: Any, b: Any) -> Any:
    """% of doubles: C's fmod (exact, the dividend's sign), NaN for a zero divisor, NULL where
    either is NULL. An infinite dividend (math.fmod raises) leaves the rows to decide."""
    import pyarrow as pa

    x, y = _filled(a, 0.0), _filled(b, 1.0)
    if np.isinf(x).any():
        raise _Undecided
    nulls = _nulls_of_columns(a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.fmod(x, y)
    return pa.array(r, pa.float64(), mask=nulls)


# What every string must look like for Arrow's cast to parse it as the reference does
# (`scalar._convert`: Python's int(), float(), date.fromisoformat() and datetime.fromisoformat()
# of the stripped string; a fraction of a second has at most 6 digits, no zone).
# Any other string (spaces, underscores, non-ASCII digits, 'inf', a fraction cast to an int,
# which the reference rounds) leaves the column to the rows.
_TEXT = {"int": r"\A[+-]?[0-9]+\z", "float": r"\A[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\z",
         "date": r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\z",
         "timestamp": r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?)?\z"}
_DAY_ONE = -719_162  # 0001-01-01 in days since 1970-01-01: Arrow parses a year 0, Python not


def _parsed(v: Any, t: str) -> Any:
    """CAST of a string column to an integer type, DOUBLE, DATE or TIMESTAMP, when every
    string is in the plain form `_TEXT` gives; Arrow refuses what does not parse (past int64,
    Feb 30, 24:00), and the rows then decide."""
    import pyarrow as pa

    pc = _pc()
    form = {"DATE": "date", "TIMESTAMP": "timestamp", "DOUBLE": "float"}.get(t, "int")
    plain = pc.match_substring_regex(v, _TEXT[form])
    if plain.null_count < len(plain) and not pc.all(plain).as_py():
        raise _Undecided
    if form == "int":
        return _within(pc.cast(v, pa.int64()), t)
    if form == "float":
        return pc.cast(v, pa.float64())  # correctly rounded, as Python's float()
    out = pc.cast(v, pa.date32() if form == "date" else pa.timestamp("us"))
    first, width = (_DAY_ONE, pa.int32()) if form == "date" else (_US_MIN, pa.int64())
    if out.null_count < len(out) and pc.min(pc.cast(out, width)).as_py() < first:
        raise _Undecided
    return out


def _within(out: Any, t: str) -> Any:
    """`out`, an integer column computed for SQL type `t`, when every value fits `t`; past
    it the per-row path raises its out-of-range error, so the table goes to the rows (as it
    does for a type not an integer's)."""
    if t not in INT_RANGE:
        raise _Undecided
    lo, hi = INT_RANGE[t]
    if len(out) > out.null_count:
        mm = _pc().min_max(out)
        if mm["min"].as_py() < lo or mm["max"].as_py() > hi:
            raise _Undecided
    return out


def _single(v: Any, kind: str, overflow: bool) -> Any:
    """A float64 column's values rounded to single precision (`scalar._to_single`), as
    float64. A finite value past FLOAT's range is infinite where `overflow` (arithmetic's
    result), else the rows decide (a CAST refuses it)."""
    import pyarrow as pa

    if kind != "float":
        raise _Undecided
    x = _filled(v, 0.0)
    with np.errstate(over="ignore"):
        single = x.astype(np.float32)
    if not overflow and bool((np.isinf(single) & np.isfinite(x)).any()):
        raise _Undecided
    return pa.array(single.astype(np.float64), pa.float64(), mask=_nulls(v))


def _nulls(v: Any) -> np.ndarray | None:
    """Column `v`'s NULLs as a NumPy mask (None: it has none), to rebuild a result with."""
    return _numpy(_pc().is_null(v)) if v.null_count else None


def _as_double(v: Any) -> Any:
    """An int scalar or column as float64, exactly (a value past 2**53 raises)."""
    import pyarrow as pa

    if isinstance(v, pa.Scalar):
        x = v.as_py()
        if x is not None and abs(x) > 2 ** 53:
            raise _Undecided
        return pa.scalar(None if x is None else float(x), pa.float64())
    return _pc().cast(v, pa.float64())  # safe: refuses an int a double cannot hold


def _result(e: Scalar, cols: list[Any]) -> Any:
    """A CASE or COALESCE result's values: None for a NULL literal, a scalar for a literal
    (Arrow broadcasts it), else its column."""
    if _is_null(e):
        return None
    if isinstance(e, Lit):
        return _scalar(e)
    return _eval(e, cols)


def _choice(e: Call, cols: list[Any]) -> Any:
    """CASE (the first condition that is TRUE picks its result; NULL is not TRUE) and
    COALESCE (the first non-NULL argument) over whole columns, when every result that is not
    a NULL literal is of one kind (ints of any width as int64)."""
    import pyarrow as pa

    pc = _pc()
    if e.func == "case":
        conds = [_eval(c, cols) for c in e.args[0:-1:2]]
        if any(_kind(c) != "bool" for c in conds):
            raise _Undecided
        results = [_result(v, cols) for v in (*e.args[1:-1:2], e.args[-1])]
    else:
        conds = []
        results = [_result(v, cols) for v in e.args]
    present = [v for v in results if v is not None]
    kinds = {_kind(v) for v in present}
    if len(kinds) != 1 or kinds <= {"other"}:
        raise _Undecided
    if kinds == {"int"}:
        present = [pc.cast(v, pa.int64()) for v in present]
        results = [None if v is None else pc.cast(v, pa.int64()) for v in results]
    null = pa.scalar(None, present[0].type)
    results = [null if v is None else v for v in results]
    if e.func == "coalesce":
        out = pc.coalesce(*results)
    else:
        out = results[-1]
        for c, v in zip(reversed(conds), reversed(results[:-1]), strict=True):
            out = pc.if_else(pc.fill_null(c, False), v, out)
    if isinstance(out, pa.Scalar):  # every result a literal, no condition a column
        out = pa.repeat(out, len(cols[0]))
    return out


def _numpy(v: Any) -> np.ndarray:
    """A null-free Arrow array or chunked array as a NumPy array."""
    import pyarrow as pa

    if isinstance(v, pa.ChunkedArray):
        return v.to_numpy()
    return v.to_numpy(zero_copy_only=False)


def _int_mod(a: Any, b: Any) -> Any:
    """SQL's truncating remainder (the sign of the dividend), NULL where either is NULL; a
    zero divisor leaves the rows to raise."""
    import pyarrow as pa

    x, y, nulls = _int_operands(a, b)
    least = np.iinfo(np.int64).min
    if np.ndim(y) == 0:  # a literal divisor: no column of comparisons with it
        if y == 0 or (y == -1 and (x == least).any()):
            raise _Undecided
    elif (y == 0).any() or ((x == least) & (y == -1)).any():
        raise _Undecided
    r = np.fmod(x, y)  # C's remainder: truncating, the dividend's sign
    return pa.array(r, type=pa.int64(), mask=nulls)


# The parts `extract` and `date_trunc` compute over columns (`planner.scalar._extract` and
# `_date_trunc` are the reference; the binder lowers the part's name). `date_trunc` of any
# other part is its argument as a timestamp, as the reference gives it.
# the parts over columns, by their canonical names (`planner.scalar.DATE_PARTS`, which the
# binder gives every call); the rest go to the rows
_EXTRACT = frozenset({"year", "month", "day", "quarter", "dow", "isodow", "doy", "week", "hour",
                      "minute", "second"})
_TRUNC = frozenset({"year", "quarter", "month", "week", "day", "hour", "minute", "second",
                    "millisecond", "microsecond"})
_US_DAY = 86_400_000_000
# The characters RE2 reads as syntax (each escaped by a backslash to stand for itself).
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _calendar(f: str, part: str, v: Any) -> Any:
    """`extract(part, v)` (an int64 column) or `date_trunc(part, v)` (a timestamp column) of a
    DATE or TIMESTAMP column, by NumPy's calendar: days and months since 1970, floored, as
    Python's dates and datetimes count them. NULL stays NULL."""
    import pyarrow as pa

    kind = _kind(v)
    if kind not in ("date", "timestamp") or isinstance(v, pa.Scalar):
        raise _Undecided
    nulls = _nulls(v)
    days, stamps = _day_numbers(v, kind)
    day = days.astype("datetime64[D]")

    # each a pass or two over the column, made only for the parts that read it
    def months() -> np.ndarray:
        return _months(days)

    def years() -> np.ndarray:
        return day.astype("datetime64[Y]")

    def isodow() -> np.ndarray:
        return (days + 3) % 7 + 1  # 1970-01-01 was a Thursday

    if f == "date_trunc":
        if part == "year":
            at = years().astype("datetime64[D]").astype(np.int64) * _US_DAY
        elif part in ("quarter", "month"):
            start = months()
            if part == "quarter":
                start -= start % 12 % 3
            at = _month_start(start) * _US_DAY
        elif part == "week":
            at = (days - (isodow() - 1)) * _US_DAY  # back to Monday
        elif part == "day":
            at = days * _US_DAY
        else:
            step = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
                    "millisecond": 1_000, "microsecond": 1}[part]
            at = stamps // step * step  # floored, as the rows' replace() of the smaller fields
        return pa.array(at, pa.timestamp("us"), mask=nulls)
    if part == "year":
        out = years().astype(np.int64) + 1970
    elif part == "month":
        out = months() % 12 + 1
    elif part == "day":
        out = days - _month_start(months()) + 1
    elif part == "quarter":
        out = months() % 12 // 3 + 1
    elif part == "dow":
        out = isodow() % 7
    elif part == "isodow":
        out = isodow()
    elif part == "doy":
        out = days - years().astype("datetime64[D]").astype(np.int64) + 1
    elif part == "week":
        # ISO 8601: the week's Thursday decides its year; week 1 holds that year's first one
        thursday = days - (isodow() - 1) + 3
        first = thursday.astype("datetime64[D]").astype("datetime64[Y]") \
            .astype("datetime64[D]").astype(np.int64)
        out = (thursday - first) // 7 + 1
    elif kind == "date":
        out = np.zeros(len(days), np.int64)  # a date's hour, minute and second
    else:
        of_day = stamps - days * _US_DAY
        if part == "hour":
            out = of_day // 3_600_000_000
        elif part == "minute":
            out = of_day // 60_000_000 % 60
        else:
            out = of_day // 1_000_000 % 60
    return pa.array(out, pa.int64(), mask=nulls)


def _like(v: Any, pattern: Any) -> Any:
    """`s LIKE pattern` over a string column (`planner.scalar._like`: `%` any run of
    characters, `_` one character, everything else itself, no escape; the whole string):
    the same pattern as an RE2 expression, `.` matching any code point, newlines too."""
    import pyarrow as pa

    if _kind(v) != "str" or isinstance(v, pa.Scalar) or not isinstance(pattern, pa.Scalar):
        raise _Undecided
    p = pattern.as_py()
    if p.__class__ is not str:
        raise _Undecided
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else
                    "\\" + ch if ch in _RE2_SPECIAL else ch for ch in p)
    return _pc().match_substring_regex(v, pattern=f"(?s)\\A(?:{regex})\\z")


def _case_of(f: str, v: Any) -> Any:
    """LOWER or UPPER of a string column: Arrow's ASCII mapping where every value is ASCII;
    else Arrow's Unicode mapping, where no value holds a character that it maps otherwise
    than Python's `str.lower` and `str.upper` (`_unlike_python`); other columns go to the
    rows."""
    import pyarrow as pa

    pc = _pc()
    if _kind(v) != "str" or isinstance(v, pa.Scalar):
        raise _Undecided
    if v.null_count == len(v) or pc.all(pc.string_is_ascii(v)).as_py():
        return pc.ascii_lower(v) if f == "lower" else pc.ascii_upper(v)
    if pc.any(pc.match_substring_regex(v, _unlike_python(f))).as_py():
        raise _Undecided
    return pc.utf8_lower(v) if f == "lower" else pc.utf8_upper(v)


# Every character with a case mapping lies below this code point, in Python's tables and in
# Arrow's (a test checks the whole range).
_CASED_END = 0x20000


@functools.cache
def _unlike_python(f: str) -> str:
    """An RE2 class of the characters Arrow's `utf8_lower` / `utf8_upper` (one code point at a
    time, by utf8proc's tables) maps otherwise than the rows' LOWER / UPPER
    (`planner.case_mapping`, DuckDB's): tables of another Unicode version ('ß' is 'ẞ' in
    DuckDB, itself in Arrow). Found once per process, in about 0.1 s."""
    import pyarrow as pa

    from planner.case_mapping import sql_lower, sql_upper

    chars = [chr(c) for c in range(_CASED_END) if not 0xD800 <= c <= 0xDFFF]
    arrow = (_pc().utf8_lower if f == "lower" else _pc().utf8_upper)(pa.array(chars)).to_pylist()
    rows = sql_lower if f == "lower" else sql_upper
    unlike = [c for c, a in zip(chars, arrow, strict=True) if rows(c) != a]
    return "[" + "".join("\\x{%x}" % ord(c) for c in unlike) + "]"


def _to_int(v: Any, kind: str, t: str) -> Any:
    """CAST of an int or float column to integer type `t` (`planner.scalar._convert`): a
    float rounded half to even (Python's `round`); a NaN, an infinity or a value outside `t`
    (which the rows refuse with their error) sends the table to the rows."""
    import pyarrow as pa

    pc = _pc()
    if kind == "float":
        x = _numpy(pc.fill_null(v, 0.0))
        if not np.isfinite(x).all():
            raise _Undecided
        r = np.rint(x)  # half to even
        if len(r) and (r.min() < -(2.0 ** 63) or r.max() >= 2.0 ** 63):
            raise _Undecided
        out = pa.array(r.astype(np.int64), pa.int64(), mask=_nulls(v))
    else:
        out = pc.cast(v, pa.int64())  # safe: refuses a uint64 past int64
    return _within(out, t)


def _day_of(v: Any) -> Any:
    """CAST of a TIMESTAMP column to DATE: the day it falls in (`datetime.date()`), its
    microseconds floored to days."""
    import pyarrow as pa

    pc = _pc()
    us = _numpy(pc.fill_null(pc.cast(v, pa.int64()), 0))
    days = (us // _US_DAY).astype(np.int32)
    return pa.array(days, pa.int32(), mask=_nulls(v)).cast(pa.date32())


def _divide(args: list[Any], kinds: list[str]) -> Any:
    """`a / b` of ints or floats into DOUBLE (`planner.scalar._div`): both made doubles (an
    int exactly, else Arrow refuses and the rows decide), then IEEE division, which is the
    reference's rule for a zero divisor too (0/0 NaN, else an infinity of the signs' sign)."""
    if any(k not in ("int", "float") for k in kinds):
        raise _Undecided
    a, b = (_as_double(x) if k == "int" else x for x, k in zip(args, kinds, strict=True))
    return _pc().divide(a, b)


def _abs(v: Any, kind: str, t: str) -> Any:
    """ABS of an int column within its SQL type (past it the rows raise) or of a float."""
    pc = _pc()
    if kind == "float":
        return pc.abs(v)
    if kind != "int" or t not in INT_RANGE:
        raise _Undecided
    return _within(pc.abs_checked(v), t)  # (ArrowInvalid for its Arrow type's minimum)


def _join(f: str, args: list[Any], kinds: list[str]) -> Any:
    """`a || b` (NULL if either is) and CONCAT (NULLs skipped) of strings."""
    if any(k != "str" for k in kinds):
        raise _Undecided
    pc = _pc()
    if f == "concat":
        # a NULL is skipped: it adds nothing, as the empty string does (Arrow's own "skip"
        # lost a row of a lone argument's join in pyarrow 26)
        args = [pc.fill_null(a, "") for a in args]
    return pc.binary_join_element_wise(*args, "")


def _round(v: Any, kind: str, n: int) -> Any:
    """ROUND(x, n), 0 <= n <= 15 (`planner.scalar._round`): an int is itself; a double is
    `round_double`: x * 10**n rounded to an integer, halves away from zero, decided on the
    exact product, then divided back. The product as a double is within half an ulp of the
    exact one, so its rounding is the exact product's except where the product lies within
    an ulp of a half: those values (halves such as 2.5 among them) are rounded one by one by
    the reference itself."""
    import pyarrow as pa

    from planner.scalar import round_double

    pc = _pc()
    if kind == "int":
        return v
    if kind != "float":
        raise _Undecided
    nulls = _nulls(v)
    x = _numpy(pc.fill_null(v, 0.0)).astype(np.float64, copy=True)
    m = 10.0 ** n
    with np.errstate(invalid="ignore", over="ignore"):
        p = x * m
        a = np.abs(p)
        whole = np.floor(a)
        frac = a - whole
        near = np.isfinite(p) & (a < 2.0 ** 52) & (np.abs(frac - 0.5) <= np.spacing(a))
        nearest = np.where(frac > 0.5, whole + 1.0, whole)
        r = np.where(a < 2.0 ** 52, np.copysign(nearest, p), p) / m
        out = np.where(np.isfinite(p) & np.isfinite(r), r, x)  # the reference keeps x then
    for i in np.flatnonzero(near).tolist():
        out[i] = round_double(float(x[i]), n)
    return pa.array(out, pa.float64(), mask=nulls)


def _numeric_call(f: str, args: list[Any], kinds: list[str], t: str) -> Any:
    """-x, FLOOR, CEIL and `//` (`planner.scalar`): an int's result within its SQL type (past it,
    or a zero divisor, the rows raise); FLOOR and CEIL of an int itself, of a float its
    integral value as a float with no negative zero (Python's `float(math.floor(x))`),
    NaN and infinities themselves; `//` of ints truncated towards zero."""
    import pyarrow as pa

    pc = _pc()
    if f in ("floor", "ceil"):
        if kinds[0] == "int":
            return args[0]
        if kinds[0] != "float":
            raise _Undecided
        x = _numpy(pc.fill_null(args[0], 0.0))
        whole = (np.floor(x) if f == "floor" else np.ceil(x)) + 0.0  # -0.0 + 0.0 is 0.0
        return pa.array(whole, pa.float64(), mask=_nulls(args[0]))
    if f == "neg" and kinds[0] == "float":
        return pc.negate(args[0])
    if any(k != "int" for k in kinds) or t not in INT_RANGE:
        raise _Undecided
    if f == "neg":
        out = pc.negate_checked(pc.cast(args[0], pa.int64()))  # raises past int64
    else:
        x, y, nulls = _int_operands(args[0], args[1])
        least = np.iinfo(np.int64).min
        if (y == 0).any() or (x == least).any() or (y == least).any():
            raise _Undecided  # a zero divisor raises; the minimum has no absolute value
        q = np.abs(x) // np.abs(y)
        out = pa.array(np.where((x < 0) != (y < 0), -q, q), pa.int64(), mask=nulls)
    return _within(out, t)


# Past the length of any string (Arrow's are below 2**63 bytes), within int64.
_LONGEST = 2 ** 62


def _string_call(f: str, v: Any, kind: str, literals: list[Any]) -> Any:
    """LENGTH (code points), STARTS_WITH, ENDS_WITH, CONTAINS, SUBSTR from a position >= 1
    (code points, as Python's slicing) and REPLACE of a non-empty pattern (every
    non-overlapping occurrence, left to right, as `str.replace`), of a string column."""
    import pyarrow as pa

    pc = _pc()
    if kind != "str" or isinstance(v, pa.Scalar):
        raise _Undecided
    if f == "length":
        return pc.cast(pc.utf8_length(v), pa.int64())
    if f == "substr":
        # an end past any string's length is that length (Arrow takes int64s: a BIGINT's
        # largest length from a start past 1 would overflow; the literals are int64s)
        begin = literals[0] - 1
        stop = min(begin + literals[1], _LONGEST) if len(literals) > 1 else None
        return pc.utf8_slice_codeunits(v, start=begin, stop=stop)
    if literals[0].__class__ is not str:
        raise _Undecided
    if f == "replace":
        return pc.replace_substring(v, pattern=literals[0], replacement=literals[1])
    if f == "starts_with":
        return pc.starts_with(v, pattern=literals[0])
    if f == "ends_with":
        return pc.ends_with(v, pattern=literals[0])
    return pc.match_substring(v, pattern=literals[0])
