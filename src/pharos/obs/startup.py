"""What `serve` says once the first scrape round is done: each backend with its detected
kind and version, the keys and the policy, so the log alone tells what this instance runs."""

from __future__ import annotations

from collections.abc import Sequence

from pharos.proxy.auth import KeyTable
from pharos.state import BackendStatus


def startup_lines(backends: Sequence[BackendStatus], keys: KeyTable, policy: str) -> list[str]:
    lines = [f"ready: {len(backends)} backends, policy {policy}, {_keys_text(keys)}"]
    for backend in backends:
        state = "up" if backend.up else f"down ({backend.down_reason or 'no answer yet'})"
        lines.append(
            f"backend {backend.url}: {backend.kind.value} {backend.version or 'version unknown'}, "
            f"{state}, {len(backend.target_ids)} models, {len(backend.active_probes)} probes"
        )
    return lines


def _keys_text(keys: KeyTable) -> str:
    if keys.is_open:
        return "no keys (every client is one anonymous key)"
    entries = keys.entries
    admins = sum(entry.admin for entry in entries)
    return f"{len(entries)} keys ({admins} admin)"
