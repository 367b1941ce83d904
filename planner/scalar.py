"""Scalar functions with DuckDB's semantics, evaluated in Python, plus SQL type helpers.

Invariant: a function in FUNCS receives already-evaluated argument values whose Python types
match the SQL types the binder inferred (the binder inserts ``cast`` calls where DuckDB would
coerce), and returns the value DuckDB returns, with NULL as None. Where DuckDB raises (integer
overflow of the result's SQL type, division by zero in ``//`` and ``%``, a failed CAST) the
evaluation raises ``planner.errors.EvaluationError`` instead of inventing a value: the view
fails, Materialize-style (see planner/errors.py). ``compile_scalar`` evaluates CASE, COALESCE,
AND and OR lazily, as DuckDB does, so a guarded ``CASE WHEN a <> 0 THEN x // a END`` never
raises. TRY_CAST (``try_cast``) is the only conversion that turns failure into NULL.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import hashlib
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from planner.case_mapping import sql_lower, sql_upper
from planner.errors import EvaluationError
from planner.ir import Call, Col, Lit, OuterRef, Scalar, fmt_scalar

# ---------------------------------------------------------------- types

# An unsigned type ranks with the smallest signed type that holds it (UINTEGER with BIGINT).
INT_RANK = {"TINYINT": 1, "SMALLINT": 2, "INTEGER": 3, "BIGINT": 4, "HUGEINT": 5,
            "UTINYINT": 2, "USMALLINT": 3, "UINTEGER": 4, "UBIGINT": 5}
SIGNED_OF_RANK = {1: "TINYINT", 2: "SMALLINT", 3: "INTEGER", 4: "BIGINT", 5: "HUGEINT"}
# The values each integer type holds; a result outside its type's range is DuckDB's
# "Out of Range Error", raised here as EvaluationError.
INT_RANGE = {"TINYINT": (-(2 ** 7), 2 ** 7 - 1), "SMALLINT": (-(2 ** 15), 2 ** 15 - 1),
             "INTEGER": (-(2 ** 31), 2 ** 31 - 1), "BIGINT": (-(2 ** 63), 2 ** 63 - 1),
             "HUGEINT": (-(2 ** 127), 2 ** 127 - 1), "UTINYINT": (0, 2 ** 8 - 1),
             "USMALLINT": (0, 2 ** 16 - 1), "UINTEGER": (0, 2 ** 32 - 1),
             "UBIGINT": (0, 2 ** 64 - 1)}
_ALIASES = {"INT": "INTEGER", "INT4": "INTEGER", "INT8": "BIGINT", "INT2": "SMALLINT",
            "LONG": "BIGINT", "SHORT": "SMALLINT", "FLOAT8": "DOUBLE", "FLOAT": "REAL",
            "FLOAT4": "REAL", "NUMERIC": "DECIMAL(18,3)", "DECIMAL": "DECIMAL(18,3)",
            "STRING": "VARCHAR", "TEXT": "VARCHAR", "CHAR": "VARCHAR", "BPCHAR": "VARCHAR",
            "BOOL": "BOOLEAN", "LOGICAL": "BOOLEAN", "DATETIME": "TIMESTAMP",
            "INT128": "HUGEINT", "INT1": "TINYINT", "DOUBLE PRECISION": "DOUBLE"}


@lru_cache(maxsize=1024)
def norm_type(t: str) -> str:
    """A SQL type name in the one spelling the planner compares (pure: cached, as the
    engine's per-group outputs ask it for every group)."""
    t = t.strip().upper().replace(" ", "") if t.upper().startswith("DECIMAL") else t.strip().upper()
    if t.startswith("VARCHAR"):
        return "VARCHAR"
    if t.startswith("NUMERIC"):
        t = "DECIMAL" + t[len("NUMERIC"):]
    return _ALIASES.get(t, t)


def family(t: str) -> str:
    t = norm_type(t)
    if t in INT_RANK:
        return "int"
    if t.startswith("DECIMAL"):
        return "decimal"
    if t in ("DOUBLE", "REAL"):
        return "float"
    if t == "VARCHAR":
        return "str"
    if t == "BOOLEAN":
        return "bool"
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    if t == "NULL":
        return "null"
    return "other"


def is_numeric(t: str) -> bool:
    return family(t) in ("int", "decimal", "float", "null")


def decimal_scale(t: str) -> int:
    m = re.match(r"DECIMAL\((\d+),(\d+)\)", norm_type(t))
    return int(m.group(2)) if m else 3


# The decimal width DuckDB gives each integer type when it meets a DECIMAL.
INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 38,
              "UTINYINT": 3, "USMALLINT": 5, "UINTEGER": 10, "UBIGINT": 20}
MAX_DECIMAL_WIDTH = 38


def decimal_ps(t: str) -> tuple[int, int]:
    """(precision, scale) of a DECIMAL, or of the DECIMAL an integer type converts to."""
    t = norm_type(t)
    if t in INT_DIGITS:
        return INT_DIGITS[t], 0
    m = re.match(r"DECIMAL\((\d+)(?:,(\d+))?\)", t)
    if m:
        return int(m.group(1)), int(m.group(2) or 0)
    return 18, 3


def decimal_type(p: int, s: int) -> str:
    return f"DECIMAL({min(p, MAX_DECIMAL_WIDTH)},{s})"


def decimal_result(func: str, a: str, b: str) -> str | None:
    """DuckDB's result type of ``a func b`` where one operand is a DECIMAL and the other a
    DECIMAL or an integer, or None where DuckDB has no DECIMAL for it: + and - widen by one
    digit; * adds precisions and scales, capped at 18 digits when both inputs fit in 64 bits
    and the scale is below 18 (DuckDB's checked int64 multiply), None past a scale of 38 (its
    error); % keeps the wider integer part and the larger scale, None past 38 digits (DuckDB
    computes it in DOUBLE then)."""
    (p1, s1), (p2, s2) = decimal_ps(a), decimal_ps(b)
    if func == "mul":
        p, s = p1 + p2, s1 + s2
        if s > MAX_DECIMAL_WIDTH:
            return None
        if p > 18 and p1 <= 18 and p2 <= 18 and s < 18:
            p = 18
        return decimal_type(p, s)
    s = max(s1, s2)
    p = max(p1 - s1, p2 - s2) + s
    if func == "mod" and p > MAX_DECIMAL_WIDTH:
        return None
    return decimal_type(p + 1 if func in ("add", "sub") else p, s)


def unify(types: list[str]) -> str | None:
    """The common supertype DuckDB would pick, or None when there is none. DECIMALs (and
    integers meeting a DECIMAL) unify to the widest integer part plus the widest scale."""
    ts = [norm_type(t) for t in types if family(t) != "null"]
    if not ts:
        return "NULL"
    fams = {family(t) for t in ts}
    if len(fams) == 1:
        f = next(iter(fams))
        if f == "int":
            return unify_ints(ts)
        if f == "float":
            return "DOUBLE" if "DOUBLE" in ts else ts[0]
        if f != "decimal":
            return ts[0]
    if fams <= {"int", "decimal"}:
        # DuckDB unifies them two at a time, from the left
        out = ts[0]
        for t in ts[1:]:
            out = _unify_decimal_pair(out, t)
        return out
    if fams <= {"int", "decimal", "float"}:
        # REAL stays REAL next to integers and decimals (DuckDB's FLOAT), DOUBLE otherwise
        return "DOUBLE" if "DOUBLE" in ts else "REAL"
    if fams == {"date", "timestamp"}:
        return "TIMESTAMP"
    return None


def _unify_decimal_pair(a: str, b: str) -> str:
    """DuckDB's common type of two of INTEGER types and DECIMALs, one of them a DECIMAL (or
    two integers: their own): the wider integer part and the larger scale; past 38 digits,
    two DECIMALs keep their integer digits and drop scale, while an integer next to a DECIMAL
    keeps the scale (HUGEINT with DECIMAL(4,1) is DECIMAL(38,1))."""
    if family(a) == family(b) == "int":
        return unify_ints([a, b])
    (p1, s1), (p2, s2) = decimal_ps(a), decimal_ps(b)
    s, whole = max(s1, s2), max(p1 - s1, p2 - s2)
    if family(a) == family(b) == "decimal":
        s = min(s, max(0, MAX_DECIMAL_WIDTH - whole))
    return decimal_type(whole + s, s)


