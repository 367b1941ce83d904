"""The relational plan IR between SQL and the engine, and its EXPLAIN printer.

A plan is a tree of frozen dataclasses, so plans are values: they hash, compare structurally and
can be shared. Columns are positional (``#i``); names live only in the binder. Every node knows
its ``arity`` and every row it denotes is a tuple of exactly that many values.

Scalar expressions: ``Col(i)`` reads column i of the input row, ``Lit`` is a constant,
``Call(func, args, type)`` applies a scalar function from ``planner.scalar.FUNCS``,
``OuterRef(k)`` is a correlated reference that exists only until decorrelation removes it.

Relations (the Materialize-style physical vocabulary):
  Get(name)            a table/view (``local=False``) or a Let/LetRec binding (``local=True``)
  Constant(rows)       a literal multiset (each row once per occurrence)
  Mfp(input, map, filter, project)
                       append ``map`` columns (each may read earlier ones), keep rows where
                       every ``filter`` is TRUE, then output the ``project`` columns
  FlatMap(input, func, args)  a table function appending columns (one row per output)
  Join(left, right, keys)     rows l+r where l[a] == r[b] for each (a, b) in keys; key equality is
                       Python equality, so NULL matches NULL: SQL joins filter NULL keys first
  DeltaJoin(inputs, keys)     a many-way join lowered as a delta join (no intermediate arrangements)
  Reduce(input, group, aggs)  group-by columns then one column per aggregate; no aggs = DISTINCT
  TopK(input, group, order, limit, offset)   rows per group, ordered, sliced
  Negate / Threshold (keep rows with positive count) / Union (multiset sum)
  ArrangeBy(input, keys)      the input indexed by key columns (shared by every reader)
  Let(id, value, body) / LetRec(ids, values, body, limit)
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass, field, fields
from typing import Any

# ---------------------------------------------------------------- scalar expressions


@dataclass(frozen=True)
class Col:
    index: int


@dataclass(frozen=True)
class Lit:
    value: Any
    type: str


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Scalar, ...]
    type: str
    # SQL text of the expression, for EvaluationError messages only: not part of equality,
    # hashing or EXPLAIN, so plans that differ only in spelling stay equal and shared.
    label: str = field(default="", compare=False)


@dataclass(frozen=True)
class OuterRef:
    index: int
    type: str


Scalar = Col | Lit | Call | OuterRef

TRUE = Lit(True, "BOOLEAN")
FALSE = Lit(False, "BOOLEAN")


def null(type_: str = "NULL") -> Lit:
    return Lit(None, type_)


def scalar_cols(e: Scalar) -> set[int]:
    """Input columns an expression reads."""
    if isinstance(e, Col):
        return {e.index}
    if isinstance(e, Call):
        out: set[int] = set()
        for a in e.args:
            out |= scalar_cols(a)
        return out
    return set()


def has_outer(e: Scalar) -> bool:
    if isinstance(e, OuterRef):
        return True
    if isinstance(e, Call):
        return any(has_outer(a) for a in e.args)
    return False


def map_cols(e: Scalar, f: Any) -> Scalar:
    """Rewrite every Col(i) to f(i) (an int) or, if f returns a Scalar, to that expression."""
    if isinstance(e, Col):
        r = f(e.index)
        return Col(r) if isinstance(r, int) else r
    if isinstance(e, Call):
        return Call(e.func, tuple(map_cols(a, f) for a in e.args), e.type, e.label)
    return e


def map_outer(e: Scalar, f: Any) -> Scalar:
    if isinstance(e, OuterRef):
        return f(e)
    if isinstance(e, Call):
        return Call(e.func, tuple(map_outer(a, f) for a in e.args), e.type, e.label)
    return e


# ---------------------------------------------------------------- relations


@dataclass(frozen=True)
class Get:
    name: str
    arity: int
    local: bool = False


@dataclass(frozen=True)
class Constant:
    rows: tuple[tuple[Any, ...], ...]
    arity: int


@dataclass(frozen=True)
class Mfp:
    input: Rel
    map: tuple[Scalar, ...] = ()
    filter: tuple[Scalar, ...] = ()
    project: tuple[int, ...] = ()

    @property
    def arity(self) -> int:
        return len(self.project)


@dataclass(frozen=True)
class FlatMap:
    input: Rel
    func: str
    args: tuple[Scalar, ...]
    out_arity: int

    @property
    def arity(self) -> int:
        return self.input.arity + self.out_arity


@dataclass(frozen=True)
class Join:
    left: Rel
    right: Rel
    keys: tuple[tuple[int, int], ...] = ()

    @property
    def arity(self) -> int:
        return self.left.arity + self.right.arity


@dataclass(frozen=True)
class DeltaJoin:
    """``inputs`` side by side (their columns concatenated), rows where ``#a == #b`` for each
    key pair of concatenated columns (Python equality, as ``Join.keys``).

    Lowered as a delta join where times are totally ordered (see engine/operators/half_join.py):
    one path per input, which looks each change of that input up in the other inputs'
    arrangements, in ``paths()`` order; input ``i``'s path sees inputs before it in ``inputs``
    strictly before its time and inputs after it through its time. Elsewhere (in loops) it is
    the left-deep binary join of ``inputs`` in order (``planner.joins.left_deep``)."""

    inputs: tuple[Rel, ...]
    keys: tuple[tuple[int, int], ...] = ()

    @property
    def arity(self) -> int:
        return sum(r.arity for r in self.inputs)

    def owners(self) -> list[tuple[int, int]]:
        """(input, column of that input) of each concatenated column."""
        return [(i, c) for i, r in enumerate(self.inputs) for c in range(r.arity)]

    def paths(self) -> list[list[int]]:
        """Per input, the order its path visits the inputs: always next an input sharing a key
        with those visited (the one earliest in ``inputs``), a cross product only when none
        does. ``inputs`` starts with the most filtered input, so paths head towards it."""
        own = self.owners()
        adj: dict[int, set[int]] = {i: set() for i in range(len(self.inputs))}
        for a, b in self.keys:
            ia, ib = own[a][0], own[b][0]
            if ia != ib:
                adj[ia].add(ib)
                adj[ib].add(ia)
        out = []
        for i in range(len(self.inputs)):
            path = [i]
            while len(path) < len(self.inputs):
                rest = [j for j in range(len(self.inputs)) if j not in path]
                linked = [j for j in rest if adj[j] & set(path)]
                path.append(min(linked or rest))
            out.append(path)
        return out


@dataclass(frozen=True)
class Agg:
    func: str  # count_star, count, sum, avg, min, max, single (a scalar subquery's value)
    arg: int | None
    distinct: bool
    type: str
    label: str = field(default="", compare=False)  # SQL text, for EvaluationError only
    arg2: int | None = None  # the second argument of covar_pop, covar_samp and corr
    # AVG of a DECIMAL(width, scale): its (width, scale); and of any AVG whether it is grouped
    # (its Reduce has keys: `planner.aggregate.as_grouped`); they decide how DuckDB rounds it
    # (`planner.aggregate._finish_avg`)
    decimal: tuple[int, int] | None = None
    grouped: bool = False


@dataclass(frozen=True)
class Reduce:
    input: Rel
    group: tuple[int, ...]
    aggs: tuple[Agg, ...] = ()

    @property
    def arity(self) -> int:
        return len(self.group) + len(self.aggs)


@dataclass(frozen=True)
class SortKey:
    col: int
    desc: bool = False
    nulls_first: bool = False


@dataclass(frozen=True)
class TopK:
    input: Rel
    group: tuple[int, ...]
    order: tuple[SortKey, ...]
    limit: int | None
    offset: int = 0

    @property
    def arity(self) -> int:
        return self.input.arity


@dataclass(frozen=True)
class Negate:
    input: Rel

    @property
    def arity(self) -> int:
        return self.input.arity


@dataclass(frozen=True)
class Threshold:
    input: Rel

    @property
    def arity(self) -> int:
        return self.input.arity


@dataclass(frozen=True)
class Union:
    inputs: tuple[Rel, ...]

    @property
    def arity(self) -> int:
        return self.inputs[0].arity


@dataclass(frozen=True)
class ArrangeBy:
    input: Rel
    keys: tuple[int, ...]

    @property
    def arity(self) -> int:
        return self.input.arity


@dataclass(frozen=True)
class Let:
    id: str
    value: Rel
    body: Rel

    @property
    def arity(self) -> int:
        return self.body.arity


@dataclass(frozen=True)
class LetRec:
    ids: tuple[str, ...]
    values: tuple[Rel, ...]
    body: Rel
    limit: int | None = None

    @property
    def arity(self) -> int:
        return self.body.arity


Rel = (Get | Constant | Mfp | FlatMap | Join | DeltaJoin | Reduce | TopK | Negate | Threshold | Union
       | ArrangeBy | Let | LetRec)

REL_CHILD_FIELDS = ("input", "left", "right", "value", "body")


def children(r: Rel) -> list[Rel]:
    if isinstance(r, (Union, DeltaJoin)):
        return list(r.inputs)
    if isinstance(r, LetRec):
        return [*r.values, r.body]
    return [getattr(r, f.name) for f in fields(r) if f.name in REL_CHILD_FIELDS]


def with_children(r: Rel, kids: list[Rel]) -> Rel:
    if isinstance(r, Union):
        return Union(tuple(kids))
    if isinstance(r, DeltaJoin):
        return DeltaJoin(tuple(kids), r.keys)
    if isinstance(r, LetRec):
        return LetRec(r.ids, tuple(kids[:-1]), kids[-1], r.limit)
    names = [f.name for f in fields(r) if f.name in REL_CHILD_FIELDS]
    if not names:
        return r
    kw = {f.name: getattr(r, f.name) for f in fields(r)}
    for n, k in zip(names, kids, strict=True):
        kw[n] = k
    return type(r)(**kw)


def transform_up(r: Rel, f: Any) -> Rel:
    """Apply f bottom-up (children first) to every node."""
    kids = children(r)
    if kids:
        new = [transform_up(k, f) for k in kids]
        if any(a is not b for a, b in zip(new, kids, strict=True)):
            r = with_children(r, new)
    return f(r)


def walk(r: Rel) -> list[Rel]:
    out = [r]
    for k in children(r):
        out.extend(walk(k))
    return out


def mfp_reads(m: Mfp) -> set[int]:
    """The input columns an Mfp reads: its projected input columns and every input column its
    map and filter expressions read (map outputs, numbered from the input's arity, are not
    input columns)."""
    n = m.input.arity
    used = {c for c in m.project if c < n}
    for e in (*m.map, *m.filter):
        used |= {c for c in scalar_cols(e) if c < n}
    return used


def columns_read(r: Rel) -> dict[str, frozenset[int]]:
    """For each table or view the plan reads (a non-local Get), the positions of its columns
    that can affect the plan's output: the columns its Mfp readers read, or all of them when
    some reader is anything but an Mfp (or the Get is the plan itself).

    Why it is sound to load the other columns as NULL: an Mfp is stateless and linear, so
    whatever values the unread columns hold, the rows it emits are the same; a change that
    later retracts a row with its real values cancels, past the Mfp, the row loaded with
    NULLs. Nothing before the Mfp holds rows (an input holds none)."""
    reads: dict[str, set[int]] = {}

    def note(g: Get, cols: set[int] | None) -> None:
        reads.setdefault(g.name, set()).update(range(g.arity) if cols is None else cols)

    if isinstance(r, Get) and not r.local:
        note(r, None)
    for n in walk(r):
        for k in children(n):
            if isinstance(k, Get) and not k.local:
                note(k, mfp_reads(n) if isinstance(n, Mfp) else None)
    return {name: frozenset(cols) for name, cols in reads.items()}


_SIMPLE_CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


def _simple(p: Scalar) -> bool:
    """A comparison of a column with a literal, or a column IS [NOT] NULL: a filter that never
    raises, whatever the row holds."""
    if not isinstance(p, Call):
        return False
    if p.func == "not" and len(p.args) == 1:
        p = p.args[0]
        if not isinstance(p, Call) or p.func != "is_null":
            return False
    if p.func == "is_null":
        return len(p.args) == 1 and isinstance(p.args[0], Col)
    if p.func not in _SIMPLE_CMP or len(p.args) != 2:
        return False
    a, b = p.args
    return (isinstance(a, Col) and isinstance(b, Lit)) or (isinstance(a, Lit) and isinstance(b, Col))


def split_by_side(preds: list[Scalar], nl: int
                  ) -> tuple[list[Scalar], list[Scalar], list[Scalar]]:
    """Predicates over the columns of a pair (L, R), L's `nl` first: those reading L alone,
    those reading R alone (R's columns renumbered from 0), and the rest (reading both sides,
    or no column), each in the given order."""
    lp: list[Scalar] = []
    rp: list[Scalar] = []
    rest: list[Scalar] = []
    for p in preds:
        cs = scalar_cols(p)
        if cs and max(cs) < nl:
            lp.append(p)
        elif cs and min(cs) >= nl:
            rp.append(map_cols(p, lambda i: i - nl))
        else:
            rest.append(p)
    return lp, rp, rest


def conjuncts(p: Scalar) -> list[Scalar]:
    """`p`'s conjuncts in the order they are evaluated (AND is lazy, left to right)."""
    if isinstance(p, Call) and p.func == "and":
        return [c for a in p.args for c in conjuncts(a)]
    return [p]


