"""Output column names as DuckDB derives them for the same SELECT list.

Invariant: ``output_name`` of a SELECT item is the name DuckDB's ``description`` gives that
column: an alias as typed, a bare column by its name, and any other expression as DuckDB
prints its parsed form (operators parenthesised, ``count(*)`` as ``count_star()``, LIKE as
``~~``, function names lowercased as typed and double-quoted where they are SQL keywords).
Names come from the source text where sqlglot renames (``string_agg`` stays ``string_agg``),
so a view's columns equal what ``/sql`` returns for its SELECT. A construct this module does
not know is printed by sqlglot, which is right for the common cases and never fails.
"""

from __future__ import annotations

import re
import string

from sqlglot import exp

# `name.translate(FOLD)`: an identifier as DuckDB compares identifiers, its ASCII letters in
# lower case and every other character as written (DuckDB folds ASCII only: "Ñame" and
# "ÑAME" are one table, "ñame" another). Every name the planner and the server resolve or
# store is folded so; Python's `lower()` would also fold Ñ, and the name the server stored
# would then not be the one DuckDB finds for the user's own SQL.
FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# DuckDB's keywords (duckdb_keywords(), all categories): a function named like one of these
# is printed double-quoted ("left"(b, 1), "year"(d)).
_KEYWORDS = frozenset("""
abort absolute access action add admin after aggregate all also alter always analyse analyze
and anti any approx array as asc asof assertion assignment asymmetric at attach attribute
authorization backward before begin between bigint binary bit boolean both by cache call
called cascade cascaded case cast catalog centuries century chain char character
characteristics check checkpoint class close cluster coalesce collate collation column columns
columns comment comments commit committed compression concurrently configuration conflict
connect connection constraint constraints content continue conversion copy cost create cross
csv cube current cursor cycle data database day days deallocate dec decade decades decimal
declare default defaults deferrable deferred definer delete delimiter delimiters depends desc
describe destroy detach dictionary disable discard disconnect distance distinct do document
domain double drop each else enable encoding encrypted end enum error escape event exact
except exclude excluding exclusive execute exists explain export export_state extension
extensions external extract false family fetch filter first float following for force foreign
forward freeze from full function functions generated generated glob global grant granted
group grouping grouping_id groups handler having header hold hour hours identity if ignore
ilike immediate immutable implicit import in include including increment index indexes inherit
inherits initially inline inner inout input insensitive insert install instead int integer
intersect interval into invoker is isnull isolation join json key label lambda language large
last lateral leading leakproof left level like limit listen load local location lock locked
logged macro map map mapping match matched materialized maxvalue merge method microsecond
microseconds millennia millennium millisecond milliseconds minute minutes minvalue mode month
months move name names national natural nchar nearest new next no none not nothing notify
notnull nowait null nullif nulls numeric object of off offset oids old on only operator option
options or order ordinality others out outer over overlaps overlay overriding owned owner
parallel parser partial partition partitioned passing password percent persistent pivot
pivot_longer pivot_wider placing plans policy position positional pragma preceding precision
prepare prepared preserve primary prior privileges procedural procedure program publication
qualify quarter quarters quote range read real reassign recheck recursive ref references
referencing refresh register reindex relative release rename repeatable replace replica reset
resource resources respect restart restrict returning returns revoke right role rollback
rollup row rows rule sample savepoint schema schemas scope scroll search second seconds secret
secure security select semi sequence sequences serializable server session set setof sets
share show similar similarity simple skip smallint snapshot some sorted source sql stable
standalone start statement statistics stdin stdout storage stored strict strip struct struct
subscription substring summarize symmetric sysid system table tables tablesample tablespace
target temp template temporary text then ties time timestamp to trailing transaction transform
treat trigger trim true truncate trusted try_cast try_cast tuple tuple type types unbounded
uncommitted unencrypted union unique unknown unlisten unlogged unpack unpivot until update use
user using vacuum valid validate validator value values varchar variable variadic varying
verbose version view views virtual volatile week weeks when where whitespace window with
within without work wrapper write xml xmlattributes xmlconcat xmlelement xmlexists xmlforest
xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable year years yes zone
""".split())

_BINARY = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
           exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.IntDiv: "//",
           exp.Mod: "%", exp.DPipe: "||", exp.Like: "~~", exp.ILike: "~~*",
           exp.NullSafeEQ: "IS NOT DISTINCT FROM", exp.NullSafeNEQ: "IS DISTINCT FROM"}
