"""Zero-config: find engines on this host's default ports (spec-free convenience for `serve`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import aiohttp

from pharos.engine import Kind, ResolveError, detect
from pharos.state import BackendSpec

log = logging.getLogger("pharos")

DEFAULT_PORTS: tuple[tuple[int, str], ...] = (
    (11434, "Ollama"),
    (8080, "llama.cpp"),
    (8000, "vLLM"),
    (30000, "SGLang"),
)
DEFAULT_PORT_NUMBERS: tuple[int, ...] = tuple(port for port, _ in DEFAULT_PORTS)
PROBE_TIMEOUT_S = 1.5

HOW_TO_CONFIGURE = (
    "start an engine on one of those ports and restart, or write a config file listing "
    "your backends and run `pharos serve --config FILE` (see `pharos serve --help`)"
)


def describe_ports(ports: Sequence[tuple[int, str]]) -> str:
    """`Ollama 11434, llama.cpp 8080` (or just the numbers when unnamed)."""
    return ", ".join(f"{name} {port}" if name else str(port) for port, name in ports)


async def _probe(session: aiohttp.ClientSession, url: str, timeout_s: float) -> Kind | None:
    try:
        return await detect(session, url, timeout_s=timeout_s)
    except ResolveError:
        return None


async def discover_local(
    session: aiohttp.ClientSession,
    *,
    host: str = "127.0.0.1",
    ports: Sequence[int] = DEFAULT_PORT_NUMBERS,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> list[BackendSpec]:
    """A backend for every port where an engine answers, with the kind it showed.

    A port where nothing answers, or whose engine cannot be told apart yet (a
    llama.cpp still loading its model answers 503 everywhere), is left out.
    """
    urls = [f"http://{host}:{port}" for port in ports]
    kinds = await asyncio.gather(*(_probe(session, url, timeout_s) for url in urls))
    return [
        BackendSpec(url=url, kind=kind)
        for url, kind in zip(urls, kinds, strict=True)
        if kind is not None
    ]


async def zero_config_backends(host: str, ports: Sequence[int]) -> list[BackendSpec]:
    """Probe host:ports (with a session of its own, closed after) and say what answered,
    or how to configure when nothing did."""
    described = describe_ports([(port, "") for port in ports])
    log.info("zero-config: no --config given; looking for engines on %s ports %s", host, described)
    async with aiohttp.ClientSession() as session:
        found = await discover_local(session, host=host, ports=ports)
    for spec in found:
        log.info("zero-config: found %s at %s", spec.kind.value, spec.url)
    if not found:
        log.warning(
            "zero-config: no engine answered on %s ports %s; %s", host, described, HOW_TO_CONFIGURE
        )
    return found
