"""The usage time zone: the configured IANA zone, else the host's own."""

from __future__ import annotations

import os
import zoneinfo
from datetime import tzinfo
from pathlib import Path

from pharos.config.schema import Usage

_LOCALTIME = Path("/etc/localtime")


def usage_zone(usage: Usage) -> tzinfo:
    """The zone whose midnight ends a usage day. Reads disk: call it at startup, not per request."""
    if usage.timezone is not None:
        return zoneinfo.ZoneInfo(usage.timezone)
    return host_zone()


def host_zone() -> tzinfo:
    """The host's zone with its DST rules (TZ, then /etc/localtime), else UTC."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if name:
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    try:
        target = str(_LOCALTIME.resolve())
        if "zoneinfo/" in target:
            return zoneinfo.ZoneInfo(target.split("zoneinfo/", 1)[1])
        with _LOCALTIME.open("rb") as tzfile:
            return zoneinfo.ZoneInfo.from_file(tzfile, key="localtime")
    except (OSError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return zoneinfo.ZoneInfo("UTC")
