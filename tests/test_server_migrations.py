"""Migrations: forward-only, numbered, applied from empty to the latest, idempotent."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import migrations


def test_migrate_from_empty_to_latest(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    available = migrations.available()
    assert [m.version for m in available] == list(range(1, len(available) + 1))
    assert migrations.migrate(con) == [m.version for m in available]
    assert migrations.current_version(con) == len(available)
    assert migrations.migrate(con) == []  # idempotent
    meta = dict(con.execute("SELECT key, value FROM diffsql.meta").fetchall())
    assert meta == {"last_ts": 0, "history_since": 0, "next_table_id": 1, "checkpoint_ts": 0}
    for table in ("tables", "views", "schema_migrations", "view_history"):
        con.execute(f"SELECT * FROM diffsql.{table}").fetchall()
    con.close()
    # A reopened database is at the latest version and is not migrated again.
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    assert migrations.migrate(con) == []
    con.close()


def test_migrations_apply_in_order_and_stop_on_error(tmp_path: Path) -> None:
    d = tmp_path / "migs"
    d.mkdir()
    (d / "0001_a.sql").write_text("CREATE TABLE diffsql.a (x INTEGER);")
    (d / "0002_b.sql").write_text(
        "INSERT INTO diffsql.a VALUES (1); CREATE TABLE diffsql.b (y INTEGER);"
    )
    con = duckdb.connect()
    assert migrations.migrate(con, d) == [1, 2]
    (d / "0003_bad.sql").write_text("INSERT INTO diffsql.a VALUES (2); SELECT * FROM nope;")
    with pytest.raises(duckdb.Error):
        migrations.migrate(con, d)
    assert migrations.current_version(con) == 2  # the failed migration left nothing behind
    assert con.execute("SELECT count(*) FROM diffsql.a").fetchone() == (1,)
    (d / "0005_gap.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match="without gaps"):
        migrations.available(d)


def test_newer_database_is_refused(tmp_path: Path) -> None:
    con = duckdb.connect()
    migrations.migrate(con)
    con.execute("INSERT INTO diffsql.schema_migrations (version, name) VALUES (999, 'future')")
    with pytest.raises(RuntimeError, match="newer"):
        migrations.migrate(con)
