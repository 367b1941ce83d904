"""Every error class is rejected at view creation as a PlanError naming the construct and, where
the construct has one, its line and column; never another exception."""

from __future__ import annotations

import pytest
from planner_support import catalog

from planner import Catalog, PlanError, compile_view

CASES = [
    # (sql, code, substring of message, line, column)
    ("SELEC id FROM t", "syntax_error", "syntax", 1, None),
    ("SELECT id FROM nope", "unknown_table", "nope", 1, 16),
    ("SELECT id,\n  zzz FROM t", "unknown_column", "zzz", 2, 3),
    ("SELECT x.id FROM t", "unknown_table", "x", 1, 8),
    ("SELECT t.nope FROM t", "unknown_column", "t.nope", 1, 8),
    ("SELECT id FROM t JOIN u ON t.a = u.a", "ambiguous_column", "id", 1, 8),
    ("SELECT a FROM t, u", "ambiguous_column", "a", 1, 8),
    ("SELECT b + 1 FROM t", "type_error", "+", 1, 8),
    ("SELECT sum(b) FROM t", "type_error", "SUM", 1, 8),
    ("SELECT id FROM t WHERE b", "type_error", "BOOLEAN", 1, 24),
    ("SELECT lower(a) FROM t", "type_error", "VARCHAR", 1, 14),
    # (an equality of them casts the text, as DuckDB 2: an ordering stays an error)
    ("SELECT id FROM t WHERE b < 1", "type_error", "compare", 1, 24),
    ("SELECT a FROM t UNION SELECT a, b FROM t", "type_error", "columns", None, None),
    ("SELECT a, count(*) FROM t", "grouping_error", "GROUP BY", 1, 8),
    ("SELECT id FROM t WHERE count(*) > 1", "grouping_error", "WHERE", 1, 24),
    ("SELECT id, row_number() OVER () FROM t", "unsupported", "window", 1, 12),
    ("SELECT id FROM t QUALIFY id > 1", "unsupported", "QUALIFY", None, None),
    ("SELECT string_agg(b, ',') FROM t", "unsupported", "aggregate", 1, None),
    # DuckDB's max(x, n) is a LIST of the top n (views have no LIST type); it was read as max(x)
    ("SELECT max(id, 2) FROM t", "unsupported", "MAX with several arguments", 1, 8),
    ("SELECT a, min(id, 2) FROM t GROUP BY a", "unsupported", "MIN with several", 1, 11),
    ("SELECT id FROM t LIMIT a", "unsupported", "LIMIT", None, None),
    # DuckDB's lpad, rpad and chr take an INTEGER and refuse a BIGINT (they were taken)
    ("SELECT lpad(b, id::BIGINT, 'x') FROM t", "type_error", "lpad takes an INTEGER", 1, 16),
    ("SELECT chr(3000000000) FROM t", "type_error", "chr takes an INTEGER, got BIGINT", 1, 12),
    ("SELECT sha256(b) FROM t", "unsupported", "SHA256", 1, 8),
    ("SELECT date_diff('era', DATE '2024-01-01', DATE '2025-01-01') FROM t", "unsupported",
     "date part 'era'", 1, 8),
    ("DELETE FROM t", "unsupported", "DELETE", None, None),
    # modifiers of a qualified star, and set operations by name (both were read as if
    # absent: t.* whole, columns matched by position)
    ("SELECT t.* EXCLUDE (a) FROM t", "unsupported", "EXCLUDE", 1, 8),
    ("SELECT t.* REPLACE (a + 1 AS a) FROM t", "unsupported", "REPLACE", 1, 8),
    ("SELECT t.* RENAME (a AS z) FROM t", "unsupported", "RENAME", 1, 8),
    ("SELECT a FROM t UNION ALL BY NAME SELECT a FROM t", "unsupported", "BY NAME", 1, 1),
    ("SELECT 1; SELECT 2", "syntax_error", "one", None, None),
]


