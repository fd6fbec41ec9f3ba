"""What a hot reload can apply live, and what needs a restart (spec §10)."""

from __future__ import annotations

from pharos.config.schema import Config

RESTART_SECTIONS = ("listen", "policy", "state_file", "peers", "usage", "drain")
"""Sections read once at startup; keys and backends apply live."""


def restart_needed(running: Config, reloaded: Config) -> tuple[str, ...]:
    """The sections that changed but take effect only after a restart (for a log line)."""
    return tuple(
        section
        for section in RESTART_SECTIONS
        if getattr(running, section) != getattr(reloaded, section)
    )
