"""`CompiledView.columns_read`: a view's output does not depend on the columns it does not read.

Invariant checked: a view hydrated from its tables with every column outside `columns_read`
NULL (as the server and the benchmarks load it: `Store.read_columns(rec, read)`,
`FileSource.unread`), then maintained through writes that carry the real rows (retractions
included), equals DuckDB recomputing it over the real tables after every batch.
"""

from __future__ import annotations

import pyarrow.parquet as pq
from planner_support import SCHEMAS, World, catalog, norm
from test_planner_oracle import BASE_VIEWS, VIEWS

import engine
from engine.sources import FileSource, null_unread, read_arrow
from planner import compile_view
from server.store import arrow_of


def test_columns_read_of_simple_plans() -> None:
    cat = catalog()

    def reads(sql: str) -> dict[str, set[int]]:
        return {t: set(c) for t, c in compile_view(sql, cat).columns_read().items()}

    assert reads("SELECT b FROM t WHERE a > 1") == {"t": {1, 2}}
    assert reads("SELECT count(*) FROM t") == {"t": set()}
    assert reads("SELECT * FROM t") == {"t": set(range(len(SCHEMAS["t"])))}
    assert reads("SELECT t.b, u.s FROM t JOIN u ON t.id = u.id") == {"t": {0, 2}, "u": {0, 2}}
    # a table read twice: what either reader reads
    assert reads("SELECT a FROM t UNION ALL SELECT c::INTEGER FROM t") == {"t": {1, 3}}


def test_views_hydrated_with_unread_columns_null_equal_duckdb() -> None:
    """Every oracle view over tables only, in its own dataflow: first contents as columns with
    the unread ones NULL, then random writes of whole rows, equal to DuckDB every batch."""
    cat = catalog(BASE_VIEWS)
    pruned = 0
    checked = 0
    for i, sql in enumerate(VIEWS):
        cv = compile_view(sql, cat)
        if not set(cv.dependencies) <= set(SCHEMAS):
            continue  # reads a view: the oracle suite covers it
        read = cv.columns_read()
        pruned += any(len(read[t]) < len(SCHEMAS[t]) for t in cv.dependencies)
        world = World(500 + i)
        df = engine.Dataflow()
        handles, sources = {}, {}
        for t in cv.dependencies:
            handles[t], sources[t] = df.new_input(t)
        cap = cv.build(df, sources).capture()
        for t in cv.dependencies:
            table = arrow_of(world.con.sql(f"SELECT * FROM {t}"))
            handles[t].send_columns(null_unread(table, read[t]))
        for batch in range(6):
            for h in handles.values():
                h.advance_to(batch + 1)
            df.run()
            world.sync()
            got, want = norm(cap.snapshot()), world.duck(sql)
            assert got == want, (batch, sql, dict(got - want), dict(want - got))
            for table_name, row, diff in world.random_batch(6):
                if table_name in handles:
                    handles[table_name].send([(row, diff)])
        checked += 1
    assert checked >= 40 and pruned >= 30, (checked, pruned)


def test_file_source_unread_columns_are_null_and_not_read(tmp_path) -> None:  # noqa: ANN001
    import pyarrow as pa

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", None], "c": [1.5, 2.5, 3.5]}), path)
    src = FileSource((str(path),), columns=("c", "b", "a"), types=("double", "string", "bigint"),
                     unread=frozenset({"b"}))
    got = read_arrow(src)
    assert got.column_names == ["c", "b", "a"]
    assert got.column(1).null_count == 3 and pa.types.is_null(got.column(1).type)
    assert got.to_pylist() == [{"c": 1.5, "b": None, "a": 1}, {"c": 2.5, "b": None, "a": 2},
                               {"c": 3.5, "b": None, "a": 3}]
    try:
        FileSource((str(path),), columns=("a",), unread=frozenset({"b"}))
    except ValueError as e:
        assert "unread" in str(e)
    else:
        raise AssertionError("an unread column must be a selected one")
