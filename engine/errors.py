"""Errors the engine raises to its callers. Each names what went wrong in words a user can act on."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class IterationLimitExceeded(EngineError):
    """A loop was still changing when it reached its iteration limit."""

    def __init__(self, limit: int, scope: str = "", epoch: object = None) -> None:
        self.limit = limit
        self.scope = scope
        where = " in %s" % scope if scope else ""
        at = " at time %s" % (epoch,) if epoch is not None else ""
        super().__init__(
            "iteration limit of %d exceeded%s%s: the recursion did not reach a fixed point "
            "within %d iterations (raise the limit if it converges slowly, or check that it "
            "converges at all)" % (limit, where, at, limit)
        )


class DataflowPoisoned(EngineError):
    """The dataflow failed earlier and can no longer make progress."""
