"""`pharos doctor`'s examination of one backend: resolve it, read its log feed, and
check what would surprise a new user (the report's text lives in report.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import aiohttp

from pharos.config import Config
from pharos.discovery.static import own_probes
from pharos.doctor.report import CODING_AGENT_ROUTES, BackendReport, RouteCheck, route_served
from pharos.engine import (
    BackendUnreachable,
    DetectionFailed,
    Plan,
    ResolveError,
    apply_aliases,
    follow_line,
    merge_snapshots,
    resolve,
)
from pharos.engine.types import Kind, Probe, ProbeError, Snapshot
from pharos.state.derive import accumulate_log

MAX_LOG_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Target:
    """One backend to examine, from --url or from the config file."""

    url: str
    kind: Kind = Kind.AUTO
    aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    capacity: int | None = None
    memory_bytes: int | None = None
    log_feed: str | None = None
    own: tuple[Probe, ...] = ()


def config_targets(config: Config, source: str) -> list[Target]:
    """Every backend of a config file, with its own probes built as serve builds them."""
    return [
        Target(
            url=backend.url,
            kind=backend.kind,
            aliases=backend.aliases,
            capacity=backend.capacity,
            memory_bytes=backend.memory_bytes,
            log_feed=backend.logs,
            own=own_probes(backend, at=f"backends[{index}]", source=source),
        )
        for index, backend in enumerate(config.backends)
    ]


async def examine_all(targets: Sequence[Target], *, timeout_s: float) -> list[BackendReport]:
    async with aiohttp.ClientSession() as session:
        return list(
            await asyncio.gather(*(examine(session, t, timeout_s=timeout_s) for t in targets))
        )


async def examine(
    session: aiohttp.ClientSession, target: Target, *, timeout_s: float = 3.0
) -> BackendReport:
    """Resolve one backend, read its log feed, and check what would surprise a new user."""
    common: dict[str, Any] = {
        "url": target.url,
        "requested_kind": target.kind,
        "aliases": target.aliases,
        "config_capacity": target.capacity,
        "memory_bytes": target.memory_bytes,
        "log_feed": target.log_feed,
    }
    try:
        plan, scraped = await resolve(
            session,
            target.url,
            target.kind,
            own=target.own,
            has_log_feed=target.log_feed is not None,
            timeout_s=timeout_s,
        )
    except BackendUnreachable as problem:
        return BackendReport(error=f"the backend answered nothing ({problem})", **common)
    except DetectionFailed as problem:
        return BackendReport(
            error=f"could not detect the engine kind ({problem}); retry, or pass --kind",
            **common,
        )
    except ResolveError as problem:
        return BackendReport(error=f"could not resolve the backend ({problem})", **common)
    log_snapshot, log_lines, log_note = await _read_log_feed(plan, target.log_feed)
    snapshot = scraped if log_snapshot is None else merge_snapshots(scraped, log_snapshot)
    engine_models = None if snapshot.models is None else tuple(sorted(snapshot.models))
    remote, routes = await asyncio.gather(
        _remote_models(session, target.url, plan.kind, timeout_s),
        _coding_agent_routes(session, target.url, timeout_s),
    )
    return BackendReport(
        kind=plan.kind,
        version=plan.version if plan.version is not None else snapshot.version,
        active=plan.active,
        dropped=plan.dropped,
        snapshot=apply_aliases(snapshot, target.aliases),
        engine_models=engine_models,
        log_lines=log_lines,
        log_note=log_note,
        remote_models=remote,
        routes=routes,
        **common,
    )


async def _read_log_feed(
    plan: Plan, feed: str | None
) -> tuple[Snapshot | None, int | None, str | None]:
    """Runs the plan's log probes over a file:// feed; returns (values, lines read, note)."""
    if feed is None:
        return None, None, None
    if not feed.startswith("file://"):
        return None, None, "doctor reads file:// feeds only; serve reads this one"
    path = Path(feed.removeprefix("file://"))
    try:
        data = await asyncio.to_thread(_read_tail, path)
    except OSError as problem:
        return None, None, f"cannot read it: {problem.strerror or problem}"
    accumulated: Snapshot | None = None
    unusable = 0
    lines = data.splitlines()
    for line in lines:
        try:
            values = follow_line(plan, line)
        except ProbeError:  # a matching line whose value cannot be the signal, as serve skips it
            unusable += 1
            continue
        if values is not None:
            accumulated = accumulate_log(accumulated, values)
    note = None if unusable == 0 else f"{unusable} matching lines had unusable values"
    return accumulated, len(lines), note


def _read_tail(path: Path) -> bytes:
    with path.open("rb") as log_file:
        size = log_file.seek(0, 2)
        log_file.seek(max(0, size - MAX_LOG_BYTES))
        return log_file.read()


async def _remote_models(
    session: aiohttp.ClientSession, base_url: str, kind: Kind, timeout_s: float
) -> tuple[str, ...]:
    """Ollama models whose /api/tags entry has remote_host: :cloud stubs run elsewhere."""
    if kind is not Kind.OLLAMA:
        return ()
    try:
        async with session.get(
            base_url + "/api/tags", timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as reply:
            if reply.status != 200:
                return ()
            body = await reply.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return ()
    entries = body.get("models") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return ()
    return tuple(
        str(entry.get("name") or entry.get("model"))
        for entry in entries
        if isinstance(entry, dict) and entry.get("remote_host")
    )


async def _coding_agent_routes(
    session: aiohttp.ClientSession, base_url: str, timeout_s: float
) -> dict[str, RouteCheck]:
    async def check(path: str) -> RouteCheck:
        try:
            async with session.post(
                base_url + path, json={}, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as reply:
                body = await reply.content.read(_ROUTE_BODY_BYTES)
                return RouteCheck(reply.status, route_served(reply.status, body))
        except (aiohttp.ClientError, TimeoutError):
            return RouteCheck(None, None)

    checks = await asyncio.gather(*(check(path) for path in CODING_AGENT_ROUTES))
    return dict(zip(CODING_AGENT_ROUTES, checks, strict=True))


_ROUTE_BODY_BYTES = 4096
