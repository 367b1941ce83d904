"""GET /health: liveness plus the current timestamp."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from server.deps import DatabaseDep

router = APIRouter(tags=["health"])


@router.get("/health")
def get_health(db: DatabaseDep) -> dict[str, Any]:
    return db.health()
