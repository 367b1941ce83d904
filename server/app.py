"""The FastAPI application: `create_app(settings)` wires settings, the database service (on
`app.state`, created in the lifespan), the guard middleware, one router per resource, and the
exception handlers that render every error in the one JSON shape of `server.errors`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.core import Database
from server.errors import ApiError
from server.executors import create_executor
from server.middleware import GuardMiddleware
from server.routes import changes, health, query, sql, tables, views
from server.settings import Settings


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "line": None, "column": None}},
        status_code=status,
    )


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.to_json(), status_code=exc.status)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: list[Any] = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return _error(400, "invalid_json", "the request body is not valid JSON")
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg')}")
    return _error(400, "invalid_request", "; ".join(parts) or "invalid request")


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return _error(exc.status_code, code, str(exc.detail))


async def _recursion_error(_: Request, exc: Exception) -> JSONResponse:
    # Something nested too deeply for a recursive pass over it (parsing is guarded earlier).
    return _error(400, "too_complex", "the request is too complex: nested too deeply")


async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
    return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")


def create_app(settings: Settings) -> FastAPI:
    """Build the application; the database opens (and recovers) when the lifespan starts."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        executor = create_executor(settings)
        # Recovery runs in the background: /health answers at once, views report
        # "hydrating" until they are up.
        db = await run_in_threadpool(Database, settings, executor, True)
        app.state.settings = settings
        app.state.db = db
        db.start_recovery()
        try:
            yield
        finally:
            await run_in_threadpool(db.close)
            executor.close()

    app = FastAPI(
        title="diffsql",
        summary="Incrementally maintained SQL views over differential dataflow",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.add_middleware(GuardMiddleware, token=settings.token, max_body=settings.max_request_bytes)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RecursionError, _recursion_error)
    app.add_exception_handler(Exception, _internal_error)
    for module in (health, sql, query, tables, views, changes):
        app.include_router(module.router)
    return app
