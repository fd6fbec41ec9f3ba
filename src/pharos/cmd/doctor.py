"""`pharos doctor`: run Resolve on each backend and say what Pharos reads from it, and why."""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

import aiohttp

from pharos.cmd.doctor_report import (
    CODING_AGENT_ROUTES,
    BackendReport,
    RouteCheck,
    route_served,
    to_json,
    to_text,
)
from pharos.config import ConfigError, load_config, log_feed_problem, url_problem
from pharos.discovery.static import own_probes
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
from pharos.engine.record import record
from pharos.engine.types import Kind, Probe, ProbeError, Snapshot
from pharos.state.derive import accumulate_log

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2
MAX_LOG_BYTES = 64 * 1024 * 1024
LOG_PRIVACY_WARNING = (
    "warning: engine logs can contain prompts and replies; review engine.log before you share "
    "or commit the capture"
)


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


class UsageError(Exception):
    """Bad arguments: printed as one line, exit status 2."""


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--url", metavar="URL", help="one backend's base URL, like http://gpu:8000")
    which.add_argument(
        "--config", "-c", metavar="FILE", help="examine every backend in this config file"
    )
    parser.add_argument(
        "--kind",
        choices=[kind.value for kind in Kind],
        default=Kind.AUTO.value,
        help="the engine kind for --url (default: auto, detected)",
    )
    parser.add_argument(
        "--log-feed",
        metavar="file:///PATH",
        help="the engine's log file for --url; its log probes run over it",
    )
    parser.add_argument(
        "--record",
        metavar="DIR",
        help="save the raw body of every known path into DIR (the fixture format); needs --url",
    )
    parser.add_argument(
        "--logs",
        action="store_true",
        help="with --record: copy the --log-feed file to DIR/engine.log (it can contain prompts)",
    )
    parser.add_argument(
        "--meta",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="with --record: an extra meta.yaml line (repeatable), like state=busy",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=3.0,
        help="per request (default: 3)",
    )


def run_doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        targets = targets_of(args)
        if args.record is not None:
            return asyncio.run(_record(args, targets[0], out, err))
    except UsageError as problem:
        err.write(f"pharos doctor: {problem}\n")
        return EXIT_USAGE
    except ConfigError as problem:
        err.write(f"{problem}\n")
        return EXIT_USAGE
    reports = asyncio.run(examine_all(targets, timeout_s=args.timeout))
    if args.json:
        out.write(json.dumps({"backends": [to_json(report) for report in reports]}, indent=2))
        out.write("\n")
    else:
        out.write("\n".join(to_text(report) for report in reports))
    return EXIT_UNREACHABLE if any(report.error is not None for report in reports) else EXIT_OK


def targets_of(args: argparse.Namespace) -> list[Target]:
    if args.config is not None:
        if args.record is not None:
            raise UsageError("--record takes one backend: use --url")
        if args.log_feed is not None:
            raise UsageError("--log-feed goes with --url; in a config file, set logs: per backend")
        config = load_config(args.config)
        return [
            Target(
                url=backend.url,
                kind=backend.kind,
                aliases=backend.aliases,
                capacity=backend.capacity,
                memory_bytes=backend.memory_bytes,
                log_feed=backend.logs,
                own=own_probes(backend, at=f"backends[{index}]", source=args.config),
            )
            for index, backend in enumerate(config.backends)
        ]
    url = args.url.strip().rstrip("/")
    problem = url_problem(url)
    if problem is not None:
        raise UsageError(f"--url: {problem}")
    if args.log_feed is not None:
        problem = log_feed_problem(args.log_feed)
        if problem is not None:
            raise UsageError(f"--log-feed: {problem}")
    if args.meta and args.record is None:
        raise UsageError("--meta adds lines to a --record capture's meta.yaml; give --record")
    if args.logs and (args.record is None or args.log_feed is None):
        raise UsageError("--logs copies the --log-feed file into a --record capture; give both")
    if args.logs and not args.log_feed.startswith("file://"):
        raise UsageError("--logs needs a file:// log feed")
    return [Target(url=url, kind=Kind(args.kind), log_feed=args.log_feed)]


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


def _meta(args: argparse.Namespace, report: BackendReport) -> dict[str, str]:
    meta = {
        "engine": (report.kind or report.requested_kind).value,
        "version": report.version or "unknown",
        "url": report.url,
        "captured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "pharos " + " ".join(sys.argv[1:]) if sys.argv[1:] else "pharos doctor",
        "host": f"{platform.system()}/{platform.machine()}",
    }
    for item in args.meta:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f'--meta "{item}": write it as KEY=VALUE')
        meta[key.strip()] = value.strip()
    return meta


async def _record(args: argparse.Namespace, target: Target, out: TextIO, err: TextIO) -> int:
    out_dir = Path(args.record)
    log_file = (
        Path(target.log_feed.removeprefix("file://")) if args.logs and target.log_feed else None
    )
    if log_file is not None and not log_file.is_file():
        raise UsageError(f"--log-feed: {log_file} is not a readable file")
    async with aiohttp.ClientSession() as session:
        report = await examine(session, target, timeout_s=args.timeout)
        meta = _meta(args, report)
        if report.error is not None:
            err.write(f"pharos doctor: {report.url}: {report.error}; recording what answers\n")
        try:
            await record(session, target.url, out_dir, meta=meta, log_file=log_file)
        except OSError as problem:
            err.write(f"pharos doctor: cannot write {out_dir}: {problem.strerror or problem}\n")
            return EXIT_USAGE
    if log_file is not None:
        err.write(LOG_PRIVACY_WARNING + "\n")
    out.write(f"recorded {target.url} into {out_dir}\n")
    return EXIT_OK
