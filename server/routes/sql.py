"""POST /sql: a script of statements; all writes commit atomically at one timestamp."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from server.deps import DatabaseDep

router = APIRouter(tags=["sql"])


class SqlRequest(BaseModel):
    sql: str = Field(description="One or more statements separated by ';'")


class SqlResponse(BaseModel):
    results: list[dict[str, Any]]


@router.post("/sql", response_model=SqlResponse)
def post_sql(body: SqlRequest, db: DatabaseDep) -> dict[str, Any]:
    return {"results": db.execute(body.sql)}
