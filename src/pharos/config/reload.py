"""What a hot reload can apply live, what needs a restart (spec §10), and what it refuses.

A reload never widens access by accident: an editor that truncates the file before
writing it, or a watcher that reads the first 70 bytes of a file caught mid-write, once
yielded zero keys and turned authentication off until the next poll (issue 11).
"""

from __future__ import annotations

from pathlib import Path

from pharos.config.load import ConfigError, load_config
from pharos.config.schema import Config

RESTART_SECTIONS = ("listen", "policy", "state_file", "peers", "usage", "drain", "limits")
"""Sections read once at startup; keys and backends apply live."""


def restart_needed(running: Config, reloaded: Config) -> tuple[str, ...]:
    """The sections that changed but take effect only after a restart (for a log line)."""
    return tuple(
        section
        for section in RESTART_SECTIONS
        if getattr(running, section) != getattr(reloaded, section)
    )


def widening_problem(running: Config, reloaded: Config) -> str | None:
    """Why applying `reloaded` would open access the running config closes; None when not."""
    if running.keys and not reloaded.keys and not reloaded.allow_dropping_keys:
        return (
            f"keys: the file lists no keys while {len(running.keys)} are running; a reload "
            "would let every client in. Refused: to run without keys on purpose, set "
            "`allow_dropping_keys: true`"
        )
    return None


def load_for_reload(path: str | Path, running: Config) -> Config:
    """Read a config to apply live; ConfigError for a file that is empty (likely caught
    mid-write), that doesn't parse, or that would widen access."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # load_config names the problem
    if text is not None and not _has_settings(text):
        raise ConfigError(
            source, ["the file is empty (caught mid-write?); an empty config is never applied"]
        )
    reloaded = load_config(path)
    problem = widening_problem(running, reloaded)
    if problem is not None:
        raise ConfigError(source, [problem])
    return reloaded


def _has_settings(text: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())
