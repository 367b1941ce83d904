"""Keyed MFP kernels: one generated Python function per arranged leaf of a join.

A join input is usually ``ArrangeBy(Mfp(Get t))``: drop rows whose join keys are NULL, apply the
pushed-down filters, keep the columns read above, and pair each row with its key. Lowered
literally that is two operators and two Python calls per row (the Mfp's row function, then a
key lambda), on every row of every joined table: at hydration, the largest cost of a many-way
join after the input itself. ``keyed_mfp`` writes the whole step as the text of one function
and compiles it once, so a row costs one call and straight-line code:

    def kernel(row):
        if row[0] is None or row[1] is None: return ()
        if not (row[2] is not None and row[2] == c0): return ()
        return (((row[0],), (row[0], row[1], row[2])),)

Invariant: ``keyed_mfp(m, keys)(row)`` equals ``reference_keyed_mfp(m, keys)(row)`` (the
composition of ``lower.compile_mfp`` and the key getter) for every row. A kernel also
carries ``over_columns`` (planner.mfp_columns) where the Mfp's expressions allow it: the same
step over a table's columns. Only predicates whose
generated text is exactly the evaluator's semantics are generated: IS [NOT] NULL of a column,
and comparisons of columns and non-NULL literals (``_cmp``: NULL on either side is not TRUE,
otherwise Python's operator); any other Mfp (maps, other functions) returns None and the caller
uses the reference. Tests run both on random rows.
"""

from __future__ import annotations

import datetime
import functools
import itertools
from collections.abc import Callable
from typing import Any

from engine.canonical import canonical
from planner.errors import EvaluationError
from planner.ir import Call, Col, Lit, Mfp, Scalar, scalar_cols
from planner.mfp_columns import columns_mfp
from planner.scalar import (
    COMPARE_TEXT,
    FUNCS,
    INT_RANGE,
    LAZY,
    cast_checked,
    cast_value,
    eager_function,
    family,
    guard_label,
    norm_type,
)

KeyedRows = Callable[[tuple[Any, ...]], tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]]


def reference_keyed_mfp(m: Mfp, keys: tuple[int, ...]) -> KeyedRows:
    """The obviously-correct twin: the Mfp's row function, then the key of each output."""
    from planner.lower import compile_mfp

    f = compile_mfp(m)

    def rows(row: tuple[Any, ...]) -> tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]:
        return tuple((tuple(out[k] for k in keys), out) for out in f(row))

    return rows


def _operand(e: Scalar, consts: list[Any]) -> str | None:
    if isinstance(e, Col):
        return f"row[{e.index}]"
    if isinstance(e, Lit) and e.value is not None:
        consts.append(e.value)
        return f"c{len(consts) - 1}"
    return None


def _condition(p: Scalar, consts: list[Any]) -> str | None:
    """Python text that is True exactly when ``p`` evaluates to SQL TRUE, or None."""
    if not isinstance(p, Call):
        return None
    if p.func == "is_null" and isinstance(p.args[0], Col):
        return f"row[{p.args[0].index}] is None"
    if p.func == "not" and isinstance(p.args[0], Call) and p.args[0].func == "is_null" and \
            isinstance(p.args[0].args[0], Col):
        return f"row[{p.args[0].args[0].index}] is not None"
    if p.func in COMPARE_TEXT and len(p.args) == 2:
        a, b = (_operand(x, consts) for x in p.args)
        if a is None or b is None:
            return None
        guard = " and ".join(f"{x} is not None" for x in (a, b) if x.startswith("row"))
        cmp = COMPARE_TEXT[p.func].format(a=a, b=b)
        return f"({guard} and {cmp})" if guard else f"({cmp})"
    if p.func == "and":
        parts = [_condition(a, consts) for a in p.args]
        if any(x is None for x in parts):
            return None
        return "(" + " and ".join(parts) + ")"  # type: ignore[arg-type]
    return None


@functools.lru_cache(maxsize=4096)
def _code(text: str, filename: str) -> Any:
    """The compiled code of a generated kernel's text: the constants are names bound by the
    namespace it runs in, so views of the same shape (the tables of a many-way join, every
    restart) compile it once."""
    return compile(text, filename, "exec")