def disjuncts(p: Scalar) -> list[Scalar]:
    """`p`'s disjuncts, nested ORs flattened, in the order they are evaluated."""
    if isinstance(p, Call) and p.func == "or":
        return [d for a in p.args for d in disjuncts(a)]
    return [p]


def scan_filters(r: Rel) -> dict[str, tuple[Scalar, ...]]:
    """For each table or view the plan reads (a non-local Get) only through Mfps, filters on
    the Get's own columns that every one of those Mfps applies, in a stable order: a loader
    may leave out the rows any of them rejects. Of an Mfp's filters, the conjuncts evaluated
    first (its filters on input columns run before any map, each AND left to right) up to the
    first that is not a simple comparison of a column with a literal or an IS [NOT] NULL.
    Tables read otherwise, or with no such filter common to every reader, are not listed.

    Why it is sound, as for `columns_read`: an Mfp is stateless, and a row one of its filters
    rejects yields nothing, so the same rows leave the Mfp whether the loader held it back or
    not; only conjuncts that never raise and that run before anything that could are taken,
    so a row held back would have been rejected without an error; and a later change that
    retracts such a row is rejected by the same filter."""
    found: dict[str, frozenset[Scalar] | None] = {}

    def note(g: Get, mine: frozenset[Scalar] | None) -> None:
        if g.name in found:
            prev = found[g.name]
            found[g.name] = None if prev is None or mine is None else prev & mine
        else:
            found[g.name] = mine

    def first_simple(m: Mfp, arity: int) -> frozenset[Scalar]:
        own = set(range(arity))
        taken: list[Scalar] = []
        for p in m.filter:
            if not scalar_cols(p) <= own:
                continue  # reads a map column: runs after the maps, so after these
            for c in conjuncts(p):
                if not _simple(c):
                    return frozenset(taken)
                taken.append(c)
        return frozenset(taken)

    if isinstance(r, Get) and not r.local:
        note(r, None)
    for n in walk(r):
        for k in children(n):
            if isinstance(k, Get) and not k.local:
                note(k, first_simple(n, k.arity) if isinstance(n, Mfp) else None)
    return {name: tuple(sorted(fs, key=repr)) for name, fs in found.items() if fs}


