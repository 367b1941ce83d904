"""Large JSON responses, encoded in pieces on worker threads and streamed.

Invariant: the event loop never encodes a result of more than `CHUNK_ROWS` rows. A response
object `{..."rows": [...], ...}` is written as its head, the rows in pieces of `CHUNK_ROWS`
(each piece made by a worker thread: Starlette iterates a synchronous body in its thread
pool), and its tail; the bytes are exactly those of the whole object encoded at once, so a
client cannot tell the difference (except `Transfer-Encoding: chunked`). Small results are
encoded at once, also off the loop (the route's thread).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi.responses import Response, StreamingResponse

CHUNK_ROWS = 2000


def _dumps(obj: Any) -> str:
    # ensure_ascii: a value that is not valid Unicode still encodes (as an escape).
    return json.dumps(obj, separators=(",", ":"))


def rows_body(
    head: dict[str, Any], rows: Callable[[], Iterable[Any]], tail: dict[str, Any]
) -> Iterator[bytes]:
    """`{**head, "rows": [...], **tail}` in pieces; `rows()` is called lazily (in the first
    worker-thread step), so sorting or converting them happens off the event loop too."""
    yield (_dumps(head)[:-1] + ("," if head else "") + '"rows":[').encode()
    batch: list[Any] = []
    first = True
    for row in rows():
        batch.append(row)
        if len(batch) == CHUNK_ROWS:
            yield (("" if first else ",") + _dumps(batch)[1:-1]).encode()
            first, batch = False, []
    if batch:
        yield (("" if first else ",") + _dumps(batch)[1:-1]).encode()
    yield ("]" + ("," + _dumps(tail)[1:] if tail else "}")).encode()


def rows_response(
    head: dict[str, Any], rows: Callable[[], Iterable[Any]], tail: dict[str, Any], count: int
) -> Response:
    """A JSON response of `count` rows: one piece when small, else streamed (see above)."""
    body = rows_body(head, rows, tail)
    if count <= CHUNK_ROWS:
        return Response(b"".join(body), media_type="application/json")
    return StreamingResponse(body, media_type="application/json")
