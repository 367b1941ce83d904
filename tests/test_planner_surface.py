"""The SQL surface a new user meets: refusals name what the user typed at its position (never
sqlglot's internal names), any OVER is refused as a window function, and view columns are
named as DuckDB names the same SELECT's columns.
"""

from __future__ import annotations

import duckdb
import pytest
from planner_support import SCHEMAS, catalog

from planner import PlanError, compile_view

REFUSALS = [
    # (sql, code, exact message, line, column)
    ("SELECT id, sum(a) OVER (ORDER BY a) FROM t", "unsupported",
     "window functions are not supported (sum(...) OVER)", 1, 12),
    ("SELECT id, row_number() OVER () FROM t", "unsupported",
     "window functions are not supported (row_number(...) OVER)", 1, 12),
    ("SELECT a,\n  count(*) OVER (PARTITION BY a) FROM t GROUP BY a", "unsupported",
     "window functions are not supported (count(...) OVER)", 2, 3),
    ("SELECT id,\n  max(a) OVER w FROM t WINDOW w AS (ORDER BY id)", "unsupported",
     "window functions are not supported (max(...) OVER)", 2, 3),
    ("SELECT id FROM t ORDER BY sum(a) OVER () LIMIT 2", "unsupported",
     "window functions are not supported (sum(...) OVER)", 1, 27),
    ("SELECT a, sum(sum(a)) OVER () FROM t GROUP BY a", "unsupported",
     "window functions are not supported (sum(...) OVER)", 1, 11),
    ("SELECT string_agg(b, ',') FROM t", "unsupported",
     "aggregate function string_agg is not supported", 1, 8),
    ("SELECT  STRING_AGG(b) FROM t", "unsupported",
     "aggregate function STRING_AGG is not supported", 1, 9),
    ("SELECT list(b) FROM t", "unsupported", "aggregate function list is not supported", 1, 8),
    ("SELECT id,\n bool_or(flag) FROM t GROUP BY id", "unsupported",
     "aggregate function bool_or is not supported", 2, 2),
    ("SELECT unnest(b) FROM t", "unsupported",
     "function or construct unnest is not supported", 1, 8),
    ("SELECT * FROM t, unnest(t.b) AS u(x)", "unsupported",
     "unnest(t.b) is not supported: views have no LIST type, so unnest takes a list literal "
     "[...] or generate_series/range", 1, 25),
    ("SELECT *\n  FROM unnest([[1, 2], [3]])", "unsupported",
     "unnest of a nested list is not supported (views have no LIST type)", 2, 16),
    ("SELECT * FROM UNNEST(NULL)", "type_error", "UNNEST needs a list, got NULL", 1, 15),
    ("SELECT * FROM unnest([1], [2])", "unsupported", "unnest takes exactly one list argument "
     "here (no several lists, WITH ORDINALITY or named options)", 1, 15),
    ("SELECT * FROM unnest([1, 2]) AS u(x, y)", "type_error", "2 column aliases for 1 column",
     1, 33),
    ("SELECT * FROM t LEFT JOIN unnest([1]) u(x) ON t.a = u.x", "unsupported",
     "only inner and cross joins with a table function are supported", 1, 17),
    ("SELECT * FROM unnest([1, 'a'])", "type_error", "cannot convert 'a' to INTEGER", 1, 26),
    ("SELECT t.id FROM t, LATERAL unnest([1]) WITH ORDINALITY", "unsupported",
     "unnest takes exactly one list argument here (no several lists, WITH ORDINALITY or "
     "named options)", 1, 21),
    ("SELECT a, count(*) FROM t GROUP BY GROUPING SETS ((a), ())", "unsupported",
     "GROUPING SETS is not supported", 1, 36),
    ("SELECT a, count(*) FROM t GROUP BY CUBE (a)", "unsupported", "CUBE is not supported",
     1, 36),
    # (they named count, or BY, as the construct not supported)
    ("SELECT id,\n  sum(a)  filter (where a > 0) FROM t GROUP BY id", "unsupported",
     "an aggregate's FILTER (WHERE ...) is not supported (sum(...) FILTER): put the condition "
     "inside it, as in sum(CASE WHEN ... THEN x END)", 2, 11),
    ("SELECT count(*) FROM t GROUP BY ()", "unsupported", "GROUP BY () is not supported: "
     "without GROUP BY, the aggregates are over all rows, as one group", 1, 33),
    ("SELECT a, count(*) FROM t GROUP BY rollup (a)", "unsupported", "rollup is not supported",
     1, 36),
    ("SELECT regexp_matches(b, 'a') FROM t", "unsupported",
     "function or construct regexp_matches is not supported", 1, 8),
    ("SELECT sha256(b) FROM t", "unsupported",
     "function or construct sha256 is not supported", 1, 8),
    # operators are named, not their left operand (they said "construct b")
    ("SELECT b[2:3] FROM t", "unsupported",
     "function or construct [] (an index or slice) is not supported", 1, 8),
    ("SELECT b GLOB 'x*' FROM t", "unsupported", "function or construct GLOB is not supported",
     1, 8),
    ("SELECT (b) SIMILAR TO 'x' FROM t", "unsupported",
     "function or construct SIMILAR TO is not supported", 1, 8),
    ("SELECT id FROM t ORDER BY b COLLATE nocase LIMIT 1", "unsupported",
     "function or construct COLLATE is not supported", 1, 27),
    ("SELECT upper(b) ~ 'x' FROM t", "unsupported", "function or construct regular "
     "expression matching (~, REGEXP) is not supported", 1, 8),
    ("SELECT b, id << 1 FROM t", "unsupported", "function or construct << is not supported",
     1, 11),
    ("SELECT id & 1 FROM t", "unsupported", "function or construct & is not supported", 1, 8),
    ("SELECT ~ id FROM t", "unsupported", "function or construct ~ is not supported", 1, 8),
    ("SELECT [b] @> ['x'] FROM t", "unsupported",
     "function or construct @> is not supported", 1, 8),
    # (they read the column's name as the part: DuckDB reads its value, and refuses a word
    # that names no column)
    ("SELECT date_trunc(b, d) FROM t", "unsupported", "the date part of date_trunc must be a "
     "string constant, as in date_trunc('month', ...)", 1, 19),
    ("SELECT date_part(t.b, d) FROM t", "unsupported", "the date part of date_part must be a "
     "string constant, as in date_part('month', ...)", 1, 18),
    ("SELECT id,\n  datediff(day, d, d) FROM t", "unsupported", "the date part of datediff "
     "must be a string constant, as in datediff('month', ...)", 2, 12),
    ("SELECT date_diff(b, d, d) FROM t", "unsupported", "the date part of date_diff must be a "
     "string constant, as in date_diff('month', ...)", 1, 18),
    ("SELECT date_trunc('year' || b, d) FROM t", "unsupported", "the date part of date_trunc "
     "must be a string constant, as in date_trunc('month', ...)", 1, 19),
    # (it said "IN subquery must return one column", a type error)
    ("SELECT id FROM t WHERE (a, b) NOT IN (SELECT a, s FROM u)", "unsupported",
     "comparing a row of values with a subquery ((a, b) IN (SELECT ...)) is not supported: "
     "compare with EXISTS and an equality per column", 1, 24),
    ("SELECT id FROM t WHERE ((a, b)) = ANY (SELECT a, s FROM u)", "unsupported",
     "comparing a row of values with a subquery ((a, b) IN (SELECT ...)) is not supported: "
     "compare with EXISTS and an equality per column", 1, 24),
    # (it was strpos with its arguments swapped: DuckDB has no locate)
    ("SELECT id, LOCATE('a', b) FROM t", "unsupported",
     "function or construct LOCATE is not supported", 1, 12),
    ("SELECT id, charindex('a', b) FROM t", "unsupported",
     "function or construct charindex is not supported", 1, 12),
    # (it was coalesce: sqlglot reads Oracle's nvl so, and DuckDB has no nvl; ifnull is DuckDB's)
    ("SELECT id, NVL(a, 'x') FROM t", "unsupported",
     "function nvl is not supported (DuckDB has none): use coalesce", 1, 12),
    # (it was LIMIT 20: every row of a small table)
    ("SELECT id FROM t ORDER BY id\nLIMIT 20 PERCENT", "unsupported",
     "LIMIT ... PERCENT is not supported", 2, 7),
    ("SELECT id FROM t ORDER BY id LIMIT 20%", "unsupported",
     "LIMIT ... PERCENT is not supported", 1, 36),
    ("SELECT id FROM t ORDER BY id\nFETCH FIRST 2 ROWS WITH TIES", "unsupported",
     "WITH TIES is not supported", 2, 13),
    # (DuckDB sorts each distinct a by an arbitrary one of its c values)
    ("SELECT DISTINCT a FROM t\nORDER BY a, c + 1 LIMIT 3", "unsupported",
     "ORDER BY of a SELECT DISTINCT must be computed from its output columns", 2, 13),
]