@pytest.mark.parametrize("sql,code,text,line,col", CASES)
def test_error_classes(sql: str, code: str, text: str, line: int | None,
                       col: int | None) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    err = info.value
    assert err.code == code, (err.code, err.message)
    assert text.lower() in err.message.lower()
    if line is not None:
        assert err.line == line, err
    if col is not None:
        assert err.column == col, err


def test_error_dict_shape() -> None:
    with pytest.raises(PlanError) as info:
        compile_view("SELECT nope FROM t", catalog())
    assert info.value.to_dict() == {"code": "unknown_column",
                                    "message": 'column "nope" does not exist',
                                    "line": 1, "column": 8}


def test_no_partial_state_on_error() -> None:
    cat = catalog()
    before = (dict(cat.tables), dict(cat.views))
    with pytest.raises(PlanError):
        compile_view("CREATE VIEW v AS SELECT nope FROM t", cat)
    assert (dict(cat.tables), dict(cat.views)) == before


def test_empty_catalog_unknown_table() -> None:
    with pytest.raises(PlanError) as info:
        compile_view("SELECT 1 FROM t", Catalog())
    assert info.value.code == "unknown_table"


def test_create_view_forms() -> None:
    v = compile_view("CREATE MATERIALIZED VIEW big_t (x, y) AS SELECT id, a FROM t WHERE a > 1",
                     catalog())
    assert v.name == "big_t"
    assert [c.name for c in v.columns] == ["x", "y"]
    assert [c.type for c in v.columns] == ["INTEGER", "INTEGER"]
    assert v.sql == "SELECT id, a FROM t WHERE a > 1"
    assert v.dependencies == ["t"]


POSITIONED = [
    # (sql, code, substring of message, line, column): the construct's first character
    ("CREATE VIEW v AS\nSELECT id,\n  INTERVAL 1 DAY FROM t", "unsupported", "INTERVAL", 3, 3),
    ("CREATE MATERIALIZED VIEW v AS\n\n   SELECT id\n     FROM t\n    WHERE d > INTERVAL 1 DAY",
     "unsupported", "INTERVAL", 5, 15),
    ("CREATE VIEW v AS\nSELECT id,\n  a + 'x' FROM t", "type_error", "'x'", 3, 3),
    ("CREATE VIEW v AS\n  SELECT id,\n         nope FROM t", "unknown_column", "nope", 3, 10),
    ("CREATE VIEW v AS SELECT\n  CAST(a AS BLOB) FROM t", "unsupported", "BLOB", 2, 13),
    ("SELECT\n  1 + DATE '2024-01-01' * 2", "type_error", "DATE", 2, 7),
    ("SELECT id FROM t\nWHERE 'x' || 1 = 2", "type_error", "convert", 2, 7),
]


@pytest.mark.parametrize("sql,code,text,line,col", POSITIONED)
def test_errors_report_the_constructs_position(sql: str, code: str, text: str, line: int,
                                               col: int) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    err = info.value
    assert err.code == code, (err.code, err.message)
    assert text.lower() in err.message.lower(), err.message
    assert (err.line, err.column) == (line, col), err


SYNTAX = [
    # (sql, near, line, column)
    ("SELECT id\nFROM t\nWHERE b GLOB", "GLOB", 3, 9),
    ("SELECT id FROM t JOIN", "JOIN", 1, 18),
    ("SELECT 1 +", "+", 1, 10),
    ("SELECT id FROM t WHERE a BETWEEN 1", "1", 1, 34),
    ("CREATE VIEW v AS\n  SELECT id\n  FROM t t2 t3", "t3", 3, 13),
]


@pytest.mark.parametrize("sql,near,line,col", SYNTAX)
def test_syntax_errors_are_clean(sql: str, near: str, line: int, col: int) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    err = info.value
    assert err.code == "syntax_error"
    assert err.message.startswith(f"syntax error at or near '{near}'"), err.message
    for leak in ("<Token", "<class", "TokenType", "sqlglot"):
        assert leak not in err.message, err.message
    assert (err.line, err.column) == (line, col), err
