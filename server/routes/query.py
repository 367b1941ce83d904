"""POST /query: one read-only SELECT over a consistent snapshot of tables and views."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from server.deps import DatabaseDep

router = APIRouter(tags=["query"])


class QueryRequest(BaseModel):
    sql: str


class QueryResponse(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    timestamp: int


@router.post("/query", response_model=QueryResponse)
def post_query(body: QueryRequest, db: DatabaseDep) -> dict[str, Any]:
    return db.query(body.sql)
