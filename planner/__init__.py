"""diffsql planner: SQL view definitions -> a decorrelated relational plan -> engine dataflow.

Pipeline (read in order): ``sqlglot`` parse -> ``binder`` (names, types, decorrelation) ->
``rewrites.RULES`` (ordered pure rewrites) -> ``CompiledView`` (EXPLAIN, naive evaluation,
``build`` through ``lower`` onto the engine's public API).

Invariant: ``compile_view`` either returns a complete CompiledView or raises PlanError; it
never leaves partial state anywhere (it has none), and never lets another exception escape.
engine/ never imports this package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from planner.binder import Binder
from planner.catalog import Catalog, Column, TableSchema, ViewDef
from planner.errors import PlanError
from planner.ir import Rel, explain
from planner.rewrites import RULES, optimize

__all__ = ["Catalog", "Column", "CompiledView", "PlanError", "TableSchema", "ViewDef",
           "compile_view"]


@dataclass
class CompiledView:
    """A bound, optimised view: its output schema, its plan, and how to build it."""

    name: str | None
    sql: str
    columns: list[Column]
    plan: Rel
    dependencies: list[str] = field(default_factory=list)
    logical_plan: Rel | None = None

    def explain(self) -> str:
        return explain(self.plan)

    def evaluate(self, sources: dict[str, dict[tuple[Any, ...], int]]) -> dict:
        """The view's contents from scratch (naive evaluator): {row: count}."""
        from planner.naive import evaluate

        return evaluate(self.plan, sources)

    def build(self, df: Any, sources: dict[str, Any]) -> Any:
        """Build the dataflow for this view in ``df``; ``sources`` maps every name in
        ``self.dependencies`` to a root-scope Collection of row tuples."""
        from planner.lower import lower

        missing = [d for d in self.dependencies if d not in sources]
        if missing:
            raise PlanError("internal", f"build() needs sources for {', '.join(missing)}")
        return lower(self.plan, df, sources)


_CREATE = re.compile(r"^\s*create\s+(?:or\s+replace\s+)?(?:materialized\s+)?view\s+"
                     r"(?:if\s+not\s+exists\s+)?(\"[^\"]+\"|[\w.]+)\s*(\([^)]*\))?\s*as\s+(.*)$",
                     re.IGNORECASE | re.DOTALL)


def _parse(sql: str) -> exp.Expression:
    try:
        stmts = [s for s in sqlglot.parse(sql, dialect="duckdb") if s is not None]
    except ParseError as e:
        info = e.errors[0] if e.errors else {}
        desc = str(info.get("description", str(e))).split("<Token")[0].strip()
        line, col = info.get("line"), info.get("col")
        hl = info.get("highlight") or ""
        if col is not None and hl:
            col = max(1, col - len(hl) + 1)
        raise PlanError("syntax_error", f"syntax error: {desc}" + (f" near '{hl}'" if hl
                                                                    else ""), line, col) from None
    except TokenError as e:
        raise PlanError("syntax_error", f"syntax error: {e}") from None
    if len(stmts) != 1:
        raise PlanError("syntax_error", "expected exactly one SELECT or CREATE VIEW statement")
    return stmts[0]


def compile_view(sql: str, catalog: Catalog, *, name: str | None = None,
                 iteration_limit: int | None = 10000) -> CompiledView:
    """Parse, bind, optimise ``sql`` (a query or CREATE [MATERIALIZED] VIEW) against
    ``catalog``. Raises PlanError; never returns a half-built view."""
    try:
        return _compile(sql, catalog, name, iteration_limit)
    except PlanError:
        raise
    except RecursionError:
        raise PlanError("unsupported", "query is nested too deeply") from None
    except Exception as e:  # noqa: BLE001 - the contract: only PlanError escapes
        raise PlanError("internal", f"internal planner error: {type(e).__name__}: {e}") from None


def _compile(sql: str, catalog: Catalog, name: str | None,
             iteration_limit: int | None) -> CompiledView:
    tree = _parse(sql)
    body_sql = sql.strip().rstrip(";").strip()
    renames: list[str] = []
    if isinstance(tree, exp.Create):
        if (tree.args.get("kind") or "").upper() != "VIEW":
            raise PlanError("unsupported", "only CREATE [MATERIALIZED] VIEW is supported")
        target = tree.this
        if isinstance(target, exp.Schema):
            renames = [c.name.lower() for c in target.expressions]
            target = target.this
        name = name or target.name.lower()
        m = _CREATE.match(sql.strip().rstrip(";"))
        body_sql = m.group(3).strip() if m else tree.expression.sql(dialect="duckdb")
        tree = tree.expression
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery,
                             exp.Values)):
        raise PlanError("unsupported", f"a view must be a query, not {tree.key.upper()}")
    binder = Binder(sql, catalog, iteration_limit)
    bound = binder.bind_query(tree, None)
    names = list(bound.names)
    if renames:
        if len(renames) > len(names):
            raise PlanError("type_error", f"view has {len(names)} columns but {len(renames)} "
                            "names")
        names = renames + names[len(renames):]
    cols = [Column(n, t) for n, t in zip(names, bound.types, strict=True)]
    plan = optimize(bound.rel, RULES)
    return CompiledView(name=name, sql=body_sql, columns=cols, plan=plan,
                        dependencies=list(binder.deps), logical_plan=bound.rel)