@pytest.mark.parametrize("sql,code,message,line,column", REFUSALS)
def test_refusals_name_what_the_user_typed(sql: str, code: str, message: str, line: int,
                                           column: int) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    assert info.value.to_dict() == {"code": code, "message": message, "line": line,
                                    "column": column}


SELECT_LISTS = [
    "count(*), COUNT(*), sum(a), SUM(c), count(DISTINCT b), avg(c), min(b), MAX(d)",
    "a+1, a + 1, (a+1)*2, -a, NOT flag, a > 2, a = 1 AND flag, a IS NULL, a IS NOT NULL",
    "a BETWEEN 1 AND 3, a IN (1,2), b LIKE 'a%', b ILIKE 'a%', b NOT LIKE 'x', a NOT IN (1, 2)",
    "CASE WHEN a > 1 THEN 1 ELSE 2 END, CASE a WHEN 1 THEN 2 END,"
    " CASE WHEN a>1 THEN 'x' WHEN a<0 THEN 'y' END",
    "coalesce(a, 0), COALESCE(a,0), nullif(a,2), ifnull(a, 1), CAST(a AS DOUBLE), a::VARCHAR,"
    " TRY_CAST(b AS INTEGER), CAST(c AS DECIMAL(10,2))",
    "lower(b), LOWER(b), upper(b), substr(b, 2, 2), substring(b, 2), trim(b), ltrim(b),"
    " b || 'x', concat(b, 1), replace(b, 'a', 'A'), left(b, 1), right(b, 2), reverse(b)",
    "length(b), strlen(b), strpos(b, 'a'), starts_with(b, 'a'), contains(b, 'a')",
    "1, 'x', NULL, true, 1.5, 'it''s', -1, 1e3",
    "a / 2, a // 2, a % 3, mod(a,3), abs(c), round(c, 1), round(c), floor(c), ceil(c),"
    " sqrt(c), power(c, 2), sign(c), greatest(a, id), least(c, 2.0)",
    "year(d), month(d), extract(day FROM d), date_trunc('month', d), d + 1,"
    " date_diff('day', d, DATE '2024-01-01'), date_part('year', d)",
    # a part that is not one of SQL's keywords is named as typed (they were all capitals)
    "extract(dow FROM d), extract(DOW FROM d), extract(Year FROM d), extract(days FROM d),"
    " extract(millisecond FROM d), extract(microseconds FROM CAST(d AS TIMESTAMP)),"
    " extract(isodow FROM d), extract(epoch FROM d), extract(yearweek FROM d),"
    " extract(century FROM d), extract(millenniums FROM d), date_trunc('millenniums', d),"
    " extract('doy' FROM d)",
    "a, A, t.a, T.A, a AS x, a AS X, a AS \"Mixed Case\", t.a + 1, A + 1",
    "a <> 3, a != 3, a IS DISTINCT FROM 2, a IS NOT DISTINCT FROM 1, flag IS TRUE,"
    " flag IS NOT FALSE, NOT (a > 1), a > 1 OR flag OR b IS NULL, a - -1",
    "max(a) - min(a), sum(a) + 1, count(a), count(1), sum(DISTINCT a), count(*) + 1",
    "(SELECT max(a) FROM u), EXISTS (SELECT 1 FROM u), a IN (SELECT a FROM u)",
    "IF(a > 1, 1, 2), (a), ((a)), a*2-c",
    "id, sum(a) FILTER_NONE",
]
SELECT_LISTS = [s.replace(" FILTER_NONE", "") for s in SELECT_LISTS]


