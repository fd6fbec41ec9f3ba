"""The Docker Engine API over its unix socket (spec §10), spoken at the daemon's own version.

Docker 20.10 (Debian's docker.io) reports API 1.41 and refuses newer paths; the captured
29.1.3 reports a later one. Every (re)connect asks GET /version (unversioned, answered by
every release) and then prefixes paths with `/v<ApiVersion>`, so Pharos never asks for a
version the daemon refuses and never pins an old one on a new daemon. Every request has a
bound; the streams (events, logs) are bounded per read by the caller.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import aiohttp

DEFAULT_SOCKET = "/var/run/docker.sock"
MIN_API_VERSION = (1, 24)  # Labels, NetworkSettings.Networks and the events filters we use
REQUEST_TIMEOUT_S = 5.0
_VERSION = re.compile(r"^(\d+)\.(\d+)$")


class DockerError(OSError):
    """The daemon is not there, answered an error, or sent something that isn't its API."""


def socket_path(environ: Mapping[str, str]) -> str | None:
    """DOCKER_HOST=unix:///path, else the default socket; None for a non-unix DOCKER_HOST
    (tcp:// needs TLS settings Pharos does not read)."""
    host = environ.get("DOCKER_HOST", "").strip()
    if not host:
        return DEFAULT_SOCKET
    parsed = urlparse(host)
    if parsed.scheme != "unix" or not parsed.path:
        return None
    return parsed.path


def api_version(body: Any) -> str:
    """The ApiVersion of a GET /version body; DockerError when missing or too old."""
    version = body.get("ApiVersion") if isinstance(body, dict) else None
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None:
        raise DockerError(f"GET /version: no ApiVersion in the reply ({version!r})")
    if (int(match[1]), int(match[2])) < MIN_API_VERSION:
        minimum = ".".join(map(str, MIN_API_VERSION))
        raise DockerError(f"Docker API {version} is older than {minimum}; upgrade Docker")
    return str(version)


def label_filters(labels: Mapping[str, str]) -> str:
    """The `filters` query value that keeps only containers (or their events) with labels."""
    return json.dumps({"label": [f"{key}={value}" for key, value in labels.items()]})


class DockerApi:
    """One connection pool to the daemon's socket; `connect` (re)learns the API version."""

    def __init__(self, socket: str, *, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.socket = socket
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self.version: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> DockerApi | None:
        path = socket_path(os.environ if environ is None else environ)
        return None if path is None else cls(path)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=self.socket),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout_s),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def connect(self) -> str:
        """Ask the daemon its API version; DockerError when it doesn't answer."""
        self.version = api_version(await self._get_json("/version"))
        return self.version

    def _path(self, path: str) -> str:
        if self.version is None:
            raise DockerError("not connected: call connect() first")
        return f"/v{self.version}{path}"

    async def _get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        try:
            async with self._client().get(
                f"http://docker{path}",
                params=params,
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            ) as response:
                body = await response.read()
                if response.status != 200:
                    raise DockerError(f"GET {path}: HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise DockerError(f"GET {path}: {type(error).__name__}: {error}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise DockerError(f"GET {path}: the reply is not JSON") from None

    async def running_containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """GET /containers/json (running only) with the label filters."""
        body = await self._get_json(
            self._path("/containers/json"), {"filters": label_filters(labels)}
        )
        if not isinstance(body, list):
            raise DockerError("GET /containers/json: the reply is not a list")
        return [item for item in body if isinstance(item, dict)]

    async def inspect(self, container: str) -> dict[str, Any]:
        body = await self._get_json(self._path(f"/containers/{container}/json"))
        if not isinstance(body, dict):
            raise DockerError("GET /containers/{id}/json: the reply is not an object")
        return body

    async def open_stream(self, path: str, params: Mapping[str, str]) -> aiohttp.ClientResponse:
        """A streaming GET (events, logs); the caller reads it with a bound and closes it."""
        try:
            response = await self._client().get(
                f"http://docker{self._path(path)}",
                params=params,
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self._timeout_s, sock_read=None
                ),
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise DockerError(f"GET {path}: {type(error).__name__}: {error}") from None
        if response.status != 200:
            response.release()
            raise DockerError(f"GET {path}: HTTP {response.status}")
        return response
