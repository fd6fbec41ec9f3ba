"""`pharos doctor`: run Resolve on each backend and say what Pharos reads from it, and why."""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import aiohttp

from pharos.config import ConfigError, load_config, log_feed_problem, url_problem
from pharos.doctor.examine import Target, config_targets, examine, examine_all
from pharos.doctor.report import BackendReport, to_json, to_text
from pharos.engine.record import record
from pharos.engine.types import Kind

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2
LOG_PRIVACY_WARNING = (
    "warning: engine logs can contain prompts and replies; review engine.log before you share "
    "or commit the capture"
)


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
        return config_targets(load_config(args.config), args.config)
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
