"""UPDATE's captured changes equal what the table keeps (`statements._update`), in process
on a real DuckDB file: after every UPDATE each view equals DuckDB reading the table, and the
table's change log adds up to its contents (what recovery replays; a log that does not is
refused at restart, and the server cannot start).

The cases that broke it: an `UPDATE ... FROM` where a row matches several rows of the FROM
(DuckDB's RETURNING gives the row once per match, with each match's value, while the table
keeps one), and a WHERE that is not deterministic (`random()`: evaluated once to find the
old rows and again by the UPDATE). Each at a few rows (Python rows) and past `DML_ROWS`
(Arrow), and after a crash (the process exits without closing: the next start replays the
change log)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from server.core import Database
from server.errors import SqlError
from server.executors import InProcessExecutor
from server.settings import Settings
from server.statements import DML_ROWS

REPO = Path(__file__).resolve().parent.parent


def rows_of(db: Database, sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in db.query(sql)["rows"])


VIEWS = {
    "tv": "SELECT k, v FROM t",
    "sums": "SELECT k % 3 AS g, sum(v) AS s, count(*) AS n FROM t GROUP BY g",
}


def check(db: Database) -> None:
    """Every view equals its SELECT over the tables as stored, and each table's change log
    sums to its contents."""
    for name in db.views:
        got = Counter(tuple(r) for r in db.view_rows(name, None)["rows"])
        assert got == rows_of(db, VIEWS[name]), name
    for name, rec in db.tables.items():
        logged: Counter[tuple[Any, ...]] = Counter()
        for _, row, diff in db.store.read_log(rec, 0):
            logged[tuple(row)] += diff
        assert +logged == Counter(db.store.read_table(db.store.conn, name)), name


SETUP = ["CREATE TABLE t (k INTEGER, v INTEGER); CREATE TABLE a (k INTEGER, x INTEGER)",
         *(f"CREATE VIEW {name} AS {sql}" for name, sql in VIEWS.items())]


@pytest.mark.parametrize("n", [4, DML_ROWS + 50])
def test_update_from_matching_several_rows(tmp_path: Path, n: int) -> None:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for sql in SETUP:
            db.execute(sql)
        db.execute(f"INSERT INTO t SELECT range, 0 FROM range({n})")
        # every key of `t` but the last matches two rows of `a`
        db.execute(f"INSERT INTO a SELECT range, range * 10 FROM range({n - 1}); "
                   f"INSERT INTO a SELECT range, range * 10 + 1 FROM range({n - 1})")
        out = db.execute("UPDATE t SET v = a.x FROM a WHERE t.k = a.k")
        assert out["results"][0]["rowcount"] == n - 1
        check(db)
        # and through a join in the FROM, with the target aliased
        db.execute("UPDATE t AS z SET v = z.v + b.x FROM a JOIN a AS b ON a.k = b.k "
                   "WHERE z.k = a.k AND z.k % 2 = 0")
        check(db)
    finally:
        db.close()


def test_update_with_a_where_that_is_not_deterministic(tmp_path: Path) -> None:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for sql in SETUP:
            db.execute(sql)
        db.execute(f"INSERT INTO t SELECT range, 0 FROM range({2 * DML_ROWS})")
        for _ in range(3):
            db.execute("UPDATE t SET v = v + 1 WHERE random() < 0.5")
            db.execute("UPDATE t SET v = v + 1 WHERE k < 100 AND random() < 0.5")
            check(db)
            # a sample is drawn anew by each evaluation of the WHERE, as random() is
            db.execute("UPDATE t SET v = v + 1 WHERE k IN (SELECT k FROM t TABLESAMPLE "
                       "reservoir(3 ROWS))")
            db.execute("UPDATE t SET v = v + 1 WHERE k IN (SELECT k FROM t USING SAMPLE 50%)")
            check(db)
    finally:
        db.close()


def test_update_of_the_primary_key(tmp_path: Path) -> None:
    """An UPDATE that assigns a key column (DuckDB moves its rows to new rowids, and applies
    one match of a row that matches several) is captured from RETURNING. One whose WHERE is
    not deterministic is refused, with nothing applied, when the UPDATE changed other rows
    than it first matched."""
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); "
                   "CREATE TABLE a (k INTEGER, x INTEGER)")
        db.execute("CREATE VIEW tv AS SELECT k, v FROM t")
        db.execute("INSERT INTO t SELECT range, range FROM range(10); "
                   "INSERT INTO a VALUES (1, 100), (1, 200), (2, 300)")
        db.execute("UPDATE t SET k = k + 100, v = 0 WHERE k < 5")
        check(db)
        db.execute("UPDATE t SET k = a.x + 1000 FROM a WHERE t.k = a.k + 100")  # 101 twice
        check(db)
        refused = 0
        for i in range(6):
            before = rows_of(db, "SELECT * FROM t")
            try:
                db.execute(f"UPDATE t SET k = k + {10_000 * (i + 1)} WHERE random() < 0.5")
            except SqlError as e:
                assert e.code == "ambiguous_update"
                assert rows_of(db, "SELECT * FROM t") == before
                refused += 1
            check(db)
        assert refused  # each time, all the rows matched pass again with probability 1/2^n
    finally:
        db.close()


CRASH = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {repo!r})
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings
    db = Database(Settings(data_dir={data!r}), InProcessExecutor())
    for sql in {setup!r}:
        db.execute(sql)
    db.execute("INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)")
    db.execute("INSERT INTO a VALUES (1, 10), (1, 11), (3, 30), (3, 31), (3, 32)")
    db.execute("UPDATE t SET v = a.x FROM a WHERE t.k = a.k")
    db.execute("UPDATE t SET v = v + 1 WHERE random() < 0.5")
    os._exit(0)  # no close: the next start replays the change log
""")


