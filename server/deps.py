"""Typed FastAPI dependencies: the only way a route reaches shared state (`app.state`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from server.core import Database
from server.settings import Settings


# Async, so that FastAPI resolves them on the event loop: a sync dependency takes a thread-pool
# thread, and /health must answer even when every thread is busy.
async def get_db(conn: HTTPConnection) -> Database:
    return conn.app.state.db  # type: ignore[no-any-return]


async def get_settings(conn: HTTPConnection) -> Settings:
    return conn.app.state.settings  # type: ignore[no-any-return]


DatabaseDep = Annotated[Database, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
