"""Rules that span fields, checked after the schema decoded: each broken rule is one line."""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Collection, Iterator, Set
from types import MappingProxyType
from urllib.parse import urlsplit

import msgspec

from pharos.config.own_probes import check_own_probes
from pharos.config.schema import Backend, Config, Key, Limits, Peers, Usage

_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
_MEMBER = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}")


NOT_BUILT: tuple[str, ...] = ()  # peers and docker:// log feeds landed; add the next one here
"""Settings the schema accepts but this version cannot honour yet: using one is an error
("X is not built in this version"), never a setting silently ignored."""


def not_built(config: Config, unbuilt: Collection[str] = NOT_BUILT) -> Iterator[str]:
    """One line per setting used that `unbuilt` lists."""
    if "peers" in unbuilt and config.peers is not None:
        yield "peers: the peer plane is not built in this version; remove `peers:`"
    if "docker log feeds" in unbuilt:
        for index, backend in enumerate(config.backends):
            if backend.logs is not None and backend.logs.startswith("docker://"):
                yield (
                    f"backends[{index}].logs: docker log feeds are not built in this version; "
                    "use file:///<path>"
                )


def check(
    config: Config, library_names: Set[str], unbuilt: Collection[str] = NOT_BUILT
) -> tuple[Config, list[str]]:
    """Returns the config with values normalized, and every problem found (empty = valid).
    `unbuilt`: the NOT_BUILT settings to refuse (tests of the schema pass none)."""
    problems: list[str] = []
    backends = tuple(_normalize_backend(backend) for backend in config.backends)
    problems.extend(_check_backends(backends, library_names))
    keys = tuple(msgspec.structs.replace(key, sha256=key.sha256.lower()) for key in config.keys)
    problems.extend(_check_keys(keys))
    problems.extend(_check_usage(config.usage))
    problems.extend(_check_limits(config.limits))
    if config.peers is not None:
        problems.extend(_check_peers(config.peers))
    if config.state_file is not None and not config.state_file.strip():
        problems.append("state_file: empty; leave it out to keep no state file")
    problems.extend(not_built(config, unbuilt))
    return msgspec.structs.replace(config, backends=backends, keys=keys), problems


def _normalize_backend(backend: Backend) -> Backend:
    return msgspec.structs.replace(
        backend,
        url=backend.url.strip().rstrip("/"),
        aliases=MappingProxyType(dict(backend.aliases)),
    )


def url_problem(url: str) -> str | None:
    """Why `url` can't be a backend's base URL, or None when it can."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as err:
        return f'"{url}" is not a URL: {err}'
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f'"{url}" is not an http:// or https:// URL with a host, like http://gpu-box:8000'
    if parts.query or parts.fragment:
        return f'"{url}": a base URL has no ?query or #fragment'
    return None


def log_feed_problem(feed: str) -> str | None:
    """Why `feed` can't be a log feed, or None when it can."""
    if feed.startswith("docker://"):
        if not feed.removeprefix("docker://").strip("/"):
            return f'"{feed}" names no container; write docker://<container name or id>'
        return None
    if feed.startswith("file://"):
        if not feed.removeprefix("file://").startswith("/"):
            return f'"{feed}": a file feed needs an absolute path, like file:///var/log/ollama.log'
        return None
    return f'"{feed}" is not docker://<container> or file:///<path>'


def _check_backends(backends: tuple[Backend, ...], library_names: Set[str]) -> Iterator[str]:
    first_index: dict[str, int] = {}
    for index, backend in enumerate(backends):
        here = f"backends[{index}]"
        problem = url_problem(backend.url)
        if problem is not None:
            yield f"{here}.url: {problem}"
        elif backend.url in first_index:
            yield f"{here}.url: same backend as backends[{first_index[backend.url]}]"
        else:
            first_index[backend.url] = index
        if backend.memory_gb is not None and not math.isfinite(backend.memory_gb):
            yield f"{here}.memory_gb: must be a finite number of GiB, like 24"
        if backend.logs is not None:
            problem = log_feed_problem(backend.logs)
            if problem is not None:
                yield f"{here}.logs: {problem}"
        yield from _check_aliases(backend, here)
        yield from check_own_probes(backend.probes, f"{here}.probes", library_names)


def _check_aliases(backend: Backend, here: str) -> Iterator[str]:
    engine_name_of: dict[str, str] = {}
    for engine_name, client_name in backend.aliases.items():
        if not engine_name.strip() or not client_name.strip():
            yield f'{here}.aliases: "{engine_name}: {client_name}" has an empty name'
        elif client_name in engine_name_of:
            yield (
                f'{here}.aliases.{engine_name}: "{client_name}" is already the alias of '
                f'"{engine_name_of[client_name]}"'
            )
        else:
            engine_name_of[client_name] = engine_name


def _check_keys(keys: tuple[Key, ...]) -> Iterator[str]:
    index_of_name: dict[str, int] = {}
    index_of_hash: dict[str, int] = {}
    for index, key in enumerate(keys):
        here = f"keys[{index}]"
        if not key.name.strip():
            yield f"{here}.name: required (usage is recorded by name)"
        elif key.name in index_of_name:
            yield f'{here}.name: "{key.name}" is already used by keys[{index_of_name[key.name]}]'
        else:
            index_of_name[key.name] = index
        if not _SHA256_HEX.fullmatch(key.sha256):
            yield f"{here}.sha256: must be 64 hex characters (from `pharos keys new`)"
        elif key.sha256 in index_of_hash:
            yield f"{here}.sha256: the same key as keys[{index_of_hash[key.sha256]}]"
        else:
            index_of_hash[key.sha256] = index
        for model_index, model in enumerate(key.models):
            if not model.strip():
                yield f"{here}.models[{model_index}]: empty model name"


def _check_usage(usage: Usage) -> Iterator[str]:
    if usage.timezone is None:
        return
    try:
        zoneinfo.ZoneInfo(usage.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        yield (
            f'usage.timezone: "{usage.timezone}" is not an IANA time zone, '
            "like Europe/Berlin or Asia/Bangkok"
        )


def _check_limits(limits: Limits) -> Iterator[str]:
    for name in ("queue_wait", "client_idle", "client_body", "upstream_idle"):
        if getattr(limits, name).seconds <= 0:
            yield f"limits.{name}: must be longer than 0 (nothing may wait forever)"


def _check_peers(peers: Peers) -> Iterator[str]:
    if peers.members and peers.dns is not None:
        yield "peers: has both members and dns; use one"
    elif not peers.members and peers.dns is None:
        yield "peers: needs members (a list of host:port) or dns (a name that lists the peers)"
    for index, member in enumerate(peers.members):
        if not _MEMBER.fullmatch(member.strip()):
            yield f'peers.members[{index}]: "{member}" is not host:port, like pharos-a:8081'
    if peers.dns is not None and not peers.dns.strip():
        yield "peers.dns: empty"
    if not peers.secret_file.strip():
        yield "peers.secret_file: required (peers authenticate with the shared secret in it)"
