"""The FastAPI application: `create_app(settings)` wires settings, the database service (on
`app.state`, created in the lifespan), the guard middleware, one router per resource, and the
exception handlers that render every error in the one JSON shape of `server.errors`.

`/docs` (Swagger UI) and `/redoc` load their scripts and styles from the server itself (the
assets packaged by the `fastapi-offline` dependency, under `/docs-assets/`), never from a CDN,
so the documentation renders with no network.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.core import Database
from server.errors import ApiError, PayloadTooLarge
from server.executors import create_executor
from server.middleware import GuardMiddleware
from server.routes import changes, health, query, sql, tables, views
from server.settings import Settings


class _ErrorResponse(JSONResponse):
    """Escapes non-ASCII: an error message may quote client text that is not valid Unicode,
    and rendering the error must never fail in turn."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return _ErrorResponse(
        {"error": {"code": code, "message": message, "line": None, "column": None}},
        status_code=status,
    )


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _ErrorResponse(exc.to_json(), status_code=exc.status)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: list[Any] = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return _error(400, "invalid_json", "the request body is not valid JSON")
    for e in errors:
        if e.get("type") == "invalid_unicode":
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            return _error(400, "invalid_unicode", f"{loc or 'body'}: {e.get('msg')}")
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg')}")
    return _error(400, "invalid_request", "; ".join(parts) or "invalid request")


# FastAPI's answer to a body it cannot decode (bytes that are not UTF-8), which never
# reaches validation
_UNPARSED_BODY = "There was an error parsing the body"


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, PayloadTooLarge):
        # The body limit found while the body was read (one sent in chunks, with no
        # Content-Length): FastAPI reports any failure of that read as a body it could not
        # parse, raised from the limit's own error.
        return _ErrorResponse(exc.__cause__.to_json(), status_code=exc.__cause__.status)
    if exc.status_code == 400 and exc.detail == _UNPARSED_BODY:
        return _error(400, "invalid_json", "the request body is not valid JSON (not UTF-8)")
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return _error(exc.status_code, code, str(exc.detail))


async def _recursion_error(_: Request, exc: Exception) -> JSONResponse:
    # Something nested too deeply for a recursive pass over it (parsing is guarded earlier).
    return _error(400, "too_complex", "the request is too complex: nested too deeply")


async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
    return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")


def _docs_assets() -> Path:
    """The directory of the packaged Swagger UI and ReDoc assets."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise RuntimeError("the fastapi-offline package (the /docs assets) is not installed")
    return Path(spec.origin).parent / "static"


def _add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc, every asset served from /docs-assets."""
    assets = "/docs-assets"
    app.mount(assets, StaticFiles(directory=_docs_assets()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
            swagger_js_url=f"{root}{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{assets}/swagger-ui.css",
            swagger_favicon_url=f"{root}{assets}/favicon.png",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{assets}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{assets}/favicon.png",
            with_google_fonts=False,
        )


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
        docs_url=None,  # served by _add_docs, from packaged assets
        redoc_url=None,
    )
    _add_docs(app)
    app.add_middleware(GuardMiddleware, token=settings.token, max_body=settings.max_request_bytes)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RecursionError, _recursion_error)
    app.add_exception_handler(Exception, _internal_error)
    for module in (health, sql, query, tables, views, changes):
        app.include_router(module.router)
    return app
