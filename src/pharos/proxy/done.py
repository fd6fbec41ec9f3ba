"""What the proxy reports about each finished request (spec §13: proxy.Done).

obs counts it, logs it at debug level and shows it on /status; the proxy never
imports obs, it calls the `on_done` callback it was given.
"""

from __future__ import annotations

import msgspec

from pharos.engine.usage import Usage
from pharos.policy import Decision, waited_reason


class RequestRecord(msgspec.Struct):
    """Filled in as a request moves through the proxy; frozen into RequestDone at the end.
    A mutable msgspec Struct: built once per request, 0.67 -> 0.14 µs against a slotted
    dataclass (timeit)."""

    route: str
    started_s: float
    request_id: str | None = None
    key: str = "-"
    model: str | None = None
    decisions: list[tuple[str, str]] = msgspec.field(default_factory=list)
    target_key: str | None = None
    backend_url: str | None = None
    decision: Decision | None = None  # the last lease's; its reason is built at finish()
    queued_by: Decision | None = None  # the last lease's, if it queued: the decision it queued by
    overhead_s: float | None = None
    queue_wait_s: float | None = None
    ttft_s: float | None = None
    usage: Usage | None = None  # the reply's usage line; None = not seen
    metered: bool | None = None  # None: the request never reached an engine
    prefix_source: str | None = None  # where the predicted slot came from: local, peer, restored

    def decide(self, stage: str, outcome: str) -> None:
        self.decisions.append((stage, outcome))


class RequestDone(msgspec.Struct, frozen=True, gc=False):
    """A msgspec Struct: built once per request with 19 fields, 40.7k -> 13.5k instructions
    against a frozen dataclass (its __init__ sets each field through object.__setattr__).
    Untracked by the collector: it holds strings, numbers, tuples of them and the routing
    Decision, which never refers back to it.

    The decision's reason string is built when `reason` is read (the debug log line, /status),
    not for every request: 17k instructions a request (callgrind)."""

    route: str
    request_id: str | None
    key: str
    model: str | None
    status: int
    decisions: tuple[tuple[str, str], ...]
    target_key: str | None
    backend_url: str | None
    decision: Decision | None  # the last lease's, for `reason`
    queued_by: Decision | None  # the decision it queued by, if it did: for `reason` too
    overhead_s: float | None
    queue_wait_s: float | None
    ttft_s: float | None
    duration_s: float
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    metered: bool | None
    prefix_source: str | None
    finished_wall_s: float

    @property
    def reason(self) -> str:
        """Why the target was picked (`warm, 1.2k cached tok, est 0.4s vs 3.1s (cold)`), "" when
        no target was."""
        if self.decision is None:
            return ""
        granted = self.decision.reason
        if self.queued_by is None or self.queue_wait_s is None:
            return granted
        return waited_reason(granted, self.queued_by.reason, self.queue_wait_s)


def finish(record: RequestRecord, status: int, now_s: float, wall_s: float) -> RequestDone:
    usage = record.usage
    return RequestDone(
        route=record.route,
        request_id=record.request_id,
        key=record.key,
        model=record.model,
        status=status,
        decisions=tuple(record.decisions),
        target_key=record.target_key,
        backend_url=record.backend_url,
        decision=record.decision,
        queued_by=record.queued_by,
        overhead_s=record.overhead_s,
        queue_wait_s=record.queue_wait_s,
        ttft_s=record.ttft_s,
        duration_s=max(0.0, now_s - record.started_s),
        prompt_tokens=None if usage is None else usage.prompt_tokens,
        cached_tokens=None if usage is None else usage.cached_tokens,
        completion_tokens=None if usage is None else usage.completion_tokens,
        metered=record.metered,
        prefix_source=record.prefix_source,
        finished_wall_s=wall_s,
    )
