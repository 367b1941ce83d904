"""Binder: a sqlglot AST plus the catalog becomes a decorrelated relational plan (planner.ir).

Invariants:
- Every name is resolved here, against the catalog, the CTEs in scope and the enclosing query
  blocks; an unresolvable, ambiguous or ill-typed construct raises PlanError with the position
  of the offending token, before any plan exists.
- The returned plan contains no OuterRef: every correlated subquery is decorrelated by
  ``planner.decorrelate.apply`` as soon as it is bound, against the distinct parameter values
  of the relation it is evaluated on.
- Values that flow through the plan have the Python type of their SQL type (the binder inserts
  casts where DuckDB coerces), so scalar functions never see mixed Decimal/float operands.
- Local binding ids are generated deterministically (a counter), so EXPLAIN output is stable.
- Integer results get DuckDB's result type (an integer literal takes the type of the integer
  column it meets when it fits), because evaluation checks overflow against that type; every
  Call that can fail at runtime carries the SQL text of its expression as ``label``.
- A scalar subquery that could return several rows per outer row is reduced by the ``single``
  aggregate, which raises EvaluationError for a key with more than one row (as DuckDB does)
  instead of duplicating the outer row.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from planner.catalog import Catalog
from planner.decorrelate import apply, correlated
from planner.errors import EvaluationError, PlanError
from planner.ir import (
    FALSE,
    TRUE,
    Agg,
    Call,
    Col,
    Constant,
    FlatMap,
    Get,
    Join,
    Let,
    LetRec,
    Lit,
    Mfp,
    Negate,
    OuterRef,
    Reduce,
    Rel,
    Scalar,
    SortKey,
    Threshold,
    TopK,
    Union,
    conjuncts,
    null,
    split_by_side,
)
from planner.naming import FOLD, output_name
from planner.scalar import (
    DATE_PARTS,
    DIFF_PARTS,
    DOUBLE_PARTS,
    FUNCS,
    INT_RANK,
    MAX_DECIMAL_WIDTH,
    NULL_TOLERANT,
    STRING_SIGNATURES,
    TRUNC_PARTS,
    Interval,
    cast_checked,
    cast_value,
    compile_scalar,
    decimal_ps,
    decimal_result,
    decimal_type,
    family,
    fitting_int_type,
    fraction_to_str,
    int_fits,
    is_numeric,
    norm_type,
    real_to_str,
    unify,
    unify_ints,
)
from planner.table_functions import TABLE_FUNCTIONS


def A(node: exp.Expression, name: str) -> Any:
    """Read an arg under its name in any sqlglot version (``from`` became ``from_``)."""
    v = node.args.get(name)
    if v is None:
        v = node.args.get(name + "_")
    return v


@dataclass
class SCol:
    qual: str | None
    name: str
    type: str
    hidden: bool = False  # hidden from unqualified lookup and * (the other side of USING)
    # the name DuckDB shows for the column (case as typed, an expression as DuckDB prints
    # it), which a `*` over it gives its output; None: `name`
    label: str | None = None


@dataclass
class Bound:
    rel: Rel
    names: list[str]
    types: list[str]
    at_most_one: bool = False  # provably at most one row (per outer row, once decorrelated)
    # the names DuckDB gives the columns (case as typed, expressions as DuckDB prints them);
    # ``names`` are the lowercased names the binder resolves references with
    labels: list[str] | None = None
    # provably exactly one row, whatever the tables hold (a global aggregate without HAVING,
    # LIMIT 0 or OFFSET), when it reads no outer column
    exactly_one: bool = False
    # the columns that are a bare NULL (typed INTEGER, as DuckDB types such a column): a set
    # operation's other branch gives them its type (`SELECT NULL ... UNION SELECT 'a'`)
    nulls: frozenset[int] = frozenset()

    @property
    def out_names(self) -> list[str]:
        return self.labels if self.labels is not None else self.names

    @property
    def scope_types(self) -> list[str]:
        """The column types a query reading this one as a derived table, a plain CTE or VALUES
        sees: a bare NULL column stays NULL there, as in DuckDB, so `coalesce(x, 'a')`, CASE
        and set operations over it take the other operand's type."""
        return ["NULL" if i in self.nulls else t for i, t in enumerate(self.types)]


@dataclass
class CteInfo:
    id: str
    names: list[str]
    types: list[str]
    labels: list[str] | None = None  # as `Bound.labels`


BB = tuple[Scalar, str]  # a bound scalar and its SQL type

# statistical aggregates: sqlglot class -> our function (DuckDB's variance/stddev are _samp)
STAT_AGGS = {exp.VariancePop: "var_pop", exp.Variance: "var_samp", exp.StddevPop: "stddev_pop",
             exp.StddevSamp: "stddev_samp", exp.Stddev: "stddev_samp",
             exp.CovarPop: "covar_pop", exp.CovarSamp: "covar_samp", exp.Corr: "corr"}
AGG_CLASSES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, *STAT_AGGS)


class _NoSubquery(Exception):
    """try_bind met a subquery; group matching never binds those."""


class Params:
    """The outer references of one query block: OuterRef(k) means ``exprs[k]`` of the parent."""

    def __init__(self, parent: ExprCtx) -> None:
        self.parent = parent
        self.exprs: list[Scalar] = []
        self.types: list[str] = []

    def resolve(self, node: exp.Column) -> BB | None:
        got = self.parent.resolve_column(node)
        if got is None:
            return None
        s, t = got
        if isinstance(s, Lit):
            return got
        if s not in self.exprs:
            self.exprs.append(s)
            self.types.append(t)
        k = self.exprs.index(s)
        return OuterRef(k, t), t

    def resolve_agg(self, node: exp.Expression) -> BB:
        """An aggregate of an enclosing block: its value there, as an outer reference."""
        s, t = self.parent.bind(node)
        if isinstance(s, Lit):
            return s, t
        if s not in self.exprs:
            self.exprs.append(s)
            self.types.append(t)
        return OuterRef(self.exprs.index(s), t), t


@dataclass
class AggInfo:
    pre: ExprCtx
    groups: list[BB]
    agg_cols: dict[int, BB]  # id(sqlglot agg node) -> bound output column
    # the SQL text of each group expression that holds a subquery: such an expression is
    # bound once, as a group (binding it adds its decorrelated join), and the same text
    # in the select list, HAVING or ORDER BY is that group's column, as in DuckDB
    subquery_texts: dict[str, int] = field(default_factory=dict)


