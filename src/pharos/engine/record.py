"""The one recorder (spec §14 layer 2 format): raw bodies of every probe path of one backend.

`pharos doctor --record DIR` and the live capture driver both call `record`. The output
is what replay tests read: one file per answered path (`/api/ps` -> `api_ps`), `paths.tsv`
with every path's status and content type (404s included; `000 -` = no answer), and
`meta.yaml`. Bodies are stored raw, never parsed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml

from pharos.engine.library import LIBRARY

CANDIDATE_PATHS: tuple[str, ...] = (
    "/health",
    "/version",
    "/api/version",
    "/api/ps",
    "/api/tags",
    "/props",
    "/slots",
    "/metrics",
    "/models",
    "/running",
    "/server_info",
    "/get_server_info",
    "/get_model_info",
    "/v1/loads",
    "/v1/models",
    "/api/v1/models",
    "/prometheus/metrics",
)
"""Paths any engine might answer (the list the Go recorder used; see any capture's paths.tsv)."""

NO_ANSWER_STATUS = "000"
NO_CONTENT_TYPE = "-"
PATHS_FILE = "paths.tsv"
META_FILE = "meta.yaml"
LOG_FILE = "engine.log"


def _merge_paths(*groups: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        for path in group:
            seen.setdefault(path, None)
    return tuple(seen)


def record_paths() -> tuple[str, ...]:
    """The candidates first (the recorded order), then every library path they miss."""
    library = (probe.feed.path for probe in LIBRARY.values() if probe.feed.path is not None)
    return _merge_paths(CANDIDATE_PATHS, library)


_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


def body_file_name(path: str) -> str:
    """`/api/ps` -> `api_ps`; a query keeps its name: `/props?model=a` -> `props_model=a`."""
    name = _UNSAFE.sub("_", path.lstrip("/"))
    if not name or name in (PATHS_FILE, META_FILE, LOG_FILE, ".", ".."):
        raise ValueError(f"path {path!r} cannot name a body file")
    return name


@dataclass(frozen=True, slots=True)
class Fetched:
    path: str
    status: int | None  # None = no answer (connection refused, reset, timeout)
    content_type: str | None
    body: bytes | None


async def _fetch(
    session: aiohttp.ClientSession, base_url: str, path: str, timeout_s: float
) -> Fetched:
    try:
        async with session.get(
            base_url.rstrip("/") + path,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            allow_redirects=False,
        ) as response:
            body = await response.read()
            return Fetched(path, response.status, response.headers.get("Content-Type"), body)
    except (TimeoutError, aiohttp.ClientError):
        return Fetched(path, None, None, None)


def paths_tsv(fetched: Sequence[Fetched]) -> str:
    lines = []
    for item in fetched:
        status = NO_ANSWER_STATUS if item.status is None else str(item.status)
        content_type = item.content_type or NO_CONTENT_TYPE
        lines.append(f"{item.path}\t{status}\t{content_type}\n")
    return "".join(lines)


def meta_yaml(meta: Mapping[str, str]) -> str:
    return yaml.safe_dump(dict(meta), sort_keys=False, allow_unicode=True)


def _write(
    out_dir: Path, fetched: Sequence[Fetched], meta: Mapping[str, str], log_file: Path | None
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for item in fetched:
        target = out_dir / body_file_name(item.path)
        if item.body is not None and item.status != 404:
            target.write_bytes(item.body)
        elif target.exists():
            target.unlink()  # a re-record must not leave a stale body beside a 404
    (out_dir / PATHS_FILE).write_text(paths_tsv(fetched), encoding="utf-8")
    (out_dir / META_FILE).write_text(meta_yaml(meta), encoding="utf-8")
    if log_file is not None:
        shutil.copyfile(log_file, out_dir / LOG_FILE)


async def record(
    session: aiohttp.ClientSession,
    base_url: str,
    out_dir: Path,
    *,
    meta: Mapping[str, str],
    log_file: Path | None = None,
    paths: Sequence[str] | None = None,
    timeout_s: float = 5.0,
) -> None:
    """GET every path (RECORD_PATHS unless `paths` is given) at once and write the capture.

    A path that answers 404 gets a paths.tsv line and no body file; one that does not
    answer at all is `000 -`. All paths are asked concurrently so the bodies describe
    one moment of a busy engine. File writes run off the event loop.
    """
    wanted = RECORD_PATHS if paths is None else tuple(paths)
    for path in wanted:
        body_file_name(path)  # fail before fetching anything
    fetched = await asyncio.gather(*(_fetch(session, base_url, p, timeout_s) for p in wanted))
    await asyncio.to_thread(_write, out_dir, fetched, meta, log_file)


RECORD_PATHS: tuple[str, ...] = record_paths()