def has_outer_rel(r: Rel) -> bool:
    for n in walk(r):
        if isinstance(n, Mfp) and any(has_outer(e) for e in (*n.map, *n.filter)):
            return True
        if isinstance(n, FlatMap) and any(has_outer(e) for e in n.args):
            return True
    return False


# ---------------------------------------------------------------- EXPLAIN


def fmt_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, datetime.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, decimal.Decimal):
        return str(v)
    return repr(v)


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "intdiv": "//", "mod": "%",
          "eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "and": "AND", "or": "OR", "dpipe": "||"}


def fmt_scalar(e: Scalar) -> str:
    if isinstance(e, Col):
        return f"#{e.index}"
    if isinstance(e, OuterRef):
        return f"outer#{e.index}"
    if isinstance(e, Lit):
        return fmt_value(e.value)
    if e.func in _INFIX:
        return "(" + f" {_INFIX[e.func]} ".join(fmt_scalar(a) for a in e.args) + ")"
    if e.func == "not":
        return f"NOT {fmt_scalar(e.args[0])}"
    if e.func == "is_null":
        return f"({fmt_scalar(e.args[0])} IS NULL)"
    if e.func == "cast":
        return f"CAST({fmt_scalar(e.args[0])} AS {e.type})"
    if e.func == "try_cast":
        return f"TRY_CAST({fmt_scalar(e.args[0])} AS {e.type})"
    return f"{e.func}(" + ", ".join(fmt_scalar(a) for a in e.args) + ")"