def _tuple(idx: tuple[int, ...] | list[int]) -> str:
    return "(" + "".join(f"row[{i}], " for i in idx) + ")"


def keyed_mfp(m: Mfp, keys: tuple[int, ...]) -> KeyedRows | None:
    """The generated kernel for ``m`` keyed by ``keys`` (columns of m's output), or None when
    m has a part the generator does not cover (then use ``reference_keyed_mfp``)."""
    return _generate(m, keys)


def plain_mfp(m: Mfp) -> Callable[[tuple[Any, ...]], tuple[tuple[Any, ...], ...]] | None:
    """The generated kernel for ``m`` alone: row -> () or (out_row,), as ``lower.compile_mfp``
    (its reference), or None when m has a part the generator does not cover."""
    return _generate(m, None)


def projection(idx: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """row -> the columns ``idx`` of row, generated with an ``over_updates`` that maps a whole
    list of updates in one comprehension (reference: ``itemgetter``)."""
    kernel = _map_kernel(_tuple(idx), _tuple(idx))
    if idx:
        kernel.over_columns = functools.partial(_select, idx)
    return kernel


def _select(idx: tuple[int, ...], table: Any) -> Any:
    """The columns `idx` of an Arrow table (the projection over columns)."""
    import pyarrow as pa

    return pa.table([table.column(i) for i in idx], names=[f"c{j}" for j in range(len(idx))])


def keyed_row(keys: tuple[int, ...]) -> Callable[[tuple[Any, ...]], Any]:
    """row -> (the columns ``keys`` of row, row), generated as ``projection``."""
    kernel = _map_kernel(f"({_tuple(keys)}, row)")
    kernel.over_rows = _same_rows
    kernel.over_columns = _same_rows  # the table itself, keyed
    kernel.row_keys = tuple(keys)
    return kernel


def _same_rows(rows: list[Any]) -> list[Any]:
    return rows


def _map_kernel(body: str, rows: str | None = None, row_keys: tuple[int, ...] | None = None
                ) -> Any:
    """A generated row function `row -> body`, with `over_updates`; with `rows` (the output row
    without its key, `row_keys` the key's columns in it) also `over_rows`, the same step over
    a plain list of rows (see `engine.operators.stateless._over_updates`)."""
    text = (f"def kernel(row):\n    return {body}\n"
            f"def over_updates(updates):\n    return [({body}, t, r) for row, t, r in updates]\n")
    if rows is not None:
        text += f"def over_rows(rows):\n    return [{rows} for row in rows]\n"
    ns: dict[str, Any] = {}
    exec(_code(text, "<map_kernel>"), ns)  # noqa: S102 - our own text
    kernel = ns["kernel"]
    kernel.over_updates = ns["over_updates"]
    if rows is not None:
        kernel.over_rows = ns["over_rows"]
        kernel.row_keys = row_keys
    return kernel


def _generate(m: Mfp, keys: tuple[int, ...] | None) -> Any:
    if m.map:
        return None
    consts: list[Any] = []
    conds: list[str] = []
    for p in m.filter:
        c = _condition(p, consts)
        if c is None:
            return None
        conds.append(c)
    lines = ["def kernel(row):"]
    for c in conds:
        lines.append(f"    if not {c}: return ()")
    # keeping every column in order: the row itself, not a copy
    plain = out = "row" if m.project == tuple(range(m.input.arity)) else _tuple(m.project)
    if keys is not None:
        out = f"({_tuple([m.project[k] for k in keys])}, {out})"
    lines.append(f"    return ({out},)")
    # The same step over a whole list of updates `(row, time, diff)`: one comprehension, no
    # call per row (a hydrating join arranges every row of every joined table this way).
    where = (" if " + " and ".join(conds)) if conds else ""
    lines.append("def over_updates(updates):")
    lines.append(f"    return [({out}, t, r) for row, t, r in updates{where}]")
    # ... and over plain rows, unkeyed (the key is `keys` of the output row)
    lines.append("def over_rows(rows):")
    lines.append("    return rows" if plain == "row" and not conds else
                 f"    return [{plain} for row in rows{where}]")
    ns: dict[str, Any] = {f"c{i}": v for i, v in enumerate(consts)}
    exec(_code("\n".join(lines), "<mfp_kernel>"), ns)  # noqa: S102 - our own text
    kernel = ns["kernel"]
    kernel.over_updates = ns["over_updates"]
    kernel.over_rows = ns["over_rows"]
    kernel.row_keys = keys
    _with_columns(kernel, m)
    return kernel


def reference_mfp(m: Mfp) -> Callable[[tuple[Any, ...]], tuple[tuple[Any, ...], ...]]:
    """``lower.compile_mfp(m)`` itself (the generators leave m: a lazy call, CASE, COALESCE,
    AND or OR, evaluated as the reference does) with the same step over whole columns where
    m's expressions allow it (planner.mfp_columns): without it such an Mfp made every row of a
    hydration a tuple, in a Python call each."""
    from planner.lower import compile_mfp

    kernel = compile_mfp(m)
    _with_columns(kernel, m)
    if getattr(kernel, "over_columns", None) is not None:
        kernel.row_keys = None  # type: ignore[attr-defined]
    return kernel


def _with_columns(kernel: Any, m: Mfp) -> None:
    """Give `kernel` the same step over whole columns (planner.mfp_columns) where m's
    expressions allow it."""
    over_columns = columns_mfp(m)
    if over_columns is not None:
        kernel.over_columns = over_columns


# -- whole MFPs with maps: straight-line code over the same scalar functions -------------------

_ARITH = {"add": "+", "sub": "-", "mul": "*"}


def _call_lines(e: Call, v: str, fn: str, args: list[str],
                consts: dict[str, Any]) -> list[tuple[int, str]]:
    """Statements setting `v` to `fn(*args)` (`fn` is `scalar.eager_function(e)`), with the
    hot cases inlined where the inline code provably computes what `fn` does:

    - a comparison is `scalar._cmp`: NULL if either side is NULL, else the operator;
    - +, - and * of two exact ints (`bool` is not `int` here) are `scalar._add` etc., whose
      range check `fn` repeats (and raises) only when the result leaves the type's range;
    - a % b of ints with a >= 0 and b > 0 is Python's %, which then agrees with SQL's
      truncating remainder and cannot overflow;
    - +, -, * and / of two floats into a DOUBLE are IEEE's (a zero divisor is left to `fn`).

    The conditions of an inlined case on a constant argument (a name in `consts`) are decided
    here, once: dropped when they hold, and the call kept alone when one does not."""
    if e.func in COMPARE_TEXT and len(args) == 2:
        a, b = args
        cmp = COMPARE_TEXT[e.func].format(a=a, b=b)
        return [(0, f"{v} = None if {a} is None or {b} is None else {cmp}")]
    call = [(0, f"{v} = {fn}({', '.join(args)})")]
    t = norm_type(e.type)
    if len(args) != 2:
        return call
    a, b = args

    def inline(conds: list[tuple[str, str]], body: list[tuple[int, str]]) -> list[tuple[int, str]]:
        # conds in evaluation order: a value's type is checked before it is compared
        live = []
        for operand, cond in conds:
            if operand in consts:
                if not eval(cond, {}, {operand: consts[operand]}):  # noqa: S307 - our own text
                    return call
            else:
                live.append(cond)
        if not live:
            return body
        return [(0, "if " + " and ".join(live) + ":"), *((d + 1, x) for d, x in body),
                (0, "else:"), (1, f"{v} = {fn}({a}, {b})")]

    floats = [(a, f"{a}.__class__ is float"), (b, f"{b}.__class__ is float")]
    ints = [(a, f"{a}.__class__ is int"), (b, f"{b}.__class__ is int")]
    if t == "DOUBLE" and e.func in _ARITH:
        # IEEE arithmetic, as scalar._add etc. compute it for floats (never raising)
        return inline(floats, [(0, f"{v} = {a} {_ARITH[e.func]} {b}")])
    if t == "DOUBLE" and e.func == "div":
        # scalar._div for a non-zero divisor (NaN included) is the IEEE quotient
        return inline(floats + [(b, f"{b} != 0.0")], [(0, f"{v} = {a} / {b}")])
    if t not in INT_RANGE:
        return call
    if e.func in _ARITH:
        lo, hi = INT_RANGE[t]
        return inline(ints, [(0, f"{v} = {a} {_ARITH[e.func]} {b}"),
                             (0, f"if not {lo} <= {v} <= {hi}:"), (1, f"{v} = {fn}({a}, {b})")])
    if e.func == "mod":
        return inline(ints + [(a, f"{a} >= 0"), (b, f"{b} > 0")], [(0, f"{v} = {a} % {b}")])
    return call
    a, b = args
    both_float = f"{a}.__class__ is float and {b}.__class__ is float"
    if t == "DOUBLE" and e.func in _ARITH:
        # IEEE arithmetic, as scalar._add etc. compute it for floats (never raising)
        return [(0, f"if {both_float}:"), (1, f"{v} = {a} {_ARITH[e.func]} {b}"),
                (0, "else:"), (1, f"{v} = {fn}({a}, {b})")]
    if t == "DOUBLE" and e.func == "div":
        # scalar._div for a non-zero divisor (NaN included) is the IEEE quotient
        return [(0, f"if {both_float} and {b} != 0.0:"), (1, f"{v} = {a} / {b}"),
                (0, "else:"), (1, f"{v} = {fn}({a}, {b})")]
    if t not in INT_RANGE:
        return call
    both_int = f"{a}.__class__ is int and {b}.__class__ is int"
    if e.func in _ARITH:
        lo, hi = INT_RANGE[t]
        return [(0, f"if {both_int}:"), (1, f"{v} = {a} {_ARITH[e.func]} {b}"),
                (1, f"if not {lo} <= {v} <= {hi}:"), (2, f"{v} = {fn}({a}, {b})"),
                (0, "else:"), (1, f"{v} = {fn}({a}, {b})")]
    if e.func == "mod":
        return [(0, f"if {both_int} and {a} >= 0 and {b} > 0:"), (1, f"{v} = {a} % {b}"),
                (0, "else:"), (1, f"{v} = {fn}({a}, {b})")]
    return call



class _Unsupported(Exception):
    """A part of an MFP the generator leaves to the reference (lazy calls, OuterRef, ...)."""


def _named(err: EvaluationError, label: str) -> EvaluationError:
    """What `scalar.compile_scalar`'s guard raises: the error, named by `label` unless a call
    further in named it already."""
    return err if err.expression is not None else EvaluationError(err.detail, label)


# Casts inlined for the Python classes whose conversion cannot fail, by target type: the class
# and the expression `scalar._convert` computes for a value `{a}` of exactly that class (a date
# compared with a TIMESTAMP is cast per row, as are integers in DOUBLE arithmetic).
_INLINE_CASTS: dict[str, tuple[tuple[type, str, str], ...]] = {
    "TIMESTAMP": ((datetime.date, "", "{datetime}({a}.year, {a}.month, {a}.day)"),
                  (datetime.datetime, "", "{a}")),
    # float(int) overflows only past about 1.8e308: such ints take the general path
    "DOUBLE": ((float, "", "{a}"), (int, "-{big} < {a} < {big}", "{float}({a})")),
}
_INLINE_NAMES = {"datetime": datetime.datetime, "float": float, "big": 1 << 1000}


def compiled_mfp(m: Mfp, keys: tuple[int, ...] | None = None
                 ) -> Callable[[tuple[Any, ...]], tuple[tuple[Any, ...], ...]] | None:
    """``lower.compile_mfp(m)`` as generated code, or None when m holds a lazy call (CASE,
    COALESCE, AND, OR: `scalar.LAZY`), where the reference is used. With `keys`
    (columns of m's output) each output row comes keyed, ``(key columns, row)``, as
    `keyed_mfp` gives it.

    Each eager call is the very function `scalar.compile_scalar` applies
    (`scalar.eager_function`), called on its arguments computed in order into local variables
    instead of through a closure per argument; a call `compile_scalar` guards (names the
    expression of an EvaluationError) is guarded the same way by a try around the statements
    of its arguments and itself. Maps are made canonical and filters run after the maps they
    read exactly as in the reference, so outputs and errors are the reference's."""
    n = m.input.arity
    ns: dict[str, Any] = {"EvaluationError": EvaluationError, "_named": _named,
                          "canonical": canonical}
    names = itertools.count()

    def const(v: Any, prefix: str) -> str:
        name = f"{prefix}{next(names)}"
        ns[name] = v
        return name

    def gen(e: Scalar, depth: int, out: list[tuple[int, str]]) -> str:
        if isinstance(e, Col):
            return f"row[{e.index}]" if e.index < n else f"m{e.index - n}"
        if isinstance(e, Lit):
            return const(e.value, "c")
        if not isinstance(e, Call):
            raise _Unsupported
        cast = e.func in ("cast", "try_cast")
        if not cast and (e.func in LAZY or e.func not in FUNCS):
            raise _Unsupported
        v = f"v{next(names)}"
        label = guard_label(e)
        inner = depth if label is None else depth + 1
        if label is not None:
            out.append((depth, "try:"))
        if cast:
            # `scalar._compile_call`'s cast: the first argument converted to the call's type
            conv = const(cast_checked if e.func == "cast" else cast_value, "F")
            a = gen(e.args[0], inner, out)
            call = f"{conv}({a}, {const(e.type, 'T')})"
            fast_paths = _INLINE_CASTS.get(norm_type(e.type), ())
            for cls, cond, expr in reversed(fast_paths):
                # What `scalar._convert` computes for a value of exactly this class (and within
                # `cond`), where it cannot fail; any other value takes the general conversion.
                given = {k: const(x, "G") for k, x in _INLINE_NAMES.items()}
                test = f"{a}.__class__ is {const(cls, 'K')}"
                if cond:
                    test += " and " + cond.format(a=a, **given)
                call = f"({expr.format(a=a, **given)} if {test} else {call})"
            if fast_paths:
                call = f"None if {a} is None else {call}"
            out.append((inner, f"{v} = {call}"))
        else:
            fn = const(eager_function(e), "F")
            args = [gen(a, inner, out) for a in e.args]
            out.extend((inner + d, line) for d, line in _call_lines(e, v, fn, args, ns))
        if label is None:
            return v
        out.append((depth, "except EvaluationError as err:"))
        out.append((depth + 1, f"raise _named(err, {const(label, 'L')}) from None"))
        return v

    # filters by the number of maps they need (the reference's order: lower.compile_mfp)
    after: list[list[Scalar]] = [[] for _ in range(len(m.map) + 1)]
    for p in m.filter:
        need = max((c - n + 1 for c in scalar_cols(p) if c >= n), default=0)
        after[need].append(p)
    body: list[tuple[int, str]] = []
    try:
        for k in range(len(m.map) + 1):
            if k > 0:
                e = m.map[k - 1]
                v = gen(e, 0, body)
                t = getattr(e, "type", None)
                if t is not None and family(t) in ("float", "null", "other"):
                    v = f"canonical({v})"
                body.append((0, f"m{k - 1} = {v}"))
            for p in after[k]:
                v = gen(p, 0, body)
                body.append((0, f"if {v} is not True: REJECT"))
    except _Unsupported:
        return None
    cols = [f"row[{i}]" if i < n else f"m{i - n}" for i in m.project]
    plain = out = "row" if not m.map and m.project == tuple(range(n)) else \
        "(" + "".join(f"{c}, " for c in cols) + ")"
    if keys is not None:
        out = "((" + "".join(f"{cols[k]}, " for k in keys) + f"), {out})"
    lines = ["def kernel(row):"]
    lines += ["    " * (d + 1) + s.replace("REJECT", "return ()") for d, s in body]
    lines.append(f"    return ({out},)")
    lines += ["def over_updates(updates):", "    res = []", "    app = res.append",
              "    for row, t, r in updates:"]
    lines += ["    " * (d + 2) + s.replace("REJECT", "continue") for d, s in body]
    lines += [f"        app(({out}, t, r))", "    return res"]
    # ... and over plain rows, unkeyed (the key is `keys` of the output row)
    lines += ["def over_rows(rows):", "    res = []", "    app = res.append",
              "    for row in rows:"]
    lines += ["    " * (d + 2) + s.replace("REJECT", "continue") for d, s in body]
    lines += [f"        app({plain})", "    return res"]
    exec(_code("\n".join(lines), "<compiled_mfp>"), ns)  # noqa: S102 - our own text
    kernel = ns["kernel"]
    kernel.over_updates = ns["over_updates"]
    kernel.over_rows = ns["over_rows"]
    kernel.row_keys = keys
    _with_columns(kernel, m)
    return kernel  # type: ignore[no-any-return]
