"""diffsql's HTTP server: SQL tables in a durable DuckDB store, views maintained incrementally
by the engine, snapshot queries, and change feeds.

`create_app(settings)` builds the ASGI app; `server.cli:main` is the `diffsql` command.
"""

from server.app import create_app
from server.settings import Settings

__all__ = ["Settings", "create_app"]
