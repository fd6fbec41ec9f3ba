"""The environment's part in configuration: `${VAR}` in config values, and the
PHAROS_CONFIG / PHAROS_LISTEN / PHAROS_LOG_LEVEL defaults of `pharos serve`.

`${VAR}` lets a config file name a secret instead of holding it (an upstream engine's
API key, `headers:`), as containers pass secrets in. Only whole `${NAME}` references
expand (`$$` writes a literal `$`); an unset variable is an error naming the field and
the variable, and no error ever prints a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{[^}]*\}?")

LOG_LEVELS = ("debug", "info", "warning", "error")


def _place(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "top level"


def _expand_text(text: str, where: str, environ: Mapping[str, str], problems: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$$":
            return "$"
        name = match.group(1)
        if name is None:
            problems.append(f"{where}: {whole!r} is not a ${{NAME}} reference")
            return whole
        value = environ.get(name)
        if value is None:
            problems.append(f"{where}: environment variable {name} is not set")
            return ""
        return value

    return _REFERENCE.sub(one, text) if "$" in text else text


def expand_env(
    document: Any, environ: Mapping[str, str], path: tuple[str | int, ...] = ()
) -> tuple[Any, list[str]]:
    """The parsed YAML with every `${NAME}` in a string value replaced; problems name fields."""
    problems: list[str] = []
    if isinstance(document, dict):
        out: dict[Any, Any] = {}
        for key, value in document.items():
            out[key], found = expand_env(value, environ, (*path, str(key)))
            problems += found
        return out, problems
    if isinstance(document, list):
        items: list[Any] = []
        for index, value in enumerate(document):
            item, found = expand_env(value, environ, (*path, index))
            items.append(item)
            problems += found
        return items, problems
    if isinstance(document, str):
        return _expand_text(document, _place(path), environ, problems), problems
    return document, problems


@dataclass(frozen=True, slots=True)
class ServeDefaults:
    config: str | None
    listen: str | None
    log_level: str | None


def serve_defaults(environ: Mapping[str, str]) -> tuple[ServeDefaults, list[str]]:
    """What PHAROS_CONFIG, PHAROS_LISTEN and PHAROS_LOG_LEVEL set (flags win over them)."""
    problems: list[str] = []
    level = environ.get("PHAROS_LOG_LEVEL") or None
    if level is not None and level.lower() not in LOG_LEVELS:
        problems.append(f"PHAROS_LOG_LEVEL: must be one of {', '.join(LOG_LEVELS)}")
        level = None
    defaults = ServeDefaults(
        config=environ.get("PHAROS_CONFIG") or None,
        listen=environ.get("PHAROS_LISTEN") or None,
        log_level=level.lower() if level is not None else None,
    )
    return defaults, problems
