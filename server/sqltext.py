"""Splitting a request's SQL into statements and parsing each one.

Invariant: every `Statement` keeps its exact source text and the line/column where it starts,
so errors (ours, the planner's, DuckDB's) can be reported at a position in the *request*, and
the planner receives the user's own text rather than a regeneration of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.tokens import TokenType

from server.errors import SqlError, inside, position

DIALECT = "duckdb"
_DUCKDB = DuckDB()


# Limits checked on the tokens, before parsing: sqlglot's parser (and later passes over the
# tree) recurse once per nesting level, so a deeply nested statement would otherwise end in a
# RecursionError (or worse, in a thread with a small stack). DuckDB itself stops at an
# expression depth of 1000.
MAX_NESTING = 32
"""Parentheses nested deeper than this are rejected (`too_complex`)."""
MAX_OPERATOR_CHAIN = 1000
"""Binary operators in a row within one parenthesis level, with no comma between them."""
MAX_TOKENS = 1_000_000
"""Tokens in one statement."""

_OPERATORS = {
    getattr(TokenType, n)
    for n in (
        "PLUS", "DASH", "STAR", "SLASH", "MOD", "DIV", "DPIPE", "AMP", "PIPE", "CARET",
        "EQ", "NEQ", "LT", "LTE", "GT", "GTE", "AND", "OR", "NULLSAFE_EQ", "LSHIFT", "RSHIFT",
        "DSTAR", "DAMP", "XOR", "IS", "LIKE", "ILIKE", "GLOB", "IN", "BETWEEN", "ARROW", "DARROW",
    )
    if hasattr(TokenType, n)
}


@dataclass(frozen=True)
class PlainInsert:
    """An `INSERT INTO table VALUES ...` of plain literals (`plain_insert`): the table's name
    and the rows' text exactly as written, and how many rows. What a write needs of it (its
    target, and the rows a combined INSERT carries) without sqlglot's tree."""

    table: str
    values: str
    rows: int


@dataclass(frozen=True)
class Statement:
    kind: str  # CREATE TABLE, DROP TABLE, CREATE VIEW, DROP VIEW, INSERT, UPDATE, DELETE,
    # COPY (FROM or TO: the writer accepts only FROM), SELECT, EXPLAIN (then `inner` is the
    # statement explained: a CREATE VIEW or a SELECT)
    text: str
    tree: Any  # sqlglot's tree (`ast`); None for a plain INSERT until it is first read
    line: int  # 1-based line of the statement's first character in the request
    column: int  # 1-based column of the same
    inner: Statement | None = None
    plain: PlainInsert | None = None

    @property
    def ast(self) -> Any:
        """sqlglot's tree of the statement; a plain INSERT's is built when first read (the
        write path reads `plain` instead), exactly as sqlglot parses it."""
        if self.tree is None and self.plain is not None:
            object.__setattr__(self, "tree", _plain_tree(self.text))
        return self.tree

    def locate(self, line: int | None, column: int | None) -> tuple[int | None, int | None]:
        """Translate a (line, column) inside `text` to a position in the request."""
        if line is None:
            return self.line, self.column
        if column is None:
            return (self.line, self.column) if line == 1 else (self.line + line - 1, None)
        return inside(self.line, self.column, line, column)


# sqlglot's descriptions name its own objects: a token's repr (with a line and column within
# the statement, not the request's) or a tree node's class
_TOKEN_REPR = re.compile(r"<Token token_type: [\w.]+, text: (.*?), line: \d+, col: \d+, "
                         r"start: \d+, end: \d+, comments: \[.*?\]>")
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>")


def _plain(description: str) -> str:
    """A parse error's description in the user's terms: "Expected table name but got
    'WHERE'", "incomplete WHERE"."""
    description = _TOKEN_REPR.sub(lambda m: repr(m.group(1)), description)
    return _MISSING.sub(lambda m: f"incomplete {m.group(1).upper()}", description)


def _parse_error(err: sqlglot.errors.ParseError) -> tuple[str, int | None, int | None]:
    if err.errors:
        e = err.errors[0]
        highlight = e.get("highlight") or ""
        col = e.get("col")
        if isinstance(col, int) and highlight:
            col = max(1, col - len(highlight) + 1)  # sqlglot reports the token's last column
        msg = f"{_plain(e.get('description') or 'syntax error')} near {highlight!r}"
        return msg, e.get("line"), col
    return str(err), None, None


