"""Why a backend could not be resolved."""

from __future__ import annotations


class ResolveError(Exception):
    """Base of the errors resolve and detect raise; the caller retries next round."""


class BackendUnreachable(ResolveError):
    """No path answered with a 2xx: down, refusing, or 5xx on everything.

    `silent`: every path timed out (nothing refused, nothing answered 5xx)."""

    def __init__(self, message: str, *, silent: bool = False) -> None:
        super().__init__(message)
        self.silent = silent


class DetectionFailed(ResolveError):
    """Auto-detect found no fingerprint and a fingerprint path got no answer or a 5xx.

    Guessing `openai` would be wrong until the next re-resolve; retry instead.
    """
