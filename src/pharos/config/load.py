"""Reading a config file: YAML -> schema -> rules, with every error naming its place."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Hashable, Mapping, Set
from pathlib import Path
from typing import Any

import msgspec
import yaml

from pharos.config.credentials import credential_problems
from pharos.config.env import expand_env
from pharos.config.own_probes import library_probe_names
from pharos.config.rules import NOT_BUILT, check
from pharos.config.schema import ENUM_CHOICES, Config, field_names
from pharos.config.values import decode_hook


class ConfigError(Exception):
    """A config that can't be used. `problems` holds one `field: what is wrong` line each."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """A safe YAML loader that rejects a key written twice (the second would win silently)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Hashable] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, Hashable) and key in seen:
            mark = key_node.start_mark
            raise yaml.MarkedYAMLError(
                problem=f'"{key}" is written twice in one mapping', problem_mark=mark
            )
        if isinstance(key, Hashable):
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_config(
    text: str,
    source: str = "config",
    *,
    library_names: Set[str] | None = None,
    unbuilt: Collection[str] = NOT_BUILT,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Parses config text. `library_names` defaults to the engine's built-in probe names;
    `unbuilt` to every setting this version cannot honour yet (rules.NOT_BUILT); `${NAME}`
    in values expands from `environ` (default: the process environment)."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a safe loader
    except yaml.YAMLError as err:
        raise ConfigError(source, [_yaml_problem(err)]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, ["top level: expected a mapping of settings, like `backends:`"])
    document, unset = expand_env(document, os.environ if environ is None else environ)
    if unset:
        raise ConfigError(source, unset)
    try:
        config = msgspec.convert(document, type=Config, dec_hook=decode_hook, strict=True)
    except msgspec.ValidationError as err:
        raise ConfigError(source, [translate_validation_error(str(err))]) from None
    names = library_probe_names() if library_names is None else library_names
    config, problems = check(config, names, unbuilt)
    problems += credential_problems(config.backends, os.environ if environ is None else environ)
    if problems:
        raise ConfigError(source, problems)
    return config


def load_config(
    path: str | Path,
    *,
    library_names: Set[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Reads and parses a config file; every failure is a ConfigError, never a traceback."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(source, [f"cannot read the file: {err.strerror or err}"]) from None
    except UnicodeDecodeError:
        raise ConfigError(source, ["not UTF-8 text"]) from None
    return parse_config(text, source, library_names=library_names, environ=environ)


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"


_AT = re.compile(r"^(?P<message>.*?)(?: - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`)?$", re.DOTALL)
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_MISSING_FIELD = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_BAD_ENUM = re.compile(r"Invalid enum value (?P<value>.*)")
_LAST_FIELD = re.compile(r"\.?(?P<name>[A-Za-z_]+)$")


def translate_validation_error(raw: str) -> str:
    """msgspec's `Expected ... - at `$.backends[1].probes[0]`` -> `backends[1].probes[0]: ...`."""
    parts = _AT.match(raw)
    assert parts is not None  # the pattern matches any string
    message = parts.group("message")
    path = (parts.group("path") or "").lstrip(".")
    place = path or "top level"

    if unknown := _UNKNOWN_FIELD.fullmatch(message):
        name = unknown.group("name")
        hint = difflib.get_close_matches(name.replace("-", "_"), field_names(), n=1)
        suggestion = f' (did you mean "{hint[0]}"?)' if hint else ""
        return f'{place}: unknown field "{name}"{suggestion}'
    if missing := _MISSING_FIELD.fullmatch(message):
        field = missing.group("name")
        return f"{path + '.' if path else ''}{field}: required"
    if bad_enum := _BAD_ENUM.fullmatch(message):
        value = bad_enum.group("value").strip("'\"")
        field = _LAST_FIELD.search(path)
        field_name = field.group("name") if field else "value"
        choices = ENUM_CHOICES.get(field_name, ())
        listed = f" (one of: {', '.join(choices)})" if choices else ""
        return f'{place}: unknown {field_name} "{value}"{listed}'
    text = message.replace("`", "")
    what = "a key: " if parts.group("key") else ""
    return f"{place}: {what}{text[:1].lower()}{text[1:]}"
