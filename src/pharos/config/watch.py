"""Hot reload (spec §10): poll the config file, and apply a new one that parses.

The running instance takes the new config through `apply_config` (the composition
root swaps keys and static backends); a file that does not parse keeps the running one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from pharos.config.load import ConfigError
from pharos.config.reload import load_for_reload
from pharos.config.schema import Config

log = logging.getLogger("pharos")

CONFIG_POLL_INTERVAL_S = 10.0


class Reloadable(Protocol):
    @property
    def config(self) -> Config:
        """The running config: a reload that would widen access against it is refused."""
        ...

    def apply_config(self, new: Config) -> tuple[str, ...]:
        """Apply what applies live; return the sections that need a restart. Raises
        ConfigError (leaving the running config whole) when the new one can't be built."""
        ...


async def reload_config(target: Reloadable, path: Path) -> bool:
    """Re-read the file and apply it; False (logged) when it doesn't parse: the running
    config stays. Keys, quotas and static backends apply live; other changed sections
    are logged as needing a restart."""
    try:
        new = await asyncio.to_thread(load_for_reload, path, target.config)
        pending = target.apply_config(new)
    except ConfigError as err:
        log.error("config reload failed; the running config stays:\n%s", err)
        return False
    log.info("config reloaded: %d keys, %d backends", len(new.keys), len(new.backends))
    for section in pending:
        log.warning("config reload: `%s` changed and needs a restart to take effect", section)
    return True


async def reload_if_changed(
    target: Reloadable, path: Path, last_mtime_ns: int | None
) -> int | None:
    """One poll of the watcher: reload when the modification time moved; returns the
    modification time seen (None when the file is gone, which keeps the running config)."""
    mtime_ns = _mtime_ns(path)
    if mtime_ns is not None and mtime_ns != last_mtime_ns:
        await reload_config(target, path)
    return mtime_ns if mtime_ns is not None else last_mtime_ns


async def watch_config(
    target: Reloadable,
    path: Path | None,
    interval_s: float = CONFIG_POLL_INTERVAL_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    if path is None:
        return
    last_mtime_ns = _mtime_ns(path)
    while True:
        await sleep(interval_s)
        try:
            last_mtime_ns = await reload_if_changed(target, path, last_mtime_ns)
        except Exception:  # a bug here must not end the watcher; the running config stays
            log.exception("config reload failed; the running config stays")
            last_mtime_ns = _mtime_ns(path)


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
