"""An Mfp over whole Arrow columns: filter, map and project a table's rows at C speed.

`columns_mfp(m)` returns `over_columns(table) -> table | None` for an Mfp whose expressions are
all in the subset below, else None. Invariant: when `over_columns` returns a table, its rows
(`engine.sources.rows_of`) are exactly `lower.compile_mfp(m)` applied to the input table's rows,
in order; when the columns hold anything the subset cannot decide exactly (a type outside it,
an integer result outside its SQL type's range, a zero divisor, a NaN compared), it returns
None and the caller runs the per-row kernel over the rows, which then computes (or raises)
what the reference does. So a vectorised answer is never an approximation, and every error
and its message stay the per-row path's.

The subset: columns of Arrow integer, float64, boolean, string, date32 and timestamp[us]
types; literals of those types; comparisons of two values of one kind: ints, NaN-free floats,
strings (UTF-8 byte order is code point order, Python's), dates, timestamps; AND, OR (Kleene
logic, which is SQL's), NOT, IS NULL; +, -, * of ints into an integer SQL type and of floats
into DOUBLE; % of ints; CAST of an int to DOUBLE (exact below 2**53, else Arrow refuses and the
rows decide) and of a date to TIMESTAMP (its midnight). Every other value may be projected
through untouched.

The Mfp's order (maps, then filters after the maps they read) does not matter here: nothing
in the subset raises, and any would-be error makes the whole table go to the per-row path.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.columns_at import value_kind
from planner.ir import Call, Col, Lit, Mfp, Scalar
from planner.scalar import INT_RANGE, norm_type

_CMP = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
        "gt": "greater", "ge": "greater_equal"}
_ARITH = {"add": "add_checked", "sub": "subtract_checked", "mul": "multiply_checked"}
_FLOAT_ARITH = {"add": "add", "sub": "subtract", "mul": "multiply"}
_LITERALS = (int, float, bool, str, datetime.date, datetime.datetime)


class _Undecided(Exception):
    """The columns hold something the subset cannot compute exactly: use the rows."""


def _supported(e: Scalar) -> bool:
    """Whether `e` is in the subset by its shape (types are checked on the columns)."""
    if isinstance(e, Col):
        return True
    if isinstance(e, Lit):
        v = e.value
        return v is not None and v.__class__ in _LITERALS and not (
            v.__class__ is datetime.datetime and v.tzinfo is not None)
    if not isinstance(e, Call) or not all(_supported(a) for a in e.args):
        return False
    f = e.func
    if f in _CMP or f in ("and", "or"):
        return len(e.args) >= 2 if f in ("and", "or") else len(e.args) == 2
    if f in ("not", "is_null"):
        return len(e.args) == 1
    if f in _ARITH or f == "mod":
        return len(e.args) == 2 and (norm_type(e.type) in INT_RANGE or (
            f in _FLOAT_ARITH and norm_type(e.type) == "DOUBLE"))
    if f == "cast":
        return norm_type(e.type) in ("DOUBLE", "TIMESTAMP")
    return False


def columns_mfp(m: Mfp) -> Callable[[Any], Any] | None:
    """`over_columns` for `m` (see the module doc), or None when an expression of m is outside
    the subset or m projects no column (a table of no columns has no rows to count)."""
    if not m.project or not all(_supported(e) for e in (*m.map, *m.filter)):
        return None
    n = m.input.arity

    def over_columns(table: Any) -> Any:
        import pyarrow as pa

        try:
            cols: list[Any] = [table.column(i) for i in range(n)]
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
    if (f in _CMP or f in _ARITH) and not all(isinstance(a, Lit) for a in e.args):
        # a literal beside a column stays a scalar: Arrow broadcasts it (no column of copies)
        args = [_scalar(a) if isinstance(a, Lit) else _eval(a, cols) for a in e.args]
    else:
        args = [_eval(a, cols) for a in e.args]
    kinds = [_kind(a) for a in args]
    if f in _CMP:
        if kinds[0] != kinds[1] or kinds[0] in ("bool", "other"):
            raise _Undecided  # e.g. an int compared with a float: Python's exact rule, per row
        if kinds[0] == "float" and (_has_nan(args[0]) or _has_nan(args[1])):
            raise _Undecided
        return getattr(pc, _CMP[f])(args[0], args[1])
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
    t = norm_type(e.type)
    if f == "cast":
        import pyarrow as pa

        if (kinds[0], t) in (("float", "DOUBLE"), ("timestamp", "TIMESTAMP")):
            return args[0]
        if (kinds[0], t) == ("int", "DOUBLE"):
            return pc.cast(args[0], pa.float64())  # safe: refuses an int a double cannot hold
        if (kinds[0], t) == ("date", "TIMESTAMP"):
            return pc.cast(args[0], pa.timestamp("us"))  # the date's midnight
        raise _Undecided
    if kinds != ["int", "int"] and not (kinds == ["float", "float"] and t == "DOUBLE"):
        raise _Undecided
    if kinds[0] == "float":
        if f not in _FLOAT_ARITH:
            raise _Undecided
        return getattr(pc, _FLOAT_ARITH[f])(args[0], args[1])  # IEEE, as Python's floats
    lo, hi = INT_RANGE[t]
    if f == "mod":
        out = _int_mod(args[0], args[1])
    else:
        out = getattr(pc, _ARITH[f])(args[0], args[1])  # raises ArrowInvalid past int64
    if len(out) > out.null_count:
        mm = pc.min_max(out)
        if mm["min"].as_py() < lo or mm["max"].as_py() > hi:
            raise _Undecided  # the per-row path raises the out-of-range error
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

    pc = _pc()
    x = _numpy(pc.fill_null(pc.cast(a, pa.int64()), 0))
    y = _numpy(pc.fill_null(pc.cast(b, pa.int64()), 1))
    nulls = None
    if a.null_count or b.null_count:
        nulls = ~_numpy(pc.and_(pc.is_valid(a), pc.is_valid(b)))
        y = np.where(nulls, 1, y)
    if (y == 0).any() or ((x == np.iinfo(np.int64).min) & (y == -1)).any():
        raise _Undecided
    r = np.fmod(x, y)  # C's remainder: truncating, the dividend's sign
    return pa.array(r, type=pa.int64(), mask=nulls)