@dataclass
class Binder:
    sql: str
    catalog: Catalog
    iteration_limit: int | None
    counter: int = 0
    ctes: list[dict[str, CteInfo]] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)
    used_ids: set[str] = field(default_factory=set)
    # aggregates written inside a subquery that belong to an enclosing query (their arguments
    # mention only its columns): id -> node, so the subquery neither aggregates them itself
    # nor rejects them, and reads them as outer references instead
    outer_aggs: dict[int, tuple[exp.Expression, exp.Expression]] = field(default_factory=dict)
    # the set operations of a recursive CTE's query (by id): the column types its anchor
    # fixed, which every branch's rows are cast to (`bind_setop`)
    setop_types: dict[int, list[str]] = field(default_factory=dict)

    # ------------------------------------------------------------ errors and ids

    def err(self, code: str, msg: str, node: exp.Expression | None = None) -> PlanError:
        line = col = None
        if node is not None:
            start = _first_pos(node)
            if start is not None:
                before = self.sql[:start]
                line = before.count("\n") + 1
                col = start - (before.rfind("\n") + 1) + 1
        return PlanError(code, msg, line, col)

    def fresh(self, hint: str = "l") -> str:
        if hint != "l" and hint not in self.used_ids:
            self.used_ids.add(hint)
            return hint
        while True:
            name = f"{hint}{self.counter}"
            self.counter += 1
            if name not in self.used_ids:
                self.used_ids.add(name)
                return name

    def let(self, value: Rel, body: Callable[[Get], Rel]) -> Rel:
        if isinstance(value, Get):
            return body(value)
        i = self.fresh()
        return Let(i, value, body(Get(i, value.arity, True)))

    # ------------------------------------------------------------ queries

    def bind_query(self, node: exp.Expression, outer: Params | None) -> Bound:
        w = A(node, "with")
        if w is not None:
            return self.bind_with(w, node, outer)
        return self.bind_query_body(node, outer)

    def bind_query_body(self, node: exp.Expression, outer: Params | None) -> Bound:
        if isinstance(node, exp.Subquery):
            b = self.bind_query(node.this, outer)
            return self.order_limit_setop(node, b)
        if isinstance(node, exp.Select):
            return self.bind_select(node, outer)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            return self.order_limit_setop(node, self.bind_setop(node, outer))
        if isinstance(node, exp.Values):
            return self.bind_values(node)
        raise self.err("unsupported", f"unsupported query construct {node.key.upper()}", node)

    def bind_values(self, node: exp.Values) -> Bound:
        rows = []
        types: list[list[str]] = []
        for tup in node.expressions:
            ctx = ExprCtx(self, Constant(((),), 0), [], None)
            vals = []
            for i, e in enumerate(tup.expressions):
                s, t = ctx.bind(e)
                if not isinstance(s, Lit):
                    raise self.err("unsupported", "VALUES rows must be constants", e)
                vals.append(s.value)
                if len(types) <= i:
                    types.append([])
                types[i].append(t)
            rows.append(tuple(vals))
        out_types = []
        for i, ts in enumerate(types):
            u = unify(ts)
            if u is None:
                raise self.err("type_error", f"VALUES column {i + 1} mixes types {ts}", node)
            out_types.append("INTEGER" if u == "NULL" else u)
        rows = [tuple(cast_value(v, out_types[i]) if v is not None and family(types[i][0])
                      != family(out_types[i]) else v for i, v in enumerate(r)) for r in rows]
        return Bound(Constant(tuple(rows), len(out_types)),
                     [f"col{i}" for i in range(len(out_types))], out_types,
                     nulls=frozenset(i for i, ts in enumerate(types) if unify(ts) == "NULL"))

    def bind_with(self, w: exp.With, node: exp.Expression, outer: Params | None) -> Bound:
        recursive = bool(w.args.get("recursive"))
        ctes = list(w.expressions)
        frame: dict[str, CteInfo] = {}
        self.ctes.append(frame)
        try:
            wrappers: list[Callable[[Rel], Rel]] = []
            names = [c.alias_or_name.translate(FOLD) for c in ctes]
            for c in ctes:
                keys = c.args.get("key_expressions")
                if keys:
                    # DuckDB's keyed recursion overwrites a key's row each round: that is not a
                    # least fixpoint, so maintaining it as one would give a different answer
                    raise self.err("unsupported", "WITH RECURSIVE ... USING KEY is not "
                                   f"supported (CTE {c.alias_or_name}); write the recursion "
                                   "without USING KEY", keys[0])
            if not recursive:
                for c in ctes:
                    wrappers.append(self.bind_cte_plain(c, frame, outer))
            else:
                for comp in _sccs(names, [_referenced_names(c.this, set(names)) for c in ctes]):
                    cyclic = len(comp) > 1 or names[comp[0]] in _referenced_names(
                        ctes[comp[0]].this, set(names))
                    if not cyclic:
                        wrappers.append(self.bind_cte_plain(ctes[comp[0]], frame, outer))
                    else:
                        wrappers.append(self.bind_cte_rec([ctes[i] for i in comp], frame, outer))
            inner = node.copy()
            inner.set("with_" if "with_" in inner.args else "with", None)
            b = self.bind_query_body(inner, outer)
        finally:
            self.ctes.pop()
        rel = b.rel
        for wrap in reversed(wrappers):
            rel = wrap(rel)
        return Bound(rel, b.names, b.types, labels=b.labels, nulls=b.nulls)

    def _cte_info(self, name: str, c: exp.CTE, b: Bound, types: list[str]) -> CteInfo:
        """The CTE `c`'s relation `name`: its columns named by its column list, if any, and
        then by its query `b`; typed `types`."""
        alias = c.args.get("alias")
        given = [i.name for i in alias.columns] if alias is not None and alias.columns else []
        if len(given) > len(b.names):
            raise self.err("type_error", f"CTE {c.alias_or_name} has {len(b.names)} columns"
                           f" but {len(given)} names", c)
        names = [n.translate(FOLD) for n in given] + b.names[len(given):]
        labels = given + b.out_names[len(given):]
        return CteInfo(self.fresh(name), names, types, labels)

    def bind_cte_plain(self, c: exp.CTE, frame: dict[str, CteInfo],
                       outer: Params | None) -> Callable[[Rel], Rel]:
        b = self.bind_query(c.this, outer)
        name = c.alias_or_name.translate(FOLD)
        info = self._cte_info(name, c, b, b.scope_types)
        frame[name] = info
        return lambda body: Let(info.id, b.rel, body)

    def bind_cte_rec(self, cs: list[exp.CTE], frame: dict[str, CteInfo],
                     outer: Params | None) -> Callable[[Rel], Rel]:
        # Column types come from each CTE's anchor (the branches before its recursive ones,
        # typed together); an anchor may read another CTE of the group whose types are
        # already known, so repeat.
        group = {x.alias_or_name.translate(FOLD) for x in cs}
        anchors = {id(c): _anchor(c.this, group) for c in cs}
        pending = list(cs)
        for _ in range(len(cs) + 1):
            still = []
            for c in pending:
                anchor = anchors[id(c)]
                refs = _referenced_names(anchor, {x.alias_or_name.translate(FOLD) for x in cs})
                if any(r not in frame for r in refs):
                    still.append(c)
                    continue
                b = self.bind_query(anchor, outer)
                name = c.alias_or_name.translate(FOLD)
                # a recursive CTE's columns keep the anchor's types (a bare NULL is INTEGER):
                # every round's rows are cast to them
                frame[name] = self._cte_info(name, c, b, b.types)
            pending = still
            if not pending:
                break
        if pending:
            raise self.err("unsupported", "cannot infer the column types of recursive CTE "
                           f"{pending[0].alias_or_name}: every anchor reads another", pending[0])
        values = []
        for c in cs:
            info = frame[c.alias_or_name.translate(FOLD)]
            # DuckDB types a recursive CTE's columns by its anchor and casts the other
            # branches' rows to them (an INTEGER anchor halved stays INTEGER: 33, not 33.3)
            node = c.this
            while isinstance(node, (exp.Union, exp.Intersect, exp.Except)) and \
                    node is not anchors[id(c)]:
                self.setop_types[id(node)] = info.types
                node = node.this
            b = self.bind_query(c.this, outer)
            if len(b.types) != len(info.types):
                raise self.err("type_error", f"recursive CTE {c.alias_or_name} branches have "
                               "different numbers of columns", c)
            values.append(_narrow_rel(b.rel, b.types, info.types))
        ids = tuple(frame[c.alias_or_name.translate(FOLD)].id for c in cs)
        limit = self.iteration_limit
        return lambda body: LetRec(ids, tuple(values), body, limit)

    def bind_setop(self, node: exp.Expression, outer: Params | None) -> Bound:
        if node.args.get("by_name"):
            # (read as a positional one, it matched columns of other names)
            raise self.err("unsupported", f"{node.key.upper()} BY NAME is not supported", node)
        distinct = node.args.get("distinct", True) is not False
        fixed = self.setop_types.get(id(node))
        # A chain of UNIONs (UNION ALL: all of them) is one set operation, as DuckDB binds
        # it: each branch cast once to the type of all of them (`d UNION ALL ts UNION ALL
        # 'z'` prints d as '2000-01-01', not by way of a TIMESTAMP); a parenthesised branch
        # is a branch of its own.
        branches = _union_chain(node, distinct) if isinstance(node, exp.Union) and \
            fixed is None else [node.this, node.expression]
        bound = [self.bind_query(q, outer) for q in branches]
        if len({len(b.types) for b in bound}) > 1:
            raise self.err("type_error", f"{node.key.upper()} branches have "
                           f"{' and '.join(str(len(b.types)) for b in bound)} columns", node)
        # a bare NULL column takes the other branches' type
        ts = [["NULL" if i in b.nulls else t for i, t in enumerate(b.types)] for b in bound]
        types = []
        for i, column in enumerate(zip(*ts, strict=True)):
            u = unify(list(column))
            if u is None and "str" in {family(a) for a in column}:
                u = "VARCHAR"  # DuckDB's set operations print the other branch's values
            if u is None:
                raise self.err("type_error", f"{node.key.upper()} column {i + 1} has types "
                               f"{' and '.join(column)}", node)
            types.append(u)
        nulls = frozenset(i for i, u in enumerate(types) if u == "NULL")
        types = ["INTEGER" if u == "NULL" else u for u in types]
        if fixed is not None:  # a recursive CTE's branches, as its anchor types them
            types, nulls = list(fixed), frozenset()
        rels = [_narrow_rel(b.rel, t, types) for b, t in zip(bound, ts, strict=True)]
        left = bound[0]
        if len(rels) > 2:
            out: Rel = Union(tuple(rels))
            return Bound(_distinct(out) if distinct else out, left.names, types,
                         labels=left.labels, nulls=nulls)
        lr, rr = rels
        if distinct and not isinstance(node, exp.Union):
            lr, rr = _distinct(lr), _distinct(rr)
        if isinstance(node, exp.Union):
            out = Union((lr, rr))
            if distinct:
                out = _distinct(out)
        elif isinstance(node, exp.Except):
            out = Threshold(Union((lr, Negate(rr))))
        else:
            out = self.let(lr, lambda g: Union((g, Negate(Threshold(Union((g, Negate(rr))))))))
        return Bound(out, left.names, types, labels=left.labels, nulls=nulls)

    def order_limit_setop(self, node: exp.Expression, b: Bound) -> Bound:
        order = A(node, "order")
        limit, offset = self.limit_offset(node)
        if limit is None and offset == 0:
            return b
        keys = []
        for o in _order_items(order, len(b.names)):
            e = o.this
            idx = None
            if isinstance(e, exp.Literal) and not e.is_string:
                idx = self.order_position(e)
            elif isinstance(e, exp.Column) and not e.table and e.name.translate(FOLD) in b.names:
                idx = b.names.index(e.name.translate(FOLD))
            if idx is None or not 0 <= idx < len(b.names):
                raise self.err("unsupported", "ORDER BY on a set operation must name an output "
                               "column", e)
            keys.append(SortKey(idx, bool(o.args.get("desc")), bool(o.args.get("nulls_first"))))
        return Bound(TopK(b.rel, (), tuple(keys), limit, offset), b.names, b.types,
                     b.at_most_one or (limit is not None and limit <= 1), b.labels,
                     nulls=b.nulls)

    def order_position(self, e: exp.Literal) -> int:
        """The select-list index an ORDER BY number names (DuckDB refuses `ORDER BY 1.5`, a
        literal that orders nothing)."""
        if not _position(e):
            raise self.err("unsupported", "ORDER BY non-integer literal has no effect", e)
        return int(e.this) - 1

    def limit_offset(self, node: exp.Expression) -> tuple[int | None, int]:
        lim, off = A(node, "limit"), A(node, "offset")
        limit = offset = None
        if lim is not None:
            options = lim.args.get("limit_options")
            if options is not None and options.args.get("percent"):
                raise self.err("unsupported", "LIMIT ... PERCENT is not supported", lim)
            if options is not None and options.args.get("with_ties"):
                raise self.err("unsupported", "WITH TIES is not supported", lim)
            if isinstance(lim, exp.Fetch):  # FETCH FIRST n ROWS ONLY: LIMIT n (n: 1)
                v = lim.args.get("count") or exp.Literal.number(1)
            else:
                v = lim.expression if lim.expression is not None else lim.this
            v = _bare_count(v)
            # LIMIT ALL and LIMIT NULL: no limit, as in DuckDB
            if not (isinstance(v, exp.Null) or (isinstance(v, exp.Var)
                                                and v.name.upper() == "ALL")):
                limit = self._count_literal(v, "LIMIT", lim)
        if off is not None:
            v = _bare_count(off.expression if off.expression is not None else off.this)
            if not isinstance(v, exp.Null):  # OFFSET NULL: none, as in DuckDB
                offset = self._count_literal(v, "OFFSET", off)
        return limit, offset or 0

    def _count_literal(self, v: exp.Expression, clause: str, at: exp.Expression) -> int:
        """A LIMIT's or OFFSET's number: an integer literal (`2`, or `2.0` as DuckDB takes it)."""
        if isinstance(v, exp.Literal) and not v.is_string:
            try:
                n = decimal.Decimal(v.this)
            except decimal.InvalidOperation:
                n = None
            if n is not None and n == n.to_integral_value():
                return int(n)
        raise self.err("unsupported", f"{clause} must be an integer literal", at)

    # ------------------------------------------------------------ FROM

    def bind_table(self, t: exp.Expression, outer: Params | None) -> tuple[Rel, list[SCol]]:
        t = _lateral_table_function(t) or t
        alias = t.args.get("alias")
        alias_labels = [c.name for c in alias.columns] if alias is not None and \
            alias.args.get("columns") else []
        col_aliases = [n.translate(FOLD) for n in alias_labels]
        if isinstance(t, exp.Table):
            if t.args.get("db") or t.args.get("catalog"):
                raise self.err("unsupported", "qualified table names are not supported", t)
            if _table_function(t) is not None:
                unit: Rel = Constant(((),), 0)
                return self.bind_table_function(t, unit, [], outer)
            if isinstance(t.this, exp.Anonymous) or not isinstance(t.this, exp.Identifier):
                name, at = self.typed_name(t.this)
                raise self.err("unsupported", f"table function {name} is not supported", at)
            name = t.name.translate(FOLD)
            qual = t.alias_or_name.translate(FOLD)
            info = None
            for frame in reversed(self.ctes):
                if name in frame:
                    info = frame[name]
                    break
            labels: list[str] | None = None
            if info is not None:
                rel: Rel = Get(info.id, len(info.types), True)
                names, types, labels = info.names, info.types, info.labels
            elif name in self.catalog.views:
                v = self.catalog.views[name]
                rel = Get(name, len(v.columns))
                labels = [c.name for c in v.columns]
                names = [c.name.translate(FOLD) for c in v.columns]
                types = [norm_type(c.type) for c in v.columns]
                if name not in self.deps:
                    self.deps.append(name)
            elif name in self.catalog.tables:
                ts = self.catalog.tables[name]
                rel = Get(name, len(ts.columns))
                labels = [c.name for c in ts.columns]
                names = [c.name.translate(FOLD) for c in ts.columns]
                types = [norm_type(c.type) for c in ts.columns]
                if name not in self.deps:
                    self.deps.append(name)
            else:
                raise self.err("unknown_table", f'table "{t.name}" does not exist', t)
        elif isinstance(t, exp.Subquery) and _join_group(t.this) is not None:
            # FROM (a CROSS JOIN b) [AS j]: a parenthesised join, not a query
            grp = _join_group(t.this)
            assert grp is not None
            rel, scope = self.bind_table(grp, outer)
            for j in grp.args.get("joins") or []:
                rel, scope = self.bind_join(rel, scope, j, outer)
            if alias is not None and alias.name:
                # aliased, the join is one relation: DuckDB names duplicates id, id_1, ...
                q = alias.name.translate(FOLD)
                seen: dict[str, int] = {}
                renamed = []
                for c in scope:
                    k = seen.get(c.name, 0)
                    seen[c.name] = k + 1
                    label = c.label or c.name
                    renamed.append(SCol(q, c.name if k == 0 else f"{c.name}_{k}", c.type,
                                        c.hidden, label if k == 0 else f"{label}_{k}"))
                scope = renamed
            if col_aliases:
                if len(col_aliases) > len(scope):
                    raise self.err("type_error", f"{len(col_aliases)} column aliases for "
                                   f"{len(scope)} columns", alias)
                scope = [SCol(c.qual, n, c.type, c.hidden, lb) for c, n, lb in
                         zip(scope, col_aliases + [c.name for c in scope[len(col_aliases):]],
                             alias_labels + [c.label or c.name
                                             for c in scope[len(col_aliases):]],
                             strict=True)]
            return rel, scope
        elif isinstance(t, exp.Subquery):
            b = self.bind_query(t.this, outer)
            b = self.order_limit_setop(t, b) if A(t, "limit") is not None else b
            rel, names, types, labels = b.rel, b.names, b.scope_types, b.labels
            qual = alias.name.translate(FOLD) if alias is not None and alias.name else None
        elif isinstance(t, exp.Values):
            b = self.bind_values(t)
            rel, names, types, labels = b.rel, b.names, b.scope_types, b.labels
            qual = alias.name.translate(FOLD) if alias is not None and alias.name else None
        elif isinstance(t, exp.Lateral):
            # first in FROM there is nothing to the left to read: a plain subquery
            q = _lateral(t)
            assert q is not None
            b = self.bind_query(q, outer)
            rel, names, types, labels = b.rel, b.names, b.scope_types, b.labels
            qual = alias.name.translate(FOLD) if alias is not None and alias.name else None
        elif isinstance(t, exp.Unnest):
            return self.bind_unnest(t, Constant(((),), 0), [], outer)
        else:
            raise self.err("unsupported", f"unsupported FROM item {t.key.upper()}", t)
        if col_aliases:
            if len(col_aliases) > len(names):
                raise self.err("type_error", f"{len(col_aliases)} column aliases for "
                               f"{len(names)} columns", alias)
            names = col_aliases + names[len(col_aliases):]
            labels = alias_labels + (labels or names)[len(col_aliases):]
        return rel, [SCol(qual, n, ty, label=lb) for n, ty, lb in
                     zip(names, types, labels or names, strict=True)]

    def bind_table_function(self, t: exp.Table, base: Rel, base_scope: list[SCol],
                            outer: Params | None) -> tuple[Rel, list[SCol]]:
        """generate_series/range in FROM: a FlatMap appending the series to each row of
        ``base``, whose columns (earlier FROM items, LATERAL as in DuckDB) and the enclosing
        queries' columns the arguments may use. Returns base's scope plus the new column."""
        func = _table_function(t)
        assert func is not None
        node = t.this
        if isinstance(node, exp.GenerateSeries):
            raw = [node.args.get("start"), node.args.get("end"), node.args.get("step")]
            if node.args.get("is_end_exclusive"):
                func = "range"
        else:
            raw = list(node.expressions)
            if not 1 <= len(raw) <= 3:
                raise self.err("type_error", f"{func} takes 1 to 3 arguments", node)
            if len(raw) == 1:
                raw = [None, raw[0]]
            raw += [None] * (3 - len(raw))
        ctx = ExprCtx(self, base, base_scope, outer)
        rel = self.flat_map(ctx, base.arity, func, self.series_args(ctx, func, raw))
        alias = t.args.get("alias")
        qual = alias.name.translate(FOLD) if alias is not None and alias.name else func
        name = func
        if alias is not None and alias.columns:
            if len(alias.columns) > 1:
                raise self.err("type_error", f"{len(alias.columns)} column aliases for 1 "
                               "column", alias)
            name = alias.columns[0].name.translate(FOLD)
        return rel, base_scope + [SCol(qual, name, "BIGINT")]

    def series_args(self, ctx: ExprCtx, func: str,
                    raw: list[exp.Expression | None]) -> list[Scalar]:
        """(start, stop, step) of generate_series/range bound in ``ctx``; None is a default."""
        args: list[Scalar] = []
        for k, x in enumerate(raw):
            if x is None:
                args.append(Lit(0 if k == 0 else 1, "BIGINT"))
                continue
            s, ty = ctx.bind(x)
            if family(ty) not in ("int", "null"):
                raise self.err("type_error", f"{func} needs integer arguments, got {ty}", x)
            args.append(s)
        return args

    def flat_map(self, ctx: ExprCtx, n: int, func: str, args: list[Scalar]) -> Rel:
        """FlatMap over ``ctx``'s relation, cut back to its base columns plus the new one
        (subqueries in the arguments extend ``ctx.rel`` with columns nobody reads after)."""
        rel: Rel = FlatMap(ctx.rel, func, tuple(args), 1)
        if ctx.rel.arity != n:
            rel = Mfp(rel, (), (), tuple(range(n)) + (ctx.rel.arity,))
        return rel

    def bind_unnest(self, t: exp.Unnest, base: Rel, base_scope: list[SCol],
                    outer: Params | None) -> tuple[Rel, list[SCol]]:
        """``unnest(list)`` in FROM: a FlatMap appending one row per list element to each row
        of ``base`` (earlier FROM items, LATERAL as in DuckDB). Views have no LIST type, so the
        list is what can be written without one: a list literal ``[e1, ...]`` (or
        ``list_value(...)``) whose elements are any scalar expressions, or a
        ``generate_series``/``range`` call, which DuckDB evaluates to a list."""
        name, at = self.typed_name(t)
        if name.translate(FOLD) != "unnest":  # LATERAL unnest(...): positioned at LATERAL
            name = "unnest"
        if len(t.expressions) != 1 or t.args.get("offset"):
            raise self.err("unsupported", f"{name} takes exactly one list argument here "
                           "(no several lists, WITH ORDINALITY or named options)", at)
        arg = t.expressions[0]
        ctx = ExprCtx(self, base, base_scope, outer)
        if isinstance(arg, exp.GenerateSeries):
            func = "range" if arg.args.get("is_end_exclusive") else "generate_series"
            raw = [arg.args.get("start"), arg.args.get("end"), arg.args.get("step")]
            rel = self.flat_map(ctx, base.arity, func, self.series_args(ctx, func, raw))
            ty = "BIGINT"
        elif isinstance(arg, exp.Array):
            vals: list[BB] = []
            for x in arg.expressions:
                if isinstance(x, exp.Array):
                    raise self.err("unsupported", "unnest of a nested list is not supported "
                                   "(views have no LIST type)", x)
                vals.append(ctx.bind(x))
            vals = [ctx.literal_to(v, [w[1] for w in vals], x)
                    for v, x in zip(vals, arg.expressions, strict=True)]
            vals = _fit_int_literals(vals, [_int_literal(x) for x in arg.expressions])
            u = ctx.unify_or_fail([ty for _, ty in vals], arg)
            ty = "INTEGER" if u == "NULL" else u
            rel = self.flat_map(ctx, base.arity, "unnest", [_cast(s, st, u) for s, st in vals])
        elif isinstance(arg, exp.Null):
            raise self.err("type_error", f"{name} needs a list, got NULL", at)
        else:
            raise self.err("unsupported", f"{name}({_sql(arg)}) is not supported: views have "
                           "no LIST type, so unnest takes a list literal [...] or "
                           "generate_series/range", arg)
        alias = t.args.get("alias")
        qual = alias.name.translate(FOLD) if alias is not None and alias.name else "unnest"
        col = qual
        if alias is not None and alias.columns:
            if len(alias.columns) > 1:
                raise self.err("type_error", f"{len(alias.columns)} column aliases for 1 "
                               "column", alias)
            col = alias.columns[0].name.translate(FOLD)
        return rel, base_scope + [SCol(qual, col, ty)]

    def bind_from(self, sel: exp.Select, outer: Params | None) -> tuple[Rel, list[SCol]]:
        frm = A(sel, "from")
        if frm is None:
            if sel.args.get("joins"):
                raise self.err("unsupported", "JOIN without FROM", sel)
            return Constant(((),), 0), []
        items = [frm.this, *frm.expressions] if frm.expressions else [frm.this]
        rel, scope = self.bind_table(items[0], outer)
        for extra in items[1:]:
            tf = _lateral_table_function(extra)
            if isinstance(tf, exp.Unnest):
                rel, scope = self.bind_unnest(tf, rel, scope, outer)
                continue
            if isinstance(tf, exp.Table):
                rel, scope = self.bind_table_function(tf, rel, scope, outer)
                continue
            if _lateral(extra) is not None:
                rel, scope = self.bind_lateral(rel, scope, extra, "", None, outer)
                continue
            got = self.bind_maybe_lateral(rel, scope, extra, "", None, outer)
            if got is not None:
                rel, scope = got
                continue
            r2, s2 = self.bind_table(extra, outer)
            rel, scope = Join(rel, r2, ()), scope + s2
        joins = sel.args.get("joins") or []
        i = 0
        while i < len(joins):
            end = i + 1
            while end < len(joins) and not _comma(joins[end]):
                end += 1
            if _comma(joins[i]) and any((x.args.get("side") or "").upper() in ("RIGHT", "FULL")
                                        for x in joins[i + 1:end]):
                # JOIN binds tighter than the comma: `a, b RIGHT JOIN c ON ...` is
                # a, (b RIGHT JOIN c ON ...), whose unmatched c rows meet every row of a. (An
                # inner or LEFT join gives the same rows either way, and its ON may read the
                # items before the comma, as DuckDB allows.)
                r2, s2 = self.bind_table(joins[i].this, outer)
                for x in joins[i + 1:end]:
                    r2, s2 = self.bind_join(r2, s2, x, outer)
                rel, scope = Join(rel, r2, ()), scope + s2
                i = end
                continue
            rel, scope = self.bind_join(rel, scope, joins[i], outer)
            i += 1
        return rel, scope

    def bind_join(self, left: Rel, lscope: list[SCol], j: exp.Join,
                  outer: Params | None) -> tuple[Rel, list[SCol]]:
        this = _lateral_table_function(j.this) or j.this
        if isinstance(this, exp.Unnest) or (
                isinstance(this, exp.Table) and _table_function(this) is not None):
            # a table function after other FROM items may use their columns (LATERAL)
            if j.args.get("side") or j.args.get("using") or (j.args.get("kind") or "").upper() \
                    not in ("", "CROSS", "INNER"):
                raise self.err("unsupported", "only inner and cross joins with a table "
                               "function are supported", j)
            if isinstance(this, exp.Unnest):
                rel, scope = self.bind_unnest(this, left, lscope, outer)
            else:
                rel, scope = self.bind_table_function(this, left, lscope, outer)
            on = j.args.get("on")
            if on is not None:
                ctx = ExprCtx(self, rel, scope, outer)
                s, t = ctx.bind(on)
                rel = Mfp(ctx.rel, (), (_to_bool(self, s, t, on),), tuple(range(rel.arity)))
            return rel, scope
        if _lateral(j.this) is not None:
            if j.args.get("using") or (j.args.get("method") or "").upper() == "NATURAL":
                raise self.err("unsupported", "LATERAL joins take ON, not USING or NATURAL", j)
            return self.bind_lateral(left, lscope, j.this, (j.args.get("side") or "").upper(),
                                     j.args.get("on"), outer)
        if not j.args.get("using") and (j.args.get("method") or "").upper() != "NATURAL" and \
                (j.args.get("side") or "").upper() in ("", "LEFT") and \
                (j.args.get("kind") or "").upper() in ("", "INNER", "CROSS"):
            got = self.bind_maybe_lateral(left, lscope, j.this, (j.args.get("side") or "")
                                          .upper(), j.args.get("on"), outer)
            if got is not None:
                return got
        right, rscope = self.bind_table(j.this, outer)
        side = (j.args.get("side") or "").upper()
        kind = (j.args.get("kind") or "").upper()
        method = (j.args.get("method") or "").upper()
        if kind in ("SEMI", "ANTI", "ASOF", "POSITIONAL") or method in ("ASOF", "POSITIONAL"):
            raise self.err("unsupported", f"{kind or method} JOIN is not supported", j)
        nl = left.arity
        scope = lscope + rscope
        on = j.args.get("on")
        using = [u.name.translate(FOLD) for u in j.args.get("using") or []]
        if method == "NATURAL":
            lnames = {c.name for c in lscope if not c.hidden}
            using = [c.name for c in rscope if c.name in lnames]
        preds: list[Scalar] = []
        # an outer join's merged USING columns: name, value, type, and the left column that
        # `*` lists it at (DuckDB lists every USING column where the left side has it)
        extra_cols: list[tuple[str, Scalar, str, int]] = []
        if using:
            for name in using:
                li = [i for i, c in enumerate(lscope) if c.name == name and not c.hidden]
                ri = [i for i, c in enumerate(rscope) if c.name == name and not c.hidden]
                if len(li) != 1 or len(ri) != 1:
                    code = "unknown_column" if not li or not ri else "ambiguous_column"
                    raise self.err(code, f'USING column "{name}" must appear once on each side',
                                   j)
                a, b = li[0], nl + ri[0]
                ta, tb = lscope[li[0]].type, rscope[ri[0]].type
                u = unify([ta, tb])
                if u is None:
                    raise self.err("type_error", f'USING column "{name}" has types {ta} and {tb}',
                                   j)
                ea, eb = _cast(Col(a), ta, u), _cast(Col(b), tb, u)
                preds.append(Call("eq", (ea, eb), "BOOLEAN"))
                if side in ("FULL", "RIGHT"):
                    scope[a].hidden = True
                    scope[b].hidden = True
                    extra_cols.append((name, Call("coalesce", (ea, eb), u), u, a))
                else:
                    scope[b].hidden = True
        elif on is not None and _has_subquery(on):
            # the ON condition is bound over the pair of inputs (its subqueries extend that
            # relation with their values), filtered, and cut back to the inputs' columns
            def inner_of(lg: Rel, rg: Rel) -> Rel:
                ctx = ExprCtx(self, Join(lg, rg, ()), scope, outer)
                s, t = ctx.bind(on)
                pred = _to_bool(self, s, t, on)
                return Mfp(ctx.rel, (), (pred,), tuple(range(nl + right.arity)))
            if side in ("LEFT", "RIGHT", "FULL"):
                rel = self.outer_join(left, right, (), side, inner_of)
            else:
                rel = inner_of(left, right)
            return rel, scope
        elif on is not None:
            ctx = ExprCtx(self, Join(left, right, ()), scope, outer)
            s, t = ctx.bind(on)
            preds.append(_to_bool(self, s, t, on))
        elif kind != "CROSS" and side:
            raise self.err("syntax_error", "outer join needs ON or USING", j)
        if side in ("LEFT", "RIGHT", "FULL"):
            rel = self.outer_join(left, right, tuple(preds), side)
        else:
            rel = Join(left, right, ())
            if preds:
                rel = Mfp(rel, (), tuple(preds), tuple(range(rel.arity)))
        if extra_cols:
            # each merged column just before its left column, where `*` lists it
            n = rel.arity
            before = {a: k for k, (_, _, _, a) in enumerate(extra_cols)}
            order: list[int] = []
            merged: list[SCol] = []
            for i in range(n):
                if i in before:
                    nm, _, ty, _ = extra_cols[before[i]]
                    order.append(n + before[i])
                    merged.append(SCol(None, nm, ty))
                order.append(i)
                merged.append(scope[i])
            rel = Mfp(rel, tuple(e for _, e, _, _ in extra_cols), (), tuple(order))
            scope = merged
        return rel, scope

    def bind_maybe_lateral(self, left: Rel, lscope: list[SCol], item: exp.Expression,
                           side: str, on: exp.Expression | None,
                           outer: Params | None) -> tuple[Rel, list[SCol]] | None:
        """A subquery in FROM that names columns of the items to its left is LATERAL without
        the keyword, as in DuckDB: None when item binds on its own (then the caller binds it
        as usual), else the lateral join."""
        if not isinstance(item, exp.Subquery) or _join_group(item.this) is not None:
            return None
        saved = (self.counter, set(self.used_ids), list(self.deps), dict(self.outer_aggs))
        try:
            self.bind_table(item, outer)
        except PlanError as e:
            if e.code not in ("unknown_column", "unknown_table"):
                raise
        else:
            return None
        finally:
            self.counter, self.used_ids, self.deps, self.outer_aggs = saved
        return self.bind_lateral(left, lscope, item, side, on, outer, force=True)

    def bind_lateral(self, left: Rel, lscope: list[SCol], item: exp.Expression, side: str,
                     on: exp.Expression | None, outer: Params | None,
                     force: bool = False) -> tuple[Rel, list[SCol]]:
        """``left [LEFT] JOIN LATERAL (q) [ON p]``: q may read left's columns, so it is bound
        as a subquery correlated with left and decorrelated against left's distinct values of
        what it reads; each left row meets q's rows for its values (LEFT keeps the left rows
        with no row passing ON, padded with NULLs)."""
        if side not in ("", "LEFT"):
            raise self.err("unsupported", f"{side} JOIN LATERAL is not supported (only inner, "
                           "CROSS and LEFT)", item)
        q = item if force else _lateral(item)
        assert q is not None
        alias = item.args.get("alias") or q.args.get("alias")
        params = Params(ExprCtx(self, left, lscope, outer))
        b = self.bind_query(q, params)
        names, labels = list(b.names), list(b.out_names)
        if alias is not None and alias.args.get("columns"):
            given = [c.name for c in alias.columns]
            if len(given) > len(names):
                raise self.err("type_error", f"{len(given)} column aliases for {len(names)} "
                               "columns", alias)
            names = [n.translate(FOLD) for n in given] + names[len(given):]
            labels = given + labels[len(given):]
        qual = alias.name.translate(FOLD) if alias is not None and alias.name else None
        rscope = [SCol(qual, n, ty, label=lb)
                  for n, ty, lb in zip(names, b.scope_types, labels, strict=True)]
        nl, nr, m = left.arity, len(b.types), len(params.exprs)
        shared: tuple[str, Rel] | None = None
        if side == "LEFT" and not isinstance(left, Get):
            # LEFT reads left twice (the join and its unmatched rows): bind it once
            shared = (self.fresh(), left)
            left = Get(shared[0], left.arity, True)
        if m == 0:
            right = b.rel
            joined: Rel = Join(left, right, ())
        else:
            ox = Mfp(left, tuple(params.exprs), (), tuple(range(nl + m)))

            def with_ox(og: Get) -> Rel:
                d = _distinct(Mfp(og, (), (), tuple(range(nl, nl + m))))
                qq = self.let(d, lambda dg: apply(b.rel, dg, m))
                j = Join(og, qq, tuple((nl + i, i) for i in range(m)))
                return Mfp(j, (), (), tuple(range(nl)) + tuple(range(nl + 2 * m,
                                                                     nl + 2 * m + nr)))
            joined = self.let(ox, with_ox)
        scope = lscope + rscope
        if on is not None:
            ctx = ExprCtx(self, joined, scope, outer)
            s, t = ctx.bind(on)
            if ctx.rel.arity != nl + nr:
                raise self.err("unsupported", "subqueries in JOIN ... ON are not supported", on)
            joined = Mfp(joined, (), (_to_bool(self, s, t, on),), tuple(range(nl + nr)))
        if side == "LEFT":
            lg_rel = left
            joined = self.let(joined, lambda mg: Union((mg, _pad(_unmatched(
                lg_rel, Mfp(mg, (), (), tuple(range(nl)))), nr, after=True))))
        if shared is not None:
            joined = Let(shared[0], shared[1], joined)
        return joined, scope

    def outer_join(self, left: Rel, right: Rel, preds: tuple[Scalar, ...], side: str,
                   inner_of: Callable[[Rel, Rel], Rel] | None = None) -> Rel:
        """inner join + the unmatched rows of the preserved side(s), padded with NULLs.

        unmatched(L) = L - semijoin(L, distinct(L-part of inner)): the subtraction is exact for
        any ON predicate because the matched rows are a sub-multiset of L (Materialize's
        anti_lookup). When the ON condition is equalities of a column of each side and
        conjuncts over one side alone, the semijoin is by the equality's columns instead
        (`_equi_split`): a row of L matches iff it passes L's conjuncts and its key is among
        the distinct keys of the R rows that pass theirs, so the distinct is of R's key
        columns, not of every column of the inner join's L part."""
        nl, nr = left.arity, right.arity
        split = _equi_split(preds, nl) if inner_of is None else None

        def build(lg: Get, rg: Get) -> Rel:
            inner: Rel = Join(lg, rg, ())
            if inner_of is not None:
                inner = inner_of(lg, rg)
            elif preds:
                inner = Mfp(inner, (), preds, tuple(range(nl + nr)))

            def with_inner(ig: Get) -> Rel:
                parts: list[Rel] = [ig]
                if split is not None:
                    eqs, lpreds, rpreds = split
                    lkeys = tuple(a for a, _ in eqs)
                    rkeys = tuple(b for _, b in eqs)
                    if side in ("LEFT", "FULL"):
                        parts.append(_pad(_unmatched_by_key(lg, lpreds, lkeys, rg, rpreds, rkeys),
                                          nr, after=True))
                    if side in ("RIGHT", "FULL"):
                        parts.append(_pad(_unmatched_by_key(rg, rpreds, rkeys, lg, lpreds, lkeys),
                                          nl, after=False))
                    return Union(tuple(parts))
                if side in ("LEFT", "FULL"):
                    parts.append(_pad(_unmatched(lg, Mfp(ig, (), (), tuple(range(nl)))),
                                      nr, after=True))
                if side in ("RIGHT", "FULL"):
                    parts.append(_pad(_unmatched(rg, Mfp(ig, (), (), tuple(range(nl, nl + nr)))),
                                      nl, after=False))
                return Union(tuple(parts))

            return self.let(inner, with_inner)

        return self.let(left, lambda lg: self.let(right, lambda rg: build(lg, rg)))

    # ------------------------------------------------------------ SELECT

    def typed_name(self, node: exp.Expression) -> tuple[str, exp.Expression]:
        """The name of the function or construct at ``node`` as the user typed it (sqlglot
        renames string_agg to GROUP_CONCAT, bool_or to LOGICAL_OR, ...), and a node carrying
        its position for the error."""
        start = _first_pos(node)
        got = _typed_name(self.sql, start) if start is not None else None
        op = next((name for cls, name in _OPERATORS.items() if isinstance(node, cls)), None)
        if op is not None and not (got is not None and got[0].lower().startswith("regexp_")):
            # an operator (not a function's spelling of it, `regexp_matches(...)`): the text
            # at its start is its left operand's
            return op, node
        if got is None:
            if isinstance(node, exp.Anonymous):
                return str(node.this), node
            # a construct that is not a function (a list index `[1, 2][1]`) has no sql_name
            return (node.sql_name() if isinstance(node, exp.Func) else node.key.upper()), node
        name, pos = got
        return name, _At(pos)

    def reject_windows(self, sel: exp.Select) -> None:
        """Any OVER (an aggregate used as a window function included) is refused before
        grouping looks at the aggregate inside it."""
        for part in [*sel.expressions, A(sel, "having"), A(sel, "order"), A(sel, "qualify"),
                     A(sel, "where")]:
            if part is None:
                continue
            for f in part.find_all(exp.Filter):
                name, at = self.typed_name(f.this)
                start = at.meta.get("start")
                # at the word FILTER after the aggregate (sqlglot keeps no node for it)
                k = self.sql.lower().find("filter", start) if isinstance(start, int) else -1
                raise self.err("unsupported", f"an aggregate's FILTER (WHERE ...) is not "
                               f"supported ({name}(...) FILTER): put the condition inside it, "
                               "as in sum(CASE WHEN ... THEN x END)",
                               _At(k) if k >= 0 else f.expression)
            for w in part.find_all(exp.Window):
                if isinstance(w.parent, exp.Window):
                    continue
                name, at = self.typed_name(w.this)
                raise self.err("unsupported", "window functions are not supported "
                               f"({name}(...) OVER)", at)
        if sel.args.get("windows"):
            raise self.err("unsupported", "window functions are not supported (WINDOW clause)",
                           sel.args["windows"][0])

    def bind_select(self, sel: exp.Select, outer: Params | None) -> Bound:
        self.reject_windows(sel)
        for bad in ("qualify", "pivots", "into", "sample", "prewhere", "connect",
                    "match", "laterals"):
            if sel.args.get(bad):
                raise self.err("unsupported", f"{bad.upper()} is not supported", sel)
        distinct = sel.args.get("distinct")
        if distinct is not None and distinct.args.get("on"):
            raise self.err("unsupported", "DISTINCT ON is not supported", distinct)
        rel, scope = self.bind_from(sel, outer)
        # DuckDB lets the SELECT list and WHERE use the SELECT list's aliases (a real column of
        # the same name wins); the alias stands for its expression, bound where it is used
        sel_aliases = {e.alias.translate(FOLD): e.this for e in sel.expressions
                       if isinstance(e, exp.Alias)}
        ctx = ExprCtx(self, rel, scope, outer)
        ctx.aliases = sel_aliases
        where = A(sel, "where")
        if where is not None:
            _reject_aggs(self, where.this, "WHERE")
            self.reject_hoisted(ctx, where.this, "WHERE")
            # Conjuncts without a subquery filter first, so that the join planner sees them
            # (comma joins become equi-joins) and subqueries run only for the rows they pass;
            # a row passes iff every conjunct is TRUE, whichever filters first.
            conjuncts = _conjuncts(where.this)
            plain = [c for c in conjuncts if not _has_subquery(c)]
            stages = [plain, [c for c in conjuncts if _has_subquery(c)]] if plain and len(
                plain) < len(conjuncts) else [[where.this]]
            for stage in stages:
                preds = []
                for c in stage:
                    inner = c
                    while isinstance(inner, exp.Paren):
                        inner = inner.this
                    ctx.semijoin = inner if isinstance(inner, exp.Exists) or (
                        isinstance(inner, exp.In) and inner.args.get("query")) else None
                    s, t = ctx.bind(c)
                    ctx.semijoin = None
                    preds.append(_to_bool(self, s, t, c))
                rel = Mfp(ctx.rel, (), tuple(preds), tuple(range(len(scope))))
                ctx = ExprCtx(self, rel, scope, outer)
                ctx.aliases = sel_aliases
        # expand * and t.* first: aggregation and ORDER BY see the expanded list
        items: list[tuple[exp.Expression, str | None]] = []
        star_labels: dict[int, str] = {}  # an item of a * (or a bare column) and its label
        for e in sel.expressions:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this,
                                                                                   exp.Star)):
                qual = e.table.translate(FOLD) if isinstance(e, exp.Column) and e.table else None
                star = e if isinstance(e, exp.Star) else e.this
                if any(star.args.get(k) for k in ("except", "except_", "replace", "rename")):
                    # (on t.* too, where they were dropped: its columns came out as a plain t.*)
                    raise self.err("unsupported", "* EXCLUDE/REPLACE/RENAME is not supported", e)
                cols = [(i, c) for i, c in enumerate(scope)
                        if (qual is None and not c.hidden) or (qual is not None and c.qual == qual)]
                if qual is not None and not cols:
                    raise self.err("unknown_table", f'table "{qual}" is not in FROM', e)
                if not cols and qual is None:
                    raise self.err("unsupported", "SELECT * with no FROM columns", e)
                for _i, c in cols:
                    items.append((exp.column(c.name, c.qual, quoted=True) if c.qual
                                  else exp.column(c.name, quoted=True), c.name))
                    star_labels[len(items) - 1] = c.label or c.name
            else:
                items.append((e, None))
                # a column named by itself keeps its source's name as DuckDB shows it (`SELECT
                # q FROM v` of a view's column "Q" is "Q"), as a * over it does
                inner = e
                while isinstance(inner, exp.Paren):
                    inner = inner.this
                if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
                    name = inner.name.translate(FOLD)
                    qual = inner.table.translate(FOLD) if inner.table else None
                    hits = [c for c in scope if c.name == name and (
                        c.qual == qual if qual is not None else not c.hidden)]
                    if len(hits) == 1 and hits[0].label:
                        star_labels[len(items) - 1] = hits[0].label
        order = A(sel, "order")
        having = A(sel, "having")
        group = A(sel, "group")
        agg_nodes: list[exp.Expression] = []
        tops = [e for e, _ in items] + ([having.this] if having is not None else []) + (
            [o.this for o in order.expressions] if order is not None else [])
        for e in tops:
            agg_nodes += self.own_aggs(e)
        for e in tops:
            agg_nodes += self.hoisted_aggs(ctx, e, sel)
        aliases = {}
        for e, _nm in items:
            if isinstance(e, exp.Alias):
                aliases[e.alias.translate(FOLD)] = e.this
        if group is not None or agg_nodes:
            for k in ("grouping_sets", "cube", "rollup", "totals"):
                found = group.args.get(k) if group is not None else None
                if found:
                    node = found[0] if isinstance(found, list) else group
                    name, at = self.typed_name(node)
                    raise self.err("unsupported", f"{name} is not supported", at)
            for g in group.expressions if group is not None else []:
                if isinstance(g, (exp.GroupingSets, exp.Cube, exp.Rollup)):
                    name, at = self.typed_name(g)
                    raise self.err("unsupported", f"{name} is not supported", at)
                if isinstance(g, exp.Tuple) and not g.expressions:
                    raise self.err("unsupported", "GROUP BY () is not supported: without GROUP "
                                   "BY, the aggregates are over all rows, as one group", group)
            if group is not None and group.args.get("all"):
                # DuckDB's GROUP BY ALL: by every select-list item with no aggregate of this
                # query, by position (none: the aggregates are over all rows, one group)
                keys = [exp.Literal.number(k + 1) for k, (e, _nm) in enumerate(items)
                        if not self.own_aggs(e)]
                group = exp.Group(expressions=keys) if keys else None
            ctx = self.aggregate(ctx, group, agg_nodes, items, aliases, outer)
            if having is not None:
                ctx.having = True
                try:
                    s, t = ctx.bind(having.this)
                finally:
                    ctx.having = False
                pred = _to_bool(self, s, t, having.this)
                n = ctx.rel.arity
                ctx = ExprCtx(self, Mfp(ctx.rel, (), (pred,), tuple(range(n))), ctx.scope,
                              outer, ctx.agg)
                ctx.aliases = sel_aliases
        elif having is not None:
            raise self.err("grouping_error", "HAVING without GROUP BY or aggregates", having)
        outs: list[BB] = []
        names: list[str] = []
        labels: list[str] = []
        bare: list[str] = []  # each output's type before a NULL's is INTEGER
        for k, (e, nm) in enumerate(items):
            inner = e.this if isinstance(e, exp.Alias) else e
            s, t = ctx.bind(inner)
            bare.append(t)
            outs.append((s, "INTEGER" if t == "NULL" else t))
            label = star_labels.get(k) or nm or output_name(e, self.sql)
            labels.append(label)
            # (folded as every name the binder resolves: `substr('Ba', 1)` is found as
            # `"substr('ba', 1)"`, as a star over a derived table names it)
            names.append(nm or (e.alias.translate(FOLD) if isinstance(e, exp.Alias) else
                                inner.name.translate(FOLD) if isinstance(inner, exp.Column)
                                else label.translate(FOLD)))
        limit, offset = self.limit_offset(sel)
        keys: list[SortKey] = []
        hidden: list[Scalar] = []
        if order is not None and (limit is not None or offset):
            item_texts: dict[str, int] = {}
            for k, (e, _nm) in enumerate(items):
                inner = e.this if isinstance(e, exp.Alias) else e
                if _holds_subquery(inner):
                    item_texts.setdefault(_text(inner), k)
            for o in _order_items(order, len(outs)):
                e = o.this
                idx: int | None = None
                if isinstance(e, exp.Literal) and not e.is_string:
                    idx = self.order_position(e)
                    if not 0 <= idx < len(outs):
                        raise self.err("unsupported", f"ORDER BY position {e.this} is not in "
                                       "the select list", e)
                elif isinstance(e, exp.Column) and not e.table and e.name.translate(FOLD) in names and \
                        e.name.translate(FOLD) in aliases:
                    idx = names.index(e.name.translate(FOLD))
                elif _holds_subquery(e) and _text(e) in item_texts:
                    # Bound a second time, a subquery is a second decorrelated join, which
                    # never equals the output's: the same subquery is matched by its text.
                    idx = item_texts[_text(e)]
                else:
                    s, _t = ctx.bind(e)
                    for i, (os_, _) in enumerate(outs):
                        if os_ == s:
                            idx = i
                            break
                    if idx is None:
                        if distinct is not None:
                            # After DISTINCT only the output columns are left: the key must
                            # be computed from them (`ORDER BY a + b` of `DISTINCT a, b`).
                            # DuckDB also takes a key that is not (`DISTINCT a ... ORDER BY
                            # b`), sorting each row by an arbitrary one of its b values.
                            s = _over_outputs(s, [os_ for os_, _ in outs])
                            if s is None:
                                raise self.err("unsupported", "ORDER BY of a SELECT DISTINCT "
                                               "must be computed from its output columns", e)
                        hidden.append(s)
                        idx = len(outs) + len(hidden) - 1
                keys.append(SortKey(idx, bool(o.args.get("desc")),
                                    bool(o.args.get("nulls_first"))))
        if distinct is not None:
            # the hidden keys read the distinct rows' columns (`_over_outputs`)
            out: Rel = _distinct(_project_exprs(ctx.rel, [s for s, _ in outs]))
            if hidden:
                out = Mfp(out, tuple(hidden), (), tuple(range(len(outs) + len(hidden))))
        else:
            out = _project_exprs(ctx.rel, [s for s, _ in outs] + hidden)
        if limit is not None or offset:
            out = TopK(out, (), tuple(keys), limit, offset)
        if hidden:
            out = Mfp(out, (), (), tuple(range(len(outs))))
        # a global aggregate, a FROM-less SELECT or LIMIT 0/1 yields at most one row
        one = (group is None and bool(agg_nodes)) or A(sel, "from") is None or (
            limit is not None and limit <= 1)
        exactly = group is None and bool(agg_nodes) and having is None and not offset and (
            limit is None or limit >= 1)
        return Bound(out, names, [t for _, t in outs], one, labels, exactly,
                     frozenset(k for k, t in enumerate(bare) if t == "NULL"))

    def own_aggs(self, e: exp.Expression | None) -> list[exp.Expression]:
        return [a for a in _find_aggs(e) if id(a) not in self.outer_aggs]

    def hoisted_aggs(self, ctx: ExprCtx, e: exp.Expression, owner: exp.Select | None,
                     register: bool = True) -> list[exp.Expression]:
        """Aggregates inside subqueries of ``e`` that belong to this query block.

        By the SQL standard an aggregate belongs to the innermost query block that one of its
        argument's columns comes from: when every column resolves past the subqueries around
        it, to this block's FROM, it is this block's aggregate (``SELECT (SELECT max(a)) FROM
        t`` is one row). Found aggregates are registered in ``outer_aggs`` with their owner
        (a block bound twice, like a recursive CTE's anchor, finds its own again)."""
        found: list[exp.Expression] = []
        for node in e.find_all(*AGG_CLASSES):
            if id(node) in self.outer_aggs:
                if self.outer_aggs[id(node)][1] is owner:
                    found.append(node)
                continue
            chain: list[exp.Select] = []
            p = node.parent
            while p is not None and p is not e:
                if isinstance(p, exp.Select):
                    chain.append(p)
                p = p.parent
            if not chain:
                continue  # not inside a subquery: an aggregate of this block already
            cols = [c for c in node.find_all(exp.Column)
                    if not any(isinstance(x, exp.Select) for x in _ancestors(c, node))]
            if not cols:
                continue
            mine = False
            for c in cols:
                if any(self._resolves_in(sel, c) for sel in chain):
                    mine = False
                    break
                try:
                    here = ctx.lookup(c) is not None
                except PlanError:
                    here = True
                mine = mine or here
            if mine:
                if register:
                    self.outer_aggs[id(node)] = (node, owner)  # type: ignore[assignment]
                found.append(node)
        return found

    def reject_hoisted(self, ctx: ExprCtx, e: exp.Expression, where: str) -> None:
        """An aggregate of this block inside a subquery of its WHERE or GROUP BY is as
        illegal there as one written directly (DuckDB: "WHERE clause cannot contain
        aggregates")."""
        found = self.hoisted_aggs(ctx, e, None, register=False)
        if found:
            raise self.err("grouping_error", f"aggregates are not allowed in {where}",
                           found[0])

    def _resolves_in(self, sel: exp.Select, c: exp.Column) -> bool:
        """Whether column c could name a column of sel's FROM (True when unsure, which keeps
        the aggregate in the subquery as before)."""
        frm = A(sel, "from")
        if frm is None:
            return False
        items = [frm.this, *frm.expressions, *[j.this for j in sel.args.get("joins") or []]]
        name = c.name.translate(FOLD)
        qual = c.table.translate(FOLD) if c.table else None
        for t in items:
            alias = t.args.get("alias")
            t_qual = (alias.name.translate(FOLD) if alias is not None and alias.name else
                      t.name.translate(FOLD) if isinstance(t, exp.Table) else None)
            if qual is not None:
                if t_qual == qual:
                    return True
                continue
            names = self._item_names(t)
            if names is None or name in names:
                return True
        return False

    def _item_names(self, t: exp.Expression) -> list[str] | None:
        alias = t.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            return None  # partly renamed: be conservative
        if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier):
            name = t.name.translate(FOLD)
            for frame in reversed(self.ctes):
                if name in frame:
                    return frame[name].names
            if name in self.catalog.views:
                return [c.name.translate(FOLD) for c in self.catalog.views[name].columns]
            if name in self.catalog.tables:
                return [c.name.translate(FOLD) for c in self.catalog.tables[name].columns]
            return None
        if isinstance(t, exp.Subquery) and isinstance(t.this, exp.Select):
            outs = []
            for x in t.this.expressions:
                if isinstance(x, exp.Star) or (isinstance(x, exp.Column) and
                                               isinstance(x.this, exp.Star)):
                    return None
                outs.append(x.alias_or_name.translate(FOLD))
            return outs
        return None

    def aggregate(self, ctx: ExprCtx, group: exp.Group | None, agg_nodes: list[exp.Expression],
                  items: list[tuple[exp.Expression, str | None]], aliases: dict[str, Any],
                  outer: Params | None) -> ExprCtx:
        groups: list[BB] = []
        subquery_texts: dict[str, int] = {}
        for g in group.expressions if group is not None else []:
            target = g
            if _position(g):  # GROUP BY 2; GROUP BY 2.0 is a constant, as in DuckDB
                k = int(g.this) - 1
                if not 0 <= k < len(items):
                    raise self.err("grouping_error", f"GROUP BY position {g.this} is not in the "
                                   "select list", g)
                target = items[k][0]
                target = target.this if isinstance(target, exp.Alias) else target
            elif isinstance(g, exp.Column) and not g.table and g.name.translate(FOLD) in aliases and \
                    ctx.lookup(g) is None:
                target = aliases[g.name.translate(FOLD)]
            _reject_aggs(self, target, "GROUP BY")
            self.reject_hoisted(ctx, target, "GROUP BY")
            if _holds_subquery(target):
                subquery_texts.setdefault(_text(target), len(groups))
            groups.append(ctx.bind(target))
        aggs: list[Agg] = []
        args: list[Scalar] = []
        agg_cols: dict[int, BB] = {}
        seen: dict[tuple[str, Scalar | None, bool, Scalar | None], int] = {}
        for node in agg_nodes:
            func, arg, dist, t, arg2, dec = self.bind_agg(ctx, node)
            key = (func, arg, dist, arg2)
            if key not in seen:
                cols: list[int | None] = []
                for x in (arg, arg2):
                    if x is None:
                        cols.append(None)
                        continue
                    if x not in args:
                        args.append(x)
                    cols.append(len(groups) + args.index(x))
                seen[key] = len(aggs)
                aggs.append(Agg(func, cols[0], dist, t, _sql(node), cols[1], dec))
            agg_cols[id(node)] = (Col(len(groups) + seen[key]), t)
        n = ctx.rel.arity
        mapped = [s for s, _ in groups] + args
        pre = Mfp(ctx.rel, tuple(mapped), (), tuple(range(n, n + len(mapped))))
        red: Rel = Reduce(pre, tuple(range(len(groups))), tuple(aggs))
        if group is None:
            red = self.global_default(red, aggs)
        post_scope = ExprCtx(self, red, [], outer)
        post_scope.agg = AggInfo(ctx, groups, agg_cols, subquery_texts)
        post_scope.aliases = ctx.aliases
        return post_scope

    def global_default(self, red: Rel, aggs: list[Agg]) -> Rel:
        """A global aggregate has exactly one row: R + (default - default-per-row-of-R)."""
        defaults = tuple(0 if a.func in ("count", "count_star") else None for a in aggs)
        lits = tuple(Lit(v, a.type) for v, a in zip(defaults, aggs, strict=True))
        k = len(aggs)
        return self.let(red, lambda g: Union((
            g, Constant((defaults,), k),
            Negate(Mfp(g, lits, (), tuple(range(k, 2 * k)))))))

    def bind_agg(self, ctx: ExprCtx, node: exp.Expression) -> tuple[
            str, Scalar | None, bool, str, Scalar | None, tuple[int, int] | None]:
        """(function, argument, DISTINCT, result type, second argument, and for AVG of a
        DECIMAL its (width, scale)) of an aggregate."""
        fname = node.key.translate(FOLD)
        if type(node) in STAT_AGGS:
            return self.bind_stat_agg(ctx, node)
        this = node.this
        dist = False
        if isinstance(this, exp.Distinct):
            dist = True
            if len(this.expressions) != 1:
                raise self.err("unsupported", f"{fname.upper()}(DISTINCT ...) takes one "
                               "argument", node)
            this = this.expressions[0]
        if fname == "count" and (this is None or isinstance(this, exp.Star)):
            return "count_star", None, False, "BIGINT", None, None
        if (node.expressions and fname != "count") or node.args.get("count") is not None:
            # (sqlglot holds max(x, n)'s n, DuckDB's top n as a LIST, as its `count`)
            raise self.err("unsupported", f"{fname.upper()} with several arguments", node)
        _reject_aggs(self, this, f"{fname.upper()} argument", nested=True)
        s, t = ctx.bind(this)
        if fname == "count":
            return "count", s, dist, "BIGINT", None, None
        f = family(t)
        if fname == "sum" and f == "bool":  # DuckDB 2 counts the true values
            return "sum", s, dist, "HUGEINT", None, None
        if fname in ("sum", "avg"):
            if not is_numeric(t):
                raise self.err("type_error", f"{fname.upper()}({t}) is not defined: the argument"
                               " must be numeric", node)
            if fname == "avg":
                return "avg", s, dist, "DOUBLE", None, decimal_ps(t) if f == "decimal" else None
            if f == "int" or f == "null":
                return "sum", s, dist, "HUGEINT", None, None
            if f == "decimal":
                return "sum", s, dist, "DECIMAL(38,%d)" % _scale(t), None, None
            return "sum", s, dist, "DOUBLE", None, None
        return fname, s, dist, ("INTEGER" if t == "NULL" else t), None, None

    def bind_stat_agg(self, ctx: ExprCtx, node: exp.Expression) -> tuple[
            str, Scalar | None, bool, str, Scalar | None, None]:
        """var_pop, var_samp, stddev_pop, stddev_samp (one argument), covar_pop, covar_samp,
        corr (two): DOUBLE results over the numeric argument(s), as in DuckDB."""
        func = STAT_AGGS[type(node)]
        name = self.typed_name(node)[0]
        this, dist = node.this, False
        if isinstance(this, exp.Distinct):
            if len(this.expressions) != 1:
                raise self.err("unsupported", f"{name}(DISTINCT ...) takes one argument", node)
            this, dist = this.expressions[0], True
        two = func in ("covar_pop", "covar_samp", "corr")
        second = node.args.get("expression")
        if two and (second is None or dist):
            raise self.err("type_error" if second is None else "unsupported",
                           f"{name} takes two arguments" if second is None else
                           f"{name}(DISTINCT ...) is not supported", node)
        out: list[Scalar | None] = []
        for x in ([this, second] if two else [this]):
            _reject_aggs(self, x, f"{name} argument", nested=True)
            s, t = ctx.bind(x)
            if not is_numeric(t):
                raise self.err("type_error", f"{name}({t}) is not defined: the argument must "
                               "be numeric", x)
            out.append(_cast(s, t, "DOUBLE") if family(t) == "float" else s)
        return func, out[0], dist, "DOUBLE", (out[1] if two else None), None

    # ------------------------------------------------------------ subqueries

    def subquery(self, ctx: ExprCtx, kind: str, q: exp.Expression,
                 lhs: exp.Expression | None = None, op: str = "eq", every: bool = False,
                 what: str = "IN", semi: bool = False) -> BB:
        """Extend ctx.rel with one column holding the subquery's value for each row.

        With `semi` (an IN or EXISTS that is a whole WHERE conjunct: only rows where it is
        TRUE matter) ctx.rel keeps just those rows, the column TRUE: a semi-join of the rows
        with the parameter values that have a hit, without the NULL and FALSE cases.

        Kind "in" is ``lhs op ANY (q)`` (IN is ``= ANY``), or with ``every`` ``lhs op ALL (q)``,
        which is evaluated as NOT (lhs negated-op ANY (q)): 3-valued NOT maps a hit to FALSE,
        only NULL comparisons to NULL and nothing (an empty q too) to TRUE, as SQL wants."""
        params = Params(ctx)
        b = self.bind_query(q, params)
        lhs_t = None
        if kind == "in":
            row = lhs
            while isinstance(row, exp.Paren):
                row = row.this
            if isinstance(row, exp.Tuple):
                # (DuckDB compares the rows, with three-valued logic)
                raise self.err("unsupported", "comparing a row of values with a subquery "
                               "((a, b) IN (SELECT ...)) is not supported: compare with EXISTS "
                               "and an equality per column", lhs)
            if len(b.types) != 1:
                raise self.err("type_error", f"{what} subquery must return one column", q)
            ls, lhs_t = ctx.bind(lhs)
            u = unify([lhs_t, b.types[0]])
            if u is None:
                raise self.err("type_error", f"cannot compare {lhs_t} with {b.types[0]} in "
                               f"{what}", lhs)
            if every:
                op = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le",
                      "le": "gt"}[op]
            params.exprs.append(_cast(ls, lhs_t, u))
            params.types.append(u)
            b = Bound(_narrow_rel(b.rel, b.types, [u]), b.names, [u])
        elif kind == "scalar" and len(b.types) != 1:
            raise self.err("type_error", "scalar subquery must return one column", q)
        m = len(params.exprs)
        n = ctx.rel.arity
        ox = Mfp(ctx.rel, tuple(params.exprs), (), tuple(range(n + m)))

        if (semi and kind == "in" and op == "eq" and not every and m == 1
                and not correlated(b.rel, frozenset())):
            # lhs IN (q), q reading no outer column: the rows whose lhs equals one of q's
            # non-NULL values, a join the join planner orders with the FROM list's joins
            values = _distinct(Mfp(b.rel, (), (Call("not", (Call(
                "is_null", (Col(0),), "BOOLEAN"),), "BOOLEAN"),), (0,)))
            ctx.rel = Mfp(Join(ox, values, ((n, 0),)), (TRUE,), (), tuple(range(n + 1))
                          + (n + 2,))
            return Col(n + 1), "BOOLEAN"

        def with_ox(og: Get) -> Rel:
            d = _distinct(Mfp(og, (), (), tuple(range(n, n + m))))

            def with_d(dg: Get) -> Rel:
                qq = apply(b.rel, dg, m) if m else b.rel
                if kind == "scalar" and not b.at_most_one:
                    # one value per outer key, or EvaluationError: never duplicate outer rows
                    qq = Reduce(qq, tuple(range(m)), (Agg("single", m, False, b.types[0],
                                                          f"({_sql(q)})"),))
                keys = tuple((n + i, i) for i in range(m))

                def semijoin(e: Rel) -> Rel:
                    return Mfp(Join(og, e, keys), (TRUE,), (), tuple(range(n + m)) + (n + 2 * m,))

                if kind == "exists":
                    e = _distinct(Mfp(qq, (), (), tuple(range(m))))
                    return semijoin(e) if semi else _lookup_exists(self, og, e, keys)
                flipped = _FLIP.get(op, op)
                if kind == "in" and m == 1 and not correlated(b.rel, frozenset()):
                    if semi and not every:
                        return self.let(b.rel, lambda qg: semijoin(_hits(dg, qg, flipped)))
                    return self.let(b.rel, lambda qg: self._in_uncorrelated(
                        og, dg, qg, n, op, every))
                if kind == "in" and semi and not every:
                    hit = Call(flipped, (Col(m), Col(m - 1)), "BOOLEAN")
                    return self.let(qq, lambda qg: semijoin(
                        _distinct(Mfp(qg, (), (hit,), tuple(range(m))))))
                if kind == "in":
                    def with_q(qg: Get) -> Rel:
                        # lhs op value, written value flipped-op lhs (IN's plan unchanged)
                        hit = Call(flipped, (Col(m), Col(m - 1)), "BOOLEAN")
                        nul = Call("or", (Call("is_null", (Col(m),), "BOOLEAN"),
                                          Call("is_null", (Col(m - 1),), "BOOLEAN")), "BOOLEAN")
                        e1 = _distinct(Mfp(qg, (), (hit,), tuple(range(m))))
                        e2 = _distinct(Mfp(qg, (), (nul,), tuple(range(m))))
                        step = self.let(_lookup_exists(self, og, e1, keys), lambda g1:
                                        _lookup_exists(self, g1, e2, keys))
                        yes, no = (FALSE, TRUE) if every else (TRUE, FALSE)
                        res = Call("case", (Col(n + m), yes, Col(n + m + 1), null("BOOLEAN"),
                                            no), "BOOLEAN")
                        return Mfp(step, (res,), (), tuple(range(n + m)) + (n + m + 2,))
                    return self.let(qq, with_q)

                def with_q2(qg: Get) -> Rel:
                    hit = Mfp(Join(og, qg, keys), (), (), tuple(range(n + m)) + (n + 2 * m,))
                    if not m and b.exactly_one:
                        return hit  # every outer row has its one value: none is missed
                    present = _distinct(Mfp(qg, (), (), tuple(range(m))))
                    miss = _pad(Union((og, Negate(Mfp(Join(og, present, keys), (), (),
                                                      tuple(range(n + m)))))), 1, after=True)
                    return Union((hit, miss))
                return self.let(qq, with_q2)

            return self.let(d, with_d) if m else with_d(Constant(((),), 0))  # type: ignore

        rel = self.let(ox, with_ox)
        ctx.rel = rel
        t = "BOOLEAN" if kind in ("exists", "in") else b.types[0]
        return Col(n + m), t

    def _in_uncorrelated(self, og: Get, dg: Get, qg: Get, n: int, op: str,
                         every: bool) -> Rel:
        """``lhs op ANY (q)`` (or ALL) for a q that reads no outer column: og (n columns,
        then lhs) + its BOOLEAN, as the general plan above, without the cross product of the
        distinct lhs values with q's rows. The hits are the lhs values with a matching row
        (`d x q` filtered by ``q-value op lhs``: for ``=``, the equi-join the join planner
        makes of it); a comparison is NULL where lhs is NULL (and q has a row) or where q has
        a NULL, each a cross product with at most one row."""
        e1 = _hits(dg, qg, _FLIP.get(op, op))
        nonempty = _distinct(Mfp(qg, (), (), ()))
        has_null = _distinct(Mfp(qg, (), (Call("is_null", (Col(0),), "BOOLEAN"),), ()))
        null_lhs = Mfp(dg, (), (Call("is_null", (Col(0),), "BOOLEAN"),), (0,))
        e2 = _distinct(Union((Join(null_lhs, nonempty, ()), Join(dg, has_null, ()))))
        keys = ((n, 0),)
        step = self.let(_lookup_exists(self, og, e1, keys), lambda g1:
                        _lookup_exists(self, g1, e2, keys))
        yes, no = (FALSE, TRUE) if every else (TRUE, FALSE)
        res = Call("case", (Col(n + 1), yes, Col(n + 2), null("BOOLEAN"), no), "BOOLEAN")
        return Mfp(step, (res,), (), tuple(range(n + 1)) + (n + 3,))


