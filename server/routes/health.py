"""GET /health: liveness plus the current timestamp (HEAD too, for probes that want no body)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from server.deps import DatabaseDep

router = APIRouter(tags=["health"])


@router.api_route("/health", methods=["GET", "HEAD"])
def get_health(db: DatabaseDep) -> dict[str, Any]:
    return db.health()
