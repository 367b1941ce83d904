"""NaN is one value wherever a row is a key (issue #10.1, #13.4).

SQL (and DuckDB) treat every NaN as equal to every other; Python floats do not, and each NaN
object hashes by identity. These tests feed NaN objects that are distinct in Python through the
engine, the planner and a real server (writes, deletes, restarts), and compare with DuckDB.
"""

from __future__ import annotations

import json
import math
import random
import struct
from collections import Counter
from pathlib import Path

import duckdb

import engine
from engine.canonical import NAN, canonical
from planner import compile_view
from tests.planner_support import catalog, norm
from tests.server_harness import Server


def fresh_nan() -> float:
    """A NaN that is a new object (as DuckDB, Arrow and arithmetic produce them)."""
    return struct.unpack("d", struct.pack("d", math.nan))[0] + 0.0


def test_canonical_replaces_every_nan_and_keeps_other_data() -> None:
    a, b = fresh_nan(), fresh_nan()
    assert a is not b and hash((a,)) != hash((b,)) or a is not b
    row = (1, a, (b, "x"), -0.0)
    c = canonical(row)
    assert c[1] is NAN and c[2][0] is NAN and c[2][1] == "x" and c[0] == 1
    assert canonical(c) is c
    plain = (1, 2.5, "s", None, (3,))
    assert canonical(plain) is plain
    assert canonical(fresh_nan()) is NAN


def _reference_canonical(data: object) -> object:
    """The obviously-correct twin: rebuild every tuple, every NaN float as NAN, every -0.0 as
    0.0."""
    if isinstance(data, float) and data != data:
        return NAN
    if isinstance(data, float) and data == 0.0:
        return 0.0
    if isinstance(data, tuple):
        return tuple(_reference_canonical(v) for v in data)
    return data


def test_canonical_equals_its_reference_on_flat_and_nested_rows() -> None:
    import decimal
    import random

    rng = random.Random(3)
    values = [0, 1, -0.0, 2.5, math.inf, None, "s", "", decimal.Decimal("1.5"),
              decimal.Decimal("NaN"), fresh_nan, lambda: (fresh_nan(), 1), lambda: (2.0,)]
    for _ in range(2000):
        row = tuple(v() if callable(v) else v for v in rng.choices(values, k=rng.randint(0, 5)))
        got, want = canonical(row), _reference_canonical(row)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g is w or g == w or (isinstance(g, decimal.Decimal) and g.is_nan()), row
            if isinstance(w, float) and w == 0.0:
                assert math.copysign(1.0, g) == 1.0, row  # type: ignore[arg-type]
        if all(g is v for g, v in zip(got, row, strict=True)):
            assert got is row  # nothing replaced: no copy


