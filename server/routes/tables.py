"""GET /tables and GET /tables/{name}: schema and row count."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from server.deps import DatabaseDep

router = APIRouter(tags=["tables"])


@router.get("/tables")
def list_tables(db: DatabaseDep) -> dict[str, Any]:
    return {"tables": db.table_list()}


@router.get("/tables/{name}")
def get_table(name: str, db: DatabaseDep) -> dict[str, Any]:
    return db.table_info(name)
