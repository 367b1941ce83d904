"""Plan rewrites: small pure functions ``Rel -> Rel`` applied in the order of ``RULES``.

Invariant: every rule preserves the multiset each plan denotes (checked by the oracle tests,
which run the optimised plan against DuckDB and against the unoptimised plan). Rules only ever
move row-wise predicates, rename columns or add physical hints; none changes multiplicities.
Rules never look through a ``Get`` of a local binding: a Let value is shared by its readers, so
a predicate of one reader must not leak into it.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.cardinality import Estimator
from planner.errors import EvaluationError
from planner.ir import (
    ArrangeBy,
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
    Reduce,
    Rel,
    Scalar,
    Threshold,
    TopK,
    Union,
    children,
    conjuncts,
    disjuncts,
    map_cols,
    mfp_reads,
    null,
    scalar_cols,
    split_by_side,
    transform_up,
    walk,
    with_children,
)
from planner.joins import order_joins, plan_delta_joins


def _identity(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def _inline(e: Scalar, n: int, maps: tuple[Scalar, ...]) -> Scalar:
    """Express e (over input + map columns) over the input columns alone."""
    def f(i: int) -> Scalar | int:
        return i if i < n else _inline(maps[i - n], n, maps)
    return map_cols(e, f)


def _filter(r: Rel, preds: list[Scalar]) -> Rel:
    if not preds:
        return r
    return Mfp(r, (), tuple(preds), _identity(r.arity))


# ---------------------------------------------------------------- fold_constants


def fold_constants(r: Rel) -> Rel:
    """Drop filters that are literally TRUE; a literally FALSE/NULL filter empties the input."""
    def f(n: Rel) -> Rel:
        if isinstance(n, Mfp) and n.filter:
            keep = []
            for p in n.filter:
                if isinstance(p, Lit):
                    if p.value is True:
                        continue
                    return Constant((), n.arity)
                keep.append(p)
            if len(keep) != len(n.filter):
                n = Mfp(n.input, n.map, tuple(keep), n.project)
        if isinstance(n, Mfp) and isinstance(n.input, Constant) and len(n.input.rows) <= 64:
            # evaluate map/filter/project over literal rows now
            from planner.lower import compile_mfp
            f = compile_mfp(n)
            try:
                return Constant(tuple(out for row in n.input.rows for out in f(row)), n.arity)
            except EvaluationError:
                pass  # it raises when evaluated (DuckDB: when run), not at view creation

        if isinstance(n, Mfp) and not n.map and not n.filter and \
                n.project == _identity(n.input.arity):
            return n.input
        if isinstance(n, Union):
            kids = tuple(k for k in n.inputs if not (isinstance(k, Constant) and not k.rows))
            if not kids:
                return n.inputs[0]
            if len(kids) == 1:
                return kids[0]
            if len(kids) != len(n.inputs):
                return Union(kids)
        return n
    return transform_up(r, f)


# ---------------------------------------------------------------- fuse_mfps


def _fuse(outer: Mfp) -> Rel:
    inner = outer.input
    assert isinstance(inner, Mfp)
    n = inner.input.arity
    base = n + len(inner.map)
    p1 = inner.project

    def remap(i: int) -> int:
        return p1[i] if i < len(p1) else base + (i - len(p1))

    maps = inner.map + tuple(map_cols(e, remap) for e in outer.map)
    filt = inner.filter + tuple(map_cols(e, remap) for e in outer.filter)
    proj = tuple(remap(i) for i in outer.project)
    return Mfp(inner.input, maps, filt, proj)


def fuse_mfps(r: Rel) -> Rel:
    """Mfp(Mfp(x)) becomes one Mfp; an identity Mfp disappears."""
    def f(n: Rel) -> Rel:
        while isinstance(n, Mfp) and isinstance(n.input, Mfp):
            n = _fuse(n)
        if isinstance(n, Mfp):
            used = set(n.project)
            for e in (*n.map, *n.filter):
                used |= scalar_cols(e)
            base = n.input.arity
            # drop map columns nobody reads (they come from fused projections)
            dead = [k for k in range(len(n.map)) if base + k not in used and not any(
                base + k in scalar_cols(m) for m in n.map)]
            if dead:
                keep = [k for k in range(len(n.map)) if k not in dead]
                newpos = {base + k: base + j for j, k in enumerate(keep)}

                def re(i: int) -> int:
                    return newpos.get(i, i)
                n = Mfp(n.input, tuple(map_cols(n.map[k], re) for k in keep),
                        tuple(map_cols(e, re) for e in n.filter), tuple(re(i) for i in n.project))
            if not n.map and not n.filter and n.project == _identity(base):
                return n.input
        return n
    return transform_up(r, f)


# ---------------------------------------------------------------- pushdown_predicates


def _push(r: Rel, preds: list[Scalar]) -> Rel:
    """``Filter(preds, r)`` with each predicate moved as far down as it can go."""
    if not preds:
        return r
    if isinstance(r, Mfp):
        n = r.input.arity
        down = [_inline(map_cols(p, lambda i: r.project[i]), n, r.map) for p in preds]
        return Mfp(_push(r.input, down), r.map, r.filter, r.project) if not r.filter else \
            Mfp(_push(r.input, down + [_inline(f, n, r.map) for f in r.filter]), r.map, (),
                r.project)
    if isinstance(r, Join):
        lp, rp, stay = split_by_side(preds, r.left.arity)
        return _filter(Join(_push(r.left, lp), _push(r.right, rp), r.keys), stay)
    if isinstance(r, Union):
        return Union(tuple(_push(k, preds) for k in r.inputs))
    if isinstance(r, Negate):
        return Negate(_push(r.input, preds))
    if isinstance(r, Threshold):
        return Threshold(_push(r.input, preds))
    if isinstance(r, (Reduce, TopK)):
        g = len(r.group) if isinstance(r, Reduce) else r.arity
        down, stay = [], []
        for p in preds:
            cs = scalar_cols(p)
            if isinstance(r, Reduce) and cs and all(c < g for c in cs):
                down.append(map_cols(p, lambda i: r.group[i]))
            elif isinstance(r, TopK) and cs and all(c in r.group for c in cs):
                down.append(p)
            else:
                stay.append(p)
        if down:
            r = with_children(r, [_push(r.input, down)])
        return _filter(r, stay)
    if isinstance(r, Let):
        return Let(r.id, r.value, _push(r.body, preds))
    if isinstance(r, LetRec):
        return LetRec(r.ids, r.values, _push(r.body, preds), r.limit)
    if isinstance(r, Constant):
        return _filter(r, preds)
    return _filter(r, preds)


def pushdown_predicates(r: Rel) -> Rel:
    """Move filters below joins, unions, negations, maps and group keys."""
    kids = children(r)
    if kids:
        r = with_children(r, [pushdown_predicates(k) for k in kids])
    if isinstance(r, Mfp) and r.filter and not isinstance(r.input, (Constant,)):
        n = r.input.arity
        inner = r.input
        if isinstance(inner, (Join, Union, Negate, Threshold, Reduce, TopK, Let, LetRec, Mfp)):
            preds = [_inline(p, n, r.map) for p in r.filter]
            pushed = _push(inner, preds)
            return Mfp(pushed, r.map, (), r.project)
    return r


# ---------------------------------------------------------------- derive_side_filters

# Functions whose call over columns and literals never raises: a filter derived from them
# may run on rows the original filter never sees (rows no join matches) without an error
# the query would not give.
_CANNOT_RAISE = frozenset({"and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "is_null"})


def _cannot_raise(p: Scalar) -> bool:
    if isinstance(p, (Col, Lit)):
        return True
    return isinstance(p, Call) and p.func in _CANNOT_RAISE and all(
        _cannot_raise(a) for a in p.args)


def _join_leaves(r: Rel, at: int = 0) -> list[tuple[int, int]]:
    """The column ranges `[lo, hi)` of the inputs of the join tree `r` in its output."""
    if isinstance(r, Join):
        return _join_leaves(r.left, at) + _join_leaves(r.right, at + r.left.arity)
    return [(at, at + r.arity)]


def _implied_for(p: Scalar, lo: int, hi: int) -> Scalar | None:
    """A filter over columns `[lo, hi)` alone that every row passing the disjunction `p`
    passes: the OR of each disjunct's conjuncts over those columns; None when some disjunct
    has none (then nothing is implied)."""
    parts = []
    for d in disjuncts(p):
        mine = [c for c in conjuncts(d) if (cs := scalar_cols(c)) and lo <= min(cs)
                and max(cs) < hi]
        if not mine:
            return None
        parts.append(mine[0] if len(mine) == 1 else Call("and", tuple(mine), "BOOLEAN"))
    return Call("or", tuple(parts), "BOOLEAN")


def derive_side_filters(r: Rel) -> Rel:
    """A filter over a join that is a disjunction of conjunctions (TPC-H Q7's `(n1 = 'FRANCE'
    AND n2 = 'GERMANY') OR (n1 = 'GERMANY' AND n2 = 'FRANCE')`, Q19's three brackets of part
    and lineitem conditions) gains, for each input of the join, the OR of each disjunct's
    conditions on that input alone, which `pushdown_predicates` then moves below the join;
    the disjunction stays where it was. Sound: a row passing the disjunction passes one of
    its disjuncts, so every conjunct of it, so that disjunct's part of the derived filter.
    Only for disjunctions of comparisons, IS NULL, NOT, AND and OR of columns and literals,
    which never raise (the derived filter sees rows that no join matches). Why: DuckDB and
    PostgreSQL derive the same; Q19 otherwise joins all of lineitem to part before its
    filter (1.2M rows at scale 0.2, against about 200,000). Runs once: a second run would
    derive the same filters again."""
    def f(n: Rel) -> Rel:
        if not (isinstance(n, Mfp) and isinstance(n.input, Join) and n.filter):
            return n
        m = n.input.arity
        leaves = _join_leaves(n.input)
        added: list[Scalar] = []
        for p in n.filter:
            if len(disjuncts(p)) < 2 or not _cannot_raise(p) or max(
                    scalar_cols(p), default=m) >= m:
                continue
            for lo, hi in leaves:
                q = _implied_for(p, lo, hi)
                if q is not None and q not in n.filter and q not in added:
                    added.append(q)
        if not added:
            return n
        return Mfp(n.input, n.map, n.filter + tuple(added), n.project)
    return transform_up(r, f)


# ---------------------------------------------------------------- join_keys_from_where


def _not_null(i: int) -> Scalar:
    return Call("not", (Call("is_null", (Col(i),), "BOOLEAN"),), "BOOLEAN")


def join_keys_from_where(r: Rel) -> Rel:
    """A filter ``l.a = r.b`` directly above a join becomes an equi-join key; SQL equality
    never matches NULL, so both key columns get an IS NOT NULL filter below the join."""
    def f(n: Rel) -> Rel:
        if not (isinstance(n, Mfp) and isinstance(n.input, Join) and n.filter):
            return n
        j = n.input
        nl = j.left.arity
        keys = list(j.keys)
        stay = []
        lnn, rnn = [], []
        for p in n.filter:
            if isinstance(p, Call) and p.func == "eq" and all(isinstance(a, Col) for a in p.args):
                a, b = p.args[0].index, p.args[1].index  # type: ignore[union-attr]
                if a >= nl > b:
                    a, b = b, a
                if a < nl <= b:
                    keys.append((a, b - nl))
                    lnn.append(_not_null(a))
                    rnn.append(_not_null(b - nl))
                    continue
            stay.append(p)
        if len(stay) == len(n.filter):
            return n
        nj = Join(_push(j.left, lnn), _push(j.right, rnn), tuple(keys))
        return Mfp(nj, n.map, tuple(stay), n.project)
    return transform_up(r, f)


# ---------------------------------------------------------------- prune_projections


def prune_projections(r: Rel) -> Rel:
    """Narrow join inputs to the columns read above the join (or used as keys), down a chain
    of joins: an input that is itself a join is narrowed in turn."""
    def narrowed(r: Rel, cols: list[int]) -> Rel:
        m = Mfp(r, (), (), tuple(cols))
        if isinstance(r, Mfp):
            m = _fuse(m)
        return f(m) if isinstance(m, Mfp) and isinstance(m.input, Join) else m

    def f(n: Rel) -> Rel:
        if not (isinstance(n, Mfp) and isinstance(n.input, Join)):
            return n
        j = n.input
        nl, nr = j.left.arity, j.right.arity
        used = mfp_reads(n)
        lneed = sorted({c for c in used if c < nl} | {a for a, _ in j.keys})
        rneed = sorted({c - nl for c in used if c >= nl} | {b for _, b in j.keys})
        if len(lneed) == nl and len(rneed) == nr:
            return n
        lpos = {c: i for i, c in enumerate(lneed)}
        rpos = {c: i for i, c in enumerate(rneed)}
        left = j.left if len(lneed) == nl else narrowed(j.left, lneed)
        right = j.right if len(rneed) == nr else narrowed(j.right, rneed)
        nl2 = len(lneed)
        keys = tuple((lpos[a], rpos[b]) for a, b in j.keys)
        total = nl + nr
        newn = nl2 + len(rneed)

        def re(i: int) -> int:
            if i < nl:
                return lpos[i]
            if i < total:
                return nl2 + rpos[i - nl]
            return newn + (i - total)

        return Mfp(Join(left, right, keys), tuple(map_cols(e, re) for e in n.map),
                   tuple(map_cols(e, re) for e in n.filter), tuple(re(i) for i in n.project))
    return transform_up(r, f)


# ---------------------------------------------------------------- narrow_lets


def _demand(r: Rel, need: set[int], uses: dict[str, set[int]]) -> None:
    """Add to `uses[id]` the columns of each local binding that `r` reads to produce its
    columns `need` (the others may hold anything without changing those). An operator whose
    result depends on whole rows (a DISTINCT or a reduce's groups and arguments, a threshold,
    a top-k's ranking and ties) demands every column it groups, ranks or thresholds by;
    linear operators (map/filter/project, union, negate, join) pass demand through, plus
    what their own filters, maps and keys read."""
    if isinstance(r, Get):
        if r.local:
            uses.setdefault(r.name, set()).update(need)
        return
    if isinstance(r, Constant):
        return
    if isinstance(r, Mfp):
        n = r.input.arity
        wanted = {r.project[i] for i in need}
        for f in r.filter:
            wanted |= scalar_cols(f)
        todo = [c for c in wanted if c >= n]
        while todo:  # the maps needed, and the maps and columns they read
            for c in scalar_cols(r.map[todo.pop() - n]):
                if c not in wanted:
                    wanted.add(c)
                    if c >= n:
                        todo.append(c)
        _demand(r.input, {c for c in wanted if c < n}, uses)
        return
    if isinstance(r, FlatMap):
        n = r.input.arity
        cols = {c for c in need if c < n}
        for a in r.args:
            cols |= scalar_cols(a)
        _demand(r.input, cols, uses)
        return
    if isinstance(r, Join):
        nl = r.left.arity
        _demand(r.left, {c for c in need if c < nl} | {a for a, _ in r.keys}, uses)
        _demand(r.right, {c - nl for c in need if c >= nl} | {b for _, b in r.keys}, uses)
        return
    if isinstance(r, Reduce):
        cols = set(r.group)
        for a in r.aggs:
            cols |= {c for c in (a.arg, a.arg2) if c is not None}
        _demand(r.input, cols, uses)
        return
    if isinstance(r, (Negate, ArrangeBy)):
        keys = set(r.keys) if isinstance(r, ArrangeBy) else set()
        _demand(r.input, need | keys, uses)
        return
    if isinstance(r, Union):
        for k in r.inputs:
            _demand(k, need, uses)
        return
    if isinstance(r, Let):
        _demand(r.body, need, uses)
        _demand(r.value, uses.get(r.id, set()), uses)
        return
    # TopK (ties), Threshold (whole rows), LetRec (iterated), DeltaJoin: every column
    for k in children(r):
        if isinstance(r, LetRec):
            for g in walk(k):
                if isinstance(g, Get) and g.local:
                    uses.setdefault(g.name, set()).update(range(g.arity))
        else:
            _demand(k, set(range(k.arity)), uses)


def narrow_lets(r: Rel) -> Rel:
    """A local binding keeps only the columns some reader demands (`_demand`): its value is
    projected onto them, and each reader's Get puts NULL in the other columns, which nothing
    above reads (fuse_mfps and prune_projections then drop them). Why: a Let is shared by its
    readers, so the rules that narrow a join's inputs to what the Mfp above reads stop at it;
    an outer join or a subquery's decorrelation binds a join of whole rows (twenty columns of
    lineitem and part for a three-column answer) and every reader carried them all."""
    ids = [n.id for n in walk(r) if isinstance(n, Let)]
    if not ids or len(set(ids)) != len(ids):
        return r  # each binding names one Let: the Gets below are its
    uses: dict[str, set[int]] = {}
    _demand(r, set(range(r.arity)), uses)
    keep: dict[str, tuple[int, ...]] = {}
    for n in walk(r):
        if isinstance(n, Let) and len(uses.get(n.id, ())) < n.value.arity:
            keep[n.id] = tuple(sorted(uses.get(n.id, ())))
    if not keep:
        return r

    def f(n: Rel) -> Rel:
        if isinstance(n, Get) and n.local and n.name in keep:
            cols = keep[n.name]
            pos = {c: i for i, c in enumerate(cols)}
            k = len(cols)
            return Mfp(Get(n.name, k, True), (null(),), (),
                       tuple(pos.get(c, k) for c in range(n.arity)))
        if isinstance(n, Let) and n.id in keep and n.value.arity != len(keep[n.id]):
            return Let(n.id, Mfp(n.value, (), (), keep[n.id]), n.body)
        return n
    return transform_up(r, f)


def _distribute(m: Mfp) -> Rel:
    inner = m.input
    if isinstance(inner, Union):
        return Union(tuple(_distribute(Mfp(k, m.map, (), m.project)) for k in inner.inputs))
    if isinstance(inner, Negate):
        return Negate(_distribute(Mfp(inner.input, m.map, (), m.project)))
    if isinstance(inner, Let):
        return Let(inner.id, inner.value, _distribute(Mfp(inner.body, m.map, (), m.project)))
    if isinstance(inner, Mfp):
        return _fuse(m)
    return m


def distribute_mfps(r: Rel) -> Rel:
    """A map/project without filters moves below a union, a negation and a Let's body, into
    each input (an Mfp acts on each row alone, so it distributes over the multiset sum): the
    columns a union's reader drops (after `narrow_lets`, the NULLs its Gets put in) are not
    carried through the union. Filters move down by `pushdown_predicates`."""
    def f(n: Rel) -> Rel:
        if isinstance(n, Mfp) and not n.filter and isinstance(n.input, (Union, Negate, Let)):
            return _distribute(n)
        return n
    return transform_up(r, f)


# ---------------------------------------------------------------- arrange_join_inputs


def arrange_join_inputs(r: Rel) -> Rel:
    """Every join reads its inputs through arrangements keyed by the join keys (shared by any
    other reader of the same collection and key)."""
    def f(n: Rel) -> Rel:
        if isinstance(n, Join) and not isinstance(n.left, ArrangeBy):
            return Join(ArrangeBy(n.left, tuple(a for a, _ in n.keys)),
                        ArrangeBy(n.right, tuple(b for _, b in n.keys)), n.keys)
        return n
    return transform_up(r, f)


Rule = Callable[[Rel], Rel]

RULES: tuple[Rule, ...] = (
    fold_constants,
    fuse_mfps,
    order_joins,
    fuse_mfps,
    derive_side_filters,
    pushdown_predicates,
    join_keys_from_where,
    pushdown_predicates,
    fuse_mfps,
    prune_projections,
    fuse_mfps,
    narrow_lets,
    distribute_mfps,
    fuse_mfps,
    prune_projections,
    fuse_mfps,
    fold_constants,
    arrange_join_inputs,
    plan_delta_joins,
)


def optimize(r: Rel, rules: tuple[Rule, ...] = RULES, estimator: Estimator | None = None) -> Rel:
    """r rewritten by each rule in turn; join ordering uses the estimator's statistics."""
    for rule in rules:
        r = order_joins(r, estimator) if rule is order_joins else rule(r)
    return r