# ---------------------------------------------------------------- expressions


class ExprCtx:
    """Binds scalar expressions against a relation whose first len(scope) columns are named.

    Binding a subquery appends columns to ``rel`` (the lookup result); callers must use
    ``ctx.rel`` after binding and project the extra columns away."""

    def __init__(self, binder: Binder, rel: Rel, scope: list[SCol], outer: Params | None,
                 agg: AggInfo | None = None) -> None:
        self.b = binder
        self.rel = rel
        self.scope = scope
        self.outer = outer
        self.agg = agg
        self.no_subqueries = False
        # A WHERE conjunct being bound: an IN or EXISTS that is the conjunct itself only keeps
        # the rows it is TRUE for, so it is bound as a semi-join (see Binder.subquery).
        self.semijoin: exp.Expression | None = None
        self.aliases: dict[str, exp.Expression] = {}
        self.expanding: set[str] = set()  # aliases being bound (an alias never uses itself)
        self.having = False  # binding HAVING (`bind_post`)

    # -- names

    def lookup(self, node: exp.Column) -> BB | None:
        name = node.name.translate(FOLD)
        qual = node.table.translate(FOLD) if node.table else None
        if qual is not None:
            hits = [i for i, c in enumerate(self.scope) if c.qual == qual and c.name == name]
        else:
            hits = [i for i, c in enumerate(self.scope) if c.name == name and not c.hidden]
        if len(hits) > 1:
            raise self.b.err("ambiguous_column", f'column reference "{node.sql()}" is '
                             "ambiguous", node)
        if hits:
            return Col(hits[0]), self.scope[hits[0]].type
        return None

    def resolve_column(self, node: exp.Column) -> BB | None:
        if self.agg is not None:
            try:
                return self.bind(node)
            except PlanError as e:
                if e.code == "unknown_column":
                    return None
                raise
        got = self.lookup(node)
        if got is not None:
            return got
        if self.outer is not None:
            return self.outer.resolve(node)
        return None

    def _has_qual(self, q: str) -> bool:
        ctx: ExprCtx | None = self
        while ctx is not None:
            scope = ctx.agg.pre.scope if ctx.agg is not None else ctx.scope
            if any(c.qual == q for c in scope):
                return True
            ctx = ctx.outer.parent if ctx.outer is not None else None
        return False

    def column(self, node: exp.Column) -> BB:
        if node.args.get("db") or node.args.get("catalog"):
            raise self.b.err("unsupported", "column references with more than one qualifier",
                             node)
        got = self.lookup(node)
        if got is None:
            got = self.alias(node)
        if got is None and self.outer is not None:
            got = self.outer.resolve(node)
        if got is None:
            if node.table and not self._has_qual(node.table.translate(FOLD)):
                raise self.b.err("unknown_table", f'table "{node.table}" is not in FROM', node)
            raise self.b.err("unknown_column", f'column "{node.sql()}" does not exist', node)
        return got

    def alias(self, node: exp.Column) -> BB | None:
        """An unqualified name that is no column: the SELECT list alias of that name, bound
        here (None if there is none, or it is the alias being bound)."""
        name = node.name.translate(FOLD)
        if node.table or name not in self.aliases or name in self.expanding:
            return None
        self.expanding.add(name)
        try:
            return self.bind(self.aliases[name])
        finally:
            self.expanding.discard(name)

    # -- binding

    def try_bind(self, e: exp.Expression) -> BB | None:
        saved = (self.rel, self.no_subqueries)
        self.no_subqueries = True
        try:
            return self.bind(e)
        except (PlanError, _NoSubquery):
            return None
        finally:
            self.rel, self.no_subqueries = saved

    def bind(self, e: exp.Expression) -> BB:
        if self.agg is not None:
            return self.bind_post(e)
        return self.bind_node(e)

    def bind_post(self, e: exp.Expression) -> BB:
        """Post-aggregation: aggregates and group expressions are columns of the Reduce."""
        info = self.agg
        assert info is not None
        if id(e) in info.agg_cols:
            return info.agg_cols[id(e)]
        if isinstance(e, (exp.Literal, exp.Null, exp.Boolean)):
            return self.bind_node(e)
        if info.subquery_texts and _holds_subquery(e):
            i = info.subquery_texts.get(_text(e))
            if i is not None:
                return Col(i), info.groups[i][1]
        if not isinstance(e, (exp.Subquery, exp.Exists)) and not (
                isinstance(e, exp.In) and e.args.get("query")):
            got = info.pre.try_bind(e)
            if got is not None:
                s, t = got
                for i, (gs, _gt) in enumerate(info.groups):
                    if gs == s:
                        return Col(i), t
                if isinstance(s, (OuterRef, Lit)):
                    return got
        if isinstance(e, exp.Column):
            if info.pre.lookup(e) is None or self.having:
                # in HAVING a column of the input wins over an alias only when it is grouped
                # (above): as in DuckDB, `SELECT b, sum(a) AS a ... GROUP BY b HAVING a > 0`
                # reads the alias (in the select list the column wins, and is refused)
                got = self.alias(e)
                if got is not None:
                    return got
            # bind in the pre scope for the precise error (unknown/ambiguous) first
            info.pre.bind(e)
            raise self.b.err("grouping_error", f'column "{e.sql()}" must appear in the GROUP BY'
                             " clause or be used in an aggregate function", e)
        return self.bind_node(e)

    def bind_node(self, e: exp.Expression) -> BB:
        b = self.b
        if isinstance(e, exp.Column):
            if isinstance(e.this, exp.Star):
                raise b.err("unsupported", "* is not allowed here", e)
            return self.column(e)
        if isinstance(e, exp.Paren):
            return self.bind(e.this)
        if isinstance(e, exp.RawString):  # a dollar-quoted string: $$text$$, $tag$text$tag$
            return Lit(e.this, "VARCHAR"), "VARCHAR"
        if isinstance(e, exp.Literal):
            if e.is_string:
                return Lit(e.this, "VARCHAR"), "VARCHAR"
            txt = e.this
            if "e" in txt.translate(FOLD):
                return Lit(float(txt), "DOUBLE"), "DOUBLE"
            if "." in txt:
                d = decimal.Decimal(txt)
                scale = max(0, -d.as_tuple().exponent)  # type: ignore[operator]
                # DuckDB's width is the text's digits, leading zeros too (00.5 is
                # DECIMAL(3,1)); sqlglot reads `.5` as 0.5 (the text at its start is the
                # point): DECIMAL(1,1)
                digits = sum(c.isdigit() for c in txt)
                start = e.meta.get("start")
                if txt.startswith("0.") and (not isinstance(start, int) or
                                             b.sql[start:start + 1] == "."):
                    digits -= 1
                width = max(digits, scale, 1)
                if width > MAX_DECIMAL_WIDTH:
                    return Lit(float(txt), "DOUBLE"), "DOUBLE"  # as DuckDB types it
                t = f"DECIMAL({width},{scale})"
                return Lit(d, t), t
            v = int(txt)
            t = "INTEGER" if -(2 ** 31) <= v < 2 ** 31 else "BIGINT" if -(2 ** 63) <= v < \
                2 ** 63 else "HUGEINT"
            if not int_fits(v, t):
                # DuckDB's UHUGEINT and BIGNUM: no view column holds one
                raise b.err("unsupported", f"integer literal {txt} is past HUGEINT's range", e)
            return Lit(v, t), t
        if isinstance(e, exp.Null):
            return null(), "NULL"
        if isinstance(e, exp.Boolean):
            return Lit(bool(e.this), "BOOLEAN"), "BOOLEAN"
        if isinstance(e, AGG_CLASSES) and id(e) in b.outer_aggs and self.outer is not None:
            return self.outer.resolve_agg(e)
        if isinstance(e, AGG_CLASSES) or isinstance(e, exp.AggFunc):
            if isinstance(e, AGG_CLASSES):
                raise b.err("grouping_error", f"aggregate {e.key.upper()} is not allowed here",
                            e)
            name, at = b.typed_name(e)
            raise b.err("unsupported", f"aggregate function {name} is not supported", at)
        if isinstance(e, exp.Window):
            raise b.err("unsupported", "window functions are not supported", e)
        if isinstance(e, (exp.Subquery, exp.Exists)) or (isinstance(e, exp.In) and
                                                          e.args.get("query")):
            if self.no_subqueries:
                raise _NoSubquery()
            semi = e is self.semijoin
            if isinstance(e, exp.Exists):
                return b.subquery(self, "exists", e.this, semi=semi)
            if isinstance(e, exp.In):
                q = e.args["query"]
                return b.subquery(self, "in", q.this if isinstance(q, exp.Subquery) else q,
                                  e.this, semi=semi)
            return b.subquery(self, "scalar", e.this)
        if isinstance(e, exp.Not):
            s, t = self.bind(e.this)
            return self.call("not", [(_to_bool(b, s, t, e.this), "BOOLEAN")], "BOOLEAN")
        if isinstance(e, (exp.And, exp.Or)):
            args = []
            for x in _flatten(e, type(e)):
                s, t = self.bind(x)
                args.append((_to_bool(b, s, t, x), "BOOLEAN"))
            return self.call("and" if isinstance(e, exp.And) else "or", args, "BOOLEAN")
        cmp = {exp.EQ: "eq", exp.NEQ: "ne", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt",
               exp.GTE: "ge"}
        if type(e) in cmp:
            if isinstance(e.expression, (exp.Any, exp.All)):
                q = e.expression.this
                if isinstance(q, exp.Paren) and isinstance(q.this, (exp.Select, exp.Union,
                                                                    exp.Subquery)):
                    q = q.this
                if not isinstance(q, (exp.Select, exp.Union, exp.Intersect, exp.Except,
                                      exp.Subquery)):
                    raise b.err("unsupported", f"{e.expression.key.upper()} takes a subquery "
                                "here (ANY/ALL over a list or array is not supported)", e)
                if self.no_subqueries:
                    raise _NoSubquery()
                every = isinstance(e.expression, exp.All)
                return b.subquery(self, "in", q, e.this, cmp[type(e)], every,
                                  f"{e.expression.key.upper()}")
            return self.compare(cmp[type(e)], e.this, e.expression, e)
        if isinstance(e, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            s, _ = self.compare("is_distinct", e.this, e.expression, e)
            if isinstance(e, exp.NullSafeEQ):
                return self.call("not", [(s, "BOOLEAN")], "BOOLEAN")
            return s, "BOOLEAN"
        if isinstance(e, exp.Is):
            s, t = self.bind(e.this)
            rhs = e.expression
            if isinstance(rhs, exp.Null):
                return self.call("is_null", [(s, t)], "BOOLEAN")
            if isinstance(rhs, exp.Boolean):
                s = _to_bool(b, s, t, e.this)
                return self.call("is_true" if rhs.this else "is_false", [(s, "BOOLEAN")],
                                 "BOOLEAN")
            raise b.err("unsupported", "IS must be followed by NULL, TRUE or FALSE", e)
        arith = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div",
                 exp.IntDiv: "intdiv", exp.Mod: "mod"}
        if type(e) in (exp.Add, exp.Sub) and (isinstance(e.this, exp.Interval) or isinstance(
                e.expression, exp.Interval)):
            return self.interval_arith(e)
        if type(e) in arith:
            return self.arith(arith[type(e)], self.bind(e.this), self.bind(e.expression), e,
                              (_int_literal(e.this), _int_literal(e.expression)))
        if isinstance(e, exp.Neg):
            inner = e.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Literal) and not inner.is_string and \
                    inner.this == str(2 ** 63):
                # the literal 9223372036854775808 is a HUGEINT, but DuckDB folds its negation
                # into BIGINT's minimum (-2147483648 stays a BIGINT, the literal's type)
                return Lit(-(2 ** 63), "BIGINT"), "BIGINT"
            s, t = self.bind(e.this)
            if not is_numeric(t):
                raise b.err("type_error", f"cannot negate a value of type {t}", e)
            return self.call("neg", [(s, t)], t, _sql(e))
        if isinstance(e, exp.DPipe):
            return self.call("dpipe", [self.bind(e.this), self.bind(e.expression)], "VARCHAR")
        if isinstance(e, exp.Between):
            x = self.bind(e.this)
            lo = self.compare_bound("ge", x, self.bind(e.args["low"]), e)
            hi = self.compare_bound("le", x, self.bind(e.args["high"]), e)
            return self.call("and", [lo, hi], "BOOLEAN")
        if isinstance(e, exp.In):
            if e.args.get("unnest") or e.args.get("field"):
                raise b.err("unsupported", "IN UNNEST is not supported", e)
            x = self.bind(e.this)
            if not e.expressions:
                # DuckDB: x IN () is FALSE, but NULL when x is NULL (as for any comparison)
                return Call("case", (Call("is_null", (x[0],), "BOOLEAN"), null("BOOLEAN"),
                                     FALSE), "BOOLEAN"), "BOOLEAN"
            # x and the list are of one type, as DuckDB's IN casts them: a text in the list
            # next to x's DATE and another item's TIMESTAMP is a TIMESTAMP
            items = [self.bind(v) for v in e.expressions]
            types = [x[1]] + [t for _, t in items]
            x = self.literal_to(x, types, e.this)
            eqs = [self.compare_bound("eq", x, self.literal_to(item, types, v), v)
                   for item, v in zip(items, e.expressions, strict=True)]
            if len(eqs) == 1:
                return eqs[0]
            return self.call("or", eqs, "BOOLEAN")
        if isinstance(e, (exp.Like, exp.ILike)):
            if e.args.get("escape") or isinstance(e.expression, exp.Escape):
                raise b.err("unsupported", "LIKE ... ESCAPE is not supported", e)
            s = self.call("like" if isinstance(e, exp.Like) else "ilike",
                          [self.str_arg(e.this), self.str_arg(e.expression)], "BOOLEAN")
            if e.args.get("negate"):
                return self.call("not", [s], "BOOLEAN")
            return s
        if isinstance(e, exp.Escape):
            raise b.err("unsupported", "LIKE ... ESCAPE is not supported", e)
        if isinstance(e, exp.Case):
            return self.case(e)
        if isinstance(e, exp.If):
            cond = self.bind(e.this)
            return self.case_from([( _to_bool(b, cond[0], cond[1], e.this), e.args["true"])],
                                  e.args.get("false"), e)
        if isinstance(e, exp.Coalesce):
            if b.typed_name(e)[0].lower() == "nvl":
                # sqlglot reads Oracle's nvl as coalesce; DuckDB has no nvl
                raise b.err("unsupported", "function nvl is not supported (DuckDB has none): "
                            "use coalesce", e)
            nodes = [e.this, *e.expressions]
            return self.unified_call("coalesce", [self.bind(x) for x in nodes], e, nodes)
        if isinstance(e, exp.Nullif):
            a, c = self.bind(e.this), self.bind(e.expression)
            c = self.literal_to(c, [a[1]], e)
            u = self.unify_or_fail([a[1], c[1]], e)
            # compared in the common type, but the result is the first argument, of its type
            return self.call("nullif", [a, (_cast(c[0], c[1], u, False), u)],
                             "INTEGER" if a[1] == "NULL" else a[1])
        if isinstance(e, (exp.Cast, exp.TryCast)):
            return self.cast(e)
        return self.function(e)

    # -- helpers

    def call(self, func: str, args: list[BB], t: str, label: str = "") -> BB:
        if func in _TEXT_OF_ARGS:
            args = [_printed_text(s, ty) for s, ty in args]
        ss = tuple(s for s, _ in args)
        c = Call(func, ss, t, label)
        # constant folding happens here so that literal coercions are visible to type checks;
        # it runs the runtime evaluator, so overflow checks apply to constants too
        if all(isinstance(s, Lit) for s in ss) and func in FUNCS:
            try:
                return Lit(compile_scalar(c)(()), t), t
            except Exception:  # noqa: BLE001 - a failing constant raises when evaluated,
                pass  # as in DuckDB (CASE WHEN false THEN 1 // 0 END is fine)
        if func not in NULL_TOLERANT and func != "cast" and any(
                isinstance(s, Lit) and s.value is None for s in ss):
            return null(t), t
        return c, t

    def unify_or_fail(self, types: list[str], node: exp.Expression) -> str:
        u = unify(types)
        if u is None:
            raise self.b.err("type_error", f"{node.key.upper()} mixes incompatible types "
                             f"{', '.join(types)}", node)
        return u

    def unified_call(self, func: str, vals: list[BB], node: exp.Expression,
                     args: list[exp.Expression] | None = None) -> BB:
        """`func` of `vals` (bound from `args`, when given: which are integer literals) in
        their common type."""
        vals = [self.literal_to(v, [w[1] for w in vals], node) for v in vals]
        vals = _fit_int_literals(vals, None if args is None else [_int_literal(a) for a in args])
        u = self.unify_or_fail([t for _, t in vals], node)
        return self.call(func, [(_cast(s, t, u), u) for s, t in vals], u)

    def literal_to(self, v: BB, others: list[str], node: exp.Expression | None = None) -> BB:
        """A string literal next to non-string values takes their common type (DuckDB's
        STRING_LITERAL is implicitly castable, and a function's or list's arguments are cast to
        one type: `coalesce(d, '2000-01-01 10:00', ts)` reads the text as a TIMESTAMP)."""
        s, t = v
        if isinstance(s, Lit) and isinstance(s.value, str):
            typed = [o for o in others if family(o) not in ("str", "null")]
            # (values of no common type: the first one's, and the caller's unification
            # refuses them)
            target = (unify(typed) or typed[0]) if typed else None
            if target is not None:
                try:
                    cv = cast_value(s.value, target)
                except EvaluationError as e:  # a date DuckDB reads past years 1 to 9999
                    raise self.b.err("value_out_of_range", e.detail, node) from None
                if cv is None:
                    raise self.b.err("type_error", f"cannot convert '{s.value}' to {target}",
                                     node)
                return Lit(cv, target), target
        return v

    def compare(self, func: str, a: exp.Expression, c: exp.Expression,
                node: exp.Expression) -> BB:
        return self.compare_bound(func, self.bind(a), self.bind(c), node)

    def compare_bound(self, func: str, x: BB, y: BB, node: exp.Expression) -> BB:
        x = self.literal_to(x, [y[1]], node)
        y = self.literal_to(y, [x[1]], node)
        on_dates = _date_bound(func, x, y)
        if on_dates is not None:
            func, x, y = on_dates
        fx, fy = family(x[1]), family(y[1])
        if "null" not in (fx, fy):
            u = unify([x[1], y[1]])
            if u is None and func in ("eq", "ne", "is_distinct"):
                x, y = _equality_operands(x, y)
                u = unify([x[1], y[1]])
            if u is None:
                raise self.b.err("type_error", f"cannot compare values of type {x[1]} and "
                                 f"{y[1]}", node)
            # An equality may become a join key, matched by value identity (a row dictionary
            # keeps 2, 2.00 and 2.000 apart): both sides take the common type exactly, as
            # DuckDB compares them. Orderings compare Python values, exact at any scale.
            exact = func == "eq"
            x, y = (_cast(x[0], x[1], u, exact), u), (_cast(y[0], y[1], u, exact), u)
        return self.call(func, [x, y], "BOOLEAN")

    def interval_arith(self, e: exp.Add | exp.Sub) -> BB:
        """``DATE/TIMESTAMP +/- INTERVAL n unit`` (or ``INTERVAL + DATE/TIMESTAMP``): a
        TIMESTAMP, as in DuckDB. The interval must be a constant; an INTERVAL anywhere else is
        refused (views have no INTERVAL values)."""
        b = self.b
        iv_node, other = (e.expression, e.this) if isinstance(e.expression, exp.Interval) else (
            e.this, e.expression)
        if isinstance(other, exp.Interval) or (isinstance(e, exp.Sub) and iv_node is e.this):
            raise b.err("unsupported", "INTERVAL arithmetic other than DATE/TIMESTAMP +/- "
                        "INTERVAL is not supported", e)
        iv = _interval(b, iv_node)
        x = self.bind(other)
        if family(x[1]) not in ("date", "timestamp"):  # NULL + INTERVAL too, as in DuckDB
            raise b.err("type_error", f"cannot add an INTERVAL to a value of type {x[1]}", e)
        func = "add_interval" if isinstance(e, exp.Add) else "sub_interval"
        return self.call(func, [x, (Lit(iv, "INTERVAL"), "INTERVAL")], "TIMESTAMP", _sql(e))

    def arith(self, func: str, x: BB, y: BB, node: exp.Expression,
              lits: tuple[bool, bool] = (False, False)) -> BB:
        """``lits`` says which operands are integer literals in the SQL text."""
        label = _sql(node)
        x = self.literal_to(x, [y[1]], node)
        y = self.literal_to(y, [x[1]], node)
        fx, fy = family(x[1]), family(y[1])
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "intdiv": "//", "mod": "%"}[func]
        if fx in ("date", "timestamp") or fy in ("date", "timestamp"):
            if func == "add" and fx == "date" and fy in ("int", "null"):
                return self.call("date_add", [x, y], "DATE")
            if func == "add" and fy == "date" and fx in ("int", "null"):
                return self.call("date_add", [y, x], "DATE")
            if func == "sub" and fx == "date" and fy in ("int", "null"):
                return self.call("date_sub", [x, y], "DATE")
            if func == "sub" and fx == "date" and fy == "date":
                return self.call("date_sub", [x, y], "BIGINT")
            raise self.b.err("type_error", f"cannot apply {sym} to {x[1]} and {y[1]}", node)
        if not (is_numeric(x[1]) and is_numeric(y[1])):
            raise self.b.err("type_error", f"cannot apply {sym} to {x[1]} and {y[1]}", node)
        if unify([x[1], y[1]]) == "REAL":
            # DuckDB computes on FLOATs as FLOATs (`//` of floats is `/`): the operands made
            # FLOAT (each rounded to single precision: `r % 0.3` by 0.30000001192...), the
            # double result rounded to one, which is the single-precision result (a double
            # holds more than twice its digits; `%` is exact): `r + 1` of 16777216 is 16777216
            q = self.call(func, [(_cast(x[0], x[1], "REAL"), "DOUBLE"),
                                 (_cast(y[0], y[1], "REAL"), "DOUBLE")], "DOUBLE", label)
            return Call("to_single", (q[0],), "REAL"), "REAL"  # (past FLOAT's range: inf)
        if func == "div":
            return self.call("div", [(_cast(x[0], x[1], "DOUBLE"), "DOUBLE"),
                                     (_cast(y[0], y[1], "DOUBLE"), "DOUBLE")], "DOUBLE")
        u = unify([x[1], y[1]]) or "DOUBLE"
        if u == "NULL":
            u = "INTEGER"
        if family(u) == "int" and lits[0] != lits[1]:
            # DuckDB's INTEGER_LITERAL adopts the other operand's integer type if it fits
            (lit, _), (_, other) = (x, y) if lits[0] else (y, x)
            if isinstance(lit, Lit) and isinstance(lit.value, int) and family(other) == "int":
                u = fitting_int_type(lit.value, other)
        elif family(u) == "int" and fx == fy == "int" and norm_type(x[1]).startswith(
                "U") != norm_type(y[1]).startswith("U") and INT_RANK[norm_type(u)] < 4 and \
                norm_type(u) not in (norm_type(x[1]), norm_type(y[1])):
            # a signed and an unsigned integer the signed type cannot hold (TINYINT and
            # UTINYINT, SMALLINT and USMALLINT): DuckDB's arithmetic on them is in BIGINT
            u = "BIGINT"
        if family(u) == "decimal" and func in ("add", "sub", "mul", "mod") and "null" not in (
                fx, fy):
            # DuckDB's decimal arithmetic types; Python's Decimal gives these operations the
            # same scale (the larger one, or the sum for *), so values need no rescaling
            r = decimal_result(func, x[1], y[1])
            if r is None and func == "mul":
                raise self.b.err("type_error", f"{x[1]} * {y[1]} needs a scale past 38 digits "
                                 "(DuckDB refuses it): cast an operand to DOUBLE or to a DECIMAL "
                                 "of a lower scale", node)
            u = r or "DOUBLE"  # (% past 38 digits: in DOUBLE, as DuckDB)
        if family(u) == "float":
            x, y = (_cast(x[0], x[1], "DOUBLE"), "DOUBLE"), (_cast(y[0], y[1], "DOUBLE"), "DOUBLE")
        if func == "intdiv" and family(u) != "int":
            u = "DOUBLE"
            x, y = (_cast(x[0], x[1], "DOUBLE"), "DOUBLE"), (_cast(y[0], y[1], "DOUBLE"), "DOUBLE")
        return self.call(func, [x, y], u, label)

    def str_arg(self, e: exp.Expression) -> BB:
        s, t = self.bind(e)
        if family(t) not in ("str", "null"):
            raise self.b.err("type_error", f"expected a VARCHAR argument, got {t}", e)
        return s, t

    def int_arg(self, e: exp.Expression) -> BB:
        s, t = self.bind(e)
        if family(t) not in ("int", "null"):
            if isinstance(s, Lit) and family(t) in ("decimal", "float"):
                return Lit(int(s.value), "INTEGER"), "INTEGER"
            raise self.b.err("type_error", f"expected an integer argument, got {t}", e)
        return s, t

    def num_arg(self, e: exp.Expression) -> BB:
        s, t = self.bind(e)
        if not is_numeric(t):
            raise self.b.err("type_error", f"expected a numeric argument, got {t}", e)
        return s, t

    def case(self, e: exp.Case) -> BB:
        subject = e.this
        whens = []
        for w in e.args.get("ifs") or []:
            if subject is not None:
                c = self.compare_bound("eq", self.bind(subject), self.bind(w.this), w)
            else:
                c = self.bind(w.this)
                c = (_to_bool(self.b, c[0], c[1], w.this), "BOOLEAN")
            whens.append((c[0], w.args["true"]))
        return self.case_from(whens, e.args.get("default"), e)

    def case_from(self, whens: list[tuple[Scalar, exp.Expression]],
                  default: exp.Expression | None, node: exp.Expression) -> BB:
        vals = [self.bind(v) for _, v in whens]
        dv = self.bind(default) if default is not None else (null(), "NULL")
        allv = [self.literal_to(v, [w[1] for w in [*vals, dv]], node) for v in [*vals, dv]]
        allv = _fit_int_literals(allv, [_int_literal(v) for _, v in whens] + [
            _int_literal(default)])
        u = self.unify_or_fail([t for _, t in allv], node)
        args: list[BB] = []
        for (c, _), (s, t) in zip(whens, allv[:-1], strict=True):
            args += [(c, "BOOLEAN"), (_cast(s, t, u), u)]
        args.append((_cast(allv[-1][0], allv[-1][1], u), u))
        return self.call("case", args, u)

    def cast(self, e: exp.Expression) -> BB:
        s, t = self.bind(e.this)
        to = e.args["to"]
        target = norm_type(to.sql(dialect="duckdb"))
        if family(target) == "other" or (family(target) == "timestamp" and
                                         target != "TIMESTAMP"):
            # (TIMESTAMPTZ, TIMESTAMP_S/MS/NS: a view's timestamps are microseconds, no zone)
            raise self.b.err("unsupported", f"CAST to {target} is not supported", to)
        if family(target) == "decimal":
            p, sc = decimal_ps(target)
            if not 1 <= p <= MAX_DECIMAL_WIDTH or sc > p:
                raise self.b.err("type_error", f"{target} is not a DECIMAL type: its width is "
                                 f"1 to {MAX_DECIMAL_WIDTH} and its scale at most its width",
                                 to)
        if family(target) == "str" and (norm_type(t) == "REAL" or _fraction(t)):
            return _printed_text(s, t)
        if isinstance(s, Lit):
            try:
                if isinstance(e, exp.TryCast):
                    return Lit(cast_value(s.value, target), target), target
                return Lit(cast_checked(s.value, target), target), target
            except EvaluationError:
                # DuckDB raises only when the CAST is evaluated: CASE WHEN false THEN
                # CAST('%' AS INTEGER) END is NULL, so the failure waits for evaluation too
                return Call("try_cast" if isinstance(e, exp.TryCast) else "cast", (s,), target,
                            _sql(e)), target
        if norm_type(t) == target:
            return s, t
        return Call("try_cast" if isinstance(e, exp.TryCast) else "cast", (s,), target,
                    _sql(e)), target

    def function(self, e: exp.Expression) -> BB:
        b = self.b
        name = e.key.translate(FOLD)
        if isinstance(e, exp.Anonymous):
            name = str(e.this).translate(FOLD)
            args = list(e.expressions)
        else:
            args = [v for k, v in e.args.items() if v is not None and k in
                    ("this", "expression", "expressions", "start", "length", "decimals",
                     "replacement", "substr")]
            flat: list[Any] = []
            for a in args:
                flat += a if isinstance(a, list) else [a]
            args = flat
        alias = {"char_length": "length", "character_length": "length",
                 "len": "length", "substring": "substr", "ceiling": "ceil", "pow": "power",
                 "ifnull": "coalesce", "datediff": "date_diff",
                 "date_part": "extract", "datepart": "extract", "timestamptrunc": "date_trunc",
                 "datetrunc": "date_trunc", "timestamp_trunc": "date_trunc",
                 "instr": "strpos", "position": "strpos", "strposition": "strpos", "stringtostr": "concat",
                 "timetounix": "epoch", "dayofweekiso": "isodow"}
        if isinstance(e, exp.StrPosition) and b.typed_name(e)[0].lower() in ("locate",
                                                                             "charindex"):
            # sqlglot reads MySQL's locate and T-SQL's charindex as strpos; DuckDB has neither
            raise b.err("unsupported", f"function or construct {b.typed_name(e)[0]} is not "
                        "supported", e)
        name = alias.get(name, name)
        if isinstance(e, (exp.Lower, exp.Upper, exp.Reverse)) or name in ("lower", "upper",
                                                                            "reverse"):
            return self.call(name, [self.str_arg(args[0])], "VARCHAR")
        if name == "length":
            return self.call("length", [self.str_arg(args[0])], "BIGINT")
        if name == "substr":
            if isinstance(e, exp.Substring):
                xs = [self.str_arg(e.this), self.int_arg(e.args["start"])]
                if e.args.get("length") is not None:
                    xs.append(self.int_arg(e.args["length"]))
            else:
                xs = [self.str_arg(args[0])] + [self.int_arg(a) for a in args[1:3]]
            return self.call("substr", xs, "VARCHAR")
        if isinstance(e, exp.Trim) or name in ("trim", "ltrim", "rtrim"):
            pos = (e.args.get("position") or "").upper() if isinstance(e, exp.Trim) else ""
            fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, name if name != "trim"
                                                              else "trim")
            xs = [self.str_arg(e.this if isinstance(e, exp.Trim) else args[0])]
            chars = e.args.get("expression") if isinstance(e, exp.Trim) else (
                args[1] if len(args) > 1 else None)
            if chars is not None:
                xs.append(self.str_arg(chars))
            return self.call(fn, xs, "VARCHAR")
        if (isinstance(e, exp.Concat) or name == "concat") and not isinstance(e, exp.ConcatWs):
            return self.call("concat", [self.bind(a) for a in (e.expressions if isinstance(
                e, exp.Concat) else args)], "VARCHAR")
        if isinstance(e, exp.Replace) or name == "replace":
            xs = [e.this, e.expression, e.args.get("replacement")] if isinstance(
                e, exp.Replace) else args
            return self.call("replace", [self.str_arg(a) for a in xs], "VARCHAR")
        if name in ("left", "right"):
            return self.call(name, [self.str_arg(args[0]), self.int_arg(args[1])], "VARCHAR")
        if name in ("strpos",):
            return self.call(name, [self.str_arg(args[0]), self.str_arg(args[1])], "BIGINT")
        if name in ("starts_with", "contains", "startswith"):
            return self.call("starts_with" if name != "contains" else "contains",
                             [self.str_arg(args[0]), self.str_arg(args[1])], "BOOLEAN")
        if name in ("abs", "sign"):
            x = self.num_arg(args[0])
            return self.call(name, [x], x[1] if name == "abs" else "TINYINT", _sql(e))
        if name in ("floor", "ceil"):
            if isinstance(e, (exp.Floor, exp.Ceil)) and e.args.get("decimals") is not None:
                raise b.err("unsupported", f"{name.upper()} with a precision", e)
            x = self.num_arg(args[0])
            t = x[1]
            if family(t) == "decimal":
                t = decimal_type(decimal_ps(t)[0], 0)
            elif family(t) == "int":
                # DuckDB 2.0 has no integer overload: floor(INTEGER) is a DOUBLE
                t = "DOUBLE"
                x = (_cast(x[0], x[1], t), t)
            return self.call(name, [x], t)
        if name == "round":
            x = self.num_arg(args[0])
            xs = [x]
            t = x[1]
            if len(args) > 1:
                xs.append(self.int_arg(args[1]))
            if family(t) == "decimal":
                if len(xs) > 1 and not isinstance(xs[1][0], Lit):
                    raise b.err("unsupported", "round of a DECIMAL needs a constant precision",
                                args[1])
                d = (xs[1][0].value or 0) if len(xs) > 1 else 0
                p, sc = decimal_ps(t)
                # a precision at or beyond the scale leaves the value (and type) as it is
                t = decimal_type(p, min(sc, max(0, d)))
            if norm_type(t) == "REAL" and len(xs) > 1:
                # DuckDB rounds a FLOAT in double precision and stores the result as a FLOAT:
                # round(r, 1) of 0.1 is 0.10000000149011612, not the double 0.1
                q = self.call("round", [(x[0], "DOUBLE"), xs[1]], "DOUBLE")
                return Call("to_single", (q[0],), "REAL"), "REAL"
            return self.call("round", xs, t)
        if name in ("sqrt", "power", "ln", "exp"):
            if name in ("ln", "exp"):
                raise b.err("unsupported", f"function {name} is not supported", e)
            xs = [self.num_arg(a) for a in args]
            return self.call(name, [(_cast(s, t, "DOUBLE"), "DOUBLE") for s, t in xs], "DOUBLE")
        if name == "mod":
            return self.arith("mod", self.bind(args[0]), self.bind(args[1]), e,
                              (_int_literal(args[0]), _int_literal(args[1])))
        if name in ("greatest", "least"):
            return self.unified_call(name, [self.bind(a) for a in args], e, args)
        if name == "coalesce":
            return self.unified_call("coalesce", [self.bind(a) for a in args], e, args)
        if isinstance(e, exp.Extract) or name == "extract" or name in _PART_FUNCTIONS:
            # extract(part FROM x), date_part('part', x), and a part's own function: year(x)
            if isinstance(e, exp.Extract):
                part, target = e.this.name, e.expression
            elif name == "extract":
                part, target = self.constant_part(e, args[0]), args[1]
            else:
                part, target = name, args[0]
            canonical = DATE_PARTS.get(part.translate(FOLD))
            if canonical is None:
                raise b.err("type_error", f'extract specifier "{part}" not recognized', e)
            x = self.bind(target)
            if family(x[1]) not in ("date", "timestamp", "null"):
                raise b.err("type_error", f"cannot extract {part} from {x[1]}", e)
            return self.call("extract", [(Lit(canonical, "VARCHAR"), "VARCHAR"), x],
                             "DOUBLE" if canonical in DOUBLE_PARTS else "BIGINT")
        if name == "date_trunc":
            if isinstance(e, exp.Anonymous):
                unit, target = self.constant_part(e, args[0]), args[1]
            else:
                unit, target = self.constant_part(e, e.args.get("unit")), e.this
            trunc = TRUNC_PARTS.get(DATE_PARTS.get(unit.translate(FOLD), ""))
            if trunc is None:
                raise b.err("type_error", f'date_trunc specifier "{unit}" not recognized', e)
            x = self.bind(target)
            if family(x[1]) not in ("date", "timestamp", "null"):
                raise b.err("type_error", f"date_trunc needs a DATE or TIMESTAMP, got {x[1]}", e)
            return self.call("date_trunc", [(Lit(trunc, "VARCHAR"), "VARCHAR"), x],
                             "TIMESTAMP")
        if name == "date_diff":
            if isinstance(e, exp.DateDiff):
                unit = self.constant_part(e, e.args.get("unit")) if e.args.get("unit") else "day"
                start, end = e.expression, e.this
            else:
                unit, start, end = self.constant_part(e, args[0]), args[1], args[2]
            if unit.translate(FOLD) not in DIFF_PARTS:
                raise b.err("unsupported", f"date_diff does not know the date part '{unit}'", e)
            xs = [self.bind(start), self.bind(end)]
            # a text takes the other argument's type (DuckDB's overloads: DATE, TIMESTAMP)
            xs = [self.literal_to(v, [w[1] for w in xs] + ["DATE"], e) for v in xs]
            for v in xs:
                if family(v[1]) not in ("date", "timestamp", "null"):
                    raise b.err("type_error", f"date_diff needs dates, got {v[1]}", e)
            return self.call("date_diff", [(Lit(unit.translate(FOLD), "VARCHAR"), "VARCHAR"), *xs],
                             "BIGINT")
        got = self.string_function(e, name)
        if got is not None:
            return got
        what, at = b.typed_name(e)
        raise b.err("unsupported", f"function or construct {what} is not supported", at)

    def constant_part(self, e: exp.Expression, part: exp.Expression | None) -> str:
        """The date part of `e` (its node `part`), which must be a string constant: a literal,
        in parentheses or cast to text too. A column or any other expression is refused
        (`date_trunc(m, x)` of a column m: DuckDB reads its value, per row), as is a bare
        word (DuckDB: no such column). sqlglot makes a word of both `'month'` and `month` in
        `date_trunc` and `datediff`: the text says which it was."""
        b = self.b
        node = part
        while isinstance(node, exp.Paren) or isinstance(node, exp.Cast) and family(
                norm_type(node.args["to"].sql("duckdb"))) == "str":
            node = node.this
        if isinstance(node, exp.Literal) and node.is_string or isinstance(
                node, (exp.RawString, exp.ByteString)):
            return str(node.this)
        typed, at = b.typed_name(e)
        if isinstance(node, exp.Var) and part is node:
            start = at.meta.get("start")
            if not isinstance(start, int):
                return node.name
            # the first thing after the call's "(", past spaces and comments
            m = _PART_START.match(b.sql, start + len(typed))
            if m is not None and b.sql[m.end():m.end() + 1] in ("'", "$"):
                return node.name
            where: exp.Expression = _At(m.end()) if m is not None else e
        else:
            where = part if part is not None else e
        raise b.err("unsupported", f"the date part of {typed} must be a string constant, as in "
                    f"{typed}('month', ...)", where)

    def string_function(self, e: exp.Expression, name: str) -> BB | None:
        """DuckDB's further string functions (planner.scalar.STRING_FUNCS), or None."""
        by_class = {exp.Repeat: "repeat", exp.Ascii: "ascii", exp.Unicode: "unicode",
                    exp.Chr: "chr", exp.SplitPart: "split_part", exp.ConcatWs: "concat_ws",
                    exp.EndsWith: "ends_with", exp.MD5: "md5", exp.Translate: "translate",
                    exp.BitLength: "bit_length"}
        if isinstance(e, exp.Pad):
            fn = "lpad" if e.args.get("is_left") else "rpad"
        elif type(e) in by_class:
            fn = by_class[type(e)]
        else:
            fn = {"ord": "unicode", "suffix": "ends_with", "prefix": "starts_with",
                  "strip_accents": "strip_accents", "lcase": "lower", "strlen": "strlen",
                  "ucase": "upper"}.get(name, "")
        if not fn:
            return None
        if isinstance(e, exp.Anonymous):
            xs = list(e.expressions)
        else:
            xs = []
            for v in e.args.values():
                xs += [x for x in (v if isinstance(v, list) else [v])
                       if isinstance(x, exp.Expression)]
        sig = STRING_SIGNATURES[fn]
        arity = len(sig[0])
        if fn == "concat_ws":
            if len(xs) < 2:
                raise self.b.err("type_error", "concat_ws needs a separator and a value", e)
            return self.call(fn, [self.str_arg(xs[0])] + [self.bind(x) for x in xs[1:]],
                             "VARCHAR")
        if len(xs) != arity:
            raise self.b.err("type_error", f"{fn} takes {arity} argument"
                             f"{'s' if arity != 1 else ''}, got {len(xs)}", e)
        args = [self.str_arg(x) if k == "s" else self.int_arg(x) for k, x in zip(sig[0], xs,
                                                                                    strict=True)]
        for (_, t), k, x in zip(args, sig[0], xs, strict=True):
            if k == "i" and fn in _INTEGER_ONLY and t in _WIDER_THAN_INTEGER:
                # DuckDB's lpad, rpad and chr take an INTEGER, and no wider type casts to
                # one implicitly: its binder refuses them (repeat and split_part take BIGINT)
                raise self.b.err("type_error", f"{fn} takes an INTEGER, got {t}: cast it", x)
        return self.call(fn, args, sig[1], _sql(e))


