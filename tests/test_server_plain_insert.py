"""`sqltext.plain_insert`, the parser of plain `INSERT ... VALUES` writes, against sqlglot.

The oracle is sqlglot's own parse of the same text (the path every other statement takes):
for random statements of the plain grammar, with random spacing, case, numbers, strings,
NULLs, booleans and DATEs, the tree, its rendering, the statement's text and its position in
the request must be identical. Texts just outside the grammar must be left to sqlglot. Then
plain INSERTs, one by one and from concurrent writers (group commit combines their rows as
written), must leave the table equal to DuckDB running the same statements.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import duckdb
import pytest

from server import sqltext
from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings
from server.sqltext import _split, parse_script, parse_statement, plain_insert


def _space(rng: random.Random) -> str:
    return rng.choice(["", " ", "  ", "\n", "\t", " \n  "])


def _gap(rng: random.Random) -> str:
    return rng.choice([" ", "  ", "\n", "\t", " \n "])


def _value(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return str(rng.randint(-10**12, 10**12))
    if kind == 1:
        return f"{rng.choice(['', '-'])}{rng.randint(0, 999)}.{rng.randint(0, 10**6):0{rng.randint(1, 7)}d}"
    if kind == 2:
        chars = "ab 'xy,()é;--/*"
        return "'" + "".join(rng.choice(chars) for _ in range(rng.randint(0, 8))).replace(
            "'", "''") + "'"
    if kind == 3:
        return rng.choice(["NULL", "null", "TRUE", "true", "False", "FALSE"])
    if kind == 4:
        return f"{rng.choice(['DATE', 'date'])}{_gap(rng)}'{rng.randint(1970, 2030)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}'"
    if kind == 5:
        return rng.choice(["0", "-0", "007", "-0.50", "1.000"])
    return "''"


def _statement(rng: random.Random) -> str:
    width = rng.randint(1, 5)
    rows = [
        "(" + _space(rng) + f"{_space(rng)},{_space(rng)}".join(
            _value(rng) for _ in range(width)) + _space(rng) + ")"
        for _ in range(rng.randint(1, 4))
    ]
    return (
        _space(rng) + rng.choice(["INSERT", "insert", "Insert"]) + _gap(rng)
        + rng.choice(["INTO", "into"]) + _gap(rng) + rng.choice(["t", "T", "my_table2", "_x"])
        + _gap(rng) + rng.choice(["VALUES", "values"]) + _space(rng)
        + f"{_space(rng)},{_space(rng)}".join(rows)
        + rng.choice(["", ";", " ; ", "\n"])
    )


def _sqlglot(sql: str):
    """The statement as sqlglot parses it (parse_script's path for every other text)."""
    pieces, _ = _split(sql)
    assert len(pieces) == 1
    return parse_statement(*pieces[0])


def test_plain_insert_builds_sqlglots_tree() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        sql = _statement(rng)
        got = plain_insert(sql)
        assert got is not None, sql
        assert got.tree is None  # built when first read
        want = _sqlglot(sql)
        assert repr(got.ast) == repr(want.ast), sql
        assert got.ast == want.ast, sql
        assert got.ast.sql("duckdb") == want.ast.sql("duckdb"), sql
        assert (got.kind, got.text, got.line, got.column) == (
            want.kind, want.text, want.line, want.column), sql
        # the target and the rows as written: the text after VALUES, and how many
        assert got.plain is not None
        assert got.plain.table == want.ast.this.name
        assert got.text.rstrip().endswith(got.plain.values)
        assert got.plain.rows == len(want.ast.expression.expressions)
        assert parse_script(sql, 10)[0].ast == want.ast


@pytest.mark.parametrize("sql", [
    "INSERT INTO values VALUES (1)",  # a keyword as the name
    "INSERT INTO t VALUES ('a\\b')",  # a backslash
    "INSERT INTO t VALUES (1.)",
    "INSERT INTO t VALUES (.5)",
    "INSERT INTO t VALUES (1e5)",
    "INSERT INTO t VALUES (1_000)",
    "INSERT INTO t VALUES (+1)",
    "INSERT INTO t VALUES (- 1)",
    "INSERT INTO t VALUES ('x' 'y')",
    "INSERT INTO t VALUES (x'00')",
    "INSERT INTO t VALUES (1 + 1)",
    "INSERT INTO t VALUES (now())",
    "INSERT INTO t VALUES (DEFAULT)",
    "INSERT INTO t VALUES (TIMESTAMP '2020-01-01 00:00:00')",
    "INSERT INTO t VALUES (1), ",
    "INSERT INTO t VALUES ()",
    "INSERT INTO t VALUES (1) -- comment",
    "INSERT INTO t /* c */ VALUES (1)",
    'INSERT INTO "t" VALUES (1)',
    "INSERT INTO main.t VALUES (1)",
    "INSERT INTO t (a) VALUES (1)",
    "INSERT INTO t VALUES (1) RETURNING *",
    "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
    "INSERT OR REPLACE INTO t VALUES (1)",
    "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
    "INSERT INTO t VALUES (1);;",
    "INSERT INTO t SELECT 1",
    "INSERT INTO t VALUES (1)\r\n",
    "INSERT INTO t VALUES (1)" + ", (1)" * 20_000 + ", (1 1)",  # long, wrong at its end
])
def test_other_texts_are_left_to_sqlglot(sql: str) -> None:
    assert plain_insert(sql) is None


def test_a_long_plain_insert() -> None:
    sql = "INSERT INTO t VALUES " + ", ".join(f"({i}, 'r''{i}', -{i}.5)" for i in range(20_000))
    got = plain_insert(sql)
    assert got is not None and got.plain is not None and got.plain.rows == 20_000
    assert got.ast == _sqlglot(sql).ast


def test_plain_inserts_equal_duckdb_alone_and_grouped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    ddl = "CREATE TABLE t (a BIGINT, b DOUBLE, c VARCHAR, d DATE, e BOOLEAN)"

    def row() -> str:
        return "(" + ", ".join([
            rng.choice([str(rng.randint(-10**6, 10**6)), "NULL"]),
            rng.choice([f"{rng.randint(-99, 99)}.{rng.randint(0, 99)}", "7", "NULL"]),
            rng.choice(["'it''s'", "'é,()'", "''", "NULL"]),
            rng.choice([f"DATE '2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}'", "NULL"]),
            rng.choice(["TRUE", "false", "NULL"]),
        ]) + ")"

    texts = [f"INSERT INTO t VALUES {', '.join(row() for _ in range(rng.randint(1, 3)))}"
             for _ in range(240)]
    assert all(plain_insert(x) is not None for x in texts)
    texts.append("INSERT INTO t VALUES " + ", ".join(row() for _ in range(3000)))  # not combined

    def no_tree(text: str) -> None:
        raise AssertionError(f"the write path read the tree of {text[:40]!r}")

    # the write path never needs sqlglot's tree of a plain INSERT
    monkeypatch.setattr(sqltext, "_plain_tree", no_tree)
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        db.execute(ddl)
        db.execute("CREATE VIEW v AS SELECT c, count(*) AS n, sum(a) AS s, max(d) AS d FROM t"
                   " GROUP BY c")
        for x in texts[:40]:
            db.execute(x)
        # concurrent writers: their requests are committed in groups, rows combined as written
        errors: list[BaseException] = []

        def writer(part: list[str]) -> None:
            try:
                for x in part:
                    db.execute(x)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(texts[40 + k::8],)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors
        duck = duckdb.connect()
        duck.execute(ddl)
        for x in texts:
            duck.execute(x)
        def bag(rows: list) -> list[list[str]]:
            return sorted([str(v) for v in r] for r in rows)

        assert bag(db.query("SELECT * FROM t")["rows"]) == bag(
            duck.execute("SELECT * FROM t").fetchall())
        assert len(bag(db.query("SELECT * FROM t")["rows"])) == duck.execute(
            "SELECT count(*) FROM t").fetchone()[0] > 3240
        assert bag(db.view_rows("v", None)["rows"]) == bag(duck.execute(
            "SELECT c, count(*) AS n, sum(a) AS s, max(d) AS d FROM t GROUP BY c").fetchall())
    finally:
        db.close()
