"""Reading values out of live observations and recorded replies, for the live assertions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pharos.engine import WHOLE_BACKEND, Plan, ScrapeResult, Snapshot
from pharos.engine.usage import Usage, parse_usage
from tests.live.capture import CaptureResult
from tests.live.engines import RunningEngine


def load_value(snapshot: Snapshot, model: str, field: str) -> float | None:
    """The model's own value if a probe read one per model, else the whole backend's."""
    for key in (model, WHOLE_BACKEND):
        load = snapshot.loads.get(key)
        if load is not None:
            value: float | None = getattr(load, field)
            if value is not None:
                return value
    return None


def reply_usage(body: bytes) -> Usage | None:
    """The last usage a reply carries: a JSON body, or the last usage line of an SSE stream."""
    whole = parse_usage(body.strip())
    if whole is not None:
        return whole
    found: Usage | None = None
    for line in body.splitlines():
        usage = parse_usage(line)
        if usage is not None:
            found = usage
    return found


@dataclass(frozen=True)
class Observed:
    """What Pharos's own resolve + scrape read off the live engine in one state."""

    plan: Plan
    resolved: Snapshot
    scraped: ScrapeResult


@dataclass(frozen=True)
class LiveCapture:
    engine: RunningEngine
    capture: CaptureResult

    def observed(self, state: str) -> Observed:
        value: Any = self.capture.observed[state]
        assert isinstance(value, Observed)
        return value