_INTEGER_ONLY = ("lpad", "rpad", "chr")
_WIDER_THAN_INTEGER = ("BIGINT", "HUGEINT", "UINTEGER", "UBIGINT", "UHUGEINT")


# ---------------------------------------------------------------- helpers


def _sql(node: exp.Expression) -> str:
    """The expression's SQL text, for EvaluationError messages."""
    try:
        return node.sql(dialect="duckdb")
    except Exception:  # noqa: BLE001 - a label is best effort
        return node.key.upper()


def _order_items(order: exp.Order | None, outputs: int) -> list[exp.Ordered]:
    """The items of an ORDER BY, DuckDB's `ORDER BY ALL` (its only item: the parser refuses
    more) made the select list's positions 1..outputs, each with its direction and NULLs."""
    items = list(order.expressions) if order is not None else []
    if len(items) == 1 and isinstance(items[0].this, exp.Var) and \
            items[0].this.name.upper() == "ALL":
        o = items[0]
        return [exp.Ordered(this=exp.Literal.number(i + 1), desc=o.args.get("desc"),
                            nulls_first=o.args.get("nulls_first")) for i in range(outputs)]
    return items


def _position(node: exp.Expression) -> bool:
    """A select-list position: a number literal of digits only (`2`, not `2.0` or `1e1`)."""
    return isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()


