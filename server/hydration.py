"""Hydration inside a write: computing views from the transaction's own, uncommitted state.

A view created by a write is computed before COMMIT (`hydrate_new_views`), so a view that
cannot be computed (an evaluation error, a budget overrun) rejects the whole request and
nothing of it is applied. A SELECT inside a write that reads a view the write changed, or a
new view over another new view, needs the view's contents after the statements so far
(`post_contents`): those are computed in throw-away dataflows fed only through input handles.

Invariants: the dataflows built here import nothing, so discarding one never disturbs another
view; the contents computed equal the view's definition evaluated over the transaction's
tables; a new view's hydration dataflow is kept as its permanent one only when it reads tables
alone and no other new view reads it (`Write.reusable`), the others are built again after
COMMIT by `server.publish`, importing what they read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from server import heap
from server.errors import ApiError, Conflict, SqlError
from server.failures import failure
from server.state import ServerState
from server.store import Store
from server.transaction import Write, table_input
from server.views import Contents, Input, MaintainedView


def imports_of(view: MaintainedView, views: dict[str, MaintainedView]) -> dict[str, Any]:
    """The output arrangements of the views `view` reads, for its dataflow to import."""
    return {d: views[d].arranged for d in view.dependencies if d in views}


def affected(w: Write, name: str) -> bool:
    """Whether relation `name`'s contents may differ after this request's writes."""
    if name in w.tables:
        return name in w.written
    rec = w.views[name]
    return name in w.new_views or any(affected(w, d) for d in rec.dependencies)


def post_contents(
    state: ServerState, w: Write, name: str, trial: dict[str, Contents]
) -> Contents:
    """Contents of `name` after this request's statements so far (inside the
    transaction). Views this request changes are computed in throw-away dataflows."""
    if name in w.tables:
        if name not in trial:
            trial[name] = Counter(Store.read_table(state.store.conn, name))
        return trial[name]
    if name in trial:
        return trial[name]  # a table or view read before, or a view this request creates
    rec = w.views[name]
    if name in w.new_views:
        compiled = w.new_views[name]
    else:
        existing = state.views[name]
        if not existing.running:
            raise Conflict(f"view {name!r} has failed: {existing.error}", code="view_failed")
        if not affected(w, name):
            # its output arrangement as installed: the snapshot is read, never copied
            trial[name] = existing.snapshot if existing.snapshot is not None else Counter()
            return trial[name]
        compiled = existing.compiled
    tmp = MaintainedView(
        name, rec.sql, rec.columns, rec.dependencies, w.ts, rec.seq, compiled=compiled
    )
    try:
        trial[name] = hydrate_one(state, w, tmp, trial)
    except ApiError:
        raise
    except Exception as e:  # noqa: BLE001 - the engine failed evaluating the view
        raise _cannot_compute(name, e) from None
    finally:
        tmp.release()
    return trial[name]


def hydrate_one(
    state: ServerState, w: Write, view: MaintainedView, trial: dict[str, Contents]
) -> Contents:
    """Compute `view` from the post-statement contents of what it reads, in a dataflow fed
    through input handles only (it imports nothing, so it can be discarded freely); its
    contents are its output arrangement's snapshot (`MaintainedView.install`), which stays
    readable after the dataflow is released."""
    read = view.compiled.columns_read()
    # the rows the view's filters on a table would reject are not read (server.scan_filters)
    kept = view.compiled.scan_filters()
    inputs: dict[str, Input] = {
        d: table_input(
            state, w, d, lambda d=d: post_contents(state, w, d, trial).items(), read.get(d),
            kept.get(d, ()),
        )
        for d in view.dependencies
    }
    view.build(state.executor.new_dataflow(), w.ts)
    out = view.run_schedule([(w.ts, inputs)], w.ts)
    view.install(sum(d for b in out.values() for _, d in b))
    assert view.snapshot is not None  # built: it has an output arrangement
    return view.snapshot


def hydrate_new_views(state: ServerState, w: Write) -> None:
    """Compute every new view before COMMIT: a view that cannot be computed is rejected
    with the whole request."""
    with heap.bulk_phase():
        _hydrate_new_views(state, w)


def _hydrate_new_views(state: ServerState, w: Write) -> None:
    read_by_new = {d for n in w.new_views for d in w.views[n].dependencies}
    for name, compiled in w.new_views.items():
        rec = w.views[name]
        view = MaintainedView(
            rec.name,
            rec.sql,
            rec.columns,
            rec.dependencies,
            w.ts,
            rec.seq,
            compiled=compiled,
            base_ts=w.ts,
            complete_ts=w.ts,
        )
        try:
            # later statements of the request read it as trial contents (`post_contents`)
            w.trial[name] = hydrate_one(state, w, view, w.trial)
        except ApiError as e:
            view.release()
            if e.line is None:  # (a failed view it reads: 409) at its CREATE VIEW
                e.line, e.column = w.created_at.get(name, (None, None))
            raise
        except Exception as e:  # noqa: BLE001 - engine failure: reject the view
            view.release()
            err = _cannot_compute(name, e)
            err.line, err.column = w.created_at.get(name, (None, None))
            raise err from None
        w.hydrated[name] = view
        if name not in read_by_new and all(d in w.tables for d in rec.dependencies):
            w.reusable.add(name)
        else:
            view.release()  # built again after COMMIT, importing what it reads


def _cannot_compute(name: str, e: Exception) -> SqlError:
    err = failure(e)
    return SqlError(
        f"view {name!r} cannot be computed: {err['message']}",
        # a budget overrun keeps its own code: the remedy (raise the budget) differs
        code="budget_exceeded" if err["code"] == "budget_exceeded" else "view_error",
    )
