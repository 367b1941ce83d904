"""POST /sql: a script of statements; all writes commit atomically at one timestamp."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from server.deps import DatabaseDep
from server.requests import SqlText

router = APIRouter(tags=["sql"])


class SqlRequest(BaseModel):
    sql: SqlText = Field(description="One or more statements separated by ';'")


class FailedView(BaseModel):
    name: str
    error: dict[str, Any]


class SqlResponse(BaseModel):
    results: list[dict[str, Any]]
    failed_views: list[FailedView] = Field(
        default_factory=list,
        description="views whose evaluation failed at this write (the write is committed; "
        "each view reports status 'failed' and is retried at its next input change)",
    )


@router.post("/sql", response_model=SqlResponse)
def post_sql(body: SqlRequest, db: DatabaseDep) -> dict[str, Any]:
    return db.execute(body.sql)