def _int_literal(node: exp.Expression | None) -> bool:
    """An integer literal in the SQL text (possibly negated or parenthesised)."""
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip(
        "-").isdigit()


def _fit_int_literals(vals: list[BB], lits: list[bool] | None = None) -> list[BB]:
    """DuckDB's INTEGER_LITERAL takes the type of the integer values it is unified with when
    it fits (coalesce(smallint_col, 1) is a SMALLINT, coalesce(uint_col, 3000000000) a
    UINTEGER). `lits` says which values are integer literals in the text; without it, an
    INTEGER constant is taken for one."""
    def literal(i: int, s: Scalar, t: str) -> bool:
        return isinstance(s, Lit) and isinstance(s.value, int) and family(t) == "int" and (
            lits[i] if lits is not None else norm_type(t) == "INTEGER")

    others = [t for i, (s, t) in enumerate(vals) if family(t) == "int" and not literal(i, s, t)]
    if not others or len(others) == len([t for _, t in vals if family(t) == "int"]):
        return vals
    target = unify_ints(others)
    return [(Lit(s.value, fitting_int_type(s.value, target)),
             fitting_int_type(s.value, target)) if literal(i, s, t) else (s, t)
            for i, (s, t) in enumerate(vals)]


def _scale(t: str) -> int:
    from planner.scalar import decimal_scale
    return decimal_scale(t) if family(t) == "decimal" else 0