def unify_ints(ts: list[str]) -> str:
    """DuckDB's integer supertype: the widest of one signedness; mixing signed and unsigned
    gives the signed type ranked with the widest (UINTEGER + TINYINT is BIGINT)."""
    ts = [norm_type(t) for t in ts]
    top = max(INT_RANK[t] for t in ts)
    if all(t.startswith("U") for t in ts) or not any(t.startswith("U") for t in ts):
        return next(t for t in ts if INT_RANK[t] == top)
    return SIGNED_OF_RANK[top]


def int_fits(v: int, t: str) -> bool:
    lo, hi = INT_RANGE[norm_type(t)]
    return lo <= v <= hi


def fitting_int_type(v: int, like: str) -> str:
    """The type DuckDB gives an integer literal next to a column of integer type ``like``:
    ``like`` itself when the literal fits it (``smallint_col + 1`` is SMALLINT), otherwise the
    supertype of ``like`` and the literal's own type."""
    if int_fits(v, like):
        return norm_type(like)
    own = next(t for t in ("INTEGER", "BIGINT", "HUGEINT") if int_fits(v, t))
    return unify_ints([like, own])


# ---------------------------------------------------------------- casts

# DuckDB's DECIMAL holds up to 38 digits, Python's default context rounds every Decimal
# operation to 28: DECIMAL arithmetic runs in this context, wide enough for the exact product
# of two DECIMAL(38) values, so no operation rounds where DuckDB's does not.
DECIMAL_CONTEXT = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_UP, Emax=999999,
                                  Emin=-999999)


def _round_half_away(v: decimal.Decimal, places: int = 0) -> decimal.Decimal:
    q = decimal.Decimal(1).scaleb(-places)
    return v.quantize(q, rounding=decimal.ROUND_HALF_UP, context=DECIMAL_CONTEXT)


