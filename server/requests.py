"""Request bodies' text fields.

Invariant: every text a client sends and the server acts on is valid Unicode. JSON can carry a
lone surrogate (`"\\ud800"`), which Python decodes into a `str` that cannot be encoded to UTF-8
(neither to DuckDB nor into a response); such a body is refused as a 400 `invalid_unicode`
before any route runs.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise PydanticCustomError(
            "invalid_unicode",
            "contains a lone surrogate (\\u{code:04x}) at character {position}: not valid Unicode",
            {"code": ord(text[e.start]), "position": e.start},
        ) from None
    return text


SqlText = Annotated[str, AfterValidator(_valid_unicode)]
"""A string field that must be valid Unicode (see the module docstring)."""
