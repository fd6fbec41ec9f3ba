"""Scalar config values that need parsing: durations and listen addresses.

They are plain classes (not dataclasses) so that msgspec hands the raw YAML
scalar to `decode_hook`, which parses it and lets msgspec name the field on error.
"""

from __future__ import annotations

import re
from typing import Any

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Duration:
    """A span of time written like `5s`, `10m`, `1h30m` or `250ms`."""

    __slots__ = ("seconds", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.seconds = parse_duration_s(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.seconds == self.seconds

    def __hash__(self) -> int:
        return hash(self.seconds)

    def __repr__(self) -> str:
        return f"Duration({self.text!r})"

    def __str__(self) -> str:
        return self.text


def parse_duration_s(text: str) -> float:
    """Seconds in a duration like `1h30m`; ValueError names the expected form."""
    compact = text.strip()
    if compact == "0":
        return 0.0
    if not compact:
        raise ValueError("empty duration; write it like 5s, 10m or 1h30m")
    position = 0
    total_s = 0.0
    for part in _DURATION_PART.finditer(compact):
        if part.start() != position:
            break
        total_s += float(part.group(1)) * _UNIT_S[part.group(2)]
        position = part.end()
    if position != len(compact):
        raise ValueError(f'"{text}" is not a duration; write it like 5s, 10m or 1h30m')
    return total_s


class HostPort:
    """A listen address: `:8090` (every interface), `127.0.0.1:8090` or `[::1]:8090`."""

    __slots__ = ("host", "port")

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    @classmethod
    def parse(cls, text: str) -> HostPort:
        host, sep, port_text = text.strip().rpartition(":")
        if not sep:
            raise ValueError(f'"{text}" is not host:port; write it like :8090 or 127.0.0.1:8090')
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise ValueError(f'"{text}": put an IPv6 address in brackets, like [::1]:8090')
        if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ValueError(f'"{text}": the port must be a number from 0 to 65535')
        return cls(host, int(port_text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostPort) and (other.host, other.port) == (self.host, self.port)

    def __hash__(self) -> int:
        return hash((self.host, self.port))

    def __repr__(self) -> str:
        return f"HostPort({self.host!r}, {self.port})"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def decode_hook(target: type, raw: Any) -> Any:
    """msgspec dec_hook: builds the custom scalar types above from YAML scalars."""
    if target is Duration:
        if isinstance(raw, bool) or not isinstance(raw, str):
            if isinstance(raw, int | float) and not isinstance(raw, bool) and raw == 0:
                return Duration("0")
            raise ValueError("a duration needs a unit; write it like 5s, 10m or 1h30m")
        return Duration(raw)
    if target is HostPort:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return HostPort.parse(f":{raw}")
        if not isinstance(raw, str):
            raise ValueError("expected host:port, like :8090 or 127.0.0.1:8090")
        return HostPort.parse(raw)
    raise NotImplementedError(f"no decoder for {target}")