def test_rows_differing_only_in_the_sign_of_zero_are_retracted(tmp_path: Path) -> None:
    """Rows that differ only in a -0.0 are one key (they are equal), so a view that tells them
    apart (as text) kept '-0.0' after both rows were deleted: every zero entering the engine is
    0.0 (`engine.canonical`), by the rows, by Arrow (past DML_ROWS) and after a restart."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings
    from server.statements import DML_ROWS

    def check(db: Database) -> None:
        for name, sql in (("v", "SELECT k, CAST(c AS VARCHAR) AS s FROM t"),
                          ("n", "SELECT count(*) FROM t")):
            want = Counter(tuple("0.0" if x == "-0.0" else x for x in r)
                           for r in db.query(sql)["rows"])
            assert Counter(tuple(r) for r in db.view_rows(name, None)["rows"]) == want, name

    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (k INTEGER, c DOUBLE); "
                   "CREATE VIEW v AS SELECT k, CAST(c AS VARCHAR) AS s FROM t; "
                   "CREATE VIEW n AS SELECT count(*) FROM t")
        for n in (1, DML_ROWS + 10):
            db.execute(f"INSERT INTO t SELECT 1, 0.0 FROM range({n})")
            db.execute(f"INSERT INTO t SELECT 1, '-0.0'::DOUBLE FROM range({n})")
            check(db)
            db.execute("DELETE FROM t WHERE k = 1")
            check(db)
        db.execute("INSERT INTO t VALUES (2, '-0.0'::DOUBLE), (3, 0.0), (3, -0.0)")
        # what a view built afresh reads (`Store.read_table`)
        zeros = [r[1] for r in db.store.read_table(db.store.conn, "t")]
        assert zeros == [0.0, 0.0, 0.0] and all(math.copysign(1, z) > 0 for z in zeros)
    finally:
        db.close()
    db = Database(settings, InProcessExecutor())  # the views rebuilt from the table
    try:
        check(db)
        db.execute("DELETE FROM t")
        check(db)
    finally:
        db.close()


def test_engine_counts_distinct_nan_objects_as_one_key() -> None:
    df = engine.Dataflow()
    h, c = df.new_input("x")
    counts = c.map(lambda r: (r[0], None)).count().capture()
    h.send([((fresh_nan(),), 1), ((fresh_nan(),), 1), ((1.5,), 1)])
    h.advance_to(1)
    df.run()
    snap = counts.snapshot()
    assert {(("nan" if k[0] != k[0] else k[0]), n): d for (k, n), d in snap.items()} == {
        ("nan", 2): 1, (1.5, 1): 1}
    h.send([((fresh_nan(),), -1)])
    h.advance_to(2)
    df.run()
    snap = counts.snapshot()
    assert {(("nan" if k[0] != k[0] else k[0]), n): d for (k, n), d in snap.items()} == {
        ("nan", 1): 1, (1.5, 1): 1}
    assert all(d > 0 for d in snap.values())


def test_nan_computed_by_an_expression_is_retracted() -> None:
    # Issue #13.4: the row computed for the empty table must go away once the table has rows.
    cat = catalog()
    views = [
        "SELECT -COUNT(24) / COUNT(*) + -2 AS x FROM t",
        "SELECT c / 0.0 AS x, count(*) AS n FROM t GROUP BY 1",
        "SELECT DISTINCT CAST('NaN' AS DOUBLE) * a AS x FROM t",
        "SELECT sum(c * 'inf'::DOUBLE) AS s FROM t",
    ]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, a INTEGER, b VARCHAR, c DOUBLE, d DATE, flag BOOLEAN)")
    df = engine.Dataflow()
    h, src = df.new_input("t")
    caps = [(v, compile_view(v, cat).build(df, {"t": src}).capture()) for v in views]
    rng = random.Random(7)
    rows: list[tuple] = []
    for epoch in range(1, 24):
        h.advance_to(epoch)
        df.run()
        con.execute("DELETE FROM t")
        if rows:
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", [list(r) for r in rows])
        for sql, cap in caps:
            got, want = norm(cap.snapshot()), norm(Counter(con.execute(sql).fetchall()))
            assert got == want, (epoch, sql, dict(got - want), dict(want - got))
            assert all(d > 0 for d in cap.snapshot().values()), (epoch, sql)
        # alternate: fill the table, then empty it again, so NaN rows come and go
        if epoch % 6 < 3:
            for _ in range(3):
                r = (epoch, rng.choice([None, 0, 1, 2]), "x",
                     rng.choice([None, 0.0, -0.0, 1.5, math.inf, -math.inf, fresh_nan()]),
                     None, None)
                rows.append(r)
                h.send([(r, 1)])
        else:
            while rows:
                r = rows.pop()
                # the retraction carries a different NaN object than the insertion did
                h.send([(tuple(fresh_nan() if isinstance(v, float) and v != v else v
                               for v in r), -1)])


def _bag(rows: list[list]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_nan_rows_through_server_delete_and_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = Server(data).start()
    views = {
        "g": "SELECT x, count(*) AS n FROM f GROUP BY x",
        "dx": "SELECT DISTINCT x FROM f",
        "j": "SELECT a.id AS i, b.id AS k FROM f a JOIN f b ON a.x = b.x",
        "r": "SELECT x / x AS q FROM f",
    }

    def check(label: str) -> None:
        for name, sql in views.items():
            got = _bag(srv.rows(name)["rows"])
            want = _bag(srv.query(sql)["rows"])
            assert got == want, (label, name, got, want)

    try:
        srv.sql("CREATE TABLE f (id INTEGER, x DOUBLE)")
        for name, sql in views.items():
            srv.sql(f"CREATE VIEW {name} AS {sql}")
        srv.sql("INSERT INTO f VALUES (1, 'NaN'), (2, 'NaN'), (3, 1.5), (4, -0.0), (5, 0.0)")
        check("insert")
        g = {json.dumps(r[0]): r[1] for r in srv.rows("g")["rows"]}
        assert g[json.dumps(srv.query("SELECT 'NaN'::DOUBLE")["rows"][0][0])] == 2
        srv.sql("DELETE FROM f WHERE id = 1")
        check("delete")
        srv.sql("INSERT INTO f VALUES (6, 'NaN'); UPDATE f SET x = 'NaN' WHERE id = 3")
        check("update")
        srv.stop()
        srv.start()  # used to exit: "change log of table f is inconsistent"
        check("restart")
        srv.sql("DELETE FROM f WHERE x <> x OR x = 'NaN'::DOUBLE")
        check("delete after restart")
        srv.sql("INSERT INTO f VALUES (7, 'NaN'), (8, 'NaN')")
        srv.kill()
        srv.start()
        check("after SIGKILL")
    finally:
        srv.stop()


def test_max_of_a_group_built_from_columns_after_a_nan_arrives() -> None:
    """MAX of a group whose values are held in arrays (built from columns, 256 distinct values
    and more) is NaN once a NaN arrives, as in DuckDB: the NaN's sort entry holds 0 for its
    value, and the group's 0.0 was taken for a tie of it (MAX gave 0.0)."""
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    sql = "SELECT g, max(f) AS mx, min(f) AS mn FROM t GROUP BY g"
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE t (g INTEGER, f DOUBLE); "
                   "INSERT INTO t SELECT 0, r - 5 FROM range(300) x(r)")
        db.execute(f"CREATE VIEW v AS {sql}")
        for step in ("INSERT INTO t VALUES (0, 'nan'::DOUBLE)", "DELETE FROM t WHERE f = -5",
                     "DELETE FROM t WHERE isnan(f)", "INSERT INTO t VALUES (0, '-inf'::DOUBLE)"):
            db.execute(step)
            assert db.view_rows("v", None)["rows"] == db.query(sql)["rows"], step
    finally:
        db.close()
