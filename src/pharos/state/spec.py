"""The values State is configured with and reports (spec §5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import msgspec

from pharos.engine.types import Kind, Probe


def _no_aliases() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class BackendSpec:
    """One desired backend, as discovery hands it to State. Equal specs keep their state."""

    url: str
    kind: Kind = Kind.AUTO
    memory_bytes: int | None = None
    capacity: int | None = None
    aliases: Mapping[str, str] = field(default_factory=_no_aliases)  # engine name -> client name
    log_feed: str | None = None  # "file:///path" or "docker://<container>"
    own_probes: tuple[Probe, ...] = ()


@dataclass(frozen=True)
class StateOptions:
    fast_interval_s: float = 1.0  # load signals (running, waiting, kv usage)
    full_interval_s: float = 5.0  # the whole plan: residency, capacity, version, models
    resolve_every_s: float = 600.0
    stale_factor: float = 3.0
    scrape_timeout_s: float = 0.8
    resolve_timeout_s: float = 3.0
    jitter_fraction: float = 0.1  # each sleep between rounds is the fast interval ± this share
    log_backoff_start_s: float = 1.0
    log_backoff_max_s: float = 30.0
    remembered_removed: int = 32  # removed backends kept to restore on return

    @property
    def rounds_per_full(self) -> int:
        """Every n-th round runs the whole plan; the rest only its load probes."""
        return max(1, round(self.full_interval_s / self.fast_interval_s))


class StatRecord(msgspec.Struct, frozen=True, rename={"key": "target_key"}):
    """A target's speed estimates, as peers and the state file carry them; None = no samples.

    On the wire `key` is named `target_key`, as wire version 1 recorded it."""

    key: str  # backend URL + " " + model
    prefill_s_per_token: float | None = None
    load_s: float | None = None
    service_s: float | None = None


@dataclass(frozen=True)
class ProbeStatus:
    """One active probe as /status shows it: what it reads, its last value, where from."""

    name: str
    signal: str
    value: str | None  # None = no value yet (unknown)
    source: str  # the HTTP path, "log", or "own <path|log>"
    own: bool


@dataclass(frozen=True)
class BackendStatus:
    """One backend as doctor-like views and /status show it."""

    url: str
    kind: Kind  # the plan's kind once resolved, else the configured one
    version: str | None
    active_probes: tuple[str, ...]
    dropped_probes: Mapping[str, str]  # probe name -> reason
    full_round_age_s: float | None  # since the last answered full round; None = never
    fast_round_age_s: float | None  # since the last answered round of any kind
    up: bool
    reachable: bool | None  # did the last round answer; None = no round yet
    down_reason: str | None  # why the last round failed
    ejected: str | None  # the proxy's reason, until the next answered round
    log_feed: str | None
    log_feed_up: bool | None  # None = no follower runs (no feed or no log probes)
    draining: bool
    target_ids: tuple[int, ...]
    probes: tuple[ProbeStatus, ...] = ()
