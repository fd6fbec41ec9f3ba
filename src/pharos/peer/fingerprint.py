"""The fingerprint peers compare (spec §10): static backend set, key set (with every
access flag: admin, metrics), usage zone.

Peers that differ route differently or count tokens_per_day over different days;
a mismatch is logged once and shown, never silently accepted. Docker-discovered
backends are per host and left out.
"""

from __future__ import annotations

import hashlib

import msgspec

from pharos.config import Config


def fingerprint(config: Config, zone: str) -> int:
    """64 bits of a SHA-256 over a canonical encoding: order in the file doesn't matter."""
    backends = sorted(
        (
            backend.url.rstrip("/"),
            backend.kind.value,
            sorted(backend.aliases.items()),
            backend.capacity,
            backend.memory_gb,
        )
        for backend in config.backends
    )
    keys = sorted(
        (
            key.name,
            key.sha256.lower(),
            key.rpm,
            key.tokens_per_day,
            key.weight,
            sorted(key.models),
            key.admin,
            key.metrics,
        )
        for key in config.keys
    )
    canonical = msgspec.json.encode({"backends": backends, "keys": keys, "zone": zone})
    return int.from_bytes(hashlib.sha256(canonical).digest()[:8], "big")