@pytest.mark.parametrize("select_list", SELECT_LISTS)
def test_view_column_names_equal_duckdb(select_list: str) -> None:
    con = duckdb.connect()
    for name, cols in SCHEMAS.items():
        con.execute(f"CREATE TABLE {name} (" + ", ".join(f"{c} {t}" for c, t in cols) + ")")
    grouped = "sum(" in select_list and "id," in select_list
    sql = f"SELECT {select_list} FROM t" + (" GROUP BY id" if grouped else "")
    # a view's columns as DuckDB names them: a query's names, repeated ones made unique
    # (`count(*)`, `count_star()_1`: `planner.unique_names`)
    con.execute(f"CREATE VIEW v AS {sql}")
    want = [r[0] for r in con.execute("DESCRIBE v").fetchall()]
    got = [c.name for c in compile_view(sql, catalog()).columns]
    assert got == want
    got_view = [c.name for c in compile_view(f"CREATE VIEW v AS\n  {sql}", catalog()).columns]
    assert got_view == want


STAR_QUERIES = [
    "SELECT * FROM (SELECT a, substr('Ba', 2, 2) FROM t) z",
    "SELECT * FROM (SELECT a, CASE WHEN flag IS TRUE THEN a ELSE id END FROM t) z",
    "SELECT * FROM (SELECT a, upper('Ab') FROM t UNION SELECT a, b FROM t) z ORDER BY 1, 2"
    " LIMIT 3",
    'SELECT * FROM (SELECT a AS "Mixed Case" FROM t) z',
    'SELECT z.* FROM (SELECT a AS "Mixed Case", b FROM t) z("X")',
    'SELECT * FROM (SELECT 1 AS A UNION SELECT 2) q',
    'SELECT * FROM (VALUES (1, 2)) v("Aa", b)',
    'WITH d AS (SELECT a AS "Mixed", upper(b) FROM t) SELECT * FROM d',
    'WITH d("Q") AS (SELECT a FROM t) SELECT * FROM d',
    'SELECT * FROM (SELECT a AS "M" FROM t) x, LATERAL (SELECT x.m + 1 AS "P") y',
    'WITH RECURSIVE r("N") AS (SELECT 1 UNION ALL SELECT "N" + 1 FROM r WHERE "N" < 3)'
    ' SELECT * FROM r',
    'SELECT * FROM (SELECT a AS "M", b FROM t) x NATURAL JOIN (SELECT a AS "m", s FROM u) y',
    'SELECT * FROM ((SELECT 1 AS "K") x CROSS JOIN (SELECT 2 AS "K") y) j',
    'SELECT * FROM ((SELECT 1 AS "K") x CROSS JOIN (SELECT 2 AS "L") y) j("A")',
    "SELECT a, count(*) FROM t GROUP BY a, 10.0",
    "SELECT a FROM t ORDER BY 1 LIMIT 2.0 OFFSET 1.0",
    # a call just before FROM (...): its name is the call's, not the word before the "("
    # after it (`max(a)` was named `"from"(a)`)
    "SELECT max(a) FROM (SELECT a, b FROM t) z",
    "SELECT a, count(b) FROM (SELECT a, b FROM t) z GROUP BY a",
]