_NOT_BINARY = {exp.Like: "!~~", exp.ILike: "!~~*"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def output_name(item: exp.Expression, sql: str) -> str:
    """DuckDB's name for one SELECT item (``sql`` is the text the item was parsed from)."""
    if isinstance(item, exp.Alias):
        return item.alias
    while isinstance(item, exp.Paren):
        item = item.this
    if isinstance(item, exp.Column):
        return item.name.translate(FOLD)  # the catalog's name (the planner's catalog is folded)
    return _Printer(sql).show(item)


_KEYWORD_PARTS = {
    **{p: p for p in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "WEEK", "QUARTER",
                      "DECADE", "CENTURY", "MILLENNIUM")},
    **{p: p[:-1] for p in ("YEARS", "MONTHS", "DAYS", "HOURS", "MINUTES", "SECONDS", "WEEKS",
                           "QUARTERS", "DECADES")},
    "CENTURIES": "CENTURY", "MILLENNIA": "MILLENNIUM",
    **{p: "MILLISECONDS" for p in ("MILLISECOND", "MILLISECONDS")},
    **{p: "MICROSECONDS" for p in ("MICROSECOND", "MICROSECONDS")},
}
_EXTRACT = re.compile(r"extract\s*\(\s*'?([A-Za-z_]+)'?\s+from\b", re.IGNORECASE)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _identifier(name: str) -> str:
    """A column's name inside an expression's name, as DuckDB prints it: double-quoted when
    it is not a plain ASCII word or is a keyword (`(a."ñ" + 1)`, `("year" + 1)`)."""
    if _PLAIN.fullmatch(name) and name.translate(FOLD) not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


