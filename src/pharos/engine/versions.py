"""Version guards shared by the library and router-mode probes."""

from __future__ import annotations

import re

_BUILD = re.compile(r"b(\d+)(?:-|\Z)")
LLAMACPP_DEFERRED_FROM_BUILD = 8772


def llamacpp_build(version: str | None) -> int | None:
    """The build number of a llama.cpp version ("b11146-7fe450e19" -> 11146), or None."""
    if version is None:
        return None
    match = _BUILD.match(version.strip())
    return int(match.group(1)) if match else None


def llamacpp_deferred_trusted(version: str | None) -> bool:
    """requests_deferred reads 0 while requests queue before b8772 (b6602, b7139 captures)."""
    build = llamacpp_build(version)
    return build is not None and build >= LLAMACPP_DEFERRED_FROM_BUILD
