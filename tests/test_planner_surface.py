"""The SQL surface a new user meets: refusals name what the user typed at its position (never
sqlglot's internal names), any OVER is refused as a window function, and view columns are
named as DuckDB names the same SELECT's columns.
"""

from __future__ import annotations

import pytest
from planner_support import catalog

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
    ("SELECT a, count(*) FROM t GROUP BY GROUPING SETS ((a), ())", "unsupported",
     "GROUPING SETS is not supported", 1, 36),
    ("SELECT a, count(*) FROM t GROUP BY CUBE (a)", "unsupported", "CUBE is not supported",
     1, 36),
    ("SELECT a, count(*) FROM t GROUP BY rollup (a)", "unsupported", "rollup is not supported",
     1, 36),
    ("SELECT regexp_matches(b, 'a') FROM t", "unsupported",
     "function or construct regexp_matches is not supported", 1, 8),
    ("SELECT md5(b) FROM t", "unsupported", "function or construct md5 is not supported", 1, 8),
]


@pytest.mark.parametrize("sql,code,message,line,column", REFUSALS)
def test_refusals_name_what_the_user_typed(sql: str, code: str, message: str, line: int,
                                           column: int) -> None:
    with pytest.raises(PlanError) as info:
        compile_view(sql, catalog())
    assert info.value.to_dict() == {"code": code, "message": message, "line": line,
                                    "column": column}
