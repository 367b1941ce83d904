"""Secrets never reach a log: a logging filter that redacts bearer tokens.

Invariant: once `install(token)` has run, every record emitted through any handler configured
at that time (uvicorn's access and error logs, at every level, and the root logger's) has the
configured token, any `Authorization: Bearer ...` value, any `bearer.<token>` WebSocket
subprotocol and any `token=` / `access_token=` query parameter replaced by `[REDACTED]`. The
filter works on the formatted message, so it also covers secrets inside logged objects (an ASGI
scope's header list at uvicorn's `trace` level, a WebSocket handshake at `debug`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "[REDACTED]"
_PATTERNS = [
    re.compile(r"(?i)(bearer[\s.]+)(?!\[REDACTED\])[^\s'\",;)\]]+"),
    re.compile(r"(?i)((?:access_)?token(?:=|%3D))(?!\[REDACTED\])[^&\s'\",;)\]]+"),
]


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with every secret replaced (never drops a record)."""

    def __init__(self, token: str | None = None) -> None:
        super().__init__()
        self.token = token or None

    def redact(self, text: str) -> str:
        if self.token:
            text = text.replace(self.token, REDACTED)
        for p in _PATTERNS:
            text = p.sub(r"\1" + REDACTED, text)
        return text

    def _arg(self, value: Any) -> Any:
        if isinstance(value, bool | int | float) or value is None:
            return value
        text = value if isinstance(value, str) else str(value)
        clean = self.redact(text)
        return value if clean == text else clean

    def filter(self, record: logging.LogRecord) -> bool:
        # Arguments one by one first: some formatters (uvicorn's access log) read them.
        if isinstance(record.args, tuple):
            record.args = tuple(self._arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: self._arg(v) for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = self.redact(record.msg)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logged as it is
            return True
        clean = self.redact(message)
        if clean != message:  # a secret made by formatting itself: keep only the clean text
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            # Tracebacks are formatted by the handler later; format (and redact) them now.
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def install(token: str | None) -> RedactSecrets:
    """Attach the filter to every handler of every logger configured so far (and to the
    loggers uvicorn and websockets log through, for handlers added later)."""
    f = RedactSecrets(token)
    loggers = [logging.getLogger()] + [
        lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets"):
        loggers.append(logging.getLogger(name))
    seen: set[int] = set()
    for lg in loggers:
        if id(lg) not in seen:
            seen.add(id(lg))
            lg.addFilter(f)
        for h in lg.handlers:
            if id(h) not in seen:
                seen.add(id(h))
                h.addFilter(f)
    return f
