"""POST /query: one read-only SELECT over a consistent snapshot of tables and views."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from server.deps import DatabaseDep
from server.requests import SqlText
from server.streaming import rows_response

router = APIRouter(tags=["query"])


class QueryRequest(BaseModel):
    sql: SqlText


class QueryResponse(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    timestamp: int


@router.post(
    "/query",
    response_class=Response,
    responses={200: {"model": QueryResponse, "content": {"application/json": {}}}},
)
async def post_query(body: QueryRequest, db: DatabaseDep) -> Response:
    # The query runs on a worker thread; a large result is encoded there too, in pieces.
    r = await run_in_threadpool(db.query, body.sql)
    rows = r["rows"]
    return rows_response({"columns": r["columns"]}, lambda: rows, {"timestamp": r["timestamp"]},
                         len(rows))
