"""Each backend's upstream credentials (`api_key_env`, `headers`) resolved to the headers
Pharos sends that backend: its engine was started with --api-key (llama-server refuses
/metrics, /slots, /props and /v1/models with 401 without it: checked live, b11312)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pharos.config.schema import Backend

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_NOT_SETTABLE = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "te"}
)


def credential_problems(backends: Sequence[Backend], environ: Mapping[str, str]) -> list[str]:
    """One `field: what is wrong` line per bad credential setting; no line shows a value."""
    problems: list[str] = []
    for index, backend in enumerate(backends):
        where = f"backends[{index}]"
        name = backend.api_key_env
        if name is not None:
            if not _ENV_NAME.fullmatch(name):
                problems.append(f"{where}.api_key_env: must be an environment variable's name")
            elif not environ.get(name):
                problems.append(f"{where}.api_key_env: environment variable {name} is not set")
        for header, value in backend.headers.items():
            if not _HEADER_NAME.fullmatch(header):
                problems.append(f"{where}.headers: {header!r} is not a header name")
            elif header.lower() in _NOT_SETTABLE:
                problems.append(f"{where}.headers.{header}: Pharos sets this header itself")
            elif name is not None and header.lower() == "authorization":
                problems.append(f"{where}.headers.{header}: api_key_env already sets it")
            elif "\r" in value or "\n" in value:
                problems.append(f"{where}.headers.{header}: must be one line")
    return problems


def upstream_headers(
    backends: Sequence[Backend], environ: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """Backend URL (no trailing slash) -> the headers to add to every request sent to it."""
    table: dict[str, dict[str, str]] = {}
    for backend in backends:
        headers = dict(backend.headers)
        if backend.api_key_env is not None and environ.get(backend.api_key_env):
            headers["Authorization"] = f"Bearer {environ[backend.api_key_env]}"
        if headers:
            table[backend.url.rstrip("/")] = headers
    return table
