"""Forward-only, numbered migrations of the durable store's own schema (`diffsql.*`).

Files are named `NNNN_description.sql` and applied in numeric order, each in its own transaction
together with the row recording it in `diffsql.schema_migrations`; so a database is always at
exactly one version, a crash mid-migration leaves the previous version intact, and applying
twice is a no-op. Migrations are never edited once released: a change is a new file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

MIGRATIONS_DIR = Path(__file__).resolve().parent
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """All migrations in `directory`, in version order; versions must be 1..n without gaps."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"badly named migration file {path.name}")
        found.append(Migration(int(m.group(1)), m.group(2), path.read_text()))
    found.sort(key=lambda m: m.version)
    for i, mig in enumerate(found, start=1):
        if mig.version != i:
            raise ValueError(f"migration versions must be 1..n without gaps; found {mig.version}")
    return found


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    con.execute("CREATE SCHEMA IF NOT EXISTS diffsql")
    con.execute(
        "CREATE TABLE IF NOT EXISTS diffsql.schema_migrations ("
        "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
        "applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    # read to its end (`fetchall`): DuckDB 2 refuses a relation on a connection whose last
    # result is still open
    rows = con.execute("SELECT coalesce(max(version), 0) FROM diffsql.schema_migrations").fetchall()
    return int(rows[0][0]) if rows else 0


def migrate(con: duckdb.DuckDBPyConnection, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply every migration newer than the database's version; return the versions applied."""
    migrations = available(directory)
    version = current_version(con)
    if version > len(migrations):
        raise RuntimeError(
            f"database schema version {version} is newer than this server ({len(migrations)})"
        )
    applied = []
    for mig in migrations[version:]:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(mig.sql)
            con.execute(
                "INSERT INTO diffsql.schema_migrations (version, name) VALUES (?, ?)",
                [mig.version, mig.name],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        applied.append(mig.version)
    return applied