# DuckDB's functions of one date part: year(x) is extract(year FROM x)
_PART_FUNCTIONS = frozenset({
    "year", "month", "day", "dayofmonth", "quarter", "dayofweek", "weekday", "isodow",
    "dayofyear", "week", "weekofyear", "yearweek", "isoyear", "decade", "century", "millennium",
    "era", "epoch", "julian", "hour", "minute", "second", "millisecond", "microsecond"})

# the calls that print their arguments as text
_TEXT_OF_ARGS = frozenset({"concat", "dpipe", "concat_ws"})


def _printed_text(s: Scalar, t: str) -> BB:
    """A REAL `s` as DuckDB prints it (`scalar.real_to_str`: 0.1, where the double it is held
    in prints 0.10000000149011612), and a DECIMAL(p,p) (`scalar.fraction_to_str`: '.25',
    without the zero the value's own text has); any other `s` as it is."""
    if norm_type(t) == "REAL":
        text, func = real_to_str, "real_text"
    elif _fraction(t):
        text, func = fraction_to_str, "fraction_text"
    else:
        return s, t
    if isinstance(s, Lit):
        return Lit(None if s.value is None else text(s.value), "VARCHAR"), "VARCHAR"
    return Call(func, (s,), "VARCHAR"), "VARCHAR"


