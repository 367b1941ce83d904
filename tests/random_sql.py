"""Random SQL views over the planner suites' tables (`planner_support.SCHEMAS`), for
differential testing against DuckDB: a grammar of the SQL the planner supports, drawn at
random with a seed, every query a complete view.

The grammar covers scalar expressions of every column type (arithmetic, integer division,
CASE, COALESCE, NULLIF, casts between the types, string functions from `substr` to `lpad`,
`split_part`, `translate` and `md5`, date arithmetic, `date_diff` over several parts,
comparisons, three-valued logic, IN lists, BETWEEN, LIKE), joins of every kind (with
conditions in ON and in WHERE, self-joins), GROUP BY with HAVING and global aggregates
(count, sum, min, max, avg, var_pop, stddev_samp, DISTINCT aggregates), DISTINCT, set operations,
subqueries (IN, NOT IN, EXISTS, NOT EXISTS, scalar, derived tables, WITH), and ORDER BY ...
LIMIT over a total order (every output column, so ties are between equal rows only), and
WITH RECURSIVE reachability over the edge table.

Invariant: every query is deterministic as a multiset of rows (no LIMIT without a total
order, no order-dependent aggregate), and reads no randomness or clock; whether DuckDB and
the planner accept it is up to them (the test skips a query DuckDB refuses, and a planner
`PlanError` is a declined feature, not a wrong answer).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# (table, column) -> type class: int, num (DOUBLE/DECIMAL), str, date, bool
COLUMNS = {
    "t": {"id": "int", "a": "int", "b": "str", "c": "num", "d": "date", "flag": "bool"},
    "u": {"id": "int", "a": "int", "s": "str", "m": "num"},
    "e": {"src": "int", "dst": "int"},
}
STRINGS = ["'x'", "'ab'", "'Ba'", "'a'", "'abc'", "''"]
DATES = ["DATE '2023-01-31'", "DATE '2023-12-01'", "DATE '2024-02-29'", "DATE '2022-06-15'"]
PATTERNS = ["'%a%'", "'a%'", "'_b%'", "'%'", "'x'", "'%c'"]

# Each kind's expressions beyond a column, a literal, CASE and COALESCE (`Gen.expr`)
TEMPLATES = {
    "int": ["({int} + {int})", "({int} - {int})", "({int} * {k})", "abs({int})",
            "({int} % {pos})", "length({str})", "greatest({int}, {int})",
            "extract(month FROM {date})", "date_diff('day', {date}, {date_lit})",
            "least({int}, {int_lit})", "sign({int})", "({int} // {pos})",
            "strpos({str}, 'a')", "ascii({str})", "nullif({int}, {int_lit})",
            "date_diff('{part}', {date}, {date})", "({date} - {date})", "CAST({num} AS INTEGER)",
            "extract(dow FROM {date})", "CASE WHEN {str} LIKE {pattern} THEN {int} END",
            "bit_length({str})", "unicode({str})"],
    "num": ["({num} + {int})", "({num} * 2)", "({num} - {num})", "abs({num})",
            "round({num}, 1)", "({int} / 2)", "CAST({int} AS DOUBLE)", "floor({num})",
            "nullif({num}, 0)", "ceil({num})", "CAST({num} AS DECIMAL(10,3))",
            "({num} * {num})", "greatest({num}, {int})", "round({num})", "({num} % 3)",
            "coalesce({num}, {int})"],
    "str": ["upper({str})", "lower({str})", "({str} || {str})", "substr({str}, {start}, {len})",
            "trim({str})", "replace({str}, 'a', 'z')", "CAST({int} AS VARCHAR)",
            "concat({str}, {int})", "left({str}, 1)", "lpad({str}, 4, '*')",
            "rpad({str}, 3, 'xy')", "split_part({str}, 'a', 1)", "concat_ws('-', {str}, {str})",
            "translate({str}, 'ab', 'x')", "repeat({str}, 2)", "reverse({str})", "right({str}, 2)",
            "md5({str})", "CAST({date} AS VARCHAR)", "CAST({num} AS VARCHAR)",
            "ltrim({str}, ' x')", "prefix({str}, 'a')::VARCHAR", "chr(65 + abs({int}) % 26)"],
    "date": ["({date} + INTERVAL '{days}' DAY)", "date_trunc('month', {date})::DATE",
             "({date} + {small})", "CAST({date} + INTERVAL '{days}' MONTH AS DATE)",
             "date_trunc('year', {date})::DATE", "greatest({date}, {date_lit})"],
}
PARTS = ["year", "month", "quarter", "week", "day", "hour", "isoyear", "decade"]
_HOLE = re.compile(r"\{(\w+)\}")


@dataclass
class Scope:
    """The columns a clause may read: (qualified name, type class)."""

    cols: list[tuple[str, str]]

    def of(self, kind: str) -> list[str]:
        return [c for c, k in self.cols if k == kind]


class Gen:
    """Draws random queries; `query()` is one view's SELECT."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.alias_n = 0
        self.names: list[str] = []  # the last `grouped` query's output names

    # -- helpers -------------------------------------------------------------------------------
    def pick(self, xs: list[str]) -> str:
        return self.rng.choice(xs)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def alias(self) -> str:
        self.alias_n += 1
        return f"q{self.alias_n}"

    # -- scalar expressions --------------------------------------------------------------------
    def expr(self, scope: Scope, kind: str, depth: int = 2) -> str:
        """An expression of type class `kind` over `scope`."""
        cols = scope.of(kind)
        if depth <= 0 or self.chance(0.35):
            if cols and self.chance(0.8):
                return self.pick(cols)
            return self.literal(kind)
        d = depth - 1
        r = self.rng.random()
        if r < 0.12:
            return (f"CASE WHEN {self.pred(scope, d)} THEN {self.expr(scope, kind, d)} "
                    f"ELSE {self.expr(scope, kind, d)} END")
        if r < 0.22:
            return f"coalesce({self.expr(scope, kind, d)}, {self.literal(kind)})"
        if kind == "bool":
            return f"({self.pred(scope, d)})"
        # a template of the kind, its holes filled: {int}, {num}, {str}, {date} with
        # expressions of that kind; the others with a literal or a number
        holes = {
            "k": lambda: str(self.rng.randint(-2, 3)),
            "pos": lambda: str(self.rng.randint(1, 4)),
            "days": lambda: str(self.rng.randint(-40, 40)),
            "small": lambda: str(self.rng.randint(-3, 3)),
            "start": lambda: str(self.rng.randint(1, 2)),
            "len": lambda: str(self.rng.randint(1, 3)),
            "int_lit": lambda: self.literal("int"),
            "date_lit": lambda: self.literal("date"),
            "part": lambda: self.pick(PARTS),
            "pattern": lambda: self.pick(PATTERNS),
        }
        for sub in ("int", "num", "str", "date"):
            holes[sub] = lambda sub=sub: self.expr(scope, sub, d)
        return _HOLE.sub(lambda m: holes[m.group(1)](), self.pick(TEMPLATES[kind]))

    def literal(self, kind: str) -> str:
        if kind == "int":
            return str(self.rng.randint(-2, 6))
        if kind == "num":
            return self.pick(["0.5", "2.0", "-1.25", "3", "10.0", "0"])
        if kind == "str":
            return self.pick(STRINGS)
        if kind == "date":
            return self.pick(DATES)
        return self.pick(["true", "false"])

    def pred(self, scope: Scope, depth: int = 2) -> str:
        """A boolean expression (three-valued) over `scope`."""
        d = depth - 1
        r = self.rng.random()
        if depth > 0 and r < 0.25:
            op = self.pick(["AND", "OR"])
            return f"({self.pred(scope, d)} {op} {self.pred(scope, d)})"
        if depth > 0 and r < 0.32:
            return f"NOT ({self.pred(scope, d)})"
        kinds = sorted({k for _, k in scope.cols})
        kind = self.pick(kinds)
        if kind == "bool":
            col = self.pick(scope.of("bool"))
            return self.pick([col, f"{col} IS TRUE", f"{col} IS NOT FALSE", f"NOT {col}",
                              f"{col} = {self.literal('bool')}"])
        x = self.expr(scope, kind, max(0, d))
        r = self.rng.random()
        if r < 0.5:
            op = self.pick(["=", "<>", "<", "<=", ">", ">="])
            other = self.expr(scope, kind, 0) if self.chance(0.4) else self.literal(kind)
            return f"{x} {op} {other}"
        if r < 0.62:
            return f"{x} IS {self.pick(['', 'NOT '])}NULL"
        if r < 0.74:
            items = ", ".join(self.literal(kind) for _ in range(self.rng.randint(1, 3)))
            if self.chance(0.2):
                items += ", NULL"
            return f"{x} {self.pick(['', 'NOT '])}IN ({items})"
        if r < 0.84:
            lo, hi = sorted([self.literal(kind), self.literal(kind)])
            return f"{x} {self.pick(['', 'NOT '])}BETWEEN {lo} AND {hi}"
        if r < 0.92 and kind == "str":
            return f"{x} {self.pick(['', 'NOT '])}LIKE {self.pick(PATTERNS)}"
        return f"{x} IS DISTINCT FROM {self.literal(kind)}"

    # -- FROM ----------------------------------------------------------------------------------
    def table(self, name: str | None = None) -> tuple[str, Scope]:
        name = name or self.pick(["t", "t", "u", "e"])
        al = self.alias()
        return f"{name} {al}", Scope([(f"{al}.{c}", k) for c, k in COLUMNS[name].items()])

    def from_clause(self, joins: int) -> tuple[str, Scope]:
        text, scope = self.table()
        for _ in range(joins):
            other, oscope = self.table()
            kind = self.pick(["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN",
                              "CROSS JOIN"])
            both = Scope(scope.cols + oscope.cols)
            if kind == "CROSS JOIN":
                text = f"{text} CROSS JOIN {other}"
            else:
                # an equality on integers (the join key), and sometimes more in ON
                on = f"{self.pick(scope.of('int'))} = {self.pick(oscope.of('int'))}"
                if self.chance(0.3):
                    on += f" AND {self.pred(both, 1)}"
                text = f"{text} {kind} {other} ON {on}"
            scope = both
        return text, scope

    # -- queries -------------------------------------------------------------------------------
    def select_list(self, scope: Scope, n: int) -> tuple[list[str], list[str]]:
        """`n` output expressions, named o0..; returns the items and their type classes."""
        items, kinds = [], []
        for i in range(n):
            kind = self.pick([k for _, k in scope.cols] + ["int", "str"])
            items.append(f"{self.expr(scope, kind, 1)} AS o{i}")
            kinds.append(kind)
        return items, kinds

    def aggregate(self, scope: Scope) -> tuple[str, str]:
        """An aggregate call over `scope` and its result's type class."""
        r = self.rng.random()
        if r < 0.15:
            return "count(*)", "int"
        kind = self.pick(["int", "num", "str", "date"] if scope.of("num") else
                         ["int", "str"])
        if not scope.of(kind):
            kind = "int"
        x = self.expr(scope, kind, 1)
        if kind in ("int", "num"):
            fn = self.pick(["sum", "min", "max", "avg", "count", "count(DISTINCT",
                            "sum(DISTINCT", "avg(DISTINCT", "var_pop", "stddev_samp"])
        else:
            fn = self.pick(["min", "max", "count", "count(DISTINCT"])
        if fn.endswith("DISTINCT"):
            return f"{fn} {x})", ("int" if fn.startswith("count") else
                                  "num" if fn.startswith("avg") else kind)
        out = "int" if fn == "count" else "num" if fn in ("avg", "var_pop", "stddev_samp") else kind
        return f"{fn}({x})", out

    def simple(self, joins: int = 1) -> tuple[str, list[str]]:
        """SELECT [DISTINCT] exprs FROM ... [WHERE ...]: the query and its type classes."""
        frm, scope = self.from_clause(self.rng.randint(0, joins))
        items, kinds = self.select_list(scope, self.rng.randint(1, 3))
        where = f" WHERE {self.pred(scope)}" if self.chance(0.7) else ""
        where = self.subquery_filter(scope, where)
        distinct = "DISTINCT " if self.chance(0.25) else ""
        return f"SELECT {distinct}{', '.join(items)} FROM {frm}{where}", kinds

    def grouped(self, joins: int = 1) -> tuple[str, list[str]]:
        frm, scope = self.from_clause(self.rng.randint(0, joins))
        keys = []
        for _ in range(self.rng.randint(0, 2)):
            kind = self.pick(sorted({k for _, k in scope.cols}))
            key = self.expr(scope, kind, 1)
            if "." not in key or "(SELECT" in key:
                key = self.pick(scope.of(kind))  # a constant would be a GROUP BY position
            keys.append((key, kind))
        aggs = [self.aggregate(scope) for _ in range(self.rng.randint(1, 3))]
        items = [f"{k} AS g{i}" for i, (k, _) in enumerate(keys)]
        items += [f"{a} AS a{i}" for i, (a, _) in enumerate(aggs)]
        where = f" WHERE {self.pred(scope)}" if self.chance(0.5) else ""
        group = f" GROUP BY {', '.join(k for k, _ in keys)}" if keys else ""
        having = ""
        if keys and self.chance(0.35):
            a, kind = self.aggregate(scope)
            having = f" HAVING {a} {self.pick(['>', '<', '=', '>=', '<>'])} {self.literal(kind)}"
        self.names = [f"g{i}" for i in range(len(keys))] + [f"a{i}" for i in range(len(aggs))]
        return (f"SELECT {', '.join(items)} FROM {frm}{where}{group}{having}",
                [k for _, k in keys] + [k for _, k in aggs])

    def subquery_filter(self, scope: Scope, where: str) -> str:
        """Sometimes AND a subquery predicate (IN, NOT IN, EXISTS, NOT EXISTS) into `where`."""
        if not self.chance(0.3):
            return where
        inner, iscope = self.table(self.pick(["u", "e", "t"]))
        outer_int = self.pick(scope.of("int"))
        r = self.rng.random()
        cond = f" WHERE {self.pred(iscope, 1)}" if self.chance(0.6) else ""
        if r < 0.5:
            sub = (f"{outer_int} {self.pick(['', 'NOT '])}IN "
                   f"(SELECT {self.pick(iscope.of('int'))} FROM {inner}{cond})")
        else:
            op = self.pick(["=", "=", "<", ">="])  # sometimes not an equality
            corr = f"{self.pick(iscope.of('int'))} {op} {outer_int}"
            extra = f" AND {self.pred(iscope, 1)}" if self.chance(0.5) else ""
            sub = (f"{self.pick(['', 'NOT '])}EXISTS (SELECT 1 FROM {inner} "
                   f"WHERE {corr}{extra})")
        return f"{where} AND {sub}" if where else f" WHERE {sub}"

    def scalar_subquery(self) -> tuple[str, list[str]]:
        frm, scope = self.table(self.pick(["t", "u"]))
        inner, iscope = self.table(self.pick(["u", "e"]))
        kind = self.pick(["int", "num"]) if iscope.of("num") else "int"
        fn = self.pick(["max", "min", "sum", "count"])
        op = self.pick(["=", "=", "<"])
        corr = f"{self.pick(iscope.of('int'))} {op} {self.pick(scope.of('int'))}"
        key = self.pick(scope.of("int"))
        sub = f"(SELECT {fn}({self.pick(iscope.of(kind))}) FROM {inner} WHERE {corr})"
        return f"SELECT {key} AS k, {sub} AS v FROM {frm}", ["int", kind]

    def set_op(self) -> tuple[str, list[str]]:
        op = self.pick(["UNION", "UNION ALL", "EXCEPT", "INTERSECT", "EXCEPT ALL",
                        "INTERSECT ALL"])
        parts = []
        for _ in range(2):
            frm, scope = self.table(self.pick(["t", "u", "e"]))
            items = [f"{self.expr(scope, 'int', 1)}"]
            if scope.of("str") and self.chance(0.5):
                items.append(self.expr(scope, "str", 1))
            else:
                items.append(self.literal("str"))
            where = f" WHERE {self.pred(scope, 1)}" if self.chance(0.6) else ""
            parts.append(f"SELECT {', '.join(items)} FROM {frm}{where}")
        return f"{parts[0]} {op} {parts[1]}", ["int", "str"]

    def derived(self) -> tuple[str, list[str]]:
        """A grouped query as a derived table (or a WITH), joined or filtered outside."""
        inner, kinds = self.grouped(joins=0)
        names = self.names
        scope = Scope([(f"d.{n}", k) for n, k in zip(names, kinds, strict=True)])
        if not scope.of("int"):
            scope.cols.append(("1", "int"))
        where = f" WHERE {self.pred(scope, 1)}" if self.chance(0.6) else ""
        cols = ", ".join(f"d.{n}" for n in names)
        if self.chance(0.5):
            return f"WITH d AS ({inner}) SELECT {cols} FROM d{where}", kinds
        other, oscope = self.table("u")
        on = f"{self.pick(scope.of('int'))} = {self.pick(oscope.of('int'))}"
        return (f"SELECT {cols}, {self.pick(oscope.of('int'))} AS x FROM ({inner}) d "
                f"{self.pick(['JOIN', 'LEFT JOIN'])} {other} ON {on}{where}", kinds + ["int"])

    def top_k(self) -> tuple[str, list[str]]:
        query, kinds = self.pick_base()
        n = len(kinds)
        order = ", ".join(f"{i + 1} {self.pick(['ASC', 'DESC'])}"
                          f"{self.pick(['', ' NULLS FIRST', ' NULLS LAST'])}" for i in range(n))
        return f"SELECT * FROM ({query}) z ORDER BY {order} LIMIT {self.rng.randint(1, 5)}", kinds

    def recursive(self) -> tuple[str, list[str]]:
        """A WITH RECURSIVE: reachability over the edges `e` (UNION, so it ends on cycles),
        from some start nodes, then read plain, counted or joined; or one of the bounded
        shapes (`bounded`)."""
        if self.chance(0.4):
            return self.bounded()
        start = self.pred(Scope([("src", "int"), ("dst", "int")]), 1)
        step = self.pick(["r.x, e.dst", "r.x, e.dst + 0", "e.src, r.y"])
        on = "r.y = e.src" if step != "e.src, r.y" else "e.dst = r.x"
        where = f" WHERE {self.pred(Scope([('e.src', 'int'), ('e.dst', 'int')]), 1)}" \
            if self.chance(0.3) else ""
        cte = (f"WITH RECURSIVE r(x, y) AS (SELECT src, dst FROM e WHERE {start} UNION "
               f"SELECT {step} FROM r JOIN e ON {on}{where})")
        r = self.rng.random()
        if r < 0.4:
            return f"{cte} SELECT x, y FROM r", ["int", "int"]
        if r < 0.7:
            return f"{cte} SELECT x, count(*) AS n, max(y) AS m FROM r GROUP BY x", \
                ["int", "int", "int"]
        return (f"{cte} SELECT t.id, r.y FROM r JOIN t ON t.a = r.x "
                f"WHERE {self.pred(Scope([('t.b', 'str'), ('t.c', 'num')]), 1)}",
                ["int", "int"])

    def bounded(self) -> tuple[str, list[str]]:
        """A WITH RECURSIVE whose steps are bounded by a depth column: hops with their
        depth (UNION, then the least depth per node), a UNION ALL (bag) counter over a
        table's rows, a string grown a step at a time, or a walk that reads a table in its
        step; each with a deterministic result under SQL's working-table evaluation."""
        depth = self.rng.randint(1, 4)
        r = self.rng.random()
        if r < 0.3:
            start = self.pred(Scope([("src", "int"), ("dst", "int")]), 1)
            cte = (f"WITH RECURSIVE r(x, n) AS (SELECT src, 0 FROM e WHERE {start} UNION "
                   f"SELECT e.dst, r.n + 1 FROM r JOIN e ON r.x = e.src WHERE r.n < {depth})")
            return self.pick([f"{cte} SELECT x, min(n) AS n FROM r GROUP BY x",
                              f"{cte} SELECT n, count(*) AS c FROM r GROUP BY n",
                              f"{cte} SELECT DISTINCT x FROM r"]), ["int", "int"]
        if r < 0.55:
            where = self.pred(Scope([("a", "int"), ("b", "str"), ("c", "num")]), 1)
            cte = (f"WITH RECURSIVE r(k, n) AS (SELECT a, 0 FROM t WHERE {where} UNION ALL "
                   f"SELECT k + {self.rng.randint(-1, 2)}, n + 1 FROM r WHERE n < {depth})")
            return self.pick([f"{cte} SELECT k, n FROM r", f"{cte} SELECT n, count(*) AS c, "
                              "sum(k) AS s FROM r GROUP BY n"]), ["int", "int"]
        if r < 0.8:
            cte = (f"WITH RECURSIVE r(s, n) AS (SELECT {self.expr(Scope([('b', 'str')]), 'str', 1)}"
                   f", 0 FROM t UNION SELECT {self.pick(['s', 'upper(s)', 'left(s, 2)'])} || "
                   f"{self.pick(STRINGS)}, n + 1 FROM r WHERE n < {depth})")
            return f"{cte} SELECT s, n FROM r", ["str", "int"]
        cte = (f"WITH RECURSIVE r(id, n) AS (SELECT id, 0 FROM u WHERE a % 3 = 0 UNION "
               f"SELECT u.id, r.n + 1 FROM r JOIN t ON t.id = r.id JOIN u ON u.a = t.a "
               f"WHERE r.n < {depth})")
        return f"{cte} SELECT id, max(n) AS n FROM r GROUP BY id", ["int", "int"]

    def anti_join(self) -> tuple[str, list[str]]:
        """Rows of one table with no partner in another: LEFT JOIN ... WHERE right IS NULL."""
        left, lscope = self.table(self.pick(["t", "u"]))
        right, rscope = self.table(self.pick(["u", "e", "t"]))
        on = f"{self.pick(lscope.of('int'))} = {self.pick(rscope.of('int'))}"
        if self.chance(0.4):
            on += f" AND {self.pred(rscope, 1)}"
        key = self.pick(lscope.of("int"))
        return (f"SELECT {key} AS k, {self.expr(lscope, 'str', 1)} AS v FROM {left} LEFT JOIN "
                f"{right} ON {on} WHERE {self.pick(rscope.of('int'))} IS NULL", ["int", "str"])

    def pick_base(self) -> tuple[str, list[str]]:
        r = self.rng.random()
        if r < 0.4:
            return self.simple()
        if r < 0.75:
            return self.grouped()
        return self.set_op()

    def query(self) -> str:
        """One view: a shape drawn by its share of all views, then drawn itself."""
        shapes = [(0.3, self.simple), (0.3, self.grouped), (0.1, self.set_op),
                  (0.08, self.scalar_subquery), (0.04, self.derived), (0.04, self.anti_join),
                  (0.07, self.top_k), (0.07, self.recursive)]
        r = self.rng.random()
        for share, shape in shapes:
            if r < share:
                return shape()[0]
            r -= share
        return shapes[-1][1]()[0]