def test_restart_after_update_from(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = CRASH.format(repo=str(REPO), data=str(data), setup=SETUP)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    db = Database(Settings(data_dir=data), InProcessExecutor())
    try:
        assert rows_of(db, "SELECT count(*) FROM t") == Counter({(3,): 1})
        check(db)
    finally:
        db.close()


def test_set_default_and_insert_or_ignore_as_duckdb(tmp_path: Path) -> None:
    """`UPDATE ... SET c = DEFAULT` (sqlglot reads the keyword as a column, rendered back as
    "DEFAULT": DuckDB found no such column) and `INSERT OR IGNORE` (DuckDB's spelling of ON
    CONFLICT DO NOTHING; it was refused as an upsert) change the table as DuckDB does, and
    the views follow."""
    import duckdb

    oracle = duckdb.connect()
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    view = "SELECT c, count(*) AS n, sum(k) AS s FROM r GROUP BY c"
    try:
        for sql in ("CREATE TABLE r (k INTEGER PRIMARY KEY, c VARCHAR, d INTEGER)",
                    "INSERT INTO r VALUES (1, 'x', 1), (2, 'y', 2), (3, 'x', 3)",
                    f"CREATE VIEW v AS {view}",
                    "UPDATE r SET c = DEFAULT WHERE k = 1",
                    "UPDATE r SET d = DEFAULT, c = 'z'",
                    "INSERT OR IGNORE INTO r VALUES (1, 'w', 0), (4, 'w', 4), (4, 'u', 5)",
                    "insert or ignore into r select k + 2, 'q', 0 from r"):
            if not sql.startswith("CREATE VIEW"):
                oracle.execute(sql)
            db.execute(sql)
            want = Counter(oracle.execute("SELECT * FROM r").fetchall())
            assert rows_of(db, "SELECT * FROM r") == want, sql
            if "v" in db.views:
                got = Counter(tuple(x) for x in db.view_rows("v", None)["rows"])
                assert got == Counter(oracle.execute(view).fetchall()), sql
        with pytest.raises(SqlError) as refused:
            db.execute("INSERT OR REPLACE INTO r VALUES (1, 'w', 0)")
        assert refused.value.code == "unsupported"
    finally:
        db.close()
