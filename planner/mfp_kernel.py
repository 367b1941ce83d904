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
composition of ``lower.compile_mfp`` and the key getter) for every row. Only predicates whose
generated text is exactly the evaluator's semantics are generated: IS [NOT] NULL of a column,
and comparisons of columns and non-NULL literals (``_cmp``: NULL on either side is not TRUE,
otherwise Python's operator); any other Mfp (maps, other functions) returns None and the caller
uses the reference. Tests run both on random rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner.ir import Call, Col, Lit, Mfp, Scalar

_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

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
    if p.func in _OPS and len(p.args) == 2:
        a, b = (_operand(x, consts) for x in p.args)
        if a is None or b is None:
            return None
        guard = " and ".join(f"{x} is not None" for x in (a, b) if x.startswith("row"))
        cmp = f"{a} {_OPS[p.func]} {b}"
        return f"({guard} and {cmp})" if guard else f"({cmp})"
    if p.func == "and":
        parts = [_condition(a, consts) for a in p.args]
        if any(x is None for x in parts):
            return None
        return "(" + " and ".join(parts) + ")"  # type: ignore[arg-type]
    return None


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
    return _map_kernel(_tuple(idx))


def keyed_row(keys: tuple[int, ...]) -> Callable[[tuple[Any, ...]], Any]:
    """row -> (the columns ``keys`` of row, row), generated as ``projection``."""
    return _map_kernel(f"({_tuple(keys)}, row)")


def _map_kernel(body: str) -> Any:
    text = (f"def kernel(row):\n    return {body}\n"
            f"def over_updates(updates):\n    return [({body}, t, r) for row, t, r in updates]")
    ns: dict[str, Any] = {}
    exec(compile(text, "<map_kernel>", "exec"), ns)  # noqa: S102 - our own text
    kernel = ns["kernel"]
    kernel.over_updates = ns["over_updates"]
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
    out = "row" if m.project == tuple(range(m.input.arity)) else _tuple(m.project)
    if keys is not None:
        out = f"({_tuple([m.project[k] for k in keys])}, {out})"
    lines.append(f"    return ({out},)")
    # The same step over a whole list of updates `(row, time, diff)`: one comprehension, no
    # call per row (a hydrating join arranges every row of every joined table this way).
    where = (" if " + " and ".join(conds)) if conds else ""
    lines.append("def over_updates(updates):")
    lines.append(f"    return [({out}, t, r) for row, t, r in updates{where}]")
    ns: dict[str, Any] = {f"c{i}": v for i, v in enumerate(consts)}
    exec(compile("\n".join(lines), "<mfp_kernel>", "exec"), ns)  # noqa: S102 - our own text
    kernel = ns["kernel"]
    kernel.over_updates = ns["over_updates"]
    return kernel
