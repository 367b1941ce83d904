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

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, TokenError

from engine.columnar import memory
from planner.binder import Binder
from planner.cardinality import Estimator
from planner.catalog import Catalog, Column, Statistics, TableSchema, ViewDef
from planner.errors import PlanError
from planner.ir import Rel, Scalar, columns_read, explain, scan_filters
from planner.naming import FOLD
from planner.rewrites import RULES, optimize

# SQL views hydrate from whole tables, a few large columns per operator allocated and freed
# once: their pages are reused, not faulted in again (see `engine.columnar.memory`), also
# those Arrow's compute kernels allocate.
memory.keep_freed_memory(memory.KEEP)
memory.arrow_system_pool(memory.KEEP)

__all__ = ["Catalog", "Column", "CompiledView", "PlanError", "Statistics", "TableSchema", "ViewDef",
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

    def columns_read(self) -> dict[str, frozenset[int]]:
        """For each dependency, the positions of its columns the view reads
        (`planner.ir.columns_read`): its output is the same whatever values the others hold,
        so a loader may leave them NULL (read only these from a store or a file)."""
        return columns_read(self.plan)

    def scan_filters(self) -> dict[str, tuple[Scalar, ...]]:
        """For each dependency read only through filters, the filters on its own columns every
        reader applies (`planner.ir.scan_filters`): a loader may leave out the rows they
        reject (a store can apply them as it scans the table)."""
        return scan_filters(self.plan)

    def evaluate(self, sources: dict[str, dict[tuple[Any, ...], int]]) -> dict:
        """The view's contents from scratch (naive evaluator): {row: count}."""
        from planner.naive import evaluate

        return evaluate(self.plan, sources)

    def build(self, df: Any, sources: dict[str, Any], start: int = 0) -> Any:
        """Build the dataflow for this view in ``df``; ``sources`` maps every name in
        ``self.dependencies`` to a root-scope Collection of row tuples. ``start``: where the
        plan's constants enter; a caller passes the first epoch its output is read at only
        when no source sends anything earlier (else 0)."""
        from planner.lower import lower

        missing = [d for d in self.dependencies if d not in sources]
        if missing:
            raise PlanError("internal", f"build() needs sources for {', '.join(missing)}")
        return lower(self.plan, df, sources, start)


_CREATE = re.compile(r"^\s*create\s+(?:or\s+replace\s+)?(?:materialized\s+)?view\s+"
                     r"(?:if\s+not\s+exists\s+)?(\"[^\"]+\"|[\w.]+)\s*(\([^)]*\))?\s*as\s+(.*)$",
                     re.IGNORECASE | re.DOTALL)


def _stamped(name: str) -> Any:
    base = getattr(DuckDB.Parser, name)

    def parse(self: Any, *args: Any, **kwargs: Any) -> Any:
        first = self._curr
        out = base(self, *args, **kwargs)
        if any(out is a for a in args) or any(out is a for a in kwargs.values()):
            # handed back what it was given (`_parse_window(max(x))` without OVER): the node
            # starts where its own parse began, not at the token after it
            return out
        if first is not None and isinstance(out, exp.Expression) and "start" not in out.meta:
            out.meta.update(line=first.line, col=first.col, start=first.start, end=first.end)
        return out

    return parse


# sqlglot records token positions only on identifiers, so an error on a construct made of
# keywords and literals (INTERVAL 1 DAY, 'a' + 1) had no position: every expression these
# parse methods build is stamped with the span start of its first token (an offset into the
# text given to compile_view, CREATE VIEW prefix included, so positions need no mapping).
_POSITIONED = ("_parse_select", "_parse_table", "_parse_join", "_parse_expression",
               "_parse_assignment", "_parse_disjunction", "_parse_conjunction",
               "_parse_equality", "_parse_comparison", "_parse_range", "_parse_bitwise",
               "_parse_term", "_parse_factor", "_parse_exponent", "_parse_unary",
               "_parse_type", "_parse_column", "_parse_primary", "_parse_function",
               "_parse_case", "_parse_paren", "_parse_interval", "_parse_cast",
               "_parse_window", "_parse_bracket", "_parse_types")


class _PositionedParser(DuckDB.Parser):  # type: ignore[misc,valid-type]
    pass


for _name in _POSITIONED:
    setattr(_PositionedParser, _name, _stamped(_name))

_DIALECT = Dialect.get_or_raise("duckdb")


def _syntax_message(info: dict[str, Any]) -> str:
    """A user-facing message from one sqlglot error record (no class names or token dumps)."""
    hl = str(info.get("highlight") or "").strip()
    desc = str(info.get("description") or "")
    hint = ""
    m = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", desc)
    if m:
        hint = f"incomplete {m.group(2).upper()}"
    elif "<" not in desc and desc and not desc.startswith("Invalid expression"):
        hint = desc[0].lower() + desc[1:]
    elif desc.startswith("Expected ") and " but got" in desc:
        hint = desc.split(" but got")[0].lower()
    near = f"at or near '{hl}'" if hl else "at end of input"
    return f"syntax error {near}" + (f" ({hint})" if hint else "")


def _parse_one(sql: str) -> list[exp.Expression]:
    parser = _PositionedParser(dialect=_DIALECT)
    return [s for s in parser.parse(_DIALECT.tokenize(sql), sql) if s is not None]


def _syntax_error(e: ParseError, sql: str, offset: int = 0) -> PlanError:
    """PlanError for e, raised parsing ``sql[offset:]``: positions are mapped back to ``sql``."""
    info = e.errors[0] if e.errors else {"description": str(e)}
    line, col = info.get("line"), info.get("col")
    hl = info.get("highlight") or ""
    if col is not None and hl and "\n" not in hl:
        col = max(1, col - len(hl) + 1)  # sqlglot reports the token's last column
    if line is not None and offset:
        before = sql[:offset]
        if line == 1 and col is not None:
            col += offset - (before.rfind("\n") + 1)
        line += before.count("\n")
    return PlanError("syntax_error", _syntax_message(info), line, col)


def _blob_literal(sql: str) -> PlanError | None:
    """x'303132' (a BLOB literal) tokenizes as the name x followed by a string: sqlglot's
    DuckDB dialect has no hex strings, and BLOB values are not supported, so name it."""
    try:
        toks = _DIALECT.tokenize(sql)
    except TokenError:
        return None
    for a, b in zip(toks, toks[1:], strict=False):
        if a.text in ("x", "X") and b.token_type.name == "STRING" and b.start == a.end + 1:
            return PlanError("unsupported", "BLOB literals (x'...') are not supported",
                             a.line, a.col)
    return None


def _parse(sql: str) -> exp.Expression:
    blob = _blob_literal(sql)
    if blob is not None:
        raise blob
    try:
        stmts = _parse_one(sql)
    except ParseError as e:
        raise _syntax_error(e, sql) from None
    except TokenError as e:
        raise PlanError("syntax_error", f"syntax error: {e}") from None
    if len(stmts) != 1:
        raise PlanError("syntax_error", "expected exactly one SELECT or CREATE VIEW statement")
    m = _CREATE.match(sql)
    if isinstance(stmts[0], exp.Command) and m:
        # sqlglot gives up on a CREATE VIEW whose body does not parse and returns an opaque
        # Command: parse the body alone for the real error, positioned in the whole text
        try:
            _parse_one(m.group(3))
        except ParseError as e:
            raise _syntax_error(e, sql, m.start(3)) from None
        except TokenError as e:
            raise PlanError("syntax_error", f"syntax error: {e}") from None
    return stmts[0]


def unique_names(names: list[str]) -> list[str]:
    """A view's column names as DuckDB makes them unique when it creates a view: a name
    equal (ignoring case) to an earlier one gets the first of `_1`, `_2`, ... that makes it
    new (`SELECT a.k, b.k` is a view of columns `k` and `k_1`), so every column of a view
    can be named, by a view over it and by `/query`."""
    seen: set[str] = set()
    out = []
    for name in names:
        if name.translate(FOLD) in seen:
            i = 1
            while f"{name}_{i}".translate(FOLD) in seen:
                i += 1
            name = f"{name}_{i}"
        seen.add(name.translate(FOLD))
        out.append(name)
    return out


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
            renames = [c.name.translate(FOLD) for c in target.expressions]
            target = target.this
        name = name or target.name.translate(FOLD)
        m = _CREATE.match(sql.strip().rstrip(";"))
        body_sql = m.group(3).strip() if m else tree.expression.sql(dialect="duckdb")
        tree = tree.expression
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery,
                             exp.Values)):
        raise PlanError("unsupported", f"a view must be a query, not {tree.key.upper()}")
    binder = Binder(sql, catalog, iteration_limit)
    bound = binder.bind_query(tree, None)
    names = list(bound.out_names)
    if renames:
        if len(renames) > len(names):
            raise PlanError("type_error", f"view has {len(names)} columns but {len(renames)} "
                            "names")
        names = renames + names[len(renames):]
    cols = [Column(n, t) for n, t in zip(unique_names(names), bound.types, strict=True)]
    plan = optimize(bound.rel, RULES, Estimator(catalog))
    return CompiledView(name=name, sql=body_sql, columns=cols, plan=plan,
                        dependencies=list(binder.deps), logical_plan=bound.rel)