class _Printer:
    def __init__(self, sql: str) -> None:
        self.sql = sql

    def show(self, e: exp.Expression) -> str:
        try:
            return self._show(e)
        except Exception:  # noqa: BLE001 - a name is best effort; sqlglot's text is the fallback
            return _sqlglot(e)

    def _show(self, e: exp.Expression) -> str:
        s = self.show
        if isinstance(e, exp.Paren):
            return s(e.this)
        if isinstance(e, exp.Column):
            return ".".join(_identifier(p.name) for p in e.parts)
        if isinstance(e, exp.Literal):
            if e.is_string:
                return "'" + e.this.replace("'", "''") + "'"
            return str(e.this)
        if isinstance(e, exp.Null):
            return "NULL"
        if isinstance(e, exp.Boolean):
            return "true" if e.this else "false"
        if isinstance(e, exp.Neg):
            if isinstance(e.this, exp.Literal) and not e.this.is_string:
                return "-" + s(e.this)
            return f"(-({s(e.this)}))"
        if type(e) in _BINARY:
            if self._called(e, "mod"):  # mod(a, 3) is a Mod node; DuckDB prints the call
                return self._function(e)
            if e.args.get("negate") and type(e) in _NOT_BINARY:
                return f"({s(e.this)} {_NOT_BINARY[type(e)]} {s(e.expression)})"
            return f"({s(e.this)} {_BINARY[type(e)]} {s(e.expression)})"
        if isinstance(e, (exp.And, exp.Or)):
            word = " AND " if isinstance(e, exp.And) else " OR "
            return "(" + word.join(s(x) for x in _flatten(e, type(e))) + ")"
        if isinstance(e, exp.Not):
            inner = e.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if type(inner) in _NOT_BINARY:
                return f"({s(inner.this)} {_NOT_BINARY[type(inner)]} {s(inner.expression)})"
            if isinstance(inner, exp.Is):
                return self._is(inner, negate=True)
            return f"(NOT {s(e.this)})"
        if isinstance(e, exp.Is):
            return self._is(e, negate=False)
        if isinstance(e, exp.Between):
            return f"({s(e.this)} BETWEEN {s(e.args['low'])} AND {s(e.args['high'])})"
        if isinstance(e, exp.In):
            q = e.args.get("query")
            if q is not None:
                q = q.this if isinstance(q, exp.Subquery) else q
                return f"({s(e.this)} = ANY({_sqlglot(q)}))"
            return f"({s(e.this)} IN (" + ", ".join(s(x) for x in e.expressions) + "))"
        if isinstance(e, exp.Case):
            out = "CASE "
            for w in e.args.get("ifs") or []:
                cond = s(w.this) if e.this is None else f"({s(e.this)} = {s(w.this)})"
                out += f" WHEN ({cond}) THEN ({s(w.args['true'])})"
            d = e.args.get("default")
            return out + f" ELSE {s(d) if d is not None else 'NULL'} END"
        if isinstance(e, exp.Coalesce):
            return "COALESCE(" + ", ".join(s(x) for x in [e.this, *e.expressions]) + ")"
        if isinstance(e, (exp.Cast, exp.TryCast)):
            word = "TRY_CAST" if isinstance(e, exp.TryCast) else "CAST"
            return f"{word}({s(e.this)} AS {_type(e.args['to'])})"
        if isinstance(e, exp.Extract):
            return f"date_part('{self._part(e)}', {s(e.expression)})"
        if isinstance(e, exp.Subquery):
            return f"({_sqlglot(e.this)})"
        if isinstance(e, exp.Exists):
            return f"EXISTS({_sqlglot(e.this)})"
        if isinstance(e, exp.Count) and (e.this is None or isinstance(e.this, exp.Star)):
            return "count_star()"
        if isinstance(e, exp.Func):
            return self._function(e)
        return _sqlglot(e)

    def _part(self, e: exp.Extract) -> str:
        """The part of `extract(part FROM x)` as DuckDB names it: SQL's keywords for parts (and
        their plurals) in capitals, milli- and microseconds as MILLISECONDS and MICROSECONDS,
        any other word as typed (`dow`, `DOW`, `epoch`). sqlglot keeps only the capitals, so
        the word is read from the text, at the last `extract(` before the argument."""
        name = e.this.name.upper()
        if name in _KEYWORD_PARTS:
            return _KEYWORD_PARTS[name]
        start = next((n.meta["start"] for n in e.expression.walk()
                      if isinstance(n.meta.get("start"), int)), None)
        typed = list(_EXTRACT.finditer(self.sql[:start])) if start is not None else []
        if typed and typed[-1].group(1).upper() == name:
            return typed[-1].group(1)
        return name

    def _is(self, e: exp.Is, negate: bool) -> str:
        rhs = e.expression
        if isinstance(rhs, exp.Null):
            return f"({self.show(e.this)} IS {'NOT ' if negate else ''}NULL)"
        if isinstance(rhs, exp.Boolean):
            op = "IS DISTINCT FROM" if negate else "IS NOT DISTINCT FROM"
            return f"(CAST({self.show(e.this)} AS BOOLEAN) {op} {self.show(rhs)})"
        raise ValueError("IS")

    def _called(self, e: exp.Expression, name: str) -> bool:
        """Whether the user wrote ``e`` as a call of function ``name``."""
        own = e.meta.get("start") if e.meta else None
        if own is None:
            return False
        m = _WORD.match(self.sql, own)
        return bool(m and m.group(0).lower() == name and re.match(r"\s*\(",
                                                                   self.sql[m.end():]))

    def _function(self, e: exp.Expression) -> str:
        name = self._typed(e)
        if name is None:
            raise ValueError("no name")
        if isinstance(e, exp.Anonymous):
            args = list(e.expressions)
        else:
            args = []
            for v in e.args.values():
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, exp.Expression):
                        args.append(x)
            # a date part sqlglot made a Var has no position: it is the first argument
            pos = [-1 if isinstance(a, exp.Var) else _first_pos(a) for a in args]
            if len(args) > 1:
                if any(p is None for p in pos):
                    raise ValueError("argument order unknown")
                args = [a for _, a in sorted(zip(pos, args, strict=True), key=lambda t: t[0])]
        shown = []
        for a in args:
            if isinstance(a, exp.Distinct):
                shown.append("DISTINCT " + ", ".join(self.show(x) for x in a.expressions))
            elif isinstance(a, exp.Var):
                shown.append("'" + a.name.lower() + "'")  # a date part sqlglot uppercased
            else:
                shown.append(self.show(a))
        lname = name.lower()
        if lname in _KEYWORDS:
            lname = f'"{lname}"'
        return f"{lname}(" + ", ".join(shown) + ")"

    def _typed(self, e: exp.Expression) -> str | None:
        """The function name as typed: at the node's own position, or just before the "(" of
        its first argument when sqlglot kept no position for the call itself."""
        own = e.meta.get("start") if e.meta else None
        if own is not None:
            m = _WORD.match(self.sql, own)
            if m and re.match(r"\s*\(", self.sql[m.end():]):
                return m.group(0)
        start = _first_pos(e)
        if start is None:
            return None
        i = start
        while i > 0 and (self.sql[i - 1].isspace() or self.sql[i - 1] == "("):
            i -= 1
        j = i
        while j > 0 and (self.sql[j - 1].isalnum() or self.sql[j - 1] == "_"):
            j -= 1
        if j == i or not self.sql[i:start].strip().startswith("("):
            return None
        return self.sql[j:i]


def _type(t: exp.Expression) -> str:
    txt = t.sql(dialect="duckdb").upper()
    return {"TEXT": "VARCHAR", "INT": "INTEGER"}.get(txt, txt)


def _sqlglot(e: exp.Expression) -> str:
    try:
        return e.sql(dialect="duckdb", normalize_functions="lower")
    except Exception:  # noqa: BLE001 - a name is best effort
        return e.key.upper()


def _flatten(e: exp.Expression, cls: type) -> list[exp.Expression]:
    if isinstance(e, cls):
        return _flatten(e.this, cls) + _flatten(e.expression, cls)
    return [e]


def _first_pos(node: exp.Expression) -> int | None:
    best = None
    for n in node.walk():
        meta = n.meta if hasattr(n, "meta") else None
        if meta and "start" in meta:
            s = meta["start"]
            if best is None or s < best:
                best = s
    return best