def _fraction(t: str) -> bool:
    """Whether `t` is a DECIMAL of no integer digits, DECIMAL(p,p)."""
    if family(t) != "decimal":
        return False
    p, sc = decimal_ps(t)
    return p == sc


def _cast(s: Scalar, t: str, u: str, exact: bool = True) -> Scalar:
    """Coerce s of type t to the common type u where Python values would differ. A value that
    becomes a DECIMAL is rescaled to u's scale (coalesce(d, 0) over DECIMAL(10,2) is 0.00, as
    DuckDB returns it); ``exact=False`` (comparisons) skips that, as Python compares ints and
    Decimals of any scale exactly."""
    ft, fu = family(t), family(u)
    if ft == "null" or (ft == fu and fu != "decimal"):
        return s
    if fu == "decimal":
        if not exact and ft in ("int", "decimal"):
            return s
        if ft == "decimal" and decimal_ps(t)[1] == decimal_ps(u)[1]:
            return s
    if fu == "float" or (fu == "timestamp" and ft == "date") or fu == "decimal":
        if isinstance(s, Lit):
            return Lit(cast_value(s.value, u), u)
        return Call("cast", (s,), u)
    return s


def _narrow(s: Scalar, t: str, u: str) -> Scalar:
    """`s` of type `t` as type `u`: as `_cast` where `u` is a common type of both (a union's,
    or that of a subquery compared by IN or ANY, which `t` widens to), else by a SQL cast
    (with its rounding and range errors) where `u` is narrower (a recursive CTE's anchor
    type)."""
    if family(t) == "null" or norm_type(t) == norm_type(u) or unify([t, u]) == norm_type(u):
        return _cast(s, t, u)
    if family(u) == "str" and (norm_type(t) == "REAL" or _fraction(t)):
        return _printed_text(s, t)[0]
    return Call("cast", (s,), u)


def _narrow_rel(rel: Rel, types: list[str], target: list[str]) -> Rel:
    exprs = [_narrow(Col(i), t, u) for i, (t, u) in enumerate(zip(types, target, strict=True))]
    if all(isinstance(e, Col) for e in exprs):
        return rel
    return _project_exprs(rel, exprs)


def _project_exprs(rel: Rel, exprs: list[Scalar]) -> Rel:
    """Mfp computing exactly ``exprs``; plain column references become projections."""
    n = rel.arity
    maps: list[Scalar] = []
    proj: list[int] = []
    for e in exprs:
        if isinstance(e, Col):
            proj.append(e.index)
        else:
            maps.append(e)
            proj.append(n + len(maps) - 1)
    if not maps and proj == list(range(n)):
        return rel
    return Mfp(rel, tuple(maps), (), tuple(proj))


def _over_outputs(e: Scalar, outs: list[Scalar]) -> Scalar | None:
    """`e`, an expression over a query block's input, rewritten over its output columns
    `outs` (each part of it equal to output i read as column i), or None if it reads an
    input column no output gives."""
    for i, o in enumerate(outs):
        if o == e:
            return Col(i)
    if isinstance(e, Col):
        return None
    if isinstance(e, Call):
        args = [_over_outputs(a, outs) for a in e.args]
        if any(a is None for a in args):
            return None
        return Call(e.func, tuple(args), e.type, e.label)  # type: ignore[arg-type]
    return e


def _distinct(r: Rel) -> Rel:
    return Reduce(r, tuple(range(r.arity)), ())


def _pad(r: Rel, k: int, after: bool) -> Rel:
    n = r.arity
    nulls = tuple(null() for _ in range(k))
    if after:
        return Mfp(r, nulls, (), tuple(range(n + k)))
    return Mfp(r, nulls, (), tuple(range(n, n + k)) + tuple(range(n)))


def _unmatched(full: Rel, matched_part: Rel) -> Rel:
    n = full.arity
    m = _distinct(matched_part)
    semi = Mfp(Join(full, m, tuple((i, i) for i in range(n))), (), (), tuple(range(n)))
    return Union((full, Negate(semi)))