def float_to_str(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def real_to_str(v: float) -> str:
    """A REAL as DuckDB prints it: the shortest digits that give back the single-precision
    value (0.1, not the double 0.10000000149011612), laid out as a DOUBLE's."""
    if not math.isfinite(v):
        return float_to_str(v)
    import numpy as np

    return repr(float(np.format_float_scientific(np.float32(v), unique=True)))


def decimal_to_str(v: decimal.Decimal) -> str:
    """A DECIMAL's digits at its scale, as DuckDB prints it: fixed-point, never an exponent
    (Python's str gives 1.000E-7 and 0E-10), and no negative zero."""
    if not v and v.is_signed():
        v = v.copy_abs()
    return format(v, "f")


def fraction_to_str(v: decimal.Decimal) -> str:
    """A DECIMAL(p,p) (a fraction: no integer digits) as DuckDB prints it, without the zero
    before the point: '.2500', '-.5', '.0000'."""
    text = decimal_to_str(v)
    return "-" + text[2:] if text.startswith("-0.") else text[1:] if text.startswith(
        "0.") else text


def timestamp_to_str(v: datetime.datetime) -> str:
    """A TIMESTAMP as DuckDB prints it: its fraction of a second without trailing zeros."""
    txt = v.replace(microsecond=0).isoformat(sep=" ")
    if v.microsecond:
        txt += f".{v.microsecond:06d}".rstrip("0")
    return txt


def to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return float_to_str(v)
    if isinstance(v, datetime.datetime):
        return timestamp_to_str(v)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return decimal_to_str(v)
    return str(v)


class _CastFailed(ValueError):
    """A conversion DuckDB rejects (a Conversion Error there)."""


# DuckDB's text forms of a DATE and a TIMESTAMP: a year of any number of digits, a month and a
# day of one or two, separated alike by '-', '/', ' ' or '\\'; then a time of day after spaces
# or a 'T' (minutes required, seconds and a fraction optional), then an offset or a zone name
# (which a TIMESTAMP ignores: it keeps the wall time), a zone name after a space. A DATE
# ignores the time of day and may end in spaces; a TIMESTAMP may end in spaces only after a
# time. Leading and trailing whitespace is allowed (ASCII's: space, tab, newline, CR, VT, FF;
# after a time without a zone only from a space on). An offset is +hh, +hhmm, +hh:mm or
# +hh:mm:ss, or +h after a space.
_DATE_TEXT = re.compile(r"\s*([0-9]+)([-/ \\])([0-9]{1,2})\2([0-9]{1,2})", re.ASCII)
_TIME_TEXT = re.compile(
    r"(?:\s+|T)([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]*))?)?"
    r"(?:(?: *(?:Z|[+-][0-9]{2}(?::?[0-9]{2}(?::?[0-9]{2})?)?)| +[+-][0-9]"
    r"| +[A-Za-z_][A-Za-z_/+-]*)\s*| \s*)?", re.ASCII)
# A date DuckDB reads that this server cannot hold (its DATE and TIMESTAMP are years 1 to
# 9999): one of BC (its "(BC)" straight after the date), a negative year, or the infinities.
_BC = re.compile(r"(.*[0-9]) +\(BC\)([ \t\n\v\f\r]*)", re.ASCII | re.IGNORECASE | re.DOTALL)
_INFINITIES = ("infinity", "-infinity")
# DuckDB reads these too, with whitespace before them but none after
_INF_WORDS = ("inf", "-inf")


class DateOutOfRange(EvaluationError):
    """A text DuckDB casts to a DATE or TIMESTAMP outside years 1 to 9999, which a view cannot
    hold: an error even for TRY_CAST (never a NULL in the place of DuckDB's value)."""

    def __reduce__(self) -> tuple[object, ...]:
        return (DateOutOfRange, (self.detail, self.expression))


def parse_date_text(text: str, timestamp: bool) -> datetime.datetime:
    """CAST(text AS DATE or TIMESTAMP) as DuckDB parses it (`_DATE_TEXT`, `_TIME_TEXT`), as a
    datetime (a DATE's is its midnight); raises _CastFailed where DuckDB gives NULL to
    TRY_CAST ('20210105', '2021-W01-1', '2021-01-05 10', Feb 30, 25:00), and DateOutOfRange
    where DuckDB's value is outside years 1 to 9999: a text that parses with its year in
    range ('10000-01-01' as year 10000 would, '-2021-01-05', '0044-03-15 (BC)', 'infinity')."""
    bare = text.strip(_NUMBER_SPACE).lower()
    if bare in ("epoch", "-epoch"):
        return _EPOCH
    beyond = bare in _INFINITIES or text.lstrip(_NUMBER_SPACE).lower() in _INF_WORDS
    body = text
    bc = _BC.fullmatch(text)
    if bc is not None:  # (a date only: DuckDB takes no time before it, a DATE spaces after)
        if timestamp and bc.group(2):
            raise _CastFailed(f"could not convert string {text!r} to a timestamp")
        body, timestamp, beyond = bc.group(1), False, True
    lead = len(body) - len(body.lstrip(_NUMBER_SPACE))
    if body[lead:lead + 1] == "-" and body[lead + 1:lead + 2].isdigit():
        body, beyond = body[:lead] + body[lead + 1:], True
    m = _DATE_TEXT.match(body)
    if m is None:
        if beyond and (bare in _INFINITIES or bare in _INF_WORDS):
            raise DateOutOfRange(f"the date {text!r} is outside years 1 to 9999, which a "
                                 "view's DATE and TIMESTAMP hold")
        raise _CastFailed(f"could not convert string {text!r} to a date")
    if bc is not None and body[m.end():].strip(_NUMBER_SPACE):
        raise _CastFailed(f"could not convert string {text!r} to a date")
    year = int(m.group(1))
    if bc is not None or year == 0 or year > 9999:
        # parsed as a year in range alike in being leap or not (year Y BC is the proleptic
        # year 1 - Y): DuckDB's value if it parses
        beyond = True
        stand_in = 2000 if calendar.isleap(1 - year if bc is not None else year) else 2001
        body = body[:m.start(1)] + str(stand_in) + body[m.end(1):]
        m = _DATE_TEXT.match(body)
        assert m is not None
    day = _parsed(text, body, m, timestamp)
    if beyond:
        raise DateOutOfRange(f"the date {text!r} is outside years 1 to 9999, which a view's "
                             "DATE and TIMESTAMP hold")
    return day


def _parsed(text: str, body: str, m: re.Match[str], timestamp: bool) -> datetime.datetime:
    """`parse_date_text` of `body` (the text, its year and era made plain), whose date `m`
    matched."""
    try:
        day = datetime.datetime(int(m.group(1)), int(m.group(3)), int(m.group(4)))
    except ValueError:
        raise _CastFailed(f"date field value out of range: {text!r}") from None
    rest = body[m.end():]
    if not rest or (not timestamp and not rest.strip(_NUMBER_SPACE)):
        return day
    t = _TIME_TEXT.fullmatch(rest)
    if t is None:
        raise _CastFailed(f"could not convert string {text!r} to a timestamp")
    h, mi, sec = int(t.group(1)), int(t.group(2)), int(t.group(3) or 0)
    micros = int((t.group(4) or "")[:6].ljust(6, "0"))
    if (h, mi, sec, micros) == (24, 0, 0, 0):
        # 24:00:00 is the next midnight (a DATE's time of day is ignored: its own day)
        if timestamp and day.date() == datetime.date.max:
            raise DateOutOfRange(f"the timestamp {text!r} is past year 9999, which a view's "
                                 "TIMESTAMP holds")
        return day + datetime.timedelta(days=1) if timestamp else day
    if h > 23 or mi > 59 or sec > 59:
        raise _CastFailed(f"time field value out of range: {text!r}")
    if not timestamp:
        return day
    return day.replace(hour=h, minute=mi, second=sec, microsecond=micros)


# What DuckDB trims around a number's text: ASCII's spaces only. (Python's int(), float(),
# Decimal() and str.strip() also take other scripts' spaces and the controls 0x1c-0x1f.)
_NUMBER_SPACE = " \t\n\v\f\r"
_NEGATIVE_ZERO_INT = re.compile(r"[ \t\n\v\f\r]*-0+", re.ASCII)  # (DuckDB: no space after)


def _double_to_decimal(v: float, scale: int) -> decimal.Decimal:
    """A DOUBLE on its way to a DECIMAL of `scale`, as DuckDB casts it: `v * 10**scale` in
    double precision, rounded half away from zero. So 9.995 (a double a hair below it) is
    9.99 at scale 2, and 2.675 (below it too) is 2.68, as 2.675 * 100 is 267.5 in doubles;
    the shortest text of the double, rounded, gave 10.00 and 2.68. Past 2**53 the product is
    a whole number, kept as it is (1e15 + 0.5 at scale 2 is ...000.48)."""
    if not math.isfinite(v):
        return decimal.Decimal(repr(v))
    x = v * float(f"1e{scale}")  # (the double nearest 10**scale, as DuckDB's table holds)
    if not math.isfinite(x):
        return decimal.Decimal(repr(v))
    r = math.trunc(x)  # (past 2**53 a double is a whole number: x itself)
    if abs(x - r) >= 0.5:
        r += 1 if x > 0 else -1
    return decimal.Decimal(r).scaleb(-scale, DECIMAL_CONTEXT)  # (exact: a DECIMAL(38) needs 38 digits)


def _to_single(x: float) -> float:
    """A double rounded to single precision, as a FLOAT result of DuckDB's arithmetic is: a
    value past FLOAT's range is infinite (where a CAST refuses it)."""
    import numpy as np

    with np.errstate(all="ignore"):
        return float(np.float32(x))


def _number_text(v: str, target: str) -> str:
    """The text of a number to CAST to `target`, as DuckDB reads it: trimmed of ASCII spaces
    only, ASCII throughout. An unsigned target takes no minus sign but on a plain zero
    (`'-0'`: DuckDB refuses `'-0.4'` and `'-1e-400'`, which round to 0)."""
    txt = v.strip(_NUMBER_SPACE)
    if not txt.isascii() or (txt and (txt[0].isspace() or txt[-1].isspace())) or (
            norm_type(target).startswith("U") and txt.startswith("-")
            and not _NEGATIVE_ZERO_INT.fullmatch(v)):
        raise _CastFailed(f"could not convert string {v!r} to {norm_type(target)}")
    return txt


_RADIX_INT = re.compile(r"0([xXbB])([0-9a-fA-F]+(?:_[0-9a-fA-F]+)*)", re.ASCII)
# an underscore not between two digits, which DuckDB refuses in a number (and Decimal reads)
_STRAY_UNDERSCORE = re.compile(r"(?<![0-9])_|_(?![0-9])")


def _convert(v: Any, target: str) -> Any:
    """CAST(v AS target) as DuckDB does it; raises _CastFailed (or ValueError, ArithmeticError,
    TypeError from the parsers) where DuckDB raises a conversion error. v is not None."""
    f = family(target)
    if f == "str":
        return to_str(v)
    if f == "int":
        if isinstance(v, bool):
            out = int(v)
        elif isinstance(v, int):
            out = v
        elif isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                raise _CastFailed(f"{float_to_str(v)} is out of range for {norm_type(target)}")
            out = round(v)  # DuckDB rounds doubles half-to-even here
        elif isinstance(v, decimal.Decimal):
            out = int(_round_half_away(v))
        elif isinstance(v, str):
            # (Python's int() reads every script's digits, DuckDB only ASCII's)
            txt = _number_text(v, target)
            if _STRAY_UNDERSCORE.search(txt):
                raise _CastFailed(f"could not convert string {v!r} to {norm_type(target)}")
            # (DuckDB reads ' 0x10' but not '0x10 ')
            radix = _RADIX_INT.fullmatch(v.lstrip(_NUMBER_SPACE))
            try:
                out = int(txt)
            except ValueError:
                if radix is not None:  # DuckDB reads 0x1F and 0b101
                    out = int(radix.group(2), 16 if radix.group(1) in "xX" else 2)
                else:
                    out = int(_round_half_away(decimal.Decimal(txt)))
        else:
            raise _CastFailed(f"cannot cast a {type(v).__name__} to {norm_type(target)}")
        if norm_type(target) in INT_RANGE and not int_fits(out, target):
            raise _CastFailed(f"value {to_str(v)} is out of range for {norm_type(target)}")
        return out
    if f == "float":
        if isinstance(v, (datetime.date, datetime.datetime)):
            raise _CastFailed(f"cannot cast a date to {norm_type(target)}")
        x = float(_number_text(v, target)) if isinstance(v, str) else float(v)
        if norm_type(target) == "REAL":
            # DuckDB's FLOAT is single precision: the value rounded to the nearest one, and
            # a finite value past its range refused
            single = _to_single(x)
            if math.isinf(single) and math.isfinite(x):
                raise _CastFailed(f"value {to_str(v)} is out of range for REAL")
            return single
        return x
    if f == "decimal":
        if isinstance(v, float):
            d = _double_to_decimal(v, decimal_ps(target)[1])
        elif isinstance(v, bool):
            d = decimal.Decimal(int(v))
        elif isinstance(v, str):
            if _STRAY_UNDERSCORE.search(v):
                raise _CastFailed(f"could not convert string {v!r} to {norm_type(target)}")
            d = decimal.Decimal(_number_text(v, target))
        else:
            d = decimal.Decimal(v)
        p, sc = decimal_ps(target)
        r = _round_half_away(d, sc)
        # DuckDB refuses NaN, infinities and values with more integer digits than p - s
        if not r.is_finite() or abs(r) >= decimal.Decimal(10) ** (p - sc):
            what = f"string {v!r}" if isinstance(v, str) else to_str(v)
            raise _CastFailed(f"could not convert {what} to {norm_type(target)}: the value "
                              "is out of range")
        # a DECIMAL is an integer of its scale: no negative zero (-0.001 at scale 0 is 0)
        return r.copy_abs() if not r else r
    if f == "bool":
        if isinstance(v, str):
            txt = v.lower()  # (DuckDB trims no spaces here)
            if txt in ("true", "t", "1", "yes", "y"):
                return True
            if txt in ("false", "f", "0", "no", "n"):
                return False
            raise _CastFailed(f"could not convert string {v!r} to BOOLEAN")
        return bool(v)
    if f == "date":
        if isinstance(v, datetime.datetime):
            return v.date()
        if isinstance(v, datetime.date):
            return v
        if isinstance(v, str):
            return parse_date_text(v, timestamp=False).date()
        raise _CastFailed(f"cannot cast a {type(v).__name__} to DATE")
    if f == "timestamp":
        if isinstance(v, datetime.datetime):
            return v
        if isinstance(v, datetime.date):
            return datetime.datetime(v.year, v.month, v.day)
        if isinstance(v, str):
            return parse_date_text(v, timestamp=True)
        raise _CastFailed(f"cannot cast a {type(v).__name__} to TIMESTAMP")
    return v


def cast_value(v: Any, target: str) -> Any:
    """TRY_CAST(v AS target): DuckDB's CAST, with None where DuckDB would raise."""
    if v is None:
        return None
    try:
        return _convert(v, target)
    except (ValueError, ArithmeticError, TypeError):
        return None


def cast_checked(v: Any, target: str) -> Any:
    """CAST(v AS target): DuckDB's CAST; raises EvaluationError where DuckDB raises."""
    if v is None:
        return None
    try:
        return _convert(v, target)
    except _CastFailed as e:
        raise EvaluationError(f"conversion error: {e}") from None
    except (ValueError, ArithmeticError, TypeError):
        what = f"string {v!r}" if isinstance(v, str) else to_str(v)
        raise EvaluationError(f"conversion error: could not convert {what} to "
                              f"{norm_type(target)}") from None


# ---------------------------------------------------------------- functions


def _nullsafe(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Strict function: any NULL argument gives NULL (SQL's default propagation)."""

    def g(*args: Any) -> Any:
        if any(a is None for a in args):
            return None
        return fn(*args)

    return g


def _div(a: Any, b: Any) -> Any:
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.inf if (a > 0) == (math.copysign(1.0, b) > 0) else -math.inf
    return a / b


def _zero_division(a: Any, op: str, b: Any) -> EvaluationError:
    return EvaluationError(f"division by zero: {to_str(a)} {op} {to_str(b)}")


def _intdiv(a: Any, b: Any) -> Any:
    # DuckDB 2.0 raises for a zero divisor of // on every numeric type (error_on_division_by_zero)
    if b == 0:
        raise _zero_division(a, "//", b)
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return _div(a, b)


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        if isinstance(a, float) or isinstance(b, float):
            return math.nan  # DOUBLE % 0 is NaN in DuckDB, only exact types raise
        raise _zero_division(a, "%", b)
    if isinstance(a, int) and isinstance(b, int):
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return DECIMAL_CONTEXT.remainder(a, b)
    try:
        return math.fmod(a, b)
    except ValueError:  # an infinite dividend: C's fmod (DuckDB's) gives NaN, Python raises
        return math.nan


def _and(*args: Any) -> Any:
    if any(a is False for a in args):
        return False
    if any(a is None for a in args):
        return None
    return True


def _or(*args: Any) -> Any:
    if any(a is True for a in args):
        return True
    if any(a is None for a in args):
        return None
    return False


def _not(a: Any) -> Any:
    return None if a is None else (not a)


def _case(*args: Any) -> Any:
    # args: cond1, val1, cond2, val2, ..., else
    n = len(args) - 1
    for i in range(0, n, 2):
        if args[i] is True:
            return args[i + 1]
    return args[-1]


def _coalesce(*args: Any) -> Any:
    for a in args:
        if a is not None:
            return a
    return None


def _nullif(a: Any, b: Any) -> Any:
    if a is not None and b is not None and sql_equal(a, b):
        return None
    return a


@lru_cache(maxsize=256)
def _like_re(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _like(s: str, p: str) -> bool:
    return _like_re(p).fullmatch(s) is not None


def _ilike(s: str, p: str) -> bool:
    # DuckDB lowers both sides, one code point at a time (Python's IGNORECASE folds more:
    # 'ſ' ILIKE 's' and 'ς' ILIKE 'Σ' are false in DuckDB)
    return _like(sql_lower(s), sql_lower(p))


# DuckDB's largest substring offset and length, and their lowest for SUBSTR (its errors
# past them; LEFT's and RIGHT's negative lengths have no bound)
_SUBSTR_MAX = 4_294_967_295
_SUBSTR_MIN = -4_294_967_296


def _substr_range(start: int | None, length: int | None, lowest: bool = True) -> None:
    for what, v in (("offset", start), ("length", length)):
        if v is not None and v > _SUBSTR_MAX:
            raise EvaluationError(f"Substring {what} outside of supported range "
                                  f"(> {_SUBSTR_MAX})")
        if lowest and v is not None and v < _SUBSTR_MIN:
            raise EvaluationError(f"Substring {what} outside of supported range "
                                  f"(< {_SUBSTR_MIN})")


def _left(s: str, n: int) -> str:
    _substr_range(None, n, lowest=False)
    return s[:n] if n >= 0 else s[:max(0, len(s) + n)]


def _substr(s: str, start: int, length: int | None = None) -> str:
    _substr_range(start, length)
    n = len(s)
    begin = start - 1 if start > 0 else (-1 if start == 0 else n + start)
    end = n if length is None else begin + length
    if end < begin:
        # a negative length takes the characters before the start, as DuckDB does
        # (substr('hello', 5, -3) is 'ell')
        begin, end = end, begin
    begin, end = max(0, min(begin, n)), max(0, min(end, n))
    return s[begin:end] if end > begin else ""


def _substr_fn(*args: Any) -> Any:
    if any(a is None for a in args):
        return None
    return _substr(*args)


# The characters DuckDB's TRIM, LTRIM and RTRIM remove by default: Unicode's space separators
# (category Zs), not tabs, line breaks or other controls, which Python's `str.strip()` removes.
SPACE = "".join(map(chr, (0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)))


def _trim(s: str, chars: str | None = None, side: str = "both") -> str:
    chars = SPACE if chars is None else chars
    if side == "leading":
        return s.lstrip(chars)
    if side == "trailing":
        return s.rstrip(chars)
    return s.strip(chars)


_GRAPHEMES: Any = None


def _reverse(s: str) -> str:
    """DuckDB's `reverse`: an ASCII string's characters in reverse order, any other string's
    grapheme clusters (a letter and its accents, an emoji sequence, a flag, a CR LF stay
    whole), as DuckDB reverses them (it reverses an ASCII string byte by byte, CR LF too).
    Clusters are found by the `regex` module's `\\X` (Unicode's extended grapheme clusters,
    UAX #29), loaded at the first string that is not ASCII."""
    global _GRAPHEMES
    if s.isascii():
        return s[::-1]
    if _GRAPHEMES is None:
        import regex

        _GRAPHEMES = regex.compile(r"\X")
    return "".join(reversed(_GRAPHEMES.findall(s)))


def _concat(*args: Any) -> Any:
    return "".join(to_str(a) for a in args if a is not None)


def _dpipe(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return to_str(a) + to_str(b)


def _round(x: Any, n: int = 0) -> Any:
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        if n >= 0:
            return x
        return int(_round_half_away(decimal.Decimal(x), n))
    if isinstance(x, decimal.Decimal):
        if n >= -x.as_tuple().exponent:  # type: ignore[operator]
            return x  # DuckDB keeps the type, and so the scale, when n >= scale
        if n >= 0:
            return _round_half_away(x, n)
        return _round_half_away(_round_half_away(x, n), 0)  # DECIMAL(p,0): no exponent
    return round_double(x, n)


def _nearest_half_away(exact: decimal.Decimal, sign: float) -> float:
    """The integer nearest ``exact``, halves away from zero, as a double carrying ``sign``
    (so a negative value that rounds to zero stays -0.0, as std::round gives it)."""
    r = exact.to_integral_value(rounding=decimal.ROUND_HALF_UP, context=_EXACT)
    return math.copysign(float(r), sign)


# Wide enough that a double times or over a power of ten up to 10^308 is exact.
_EXACT = decimal.Context(prec=1200, Emax=999999, Emin=-999999)


def round_double(x: float, n: int = 0) -> float:
    """DuckDB's round(DOUBLE, n) (DuckDB 2): x * 10^n rounded to an integer, halves away from
    zero, decided on the exact product rather than the rounded one, then divided back in
    floating point. So round(-483.445, 2) is -483.44 (the double is -483.44499999999999...),
    and round(1.005, 2) is 1.0; beyond 2^52 the product is already integral."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        m = 10.0 ** abs(n)
    except OverflowError:
        m = math.inf
    if n >= 0:
        p = x * m
        if math.isinf(p) or math.isnan(p):
            return x
        if abs(p) < 2.0 ** 52:
            p = _nearest_half_away(decimal.Decimal(x) * decimal.Decimal(m), p)
        r = p / m
        return x if math.isinf(r) or math.isnan(r) else r
    if math.isinf(m):
        return 0.0
    q = x / m
    if abs(q) < 2.0 ** 52:
        q = _nearest_half_away(_EXACT.divide(decimal.Decimal(x), decimal.Decimal(m)), q)
    r = q * m
    if math.isinf(r):
        return x
    return 0.0 if math.isnan(r) else r


def _floor(x: Any) -> Any:
    if isinstance(x, int):
        return x
    if isinstance(x, decimal.Decimal):
        return x.to_integral_value(rounding=decimal.ROUND_FLOOR)
    return float(math.floor(x)) if math.isfinite(x) else x


def _ceil(x: Any) -> Any:
    if isinstance(x, int):
        return x
    if isinstance(x, decimal.Decimal):
        return x.to_integral_value(rounding=decimal.ROUND_CEILING)
    return float(math.ceil(x)) if math.isfinite(x) else x


def _sqrt(x: Any) -> Any:
    return math.sqrt(x) if x >= 0 else math.nan


def _power(a: Any, b: Any) -> Any:
    """POWER of doubles as DuckDB gives it, which is C's `pow`: infinity past the doubles
    (10^400), NaN for a negative base and a fractional exponent, infinity for 0 to a negative
    power. `math.pow` raises there instead; NumPy's `power` of float64 is C's."""
    x, y = float(a), float(b)
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError):
        import numpy as np

        with np.errstate(all="ignore"):
            return float(np.power(np.float64(x), np.float64(y)))


def _nan_last(v: Any) -> tuple[bool, Any]:
    # DuckDB's order of doubles: NaN above every other value (`COMPARE_TEXT`)
    return v != v, v


def _greatest(*args: Any) -> Any:
    vals = [a for a in args if a is not None]
    return max(vals, key=_nan_last) if vals else None


def _least(*args: Any) -> Any:
    vals = [a for a in args if a is not None]
    return min(vals, key=_nan_last) if vals else None


# The date parts extract and date_trunc take, each spelling DuckDB accepts to the part it
# names (DuckDB's date part specifiers); a spelling not here is refused when a view is bound.
DATE_PARTS = {
    **dict.fromkeys(("year", "years", "y", "yr", "yrs"), "year"),
    **dict.fromkeys(("month", "mon", "months", "mons"), "month"),
    **dict.fromkeys(("day", "days", "d", "dayofmonth"), "day"),
    **dict.fromkeys(("quarter", "quarters"), "quarter"),
    **dict.fromkeys(("dow", "dayofweek", "weekday"), "dow"),
    "isodow": "isodow",
    **dict.fromkeys(("doy", "dayofyear"), "doy"),
    **dict.fromkeys(("week", "weeks", "w", "weekofyear"), "week"),
    "yearweek": "yearweek",
    "isoyear": "isoyear",
    **dict.fromkeys(("decade", "dec", "decades", "decs"), "decade"),
    **dict.fromkeys(("century", "cent", "centuries", "c"), "century"),
    **dict.fromkeys(("millennium", "mil", "millennia", "mils", "millenium", "millenniums"), "millennium"),
    "era": "era",
    "epoch": "epoch",
    "julian": "julian",
    **dict.fromkeys(("hour", "hours", "h", "hr", "hrs"), "hour"),
    **dict.fromkeys(("minute", "min", "minutes", "mins", "m"), "minute"),
    **dict.fromkeys(("second", "sec", "seconds", "secs", "s"), "second"),
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs", "msecond",
                     "mseconds"), "millisecond"),
    **dict.fromkeys(("microsecond", "microseconds", "us", "usec", "usecs", "usecond",
                     "useconds"), "microsecond"),
}
# extract's parts that are a DOUBLE (every other one is a BIGINT)
DOUBLE_PARTS = frozenset({"epoch", "julian"})
# date_trunc's parts: DuckDB truncates to the part a spelling names, the parts within a day
# (dow, doy, julian) to the day, yearweek to the week and epoch to the second; era it refuses
TRUNC_PARTS = {**{p: p for p in set(DATE_PARTS.values()) - {"era"}},
               "dow": "day", "isodow": "day", "doy": "day", "julian": "day",
               "yearweek": "week", "epoch": "second"}
# The Julian day number of 1970-01-01, which `julian` counts from.
_JULIAN_1970 = 2440588


def _datetime(d: Any) -> datetime.datetime:
    """A DATE (its midnight) or a TIMESTAMP as a datetime."""
    return d if isinstance(d, datetime.datetime) else datetime.datetime(d.year, d.month, d.day)


def _julian(d: Any) -> float:
    dt = _datetime(d)
    of_day = dt - dt.replace(hour=0, minute=0, second=0, microsecond=0)
    return dt.toordinal() - _EPOCH.toordinal() + _JULIAN_1970 + of_day / datetime.timedelta(days=1)


def _within_minute(d: Any, per_second: int) -> int:
    """The seconds into its minute of `d`, counted in units of 1/per_second (DuckDB's
    millisecond and microsecond parts)."""
    t = _datetime(d)
    return t.second * per_second + t.microsecond // (1_000_000 // per_second)


# extract's parts (by their canonical names): each of a DATE or a TIMESTAMP, as DuckDB gives
# it (a date's time of day is midnight; a Python date is never before the common era)
_EXTRACT: dict[str, Callable[[Any], Any]] = {
    "year": lambda d: d.year,
    "month": lambda d: d.month,
    "day": lambda d: d.day,
    "quarter": lambda d: (d.month - 1) // 3 + 1,
    "dow": lambda d: d.isoweekday() % 7,
    "isodow": lambda d: d.isoweekday(),
    "doy": lambda d: d.timetuple().tm_yday,
    "week": lambda d: d.isocalendar()[1],
    "isoyear": lambda d: d.isocalendar()[0],
    "yearweek": lambda d: d.isocalendar()[0] * 100 + d.isocalendar()[1],
    "decade": lambda d: d.year // 10,
    "century": lambda d: (d.year - 1) // 100 + 1,
    "millennium": lambda d: (d.year - 1) // 1000 + 1,
    "era": lambda d: 1,
    "epoch": lambda d: _micros(d) / 1e6,
    "julian": _julian,
    "hour": lambda d: _datetime(d).hour,
    "minute": lambda d: _datetime(d).minute,
    "second": lambda d: _datetime(d).second,
    "millisecond": lambda d: _within_minute(d, 1_000),
    "microsecond": lambda d: _within_minute(d, 1_000_000),
}


def _extract(part: str, d: Any) -> Any:
    """extract(part FROM d) of a DATE or TIMESTAMP `d`, for a part DATE_PARTS names (by its
    canonical name)."""
    return None if d is None else _EXTRACT[part](d)


def _date_trunc(part: str, d: Any) -> Any:
    """date_trunc(part, d), for a part TRUNC_PARTS names (by its canonical name): the
    TIMESTAMP at the start of the part holding `d`."""
    if d is None:
        return None
    dt = _datetime(d)
    day = dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if part in ("year", "decade", "century", "millennium"):
        span = {"year": 1, "decade": 10, "century": 100, "millennium": 1000}[part]
        year = dt.year // span * span
        if year < 1:
            # DuckDB's answer is in 1 BC, before any date a view holds
            raise EvaluationError(f"date_trunc('{part}', {to_str(d)}) is before year 1")
        return day.replace(year=year, month=1, day=1)
    if part == "quarter":
        return day.replace(month=(dt.month - 1) // 3 * 3 + 1, day=1)
    if part == "month":
        return day.replace(day=1)
    if part == "week":
        return day - datetime.timedelta(days=dt.weekday())
    if part == "isoyear":
        return datetime.datetime.fromisocalendar(dt.isocalendar()[0], 1, 1)
    if part == "day":
        return day
    if part == "hour":
        return dt.replace(minute=0, second=0, microsecond=0)
    if part == "minute":
        return dt.replace(second=0, microsecond=0)
    if part == "second":
        return dt.replace(microsecond=0)
    if part == "millisecond":
        return dt.replace(microsecond=dt.microsecond // 1000 * 1000)
    if part == "microsecond":
        return dt
    raise ValueError(f"date_trunc to {part}")


# date_diff's parts as DuckDB names them, each to the boundaries it counts (DuckDB's date part
# specifiers; the day-of-something parts count days, `epoch` seconds, `yearweek` weeks).
DIFF_PARTS = {
    **dict.fromkeys(("year", "y", "years", "yr", "yrs"), "year"),
    **dict.fromkeys(("month", "mon", "months", "mons"), "month"),
    **dict.fromkeys(("quarter", "quarters"), "quarter"),
    **dict.fromkeys(("decade", "dec", "decades", "decs"), "decade"),
    **dict.fromkeys(("century", "cent", "centuries", "c"), "century"),
    **dict.fromkeys(("millennium", "mil", "millennia", "mils", "millenium", "millenniums"),
                    "millennium"),
    "isoyear": "isoyear",
    **dict.fromkeys(("week", "weeks", "w", "weekofyear", "yearweek"), "week"),
    **dict.fromkeys(("day", "days", "d", "dayofmonth", "dow", "dayofweek", "weekday", "isodow",
                     "doy", "dayofyear", "julian"), "day"),
    **dict.fromkeys(("hour", "hr", "hours", "hrs", "h"), "hour"),
    **dict.fromkeys(("minute", "min", "minutes", "mins", "m"), "minute"),
    **dict.fromkeys(("second", "sec", "seconds", "secs", "s", "epoch"), "second"),
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs", "msecond",
                     "mseconds"), "millisecond"),
    **dict.fromkeys(("microsecond", "microseconds", "us", "usec", "usecs", "usecond",
                     "useconds"), "microsecond"),
}
# Years in each part counted by the year's number.
DIFF_SPANS = {"decade": 10, "century": 100, "millennium": 1000}
# Microseconds in each part below a day.
DIFF_MICROS = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
               "millisecond": 1_000, "microsecond": 1}
_EPOCH = datetime.datetime(1970, 1, 1)


def _date_diff(part: str, a: Any, b: Any) -> Any:
    """DuckDB's date_diff: the `part` boundaries between a and b (b's count less a's: the
    calendar's years, months, quarters, decades, centuries, millennia and ISO years; the
    microseconds since 1970 floored to hours, minutes, seconds...). Weeks are the days
    between their dates over 7, towards zero."""
    if a is None or b is None:
        return None
    p = DIFF_PARTS[part.lower()]
    if p == "year":
        return b.year - a.year
    if p == "month":
        return (b.year - a.year) * 12 + b.month - a.month
    if p == "quarter":
        return (b.year * 12 + b.month - 1) // 3 - (a.year * 12 + a.month - 1) // 3
    if p in DIFF_SPANS:
        return b.year // DIFF_SPANS[p] - a.year // DIFF_SPANS[p]
    if p == "isoyear":
        return b.isocalendar()[0] - a.isocalendar()[0]
    if p in DIFF_MICROS:
        step = DIFF_MICROS[p]
        return _micros(b) // step - _micros(a) // step
    da = a.date() if isinstance(a, datetime.datetime) else a
    db = b.date() if isinstance(b, datetime.datetime) else b
    days = (db - da).days
    if p == "week":
        return int(days / 7)
    return days


def _micros(v: Any) -> int:
    """A DATE's or TIMESTAMP's microseconds since 1970 (a date's midnight)."""
    ts = v if isinstance(v, datetime.datetime) else datetime.datetime(v.year, v.month, v.day)
    return (ts - _EPOCH) // datetime.timedelta(microseconds=1)


@dataclass(frozen=True)
class Interval:
    """A constant SQL INTERVAL as DuckDB holds one: months, days and microseconds, kept apart
    (a month has no fixed number of days)."""

    months: int
    days: int
    micros: int

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)

    def __str__(self) -> str:
        return f"INTERVAL '{self.months} months {self.days} days {self.micros} microseconds'"

    __repr__ = __str__  # EXPLAIN shows the literal as SQL


def _add_interval(v: Any, iv: Interval) -> datetime.datetime:
    """DuckDB's DATE/TIMESTAMP + INTERVAL (a TIMESTAMP): the months first, the day clamped to
    the end of the month (Jan 31 + 1 month is Feb 28 or 29), then the days, then the
    microseconds."""
    ts = v if isinstance(v, datetime.datetime) else datetime.datetime(v.year, v.month, v.day)
    try:
        if iv.months:
            y, m = divmod(ts.month - 1 + iv.months, 12)
            year = ts.year + y
            day = min(ts.day, calendar.monthrange(year, m + 1)[1]) if 1 <= year <= 9999 else 0
            ts = ts.replace(year=year, month=m + 1, day=day)
        return ts + datetime.timedelta(days=iv.days, microseconds=iv.micros)
    except (ValueError, OverflowError):
        raise EvaluationError(f"timestamp out of range: {to_str(v)} + {iv} is not within "
                              "years 1 to 9999") from None


def _sub_interval(v: Any, iv: Interval) -> datetime.datetime:
    return _add_interval(v, -iv)


def _date_add(d: Any, n: Any) -> Any:
    """DATE + integer days. DuckDB's dates run past Python's (its 9999-12-31 + 1 is
    10000-01-01), which no view value can hold: such a result is an error, as it is for
    `_add_interval`, never NULL in its place."""
    try:
        return d + datetime.timedelta(days=int(n))
    except OverflowError:
        raise EvaluationError(f"date out of range: {to_str(d)} + {int(n)} days is not within "
                              "years 1 to 9999") from None


def _date_sub(d: Any, n: Any) -> Any:
    if isinstance(n, datetime.date):
        return (d - n).days if not isinstance(d, datetime.datetime) else int(
            (d - n).total_seconds() // 86400)
    return _date_add(d, -n)


def _repeat(s: str, n: int) -> str:
    return s * n if n > 0 else ""


def _pad(s: str, n: int, fill: str, left: bool) -> str:
    if n <= 0:
        return ""
    if len(s) >= n:
        return s[:n]
    if not fill:
        raise EvaluationError(f"insufficient padding in {'LPAD' if left else 'RPAD'}")
    need = n - len(s)
    pad = (fill * (need // len(fill) + 1))[:need]
    return pad + s if left else s + pad


def _chr(n: int) -> str:
    if not 0 <= n <= 0x10FFFF or 0xD800 <= n <= 0xDFFF:
        raise EvaluationError(f"invalid UTF-8 code point {n} in chr")
    return chr(n)


def _split_part(s: str, sep: str, i: int) -> str:
    parts = list(s) if sep == "" else s.split(sep)
    if sep == "" and not s:
        parts = [""]
    if i == 0 or abs(i) > len(parts):
        return ""
    return parts[i - 1] if i > 0 else parts[i]


def _concat_ws(sep: Any, *args: Any) -> Any:
    if sep is None:
        return None
    return sep.join(to_str(a) for a in args if a is not None)


def _translate(s: str, src: str, dst: str) -> str:
    table: dict[int, int | None] = {}
    for k, ch in enumerate(src):
        table.setdefault(ord(ch), ord(dst[k]) if k < len(dst) else None)
    return s.translate(table)


def _strip_accents(s: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", s) if not unicodedata.combining(c))


# DuckDB's further string functions: argument kinds ("s" VARCHAR, "i" integer) and result
# type, for the binder; the implementations are in FUNCS under the same names.
STRING_SIGNATURES: dict[str, tuple[str, str]] = {
    "repeat": ("si", "VARCHAR"), "lpad": ("sis", "VARCHAR"), "rpad": ("sis", "VARCHAR"),
    "ascii": ("s", "INTEGER"), "unicode": ("s", "INTEGER"), "chr": ("i", "VARCHAR"), "split_part": ("ssi", "VARCHAR"),
    "concat_ws": ("s", "VARCHAR"), "ends_with": ("ss", "BOOLEAN"),
    "starts_with": ("ss", "BOOLEAN"), "md5": ("s", "VARCHAR"), "translate": ("sss", "VARCHAR"),
    "bit_length": ("s", "BIGINT"), "strlen": ("s", "BIGINT"), "strip_accents": ("s", "VARCHAR"),
    "lower": ("s", "VARCHAR"), "upper": ("s", "VARCHAR"),
}


# SQL's comparisons of two non-NULL values as Python expressions of operands `{a}` and `{b}`
# (names, each read more than once): Python's operators, but with DuckDB's order of doubles,
# where NaN equals NaN and is above every other value, +inf included (Python's NaN compares
# unequal and unordered with everything). `x != x` holds for a NaN only, so where no operand is
# a NaN each is the bare operator; the extra test runs only when the operator says False.
# `mfp_kernel` generates these texts; FUNCS' comparisons are made from them.
COMPARE_TEXT = {
    "eq": "({a} == {b} or ({a} != {a} and {b} != {b}))",
    "ne": "({a} != {b} and ({a} == {a} or {b} == {b}))",
    "lt": "({a} < {b} or ({b} != {b} and {a} == {a}))",
    "le": "({a} <= {b} or {b} != {b})",
    "gt": "({a} > {b} or ({a} != {a} and {b} == {b}))",
    "ge": "({a} >= {b} or {a} != {a})",
}
_COMPARE = {op: eval("lambda a, b: " + text.format(a="a", b="b"))  # noqa: S307 - our text
            for op, text in COMPARE_TEXT.items()}
sql_equal = _COMPARE["eq"]


def _cmp(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def g(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        return op(a, b)

    return g


def _neg(a: Any) -> Any:
    return DECIMAL_CONTEXT.minus(a) if isinstance(a, decimal.Decimal) else -a


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return DECIMAL_CONTEXT.add(a, b)
    return a + b


def _sub(a: Any, b: Any) -> Any:
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return DECIMAL_CONTEXT.subtract(a, b)
    return a - b


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return DECIMAL_CONTEXT.multiply(a, b)
    return a * b


def _abs(a: Any) -> Any:
    return DECIMAL_CONTEXT.abs(a) if isinstance(a, decimal.Decimal) else abs(a)


def _no_neg_zero(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, with a DECIMAL -0 result made 0: Python's Decimal keeps the sign of a zero
    (-3.99 * 0.00 is -0.0000), DuckDB's fixed-point DECIMAL has no negative zero."""

    def g(*args: Any) -> Any:
        v = fn(*args)
        if isinstance(v, decimal.Decimal) and not v and v.is_signed():
            return v.copy_abs()
        return v

    return g


FUNCS: dict[str, Callable[..., Any]] = {
    "add": _nullsafe(_no_neg_zero(_add)),
    "sub": _nullsafe(_no_neg_zero(_sub)),
    "mul": _nullsafe(_no_neg_zero(_mul)),
    "div": _nullsafe(_div),
    "real_text": _nullsafe(real_to_str),
    "fraction_text": _nullsafe(fraction_to_str),
    "intdiv": _nullsafe(_intdiv),
    "mod": _nullsafe(_no_neg_zero(_mod)),
    "neg": _nullsafe(_no_neg_zero(_neg)),
    "eq": _cmp(_COMPARE["eq"]),
    "ne": _cmp(_COMPARE["ne"]),
    "lt": _cmp(_COMPARE["lt"]),
    "le": _cmp(_COMPARE["le"]),
    "gt": _cmp(_COMPARE["gt"]),
    "ge": _cmp(_COMPARE["ge"]),
    "is_distinct": lambda a, b: not ((a is None and b is None) or (
        a is not None and b is not None and sql_equal(a, b))),
    "and": _and,
    "or": _or,
    "not": _not,
    "is_null": lambda a: a is None,
    "is_true": lambda a: a is True,
    "is_false": lambda a: a is False,
    "case": _case,
    "coalesce": _coalesce,
    "nullif": _nullif,
    "like": _nullsafe(_like),
    "ilike": _nullsafe(_ilike),
    "lower": _nullsafe(sql_lower),
    "upper": _nullsafe(sql_upper),
    "length": _nullsafe(len),
    "substr": _substr_fn,
    "trim": _nullsafe(lambda s, c=None: _trim(s, c)),
    "ltrim": _nullsafe(lambda s, c=None: _trim(s, c, "leading")),
    "rtrim": _nullsafe(lambda s, c=None: _trim(s, c, "trailing")),
    "concat": _concat,
    "dpipe": _dpipe,
    # DuckDB replaces nothing for an empty pattern (Python's `str.replace` inserts between
    # every character)
    "replace": _nullsafe(lambda s, a, b: s.replace(a, b) if a else s),
    "reverse": _nullsafe(lambda s: _reverse(s)),
    "left": _nullsafe(_left),
    "right": _nullsafe(lambda s, n: (s[-n:] if n > 0 else "") if n >= 0 else s[-n:]),
    "strpos": _nullsafe(lambda s, sub: s.find(sub) + 1),
    "starts_with": _nullsafe(lambda s, p: s.startswith(p)),
    "contains": _nullsafe(lambda s, p: p in s),
    "repeat": _nullsafe(_repeat),
    "lpad": _nullsafe(lambda s, n, f: _pad(s, n, f, True)),
    "rpad": _nullsafe(lambda s, n, f: _pad(s, n, f, False)),
    "ascii": _nullsafe(lambda s: ord(s[0]) if s else 0),
    "unicode": _nullsafe(lambda s: ord(s[0]) if s else -1),
    "chr": _nullsafe(_chr),
    "split_part": _nullsafe(_split_part),
    "concat_ws": _concat_ws,
    "ends_with": _nullsafe(lambda s, p: s.endswith(p)),
    "md5": _nullsafe(lambda s: hashlib.md5(s.encode()).hexdigest()),
    "translate": _nullsafe(_translate),
    "bit_length": _nullsafe(lambda s: 8 * len(s.encode())),
    "strlen": _nullsafe(lambda s: len(s.encode())),  # bytes (LENGTH counts characters)
    "to_single": _nullsafe(_to_single),
    "strip_accents": _nullsafe(_strip_accents),
    "abs": _nullsafe(_abs),
    "round": _nullsafe(_no_neg_zero(_round)),
    "floor": _nullsafe(_no_neg_zero(_floor)),
    "ceil": _nullsafe(_no_neg_zero(_ceil)),
    "sqrt": _nullsafe(_sqrt),
    "power": _nullsafe(_power),
    "sign": _nullsafe(lambda x: (x > 0) - (x < 0)),
    "greatest": _greatest,
    "least": _least,
    "extract": _extract,
    "date_trunc": _date_trunc,
    "date_diff": _date_diff,
    "add_interval": _nullsafe(_add_interval),
    "sub_interval": _nullsafe(_sub_interval),
    "date_add": _nullsafe(_date_add),
    "date_sub": _nullsafe(_date_sub),
}

# Functions whose result is not NULL just because an argument is (no fold-away of NULL args).
NULL_TOLERANT = {"and", "or", "is_null", "is_true", "is_false", "case", "coalesce", "nullif",
                 "concat", "concat_ws", "greatest", "least", "is_distinct", "not", "substr", "extract",
                 "date_trunc", "date_diff"}


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "intdiv": "//", "mod": "%"}
_OPNAME = {"add": "addition", "sub": "subtraction", "mul": "multiplication",
           "intdiv": "division", "mod": "division"}
# Integer functions whose result can leave the range of their SQL type.
CHECKED = {"add", "sub", "mul", "intdiv", "mod", "neg", "abs", "round"}


def _checked_int(func: str, fn: Callable[..., Any], t: str) -> Callable[..., Any]:
    """fn, raising EvaluationError when its integer result does not fit SQL type t."""
    lo, hi = INT_RANGE[t]

    def overflow(*args: Any) -> EvaluationError:
        if func in _SYMBOL:
            what = f"{_OPNAME[func]} of {t} ({to_str(args[0])} {_SYMBOL[func]} {to_str(args[1])})"
        elif func == "neg":
            what = f"negation of {t} (-({to_str(args[0])}))"
        elif func == "round":
            what = f"round of {t} (round({', '.join(map(to_str, args))}))"
        else:
            what = f"abs of {t} (abs({to_str(args[0])}))"
        return EvaluationError(f"integer overflow in {what}: the result is out of range")

    if func == "round":  # round(x) or round(x, places): to the tens and beyond it can overflow
        def gn(*args: Any) -> Any:
            v = fn(*args)
            if v is not None and not lo <= v <= hi:
                raise overflow(*args)
            return v
        return gn
    if func in ("neg", "abs"):
        def g1(a: Any) -> Any:
            v = fn(a)
            if v is not None and not lo <= v <= hi:
                raise overflow(a)
            return v
        return g1

    def g2(a: Any, b: Any) -> Any:
        v = fn(a, b)
        if v is not None and not lo <= v <= hi:  # MIN % -1 is 0 (DuckDB 2), not an overflow
            raise overflow(a, b)
        return v
    return g2


def eval_scalar(e: Scalar, row: tuple[Any, ...]) -> Any:
    """Reference (uncompiled) evaluation; compile_scalar is the fast path."""
    return compile_scalar(e)(row)


def compile_scalar(e: Scalar) -> Callable[[tuple[Any, ...]], Any]:
    """A closure evaluating ``e`` on an input row; raises EvaluationError naming ``e`` where
    DuckDB raises."""
    if isinstance(e, Col):
        i = e.index
        return lambda row: row[i]
    if isinstance(e, Lit):
        v = e.value
        return lambda row: v
    if isinstance(e, OuterRef):
        raise AssertionError("OuterRef survived decorrelation")
    inner = _compile_call(e)
    label = guard_label(e)
    if label is None:
        return inner

    def guarded(row: tuple[Any, ...]) -> Any:
        try:
            return inner(row)
        except EvaluationError as err:
            if err.expression is not None:
                raise
            raise EvaluationError(err.detail, label) from None

    return guarded


def guard_label(e: Call) -> str | None:
    """The expression text an EvaluationError raised inside ``e`` (and not named further in)
    is named by, or None when ``e`` names none."""
    if e.func not in CHECKED and e.func not in ("cast", "intdiv", "mod", "lpad", "rpad", "chr"):
        return None
    return e.label or fmt_scalar(e)


LAZY = {"cast", "try_cast", "case", "coalesce", "and", "or"}  # not `eager_function`s


def eager_function(e: Call) -> Callable[..., Any]:
    """The function of a call that evaluates all its arguments, left to right, then applies
    it (every call but those in LAZY): FUNCS[func], with the integer range check of its
    result type."""
    fn = FUNCS[e.func]
    t = norm_type(e.type)
    if e.func in CHECKED and t in INT_RANGE:
        fn = _checked_int(e.func, fn, t)
    elif e.func in CHECKED and family(t) == "decimal":
        fn = _checked_decimal(e.func, fn, t)
    return fn


def _checked_decimal(func: str, fn: Callable[..., Any], t: str) -> Callable[..., Any]:
    """fn, raising EvaluationError when its DECIMAL result has more digits than type t holds
    (DuckDB's "Overflow in multiplication of DECIMAL(18)": a product's type is capped at 18
    digits when both operands fit 64 bits, and every DECIMAL at 38)."""
    p, s = decimal_ps(t)
    limit = decimal.Decimal(10) ** (p - s)

    def g(*args: Any) -> Any:
        v = fn(*args)
        # (copy_abs: abs() rounds to the context's 28 digits)
        if v is not None and (v.copy_abs() if v.__class__ is decimal.Decimal else abs(v)) >= limit:
            what = _OPNAME.get(func, func)
            raise EvaluationError(f"overflow in {what} of {t} ({', '.join(map(to_str, args))}):"
                                  " the result has more digits than the type holds")
        return v
    return g


def _compile_call(e: Call) -> Callable[[tuple[Any, ...]], Any]:
    args = [compile_scalar(a) for a in e.args]
    if e.func in ("cast", "try_cast"):
        target = e.type
        a0 = args[0]
        conv = cast_checked if e.func == "cast" else cast_value
        return lambda row: conv(a0(row), target)
    # CASE, COALESCE, AND and OR evaluate their arguments lazily, left to right, as DuckDB
    # does: an argument that is not needed is not evaluated, so it cannot raise.
    if e.func == "case":
        pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
        default = args[-1]

        def case(row: tuple[Any, ...]) -> Any:
            for cond, val in pairs:
                if cond(row) is True:
                    return val(row)
            return default(row)
        return case
    if e.func == "coalesce":
        def coalesce(row: tuple[Any, ...]) -> Any:
            for a in args:
                v = a(row)
                if v is not None:
                    return v
            return None
        return coalesce
    if e.func in ("and", "or"):
        stop = e.func == "or"  # the value that decides the result on its own

        def conj(row: tuple[Any, ...]) -> Any:
            unknown = False
            for a in args:
                v = a(row)
                if v is stop:
                    return stop
                if v is None:
                    unknown = True
            return None if unknown else not stop
        return conj
    fn = eager_function(e)
    if len(args) == 1:
        a0 = args[0]
        return lambda row: fn(a0(row))
    if len(args) == 2:
        a0, a1 = args
        return lambda row: fn(a0(row), a1(row))
    return lambda row: fn(*[a(row) for a in args])


# ---------------------------------------------------------------- canonical ordering


def sort_key(v: Any) -> tuple[float, Any]:
    """A total order over SQL values of mixed Python types (None first)."""
    if v is None:
        return (0, 0)
    if isinstance(v, bool):
        return (1, int(v))
    if isinstance(v, (int, float, decimal.Decimal)):
        if isinstance(v, float) and math.isnan(v):
            return (2.5, 0)  # after every other number, +inf included, as DuckDB orders them
        return (2, v)
    if isinstance(v, str):
        return (3, v)
    if isinstance(v, datetime.datetime):
        return (4, v)
    if isinstance(v, datetime.date):
        return (4, datetime.datetime(v.year, v.month, v.day))
    return (9, repr(v))


def row_key(row: tuple[Any, ...]) -> tuple[tuple[int, Any], ...]:
    return tuple(sort_key(v) for v in row)
