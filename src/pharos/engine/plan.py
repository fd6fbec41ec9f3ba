"""Plan (the probes that answered on one backend) and the result of one scrape round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pharos.engine.router_mode import per_model_path
from pharos.engine.snapshots import assemble, known
from pharos.engine.types import FAST_SIGNALS, Kind, Probe, ProbeError, Snapshot

TRANSIENT_DROP_PREFIXES = ("fetch error", "status 5")


@dataclass(frozen=True)
class Plan:
    kind: Kind
    version: str | None
    active: tuple[Probe, ...]  # own probes first, then recipe order; one probe per signal
    dropped: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # probe name -> "404", "status 503", "fetch error: ...", "parse error: ...",
    # "no value", "redundant", "version guard", "no log feed", "no per-model list"
    per_model: tuple[str, ...] = ()  # the models per-model probes ask about (router mode)

    @property
    def log_probes(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.active if p.feed.log)

    @property
    def http_probes(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.active if p.feed.path is not None and not p.feed.log)

    @property
    def incomplete(self) -> bool:
        """A probe was dropped for a reason that may pass (no answer, a 5xx): re-resolve soon."""
        return any(r.startswith(TRANSIENT_DROP_PREFIXES) for r in self.dropped.values())

    def probes(self, *, fast_only: bool) -> tuple[Probe, ...]:
        """The HTTP probes a round runs; a fast round runs only running/waiting/kv_usage."""
        return tuple(p for p in self.http_probes if not fast_only or p.signal in FAST_SIGNALS)

    def paths(self, *, fast_only: bool) -> tuple[str, ...]:
        """The distinct GET paths a round needs (probes on one path share one GET).

        A per-model probe needs one GET per listed model, each with autoload=false.
        """
        seen: dict[str, None] = {}
        for probe in self.probes(fast_only=fast_only):
            assert probe.feed.path is not None
            if probe.feed.per_model:
                for model in self.per_model:
                    seen.setdefault(per_model_path(probe.feed.path, model), None)
            else:
                seen.setdefault(probe.feed.path, None)
        return tuple(seen)


@dataclass(frozen=True)
class ScrapeResult:
    snapshot: Snapshot
    failed: Mapping[str, str]  # planned probe name -> reason (non-empty => caller re-resolves)
    answered: bool  # False = no path answered with a 2xx (unreachable, or 5xx everywhere)
    plan_version: str | None = None
    silent: bool = False  # not answered because every path timed out (none refused)

    @property
    def needs_resolve(self) -> bool:
        if self.failed:
            return True
        version = self.snapshot.version
        return version is not None and version != self.plan_version


def follow_line(plan: Plan, line: bytes) -> Snapshot | None:
    """Runs the plan's log probes on one log line.

    Returns the signals the line set (a residency value covers only the model the
    line names), or None when no probe matched. Raises ProbeError (naming the
    probe, never quoting the line) when a matching line's value is unusable.
    """
    outputs: list[tuple[Probe, Snapshot]] = []
    for probe in plan.log_probes:
        output = probe.parse(line)
        if known(output, probe.signal):
            outputs.append((probe, output))
    if not outputs:
        return None
    return assemble(outputs, residency_lists=False)


__all__ = ["Plan", "ProbeError", "ScrapeResult", "follow_line"]
