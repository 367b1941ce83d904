"""Views: list, create (POST /views, 201), inspect, drop, read rows (optionally as of T)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from planner.naming import FOLD
from server.deps import DatabaseDep, SettingsDep
from server.requests import SqlText
from server.streaming import rows_response
from server.values import row_to_json, sort_key

router = APIRouter(tags=["views"])


class CreateViewRequest(BaseModel):
    sql: SqlText


@router.get("/views")
def list_views(db: DatabaseDep) -> dict[str, Any]:
    return {"views": db.view_list()}


@router.post("/views", status_code=201)
def create_view(body: CreateViewRequest, db: DatabaseDep) -> dict[str, Any]:
    return db.create_view(body.sql)


@router.get("/views/{name}")
def get_view(name: str, db: DatabaseDep) -> dict[str, Any]:
    return db.view_info(name)


@router.get("/views/{name}/explain")
def explain_view(name: str, db: DatabaseDep) -> dict[str, Any]:
    return {"name": name.translate(FOLD), "plan": db.explain_view(name)}


@router.delete("/views/{name}")
def delete_view(name: str, db: DatabaseDep) -> dict[str, Any]:
    return db.drop_view(name)


class RowsResponse(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    timestamp: int


@router.get(
    "/views/{name}/rows",
    response_class=Response,
    responses={200: {"model": RowsResponse, "content": {"application/json": {}}}},
)
async def view_rows(
    name: str,
    db: DatabaseDep,
    settings: SettingsDep,
    as_of: int | None = Query(
        None, ge=0, le=2**63 - 1, description="timestamp; waits until complete"
    ),
    timeout: float | None = Query(None, gt=0, le=300, description="seconds to wait for as_of"),
) -> Response:
    name = name.translate(FOLD)
    # Without as_of: as of the latest write committed before this request (read-your-writes).
    target = db.committed_ts if as_of is None else as_of
    await db.wait_complete(name, target, timeout or settings.as_of_timeout)
    # Only the copy holds the state lock; sorting and encoding run on worker threads, in
    # pieces, so a large view never holds the event loop, the writer or /health.
    columns, ts, items = await run_in_threadpool(db.view_items, name, as_of)

    def rows() -> Iterator[list[Any]]:
        ordered = sorted((r for r, n in items for _ in range(n)), key=sort_key)
        return (row_to_json(r) for r in ordered)

    count = sum(n for _, n in items)
    return rows_response({"columns": columns}, rows, {"timestamp": ts}, count)