def _cols(cs: tuple[int, ...]) -> str:
    return "(" + ", ".join(f"#{c}" for c in cs) + ")"


def _line(r: Rel) -> str:
    if isinstance(r, Get):
        return f"Get {r.name}" + (" (local)" if r.local else "")
    if isinstance(r, Constant):
        rows = "; ".join("(" + ", ".join(fmt_value(v) for v in row) + ")" for row in r.rows[:8])
        more = f" ... {len(r.rows)} rows" if len(r.rows) > 8 else ""
        return f"Constant arity={r.arity} [{rows}{more}]"
    if isinstance(r, Mfp):
        parts = []
        if r.map:
            parts.append("map=(" + ", ".join(fmt_scalar(e) for e in r.map) + ")")
        if r.filter:
            parts.append("filter=(" + " AND ".join(fmt_scalar(e) for e in r.filter) + ")")
        parts.append("project=" + _cols(r.project))
        return "Mfp " + " ".join(parts)
    if isinstance(r, FlatMap):
        return f"FlatMap {r.func}(" + ", ".join(fmt_scalar(a) for a in r.args) + ")"
    if isinstance(r, Join):
        if not r.keys:
            return "Join cross"
        return "Join on=(" + ", ".join(f"#{a} = #{b + r.left.arity}" for a, b in r.keys) + ")"
    if isinstance(r, DeltaJoin):
        paths = "; ".join(" > ".join(f"%{i}" for i in p) for p in r.paths())
        return ("DeltaJoin on=(" + ", ".join(f"#{a} = #{b}" for a, b in r.keys) + ")"
                f" paths=({paths})")
    if isinstance(r, Reduce):
        if not r.aggs:
            return f"Reduce distinct group={_cols(r.group)}"
        aggs = ", ".join(
            f"{a.func}({'distinct ' if a.distinct else ''}{'*' if a.arg is None else '#%d' % a.arg}"
            f"{'' if a.arg2 is None else ', #%d' % a.arg2})"
            for a in r.aggs)
        return f"Reduce group={_cols(r.group)} aggs=({aggs})"
    if isinstance(r, TopK):
        order = ", ".join(
            f"#{k.col} {'desc' if k.desc else 'asc'} nulls_{'first' if k.nulls_first else 'last'}"
            for k in r.order)
        return (f"TopK group={_cols(r.group)} order=({order}) limit={r.limit}"
                f" offset={r.offset}")
    if isinstance(r, ArrangeBy):
        return f"ArrangeBy keys={_cols(r.keys)}"
    return type(r).__name__


def explain(r: Rel, indent: int = 0) -> str:
    """Stable indented text: one node per line, children indented two spaces."""
    pad = "  " * indent
    if isinstance(r, Let):
        return (f"{pad}Let {r.id} =\n{explain(r.value, indent + 1)}\n"
                f"{pad}in\n{explain(r.body, indent + 1)}")
    if isinstance(r, LetRec):
        head = f"{pad}LetRec limit={r.limit}"
        parts = [head]
        for i, v in zip(r.ids, r.values, strict=True):
            parts.append(f"{pad}  {i} =")
            parts.append(explain(v, indent + 2))
        parts.append(f"{pad}in")
        parts.append(explain(r.body, indent + 1))
        return "\n".join(parts)
    out = [pad + _line(r)]
    for k in children(r):
        out.append(explain(k, indent + 1))
    return "\n".join(out)
