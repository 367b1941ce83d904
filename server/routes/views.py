"""Views: list, create (POST /views, 201), inspect, drop, read rows (optionally as of T)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from server.deps import DatabaseDep, SettingsDep

router = APIRouter(tags=["views"])


class CreateViewRequest(BaseModel):
    sql: str


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
    return {"name": name.lower(), "plan": db.explain_view(name)}


@router.delete("/views/{name}")
def delete_view(name: str, db: DatabaseDep) -> dict[str, Any]:
    return db.drop_view(name)


@router.get("/views/{name}/rows")
async def view_rows(
    name: str,
    db: DatabaseDep,
    settings: SettingsDep,
    as_of: int | None = Query(None, ge=0, description="timestamp; waits until complete"),
    timeout: float | None = Query(None, gt=0, le=300, description="seconds to wait for as_of"),
) -> dict[str, Any]:
    name = name.lower()
    # Without as_of: as of the latest write committed before this request (read-your-writes).
    target = db.committed_ts if as_of is None else as_of
    await db.wait_complete(name, target, timeout or settings.as_of_timeout)
    return await run_in_threadpool(db.view_rows, name, as_of)
