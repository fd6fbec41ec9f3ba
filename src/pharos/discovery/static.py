"""The static backend list (config `backends:`) as the BackendSpecs State wants (spec §10)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from urllib.parse import urlparse

from pharos.discovery.filefeed import file_feed_path
from pharos.engine.types import Kind, Probe
from pharos.state import BackendSpec

GIB_BYTES = 1 << 30
"""memory_gb counts GiB: a "24 GB" GPU holds 24 GiB."""

LOG_FEED_SCHEMES = ("file", "docker")


def static_spec(
    url: str,
    *,
    kind: str | Kind = Kind.AUTO,
    memory_gb: float | None = None,
    capacity: int | None = None,
    aliases: Mapping[str, str] | None = None,
    logs: str | None = None,
    probes: Sequence[Probe] = (),
    where: str = "backends[]",
) -> BackendSpec:
    """Check one static backend entry; ValueError names the bad field (`where` prefixes it)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{where}.url: {url!r} is not an http:// or https:// URL")
    try:
        engine_kind = kind if isinstance(kind, Kind) else Kind(kind)
    except ValueError:
        kinds = ", ".join(k.value for k in Kind)
        raise ValueError(f"{where}.kind: {kind!r} is not one of {kinds}") from None
    memory_bytes: int | None = None
    if memory_gb is not None:
        if not math.isfinite(memory_gb) or memory_gb <= 0:
            raise ValueError(f"{where}.memory_gb: {memory_gb!r} must be a positive number")
        memory_bytes = int(memory_gb * GIB_BYTES)
    if capacity is not None and capacity < 1:
        raise ValueError(f"{where}.capacity: {capacity!r} must be at least 1")
    if logs is not None:
        scheme = urlparse(logs).scheme
        if scheme not in LOG_FEED_SCHEMES:
            raise ValueError(f"{where}.logs: {logs!r} must be file:///path or docker://container")
        if scheme == "file":
            try:
                file_feed_path(logs)
            except ValueError as error:
                raise ValueError(f"{where}.logs: {error}") from None
    probe_names = [probe.name for probe in probes]
    duplicates = sorted({name for name in probe_names if probe_names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{where}.probes: duplicate name {duplicates[0]!r}")
    return BackendSpec(
        url=url.rstrip("/"),
        kind=engine_kind,
        memory_bytes=memory_bytes,
        capacity=capacity,
        aliases=MappingProxyType(dict(aliases or {})),
        log_feed=logs,
        own_probes=tuple(probes),
    )


def merge_specs(*sources: Sequence[BackendSpec]) -> list[BackendSpec]:
    """Combine static and discovered lists; the first source to name a URL wins."""
    seen: dict[str, BackendSpec] = {}
    for source in sources:
        for spec in source:
            seen.setdefault(spec.url, spec)
    return list(seen.values())
