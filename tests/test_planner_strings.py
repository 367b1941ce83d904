"""String functions over text that is not plain ASCII, against DuckDB: combining accents,
emoji sequences joined by ZWJ, flags, Hangul syllables built from jamo, CR LF (in ASCII and other text), empty
strings and NULL.

Oracle: DuckDB running the view's SELECT over the same rows. Each view is maintained from
rows (the per-row evaluator) and from Arrow columns (the vectorised path, `send_columns`),
then its rows are deleted one by one: at every step the view equals DuckDB's answer.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import engine
from planner import Catalog, Column, TableSchema, compile_view

STRINGS = [
    "ae\u0301b\U0001F468\u200D\U0001F469x",  # an accent, a ZWJ family
    "a\r\nb",  # DuckDB reverses an ASCII string by bytes, CR LF too
    "\u00e9\r\nx",  # ... and keeps a CR LF whole in any other
    "\U0001F1FA\U0001F1F8\U0001F1EC\U0001F1E7",  # two flags
    "\u1100\u1161\u11A8x",  # a Hangul syllable of three jamo
    "n\u0303o\u0308",
    "\U0001F44D\U0001F3FD!",  # a skin tone modifier
    "plain",
    "abcabc",
    "",
    None,
]

EXPRESSIONS = [
    "reverse(s)",
    "replace(s, '', 'x')",
    "replace(s, 'a', '')",
    "replace(s, 'b', 'YY')",
    "length(s)",
    "left(s, 2)",
    "right(s, 2)",
    "substr(s, 2, 2)",
    "upper(s)",
    "strpos(s, 'b')",
    "s || reverse(s)",
    "reverse(reverse(s)) = s",
]


def view_rows(sql: str, rows: list[tuple[Any, ...]], columns: bool) -> list[Counter]:
    """The view's rows after the first contents arrive and after each row is deleted."""
    cat = Catalog(tables={"w": TableSchema("w", [Column("id", "INTEGER"),
                                                   Column("s", "VARCHAR")])})
    df = engine.Dataflow()
    handle, source = df.new_input("w")
    cap = compile_view(sql, cat).build(df, {"w": source}).capture()
    if columns:
        handle.send_columns(pa.table({"id": pa.array([r[0] for r in rows], pa.int32()),
                                      "s": pa.array([r[1] for r in rows], pa.string())}))
    else:
        handle.send([(r, 1) for r in rows])
    out = []
    for epoch, gone in enumerate([None, *rows]):
        if gone is not None:
            handle.send([(gone, -1)])
        handle.advance_to(epoch + 1)
        df.run()
        out.append(Counter({k: v for k, v in cap.snapshot().items() if v}))
    return out


@pytest.mark.parametrize("columns", [False, True], ids=["rows", "columns"])
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_string_functions_match_duckdb(expr: str, columns: bool) -> None:
    rows = [(i, s) for i, s in enumerate(STRINGS)]
    sql = f"SELECT id, {expr} AS v FROM w"
    con = duckdb.connect()
    con.execute("CREATE TABLE w (id INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO w VALUES (?, ?)", [list(r) for r in rows])
    got = view_rows(sql, rows, columns)
    for step, have in enumerate(got):
        if step:
            con.execute("DELETE FROM w WHERE id = ?", [rows[step - 1][0]])
        want = Counter(con.execute(sql).fetchall())
        assert have == want, (step, dict(have - want), dict(want - have))
