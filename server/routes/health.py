"""GET /health: liveness plus the current timestamp (HEAD too, for probes that want no body)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from server.deps import DatabaseDep

router = APIRouter(tags=["health"])


@router.api_route("/health", methods=["GET", "HEAD"])
async def get_health(db: DatabaseDep) -> dict[str, Any]:
    # On the event loop, not the thread pool: when every pool thread is busy (large reads,
    # writes waiting for the lock), a probe must still answer at once. `health` takes no lock.
    return db.health()