def _token_error(sql: str) -> tuple[str, int | None, int | None]:
    """What sqlglot could not tokenize in `sql` (its message quotes the text, cut short, with
    no position): the string, quoted name or comment left open, as DuckDB says it, and where
    it opens (line and column in `sql`)."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:  # DuckDB's comments nest
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                return "unterminated /* comment", *position(sql, i)
            i = j
        elif c in "'\"":
            escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and not (
                i > 1 and (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            j = i + 1
            while j < n:
                if escapes and sql[j] == "\\":
                    j += 2
                elif sql[j] == c:
                    if not sql.startswith(c, j + 1):
                        break
                    j += 2  # a doubled quote
                else:
                    j += 1
            if j >= n:
                what = "string literal" if c == "'" else "quoted identifier"
                return f"unterminated {what}", *position(sql, i - escapes)
            i = j + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", sql[i:])):
            end = sql.find(m.group(), i + len(m.group()))
            if end < 0:
                return "unterminated dollar-quoted string", *position(sql, i)
            i = end + len(m.group())
        else:
            i += 1
    return "the SQL could not be read", None, None


def split(sql: str) -> list[tuple[str, int, int]]:
    """The statements of `sql` as (text, line, column), split at top-level semicolons."""
    return _split(sql)[0]


def _split(sql: str) -> tuple[list[tuple[str, int, int]], list[Any]]:
    """`split`, and the tokens of the whole of `sql`."""
    try:
        tokens = _DUCKDB.tokenize(sql)
    except sqlglot.errors.TokenError:
        msg, line, column = _token_error(sql)
        raise SqlError(msg, code="syntax_error", line=line or 1, column=column or 1) from None
    except RecursionError:
        raise SqlError("the SQL is too complex to tokenize", code="too_complex") from None
    pieces: list[tuple[str, int, int]] = []
    start: int | None = None
    end = 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None:
                pieces.append((sql[start : end + 1], *position(sql, start)))
            start = None
            continue
        if start is None:
            start = tok.start
            # A comment before the first token belongs to no statement.
        end = tok.end
    if start is not None:
        pieces.append((sql[start : end + 1], *position(sql, start)))
    return pieces, tokens


_KINDS: list[tuple[type[exp.Expression], str]] = [
    (exp.Insert, "INSERT"),
    (exp.Update, "UPDATE"),
    (exp.Delete, "DELETE"),
    (exp.Copy, "COPY"),
]


def classify(ast: exp.Expression) -> str | None:
    if isinstance(ast, exp.Create):
        kind = str(ast.args.get("kind") or "").upper()
        return {"TABLE": "CREATE TABLE", "VIEW": "CREATE VIEW"}.get(kind)
    if isinstance(ast, exp.Drop):
        kind = str(ast.args.get("kind") or "").upper()
        return {"TABLE": "DROP TABLE", "VIEW": "DROP VIEW"}.get(kind)
    for cls, name in _KINDS:
        if isinstance(ast, cls):
            return name
    if isinstance(ast, exp.Query):
        return "SELECT"
    return None


def check_complexity(tokens: list[Any], line: int = 1, column: int = 1) -> None:
    """Reject a statement too deeply nested (or too long) to parse safely: `too_complex`."""

    def too_complex(what: str) -> SqlError:
        return SqlError(
            f"the statement is too complex: {what}", code="too_complex", line=line, column=column
        )

    if len(tokens) > MAX_TOKENS:
        raise too_complex(f"more than {MAX_TOKENS} tokens")
    chains = [0]
    for tok in tokens:
        tt = tok.token_type
        if tt == TokenType.L_PAREN:
            chains.append(0)
            if len(chains) - 1 > MAX_NESTING:
                raise too_complex(f"parentheses nested more than {MAX_NESTING} deep")
        elif tt == TokenType.R_PAREN:
            if len(chains) > 1:
                chains.pop()
        elif tt in (TokenType.COMMA, TokenType.SEMICOLON):
            chains[-1] = 0
        elif tt in _OPERATORS:
            chains[-1] += 1
            if chains[-1] > MAX_OPERATOR_CHAIN:
                raise too_complex(
                    f"more than {MAX_OPERATOR_CHAIN} operators in one expression"
                )


def _explain(text: str, tokens: list[Any], line: int, column: int) -> Statement:
    """EXPLAIN CREATE [MATERIALIZED] VIEW ... or EXPLAIN SELECT ...: the statement explained."""
    if len(tokens) < 2:
        raise SqlError("EXPLAIN needs a statement", code="syntax_error", line=line, column=column)
    start = tokens[0].end + 1
    while start < len(text) and text[start].isspace():
        start += 1
    probe = Statement("?", text, None, line, column)
    ln, col = position(text, start)
    ln2, col2 = probe.locate(ln, col)
    inner = parse_statement(text[start:], ln2 or line, col2 or column)
    if inner.kind not in ("CREATE VIEW", "SELECT"):
        raise SqlError(
            "EXPLAIN supports CREATE [MATERIALIZED] VIEW and SELECT statements",
            code="unsupported",
            line=line,
            column=column,
        )
    return Statement("EXPLAIN", text, inner.ast, line, column, inner)


def parse_statement(
    text: str, line: int = 1, column: int = 1, tokens: list[Any] | None = None
) -> Statement:
    """Parse one statement (`tokens`: its tokens, when the caller has them); raise `SqlError`
    with its position in the request."""
    if tokens is None:
        try:
            tokens = _DUCKDB.tokenize(text)
        except sqlglot.errors.TokenError:
            msg, at_line, at_column = _token_error(text)
            ln, col = Statement("?", text, None, line, column).locate(at_line, at_column)
            raise SqlError(msg, code="syntax_error", line=ln, column=col) from None
    check_complexity(tokens, line, column)
    for a, b in zip(tokens, tokens[1:], strict=False):
        # x'303132' is a BLOB literal to DuckDB, but sqlglot reads a name and a string
        if a.text in ("x", "X") and b.token_type == TokenType.STRING and b.start == a.end + 1:
            probe = Statement("?", text, None, line, column)
            ln, col = probe.locate(*position(text, a.start))
            raise SqlError("BLOB literals (x'...') are not supported", code="unsupported",
                           line=ln or line, column=col or column)
    if tokens and tokens[0].text.upper() == "EXPLAIN":
        return _explain(text, tokens, line, column)
    try:
        asts = [a for a in _DUCKDB.parser().parse(tokens, text) if a is not None]
    except sqlglot.errors.ParseError as e:
        msg, ln, col = _parse_error(e)
        probe = Statement("?", text, None, line, column)
        ln2, col2 = probe.locate(ln, col)
        raise SqlError(f"syntax error: {msg}", code="syntax_error", line=ln2, column=col2) from None
    except RecursionError:
        raise SqlError(
            "the statement is too complex: nested too deeply to parse",
            code="too_complex",
            line=line,
            column=column,
        ) from None
    except Exception as e:  # noqa: BLE001 - a parser bug must be a client error, not a 500
        raise SqlError(
            f"cannot parse the statement: {type(e).__name__}: {e}",
            code="syntax_error",
            line=line,
            column=column,
        ) from None
    if len(asts) != 1:
        raise SqlError(
            "expected exactly one statement", code="syntax_error", line=line, column=column
        )
    ast = asts[0]
    kind = classify(ast)
    if kind is None:
        first = text.split(None, 1)[0].upper() if text.strip() else "?"
        raise SqlError(
            f"unsupported statement {first}: supported are CREATE TABLE, DROP TABLE, "
            "CREATE [MATERIALIZED] VIEW, DROP VIEW, INSERT, UPDATE, DELETE, COPY ... FROM and "
            "SELECT",
            code="unsupported",
            line=line,
            column=column,
        )
    return Statement(kind, text, ast, line, column)


def parse_script(sql: str, max_statements: int) -> list[Statement]:
    plain = plain_insert(sql)
    if plain is not None:
        return [plain]
    pieces, tokens = _split(sql)
    if not pieces:
        raise SqlError("no SQL statement given", code="syntax_error")
    if len(pieces) > max_statements:
        raise SqlError(
            f"too many statements (at most {max_statements})", code="too_many_statements"
        )
    if len(pieces) == 1 and pieces[0][0] == sql:
        # The script is exactly one statement: its tokens are the script's (a single-row
        # write's planning spent a fifth of its time tokenizing twice).
        return [parse_statement(sql, 1, 1, tokens)]
    return [parse_statement(text, line, col) for text, line, col in pieces]


# ---------------------------------------------------------------------- plain INSERTs

# Most writes are `INSERT INTO t VALUES (...)` with literal values; sqlglot's tokenizer and
# recursive-descent parser spent a tenth of a single-row write's time on them (a descent of
# about fifteen precedence levels per value), and two thirds of a 10,000-row INSERT's.
# `plain_insert` reads exactly this grammar with regular expressions; the write path needs
# only the target and the rows' text (DuckDB parses the text itself), and the tree, if
# anything reads it, is the one sqlglot builds (tests/test_server_plain_insert compares the
# two). Any other text, however close, goes to sqlglot:
#   INSERT INTO <name> VALUES <row> [, <row>]* [;]
#   <row>:   ( <value> [, <value>]* )
#   <value>: [-]digits[.digits] | 'text' ('' inside, no backslash) | NULL | TRUE | FALSE
#            | DATE 'text'
# with <name> an unquoted identifier that is not a keyword, and only spaces, tabs and newlines
# between (no comments).
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_.])"
_STRING = r"'(?:[^'\\]|'')*'"
_VALUE = rf"(?:{_NUMBER}|{_STRING}|(?:NULL|TRUE|FALSE)(?![0-9A-Za-z_])|DATE[ \t\n]+{_STRING})"
_ROW = rf"\([ \t\n]*{_VALUE}(?:[ \t\n]*,[ \t\n]*{_VALUE})*[ \t\n]*\)"
_PLAIN_INSERT = re.compile(
    rf"[ \t\n]*(?P<stmt>INSERT[ \t\n]+INTO[ \t\n]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t\n]+"
    rf"VALUES[ \t\n]*(?P<values>{_ROW}(?:[ \t\n]*,[ \t\n]*{_ROW})*))[ \t\n]*;?[ \t\n]*",
    re.IGNORECASE,
)
_ROW_RE = re.compile(_ROW, re.IGNORECASE)
_TOKEN = re.compile(
    r"[ \t\n]*(?:(?P<open>\()|(?P<close>\))|(?P<comma>,)|(?P<neg>-)?(?P<number>[0-9]+(?:\.[0-9]+)?)"
    r"|'(?P<string>(?:[^'\\]|'')*)'|(?P<word>NULL|TRUE|FALSE)|DATE[ \t\n]+'(?P<date>(?:[^'\\]|'')*)')",
    re.IGNORECASE,
)


def _template(sql: str) -> exp.Expression:
    return _DUCKDB.parser().parse(_DUCKDB.tokenize(sql), sql)[0]


# The arguments sqlglot sets on such an INSERT (is_function=False, stored=False, ..., in its
# order, `this` and `expression` replaced), and its tree for a DATE literal: taken from sqlglot
# itself, so the trees built here follow its version.
_INSERT_ARGS = dict(_template("INSERT INTO t VALUES (1)").args)
_DATE = _template("SELECT DATE '2000-01-01'").expressions[0]


def plain_insert(sql: str) -> Statement | None:
    """The one statement of `sql` when it is a plain INSERT (the grammar above); None for
    anything else. Its tree is built only if read (`Statement.ast`)."""
    m = _PLAIN_INSERT.fullmatch(sql)
    if m is None or m.group("name").upper() in _DUCKDB.tokenizer_class.KEYWORDS:
        return None
    values = m.group("values")
    plain = PlainInsert(m.group("name"), values, sum(1 for _ in _ROW_RE.finditer(values)))
    return Statement("INSERT", m.group("stmt"), None, *position(sql, m.start("stmt")),
                     plain=plain)


def _plain_tree(text: str) -> exp.Expression:
    """The tree sqlglot parses for the plain INSERT `text`."""
    m = _PLAIN_INSERT.fullmatch(text)
    assert m is not None
    rows: list[exp.Expression] = []
    row: list[exp.Expression] = []
    for t in _TOKEN.finditer(text, m.start("values"), m.end("values")):
        kind = t.lastgroup
        if kind == "close":
            rows.append(exp.Tuple(expressions=row))
        elif kind == "open":
            row = []
        elif kind == "number":
            lit = exp.Literal(this=t.group("number"), is_string=False)
            row.append(exp.Neg(this=lit) if t.group("neg") else lit)
        elif kind == "string":
            row.append(exp.Literal(this=t.group("string").replace("''", "'"), is_string=True))
        elif kind == "word":
            word = t.group("word").upper()
            row.append(exp.Null() if word == "NULL" else exp.Boolean(this=word == "TRUE"))
        elif kind == "date":
            date = _DATE.copy()
            date.this.set("this", t.group("date").replace("''", "'"))
            row.append(date)
    return exp.Insert(**{
        **_INSERT_ARGS,
        "this": exp.Table(this=exp.Identifier(this=m.group("name"), quoted=False)),
        "expression": exp.Values(expressions=rows),
    })
