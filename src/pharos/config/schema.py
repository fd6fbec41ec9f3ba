"""The config file's schema (spec §10) as frozen msgspec Structs.

Unknown fields are errors, so a typo (`per-model` for `per_model`) fails at
startup or reload instead of silently dropping a setting. Structural checks live
here; rules that span fields or need a registry live in `rules.py`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated

import msgspec

from pharos.config.values import Duration, HostPort
from pharos.engine.types import Kind, Signal

BYTES_PER_GB = 1024**3
"""`memory_gb` counts GiB: a "24 GB" GPU holds 24 GiB."""


class Policy(enum.Enum):
    COST = "cost"
    LEAST_LOAD = "least-load"


PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


class PromProbe(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    path: str
    metric: str
    per_model: str | None = None  # the label that splits the metric per model
    percent: bool = False  # the metric is 0..100, not 0..1 (kv_usage)


class LogProbe(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    match: str  # a regular expression; named groups `value` and `model`
    value: str | int | float | None = None  # a fixed value a matching line reports


class OwnProbe(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An operator's probe (spec §4): one signal from one Prometheus metric or one log line."""

    name: str = ""
    signal: Signal | None = None
    prom: PromProbe | None = None
    log: LogProbe | None = None


class Backend(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    url: str
    kind: Kind = Kind.AUTO
    memory_gb: Annotated[float, msgspec.Meta(gt=0)] | None = None
    capacity: PositiveInt | None = None  # per target, used only when the engine reports none
    aliases: Mapping[str, str] = msgspec.field(default_factory=dict)  # engine name -> client name
    logs: str | None = None  # docker://<container> or file:///<path>
    probes: tuple[OwnProbe, ...] = ()
    # Upstream credentials for an engine started with --api-key: sent to this backend only.
    api_key_env: str | None = None  # an environment variable holding the key (Bearer)
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)  # use ${VAR} for secrets

    def __repr__(self) -> str:
        return f"Backend(url={self.url!r}, kind={self.kind!r})"  # headers may hold secrets

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory_gb is None else int(self.memory_gb * BYTES_PER_GB)


class Key(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    name: str
    sha256: str  # lowercase hex of the SHA-256 of the key; the key itself is never stored
    rpm: PositiveInt | None = None  # None = no per-minute limit
    tokens_per_day: PositiveInt | None = None  # None = no daily limit
    weight: PositiveInt = 1  # fair-queue share
    models: tuple[str, ...] = ()  # allow-list; empty = every model
    admin: bool = False  # may read /status and /usage
    metrics: bool = False  # may read /metrics (a Prometheus scrape key); admin keys may too


class Usage(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    timezone: str | None = None  # IANA name; None = the host's zone (see zones.usage_zone)
    retention_days: PositiveInt = 400


class Drain(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    grace: Duration = msgspec.field(default_factory=lambda: Duration("5s"))
    timeout: Duration = msgspec.field(default_factory=lambda: Duration("10m"))


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Bounds on waiting and reading (issue 11): nothing waits forever. Read at startup."""

    queue_wait: Duration = msgspec.field(default_factory=lambda: Duration("10m"))  # cold load
    client_idle: Duration = msgspec.field(default_factory=lambda: Duration("30s"))  # headers
    client_body: Duration = msgspec.field(default_factory=lambda: Duration("60s"))
    max_connections: PositiveInt = 768  # client connections; under a 1024-fd default limit
    bodies_in_flight_mb: PositiveInt = 256  # request bytes held at once, over all requests
    upstream_idle: Duration = msgspec.field(default_factory=lambda: Duration("10m"))


class Peers(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    secret_file: str
    listen: HostPort = msgspec.field(default_factory=lambda: HostPort("", 8081))
    members: tuple[str, ...] = ()  # host:port each; may include this instance
    dns: str | None = None  # a name whose A/AAAA records are the peers (k8s headless Service)


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    listen: HostPort = msgspec.field(default_factory=lambda: HostPort("", 8090))
    policy: Policy = Policy.COST
    backends: tuple[Backend, ...] = ()
    keys: tuple[Key, ...] = ()
    state_file: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    drain: Drain = msgspec.field(default_factory=Drain)
    peers: Peers | None = None
    limits: Limits = msgspec.field(default_factory=Limits)
    metrics_public: bool = False  # true: /metrics needs no key even when keys are configured
    allow_dropping_keys: bool = False  # true: a reload may remove every key (opening access)


ENUM_CHOICES: Mapping[str, tuple[str, ...]] = {
    "kind": tuple(kind.value for kind in Kind),
    "policy": tuple(policy.value for policy in Policy),
    "signal": tuple(signal.value for signal in Signal),
}
"""Field name -> allowed values, for error messages about an enum field."""


def field_names() -> frozenset[str]:
    """Every field name of the schema, to suggest a fix for an unknown field."""
    names: set[str] = set()
    for struct in (
        PromProbe,
        LogProbe,
        OwnProbe,
        Backend,
        Key,
        Usage,
        Drain,
        Peers,
        Limits,
        Config,
    ):
        names.update(struct.__struct_fields__)
    return frozenset(names)