def _equi_split(preds: tuple[Scalar, ...], nl: int) -> tuple[
        tuple[tuple[int, int], ...], tuple[Scalar, ...], tuple[Scalar, ...]] | None:
    """An ON condition over (L, R) (L's `nl` columns first) as equalities `L.a = R.b` of plain
    columns, conjuncts reading L alone and conjuncts reading R alone (R's columns renumbered
    from 0), or None when it has none of the first or a conjunct of another form (reading
    both sides otherwise, or no column)."""
    eqs: list[tuple[int, int]] = []
    others: list[Scalar] = []
    for p in preds:
        for c in conjuncts(p):
            if isinstance(c, Call) and c.func == "eq" and len(c.args) == 2 and all(
                    isinstance(a, Col) for a in c.args):
                a, b = c.args[0].index, c.args[1].index  # type: ignore[union-attr]
                if a >= nl > b:
                    a, b = b, a
                if a < nl <= b:
                    eqs.append((a, b - nl))
                    continue
            others.append(c)
    lp, rp, both = split_by_side(others, nl)
    return (tuple(eqs), tuple(lp), tuple(rp)) if eqs and not both else None


def _unmatched_by_key(full: Rel, own: tuple[Scalar, ...], keys: tuple[int, ...], other: Rel,
                      theirs: tuple[Scalar, ...], their_keys: tuple[int, ...]) -> Rel:
    """The rows of `full` that match no row of `other` under an ON condition of `_equi_split`'s
    form: `full` minus its rows that pass `own` and whose key columns `keys` are among the
    distinct `their_keys` of `other`'s rows passing `theirs`. SQL's equality never matches
    NULL, while a join's keys do, so NULL keys are filtered out on both sides."""
    n = full.arity

    def not_null(ks: tuple[int, ...]) -> tuple[Scalar, ...]:
        return tuple(Call("not", (Call("is_null", (Col(k),), "BOOLEAN"),), "BOOLEAN")
                     for k in ks)

    found = _distinct(Mfp(other, (), theirs + not_null(their_keys), their_keys))
    semi = Mfp(Join(Mfp(full, (), own + not_null(keys), tuple(range(n))), found,
                    tuple((k, i) for i, k in enumerate(keys))), (), (), tuple(range(n)))
    return Union((full, Negate(semi)))


def _lookup_exists(b: Binder, og: Rel, e: Rel, keys: tuple[tuple[int, int], ...]) -> Rel:
    """og + one BOOLEAN column: whether og's key columns appear in the distinct keys e."""
    n = og.arity

    def body(mg: Get) -> Rel:
        yes = Mfp(mg, (TRUE,), (), tuple(range(n + 1)))
        no = Mfp(Union((og, Negate(mg))), (FALSE,), (), tuple(range(n + 1)))
        return Union((yes, no))

    return b.let(Mfp(Join(og, e, keys), (), (), tuple(range(n))), body)


def _to_bool(b: Binder, s: Scalar, t: str, node: exp.Expression) -> Scalar:
    f = family(t)
    if f in ("bool", "null"):
        return s
    if f in ("int",):
        return Call("cast", (s,), "BOOLEAN")
    raise b.err("type_error", f"expected a BOOLEAN condition, got {t}", node)


def _table_function(t: exp.Table) -> str | None:
    """The supported table function a FROM item calls, or None."""
    node = t.this
    if isinstance(node, exp.GenerateSeries):
        return "generate_series"
    if isinstance(node, exp.Anonymous) and str(node.this).translate(FOLD) in TABLE_FUNCTIONS:
        return str(node.this).translate(FOLD)
    return None


# An operator with its operands swapped: ``a op b`` is ``b _FLIP[op] a``.
_FLIP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}


def _date_bound(func: str, x: BB, y: BB) -> tuple[str, BB, BB] | None:
    """``d op t``, a DATE value ``d`` compared with a TIMESTAMP literal ``t`` (either side; the
    form of TPC-H's ``l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY``), as a comparison of
    ``d`` with a DATE literal, or None where there is none. DuckDB compares ``d``'s midnight
    with ``t``; with ``day`` the date of ``t``, midnight(d) <= t exactly when d <= day, and
    midnight(d) > t when d > day; < and >= are those of ``day`` too when ``t`` is not a
    midnight (midnight(d) < t when d <= day, >= t when d > day), = and <> only when it is.
    NULL compares to NULL either way, and a DATE's midnight never fails to cast, so the
    comparisons agree on every row. The DATE form needs no cast per row, and hydration can
    leave the rows it rejects in the store (`ir.scan_filters` takes a column compared with a
    literal)."""
    if func not in ("eq", "ne", "lt", "le", "gt", "ge"):
        return None
    for d, t, op in ((x, y, func), (y, x, _FLIP.get(func, func))):
        lit = t[0]
        if (family(d[1]) != "date" or norm_type(t[1]) != "TIMESTAMP" or not isinstance(lit, Lit)
                or not isinstance(lit.value, datetime.datetime) or lit.value.tzinfo is not None):
            continue
        day = lit.value.date()
        if lit.value != datetime.datetime(day.year, day.month, day.day):
            if op in ("eq", "ne"):
                return None
            op = {"lt": "le", "ge": "gt"}.get(op, op)
        return op, d, (Lit(day, "DATE"), "DATE")
    return None


def _hits(dg: Get, qg: Get, flipped: str) -> Rel:
    """The distinct lhs values (dg, one column) with a row of the one-column, uncorrelated qg
    that compares TRUE (``q-value flipped lhs``): for ``=``, the join planner's equi-join."""
    hit = Call(flipped, (Col(1), Col(0)), "BOOLEAN")
    return _distinct(Mfp(Join(dg, qg, ()), (), (hit,), (0,)))


# INTERVAL units as (months, days, microseconds) per unit, DuckDB's spellings.
_INTERVAL_UNITS = {
    "year": (12, 0, 0), "quarter": (3, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0),
    "day": (0, 1, 0), "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "millisecond": (0, 0, 1_000), "microsecond": (0, 0, 1),
}


def _interval(b: Binder, node: exp.Interval) -> Interval:
    """A constant ``INTERVAL n unit`` (n an integer, as a number or a string)."""
    unit = str(node.args["unit"].name if node.args.get("unit") is not None else "").translate(FOLD)
    unit = {"years": "year", "quarters": "quarter", "months": "month", "weeks": "week",
            "days": "day", "hours": "hour", "minutes": "minute", "seconds": "second",
            "milliseconds": "millisecond", "microseconds": "microsecond"}.get(unit, unit)
    value = node.this
    sign = 1
    while isinstance(value, (exp.Paren, exp.Neg)):
        if isinstance(value, exp.Neg):
            sign = -sign
        value = value.this
    text = value.this if isinstance(value, exp.Literal) else None
    if unit not in _INTERVAL_UNITS or text is None or not re.fullmatch(r"[+-]?\d+", str(text)):
        raise b.err("unsupported", f"{node.sql()}: only a constant whole number of "
                    "years, quarters, months, weeks, days, hours, minutes, seconds, "
                    "milliseconds or microseconds is supported", node)
    n = sign * int(text)
    mo, d, us = _INTERVAL_UNITS[unit]
    return Interval(n * mo, n * d, n * us)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The operands of a top-level AND chain (through parentheses), else [e]."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _has_subquery(e: exp.Expression) -> bool:
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) or (
        isinstance(n, exp.In) and n.args.get("query") is not None) for n in e.walk())


def _flatten(e: exp.Expression, cls: type) -> list[exp.Expression]:
    if isinstance(e, cls):
        return _flatten(e.this, cls) + _flatten(e.expression, cls)
    return [e]


def _find_aggs(e: exp.Expression | None) -> list[exp.Expression]:
    """Aggregate calls in e, not looking into subqueries (they aggregate on their own)."""
    out: list[exp.Expression] = []
    if e is None:
        return out

    def visit(n: exp.Expression) -> None:
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists, exp.Union)):
            return
        if isinstance(n, AGG_CLASSES):
            out.append(n)
            return
        for child in n.iter_expressions():
            visit(child)

    visit(e)
    return out


def _reject_aggs(b: Binder, e: exp.Expression | None, where: str, nested: bool = False) -> None:
    found = [a for a in _find_aggs(e) if id(a) not in b.outer_aggs]
    if found:
        what = "nested aggregates are" if nested else f"aggregates are not allowed in {where}"
        raise b.err("grouping_error", what if not nested else f"{what} not allowed", found[0])


class _At(exp.Expression):
    """A position in the source text for an error (a word sqlglot kept no node for)."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.meta["start"] = start


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _typed_name(sql: str, start: int) -> tuple[str, int] | None:
    """The function name or keyword the user typed at ``start``, or just before it when
    ``start`` is the first argument's position (``string_agg(b`` starts at ``b``): the word
    followed by ``(``, with ``GROUPING SETS`` as one name."""
    m = _WORD.match(sql, start)
    if m and (re.match(r"\s*\(", sql[m.end():]) or not sql[:start].rstrip().endswith("(")):
        word, at = m.group(0), start
    else:
        i = start
        while i > 0 and (sql[i - 1].isspace() or sql[i - 1] == "("):
            i -= 1
        j = i
        while j > 0 and (sql[j - 1].isalnum() or sql[j - 1] == "_"):
            j -= 1
        if j == i:
            return None
        word, at = sql[j:i], j
    if word.upper() == "SETS":
        k = at
        while k > 0 and sql[k - 1].isspace():
            k -= 1
        prev = re.search(r"([A-Za-z_]+)$", sql[:k])
        if prev and prev.group(1).upper() == "GROUPING":
            return sql[prev.start(1):at + len(word)], prev.start(1)
    if word.upper() == "GROUPING":
        m2 = re.match(r"GROUPING\s+SETS", sql[at:], re.IGNORECASE)
        if m2:
            return m2.group(0), at
    return word, at


# Parentheses around these change nothing (sqlglot prints an operator's operands as parsed,
# so only parentheses around a term that is whole by itself can go)
_WHOLE = (exp.Subquery, exp.Exists, exp.In, exp.Column, exp.Literal, exp.Paren)


# Constructs written as an operator after their first operand, by the name to refuse them with
_OPERATORS: dict[type[exp.Expression], str] = {
    exp.Glob: "GLOB", exp.SimilarTo: "SIMILAR TO", exp.Collate: "COLLATE",
    exp.RegexpLike: "regular expression matching (~, REGEXP)", exp.Bracket: "[] (an index or slice)",
    exp.BitwiseAnd: "&", exp.BitwiseOr: "|", exp.BitwiseXor: "xor", exp.BitwiseNot: "~",
    exp.BitwiseLeftShift: "<<", exp.BitwiseRightShift: ">>", exp.ArrayContainsAll: "@>",
    exp.ArrayContainedBy: "<@",
}


def _union_chain(node: exp.Expression, distinct: bool) -> list[exp.Expression]:
    """The branches of a chain of UNIONs of one kind (all ALL, or all DISTINCT) from `node`,
    left to right: `a UNION ALL b UNION ALL c` is Union(Union(a, b), c); a parenthesised
    chain (a Subquery) or a UNION of the other kind is one branch."""
    out = []
    for side in (node.this, node.expression):
        if isinstance(side, exp.Union) and (side.args.get("distinct", True) is not False) == \
                distinct and not side.args.get("by_name") and not any(
                side.args.get(k) for k in ("order", "limit", "offset")):
            out += _union_chain(side, distinct)
        else:
            out.append(side)
    return out


def _equality_operands(x: BB, y: BB) -> tuple[BB, BB]:
    """The operands of an (in)equality of types of no common one, as DuckDB 2 casts them: a
    VARCHAR to the other's number, date, timestamp or BOOLEAN type (`s = i` is
    `CAST(s AS INTEGER) = i`, an error where s holds no such value), a BOOLEAN to the other's
    number type (`flag = 2` is false); any other pair as it is (refused by the caller, as
    DuckDB refuses orderings of them)."""
    fx, fy = family(x[1]), family(y[1])
    to_text = ("int", "decimal", "float", "date", "timestamp", "bool")
    to_bool = ("int", "decimal", "float")
    if (fx == "str" and fy in to_text) or (fx == "bool" and fy in to_bool):
        return (Call("cast", (x[0],), y[1]), y[1]), y
    if (fy == "str" and fx in to_text) or (fy == "bool" and fx in to_bool):
        return x, (Call("cast", (y[0],), x[1]), x[1])
    return x, y


# a call's "(" and what may stand before its first argument: spaces and comments
_PART_START = re.compile(r"\s*\((?:\s|/\*.*?\*/|--[^\n]*\n)*", re.DOTALL)


def _bare_count(v: exp.Expression) -> exp.Expression:
    """A LIMIT's or OFFSET's value without parentheses, and a cast NULL as NULL (`LIMIT
    (NULL)`, `LIMIT CAST(NULL AS INT)`: no limit, as in DuckDB)."""
    while isinstance(v, exp.Paren):
        v = v.this
    if isinstance(v, exp.Cast) and isinstance(_bare_count(v.this), exp.Null):
        return exp.Null()
    return v


def _text(e: exp.Expression) -> str:
    """An expression's text without redundant parentheses: `((SELECT ...))`, `(x IN (SELECT
    ...))` and `x IN (SELECT ...)` are one group expression, as in DuckDB."""
    def bare(n: exp.Expression) -> exp.Expression:
        # sqlglot reads `((SELECT ...))` as a subquery of a subquery
        while (isinstance(n, exp.Paren) and isinstance(n.this, _WHOLE)) or (
                isinstance(n, exp.Subquery) and isinstance(n.this, (exp.Subquery, exp.Paren))
                and not n.alias):
            n = n.this
        return n

    while isinstance(e, exp.Paren):
        e = e.this
    return e.transform(bare).sql("duckdb")


def _holds_subquery(e: exp.Expression) -> bool:
    return e.find(exp.Subquery, exp.Exists) is not None or any(
        x.args.get("query") is not None for x in e.find_all(exp.In))


def _comma(j: exp.Join) -> bool:
    """Whether a join of sqlglot's is a comma in FROM (`FROM a, b`): a join with nothing but
    its table."""
    return not any(v for k, v in j.args.items() if k != "this")


def _lateral_table_function(t: exp.Expression) -> exp.Expression | None:
    """``LATERAL unnest(...)`` / ``LATERAL generate_series(...)``: the table function as a
    plain FROM item (table functions in FROM are lateral anyway), or None."""
    if not isinstance(t, exp.Lateral):
        return None
    fn = t.this
    alias = t.args.get("alias")
    if isinstance(fn, exp.Unnest):
        out = exp.Unnest(expressions=list(fn.expressions), alias=alias,
                         offset=fn.args.get("offset") or t.args.get("ordinality"))
    elif isinstance(fn, exp.GenerateSeries) or (
            isinstance(fn, exp.Anonymous) and str(fn.this).translate(FOLD) in TABLE_FUNCTIONS):
        if t.args.get("ordinality"):
            return None  # refused by _lateral, naming LATERAL
        out = exp.Table(this=fn, alias=alias)
    else:
        return None
    out.meta.update(t.meta)
    return out


def _lateral(t: exp.Expression) -> exp.Expression | None:
    """The subquery of a LATERAL FROM item, or None when t is not one."""
    if isinstance(t, exp.Lateral):
        if not isinstance(t.this, exp.Subquery):
            raise PlanError("unsupported", "LATERAL takes a subquery here (LATERAL table "
                            "functions are not supported)")
        return t.this
    if isinstance(t, exp.Subquery) and t.args.get("lateral"):
        return t
    return None


def _join_group(t: exp.Expression) -> exp.Expression | None:
    """The FROM item carrying the joins of a parenthesised join (``(a JOIN b ON ...)``, which
    sqlglot parses as a subquery over a table with joins), or None for a real subquery."""
    while isinstance(t, exp.Subquery) and not t.args.get("alias") and not t.args.get("joins"):
        t = t.this
    if isinstance(t, (exp.Table, exp.Subquery)) and t.args.get("joins"):
        return t
    return None


def _ancestors(node: exp.Expression, stop: exp.Expression) -> list[exp.Expression]:
    """The nodes strictly between node and stop (stop excluded), innermost first."""
    out = []
    p = node.parent
    while p is not None and p is not stop:
        out.append(p)
        p = p.parent
    return out


def _first_pos(node: exp.Expression) -> int | None:
    best = None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or (n.meta if hasattr(n, "meta") else None)
        if meta and "start" in meta:
            s = meta["start"]
            if best is None or s < best:
                best = s
    return best


def _anchor(q: exp.Expression, group: set[str]) -> exp.Expression:
    """The anchor of a recursive CTE's query `q`: the left side of the set operation whose
    right side is the first to read a CTE of `group` (`a UNION ALL b UNION ALL <recursive>`:
    `a UNION ALL b`, typed as a whole, as DuckDB types it), or the leftmost branch."""
    node = q
    while True:
        while isinstance(node, exp.Subquery) and A(node, "with") is None:
            node = node.this
        if not isinstance(node, (exp.Union, exp.Intersect, exp.Except)) or A(node, "with") is not None:
            return node
        if not _referenced_names(node.this, group):
            return node.this
        node = node.this


def _referenced_names(q: exp.Expression, names: set[str]) -> set[str]:
    return {t.name.translate(FOLD) for t in q.find_all(exp.Table) if t.name.translate(FOLD) in names}


def _sccs(names: list[str], refs: list[set[str]]) -> list[list[int]]:
    """Strongly connected components of the CTE reference graph, dependencies first."""
    idx = {n: i for i, n in enumerate(names)}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on: set[int] = set()
    out: list[list[int]] = []
    counter = [0]

    def strong(v: int) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(idx[r] for r in refs[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in range(len(names)):
        if v not in index:
            strong(v)
    return out