@pytest.mark.parametrize("sql", STAR_QUERIES)
def test_star_column_names_equal_duckdb(sql: str) -> None:
    """A `*` over a derived table, a CTE, a join or a LATERAL names its columns as DuckDB
    does (case as typed, an expression as DuckDB prints it), and resolves them (a column
    named by an expression with capitals once could not be found); GROUP BY 10.0 is a
    constant and LIMIT 2.0 a count, as in DuckDB."""
    con = duckdb.connect()
    for name, cols in SCHEMAS.items():
        con.execute(f"CREATE TABLE {name} (" + ", ".join(f"{c} {t}" for c, t in cols) + ")")
    con.execute(f"CREATE VIEW v AS {sql}")
    want = [r[0] for r in con.execute("DESCRIBE v").fetchall()]
    assert [c.name for c in compile_view(sql, catalog()).columns] == want


@pytest.mark.parametrize("sql", ["SELECT a FROM t ORDER BY 1.5 LIMIT 1",
                                 "SELECT a FROM t LIMIT 1.5"])
def test_non_integer_order_and_limit_literals_are_refused(sql: str) -> None:
    with pytest.raises(PlanError) as e:
        compile_view(sql, catalog())
    assert e.value.code == "unsupported"


def test_quoted_columns_in_expression_names_equal_duckdb() -> None:
    """A column whose name is not a plain ASCII word, or is a keyword, is double-quoted in an
    expression's name as DuckDB prints it (`(a."ñ" + 1)`: it was `(a.ñ + 1)`); a column
    alone keeps its name."""
    from planner import Catalog, Column, TableSchema

    cols = [("ñ", "INTEGER"), ("year", "INTEGER"), ("a b", "INTEGER"), ("Mixed", "INTEGER"),
            ("x1", "INTEGER"), ("1x", "INTEGER")]
    cat = Catalog(tables={"w": TableSchema("w", [Column(c, t) for c, t in cols])})
    con = duckdb.connect()
    con.execute("CREATE TABLE w (" + ", ".join(f'"{c}" {t}' for c, t in cols) + ")")
    sql = ('SELECT w."ñ" + 1, "ñ" * 2, "year" + 1, "a b" - 1, "Mixed" + 1, x1 + 1, "1x" + 1,'
           ' "ñ", "year" FROM w')
    con.execute(f"CREATE VIEW v AS {sql}")
    want = [r[0] for r in con.execute("DESCRIBE v").fetchall()]
    assert [c.name for c in compile_view(sql, cat).columns] == want
