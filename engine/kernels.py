"""The bulk work of operators, as pure functions over batches.

Nothing here knows about scheduling, frontiers of edges or capabilities: each function takes
batches (or per-key histories) and returns updates. The in-process executor calls them from its
operators; a distributed executor can call the same functions on partitions of the same data.

Invariants each kernel keeps:
- `join_batches`: every pair of updates `(k, v1, t1, r1)`, `(k, v2, t2, r2)` with one side from
  the new batch yields `(f(k, v1, v2), join(t1, t2), r1 * r2)` exactly once per call.
- `reduce_key`: for one key, emits corrections so that the accumulated output at every newly
  interesting time equals `logic(key, accumulated input)`; times beyond `upper` are deferred.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.budget import CHECK_EVERY
from engine.lattice import Antichain, Time, join, less_equal
from engine.order import sort_key
from engine.trace import Batch, Entry

Logic = Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]]


def join_batches(
    new: Batch,
    others: list[Batch],
    f: Callable[[Any, Any, Any], Any],
    new_is_left: bool,
    out: list[tuple[Any, Time, int]],
    budget: Any = None,
) -> None:
    """Join the updates of `new` against `others` (a trace cut), appending to `out`; a
    `budget` (engine.budget.Budget) is charged with the outputs as they are produced."""
    if not others:
        return
    if budget is not None:
        _join_budgeted(new, others, f, new_is_left, out, budget)
        return
    for ob in others:
        # Probe the larger side with the keys of the smaller: a hydration's big batch meets a
        # small (or empty) trace, and a small change meets a big trace. A batch indexed by a
        # sorted column (`engine.rows_batch`) answers all the probes in one vectorised search.
        if ob.records < new.records:
            probing = ob.updates
            keys = list(probing)
            pairs = zip(keys, new.get_many(keys), probing.values(), strict=True)
        else:
            probing = new.updates
            keys = list(probing)
            pairs = zip(keys, probing.values(), ob.get_many(keys), strict=True)
        for key, entries, oentries in pairs:
            if not entries or not oentries:
                continue
            if new_is_left:
                for v1, t1, r1 in entries:
                    for v2, t2, r2 in oentries:
                        out.append((f(key, v1, v2), t1 if t1 == t2 else join(t1, t2), r1 * r2))
            else:
                for v2, t2, r2 in entries:
                    for v1, t1, r1 in oentries:
                        out.append((f(key, v1, v2), t1 if t1 == t2 else join(t1, t2), r1 * r2))


def _join_budgeted(
    new: Batch,
    others: list[Batch],
    f: Callable[[Any, Any, Any], Any],
    new_is_left: bool,
    out: list[tuple[Any, Time, int]],
    budget: Any,
) -> None:
    """`join_batches` charging `budget` at least every `CHECK_EVERY` outputs (plus one row of
    the other side), so a single key with a huge cross product is stopped midway too."""
    charged = 0
    lookups = [ob.lookup() for ob in others]
    for key, entries in new.updates.items():
        for get in lookups:
            oentries = get(key)
            if not oentries:
                continue
            for vn, tn, rn in entries:
                if len(out) - charged >= CHECK_EVERY:
                    budget.charge(len(out) - charged)
                    charged = len(out)
                if new_is_left:
                    for vo, to, ro in oentries:
                        out.append((f(key, vn, vo), tn if tn == to else join(tn, to), rn * ro))
                else:
                    for vo, to, ro in oentries:
                        out.append((f(key, vo, vn), tn if tn == to else join(tn, to), rn * ro))
    budget.charge(len(out) - charged)


def history(batches: list[Batch], key: Any) -> list[Entry]:
    out: list[Entry] = []
    for b in batches:
        e = b.lookup()(key)
        if e:
            out.extend(e)
    return out


def accumulate(entries: list[Entry], t: Time) -> dict[Any, int]:
    acc: dict[Any, int] = {}
    for v, s, r in entries:
        if s == t or less_equal(s, t):
            acc[v] = acc.get(v, 0) + r
    return acc


def interesting_times(
    seeds: set[Time], ground: set[Time], upper: Antichain
) -> tuple[list[Time], set[Time]]:
    """The closure under join of `seeds` with `ground`, split at `upper`.

    Returns the times to evaluate now (not beyond `upper`, in a linear extension of the
    partial order) and the times to defer (beyond `upper`).
    """
    active: set[Time] = set()
    deferred: set[Time] = set()
    todo = list(seeds)
    beyond = upper.less_equal
    while todo:
        t = todo.pop()
        if t in active:
            continue
        active.add(t)
        for g in list(ground) + list(active):
            if less_equal(g, t):
                continue
            j = join(t, g)
            if j in active or j in deferred:
                continue
            if beyond(j):
                deferred.add(j)
            else:
                todo.append(j)
    return sorted(active), deferred


def desired(
    key: Any, inputs: list[Entry], t: Time, logic: Logic, counting: Any = None
) -> dict[Any, int]:
    """The output `logic` wants at `t`: `{out_val: multiplicity}` from the input accumulated there."""
    if counting is not None:
        # Logic that depends only on the key's total count: no per-value accumulation.
        total = 0
        for _, s, r in inputs:
            if s == t or less_equal(s, t):
                total += r
        return dict(counting(total)) if total else {}
    nonzero = [(v, r) for v, r in accumulate(inputs, t).items() if r]
    want: dict[Any, int] = {}
    if nonzero:
        nonzero.sort(key=lambda vr: sort_key(vr[0]))
        for v, r in logic(key, nonzero):
            if r:
                want[v] = want.get(v, 0) + r
    return want


def reduce_key(
    key: Any,
    inputs: list[Entry],
    outputs: list[Entry],
    seeds: set[Time],
    upper: Antichain,
    logic: Logic,
) -> tuple[list[Entry], set[Time]]:
    """Corrections for one key at its interesting times, and the times deferred past `upper`.

    `inputs` is the key's whole input history (the new batch included) and `outputs` its
    output history; `seeds` are the new batch's times and the pending times now complete.
    """
    if len(seeds) == 1:
        (t0,) = seeds
        # Fast path: the usual case of one new time that every stored time precedes.
        simple = all(s == t0 or less_equal(s, t0) for _, s, _ in inputs) and all(
            s == t0 or less_equal(s, t0) for _, s, _ in outputs
        )
    else:
        simple = False
    if simple:
        times, deferred = [t0], set()
    else:
        ground = {t for _, t, _ in inputs}
        ground.update(t for _, t, _ in outputs)
        times, deferred = interesting_times(seeds, ground, upper)
    emitted: list[Entry] = []
    counting = getattr(logic, "counting", None)
    for t in times:
        want = desired(key, inputs, t, logic, counting)
        have = accumulate(outputs, t)
        for v, s, r in emitted:
            if less_equal(s, t):
                have[v] = have.get(v, 0) + r
        for v in want.keys() | have.keys():
            d = want.get(v, 0) - have.get(v, 0)
            if d:
                emitted.append((v, t, d))
    return emitted, deferred


def group_by_time(
    updates: Iterable[tuple[tuple[Any, Any], Time, int]],
) -> dict[Time, tuple[dict[Any, list[Any]], int | None]]:
    """`((key, val), time, diff)` updates by time, then by key: `[(val, diff)]` per key (the
    diff slot of each time is None: every pair carries its own)."""
    by_time: dict[Time, tuple[dict[Any, list[Any]], int | None]] = {}
    for (key, val), t, r in updates:
        slot = by_time.get(t)
        if slot is None:
            slot = by_time[t] = ({}, None)
        per_key = slot[0]
        changes = per_key.get(key)
        if changes is None:
            per_key[key] = [(val, r)]
        else:
            changes.append((val, r))
    return by_time
