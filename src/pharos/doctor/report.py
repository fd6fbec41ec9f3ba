"""What `pharos doctor` found about one backend, and how it prints (text and JSON).

Pure functions over a finished `BackendReport`: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec

from pharos.engine.snapshots import load_value
from pharos.engine.types import WHOLE_BACKEND, Kind, Probe, Residency, Signal, Snapshot

CODING_AGENT_ROUTES: Mapping[str, str] = MappingProxyType(
    {"/v1/messages": "Claude Code", "/v1/responses": "Codex"}
)
LOAD_FIELDS = ("running", "waiting", "capacity", "kv_usage")


@dataclass(frozen=True)
class BackendReport:
    url: str
    requested_kind: Kind
    error: str | None = None  # the backend answered nothing / its kind could not be detected
    kind: Kind | None = None
    version: str | None = None
    active: tuple[Probe, ...] = ()
    dropped: Mapping[str, str] = field(default_factory=dict)
    snapshot: Snapshot = field(default_factory=Snapshot)  # scraped + log values, after aliases
    engine_models: tuple[str, ...] | None = None  # names the engine lists, before aliases
    aliases: Mapping[str, str] = field(default_factory=dict)
    config_capacity: int | None = None
    memory_bytes: int | None = None
    log_feed: str | None = None
    log_lines: int | None = None  # lines of the feed that doctor read; None = not read
    log_note: str | None = None
    remote_models: tuple[str, ...] = ()  # Ollama :cloud stubs (remote_host in /api/tags)
    routes: Mapping[str, RouteCheck] = field(default_factory=dict)  # path -> what it answered


def probe_source(probe: Probe) -> str:
    """Where a probe reads from, as doctor and /status label it: `own`, `log` or the path."""
    if probe.own:
        return "own"
    if probe.feed.log:
        return "log"
    return probe.feed.path or "?"


def _residency(value: Residency) -> str | None:
    return None if value is Residency.UNKNOWN else value.value


def model_values(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = {}
    for model, info in sorted((snapshot.models or {}).items()):
        values: dict[str, Any] = {
            "residency": _residency(info.state),
            "vram_bytes": info.vram_bytes,
            "size_bytes": info.size_bytes,
        }
        for name in LOAD_FIELDS:
            values[name] = load_value(snapshot, model, name)
        models[model] = values
    return models


def engine_capacity(snapshot: Snapshot) -> int | None:
    for load in snapshot.loads.values():
        if load.capacity is not None:
            return load.capacity
    return None


def capacity_used(report: BackendReport) -> bool:
    """Config capacity counts only when the engine reports none of its own."""
    return report.config_capacity is not None and engine_capacity(report.snapshot) is None


def alias_listed(report: BackendReport, engine_name: str) -> bool | None:
    return None if report.engine_models is None else engine_name in report.engine_models


@dataclass(frozen=True)
class RouteCheck:
    status: int | None  # None: no answer
    served: bool | None  # None: the answer does not tell


def route_served(status: int | None, body: bytes = b"") -> bool | None:
    """A POST {} names no model: a served route refuses the body, a missing one answers 404.

    Most engines refuse with 400 (or 422); llama-server b11312 serves /v1/messages but
    answers an empty body with 500 and a JSON error naming the missing field (live), so a
    5xx carrying a JSON error object counts as served too.
    """
    if status in (400, 422):
        return True
    if status in (404, 405):
        return False
    if status is not None and status >= 500 and _is_json_error(body):
        return True
    return None


def _is_json_error(body: bytes) -> bool:
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    return isinstance(decoded, dict) and "error" in decoded


def to_json(report: BackendReport) -> dict[str, Any]:
    snapshot = report.snapshot
    active_by_name = {probe.name: probe for probe in report.active}
    signals: dict[str, dict[str, str] | None] = {}
    for signal in Signal:
        name = snapshot.sources.get(signal)
        probe = active_by_name.get(name) if name is not None else None
        signals[signal.value] = (
            None
            if name is None
            else {"probe": name, "source": "?" if probe is None else probe_source(probe)}
        )
    return {
        "url": report.url,
        "kind": (report.kind or report.requested_kind).value,
        "version": report.version,
        "error": report.error,
        "models": model_values(snapshot),
        "signals": signals,
        "active": [probe.name for probe in report.active],
        "dropped": dict(report.dropped),
        "capacity": {
            "config": report.config_capacity,
            "engine": engine_capacity(snapshot),
            "config_used": capacity_used(report),
        },
        "aliases": {
            engine_name: {"as": client_name, "listed": alias_listed(report, engine_name)}
            for engine_name, client_name in report.aliases.items()
        },
        "remote_models": list(report.remote_models),
        "routes": {
            path: {"status": check.status, "served": check.served}
            for path, check in report.routes.items()
        },
        "log_feed": {"feed": report.log_feed, "lines": report.log_lines, "note": report.log_note},
    }


def _bytes(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _field_text(name: str, value: object) -> str:
    if name in ("vram_bytes", "size_bytes") and isinstance(value, int):
        return f"{name.removesuffix('_bytes')} {_bytes(value)}"
    if name == "kv_usage" and isinstance(value, float):
        return f"kv_usage {value:.1%}"
    return f"{name} {value}"


def _per_key(values: Mapping[str, object]) -> str:
    parts = [
        f"{'(backend)' if key == WHOLE_BACKEND else key}={value}"
        for key, value in sorted(values.items())
    ]
    return ", ".join(parts)


def signal_text(snapshot: Snapshot, signal: Signal) -> str | None:
    """The signal's value as one short line, or None when unknown."""
    if signal is Signal.VERSION:
        return snapshot.version
    models = snapshot.models
    if signal is Signal.MODELS:
        if models is None:
            return None
        return ", ".join(sorted(models)) or "(none)"
    if signal is Signal.RESIDENCY:
        states = {
            m: i.state.value for m, i in (models or {}).items() if i.state is not Residency.UNKNOWN
        }
        return _per_key(states) or None
    if signal in (Signal.VRAM_BYTES, Signal.SIZE_BYTES):
        attr = signal.value
        sizes = {
            m: _bytes(getattr(i, attr))
            for m, i in (models or {}).items()
            if getattr(i, attr) is not None
        }
        return _per_key(sizes) or None
    numbers = {
        key: f"{value:.1%}" if signal is Signal.KV_USAGE else value
        for key, load in snapshot.loads.items()
        if (value := getattr(load, signal.value)) is not None
    }
    return _per_key(numbers) or None


def _probe_line(probe: Probe, snapshot: Snapshot) -> str:
    won = snapshot.sources.get(probe.signal) == probe.name
    value = signal_text(snapshot, probe.signal) if won else None
    if value is None:
        value = "no match yet" if probe.feed.log else "no value"
    return f"    {probe.name:<28} {probe.signal.value:<10} {value}  [{probe_source(probe)}]"


def _route_text(path: str, check: RouteCheck) -> str:
    status, served = check.status, check.served
    who = CODING_AGENT_ROUTES.get(path, "")
    if served is True:
        verdict = f"answers ({status})"
    elif served is False:
        verdict = f"not served ({status})"
    elif status is None:
        verdict = "no answer"
    else:
        verdict = f"status {status} (unclear)"
    return f"{path} ({who}): {verdict}" if who else f"{path}: {verdict}"


def notes(report: BackendReport) -> list[str]:
    """What tends to surprise a new user about this backend."""
    found: list[str] = []
    reported = engine_capacity(report.snapshot)
    if report.config_capacity is not None and reported is not None:
        found.append(
            f"capacity: {report.config_capacity} in config is ignored; the engine reports its "
            f"own ({reported})"
        )
    elif report.config_capacity is not None:
        found.append(
            f"capacity: {report.config_capacity} from config is used (the engine reports none)"
        )
    elif reported is None:
        found.append(
            "capacity: the engine does not report how many requests it runs at once; set "
            "`capacity:` for this backend in config"
        )
    for engine_name, client_name in report.aliases.items():
        listed = alias_listed(report, engine_name)
        if listed is False:
            found.append(
                f'alias "{engine_name}" -> "{client_name}": the engine does not list '
                f'"{engine_name}", so the alias does nothing'
            )
        elif listed is True:
            found.append(f'alias "{engine_name}" -> "{client_name}": listed by the engine')
    for model in report.remote_models:
        found.append(
            f'model "{model}" is an Ollama cloud model (remote_host in /api/tags): Pharos routes '
            "to it like a local model, and its prompts leave your network"
        )
    found.extend(never_fit(report))
    if report.kind is Kind.OLLAMA and report.memory_bytes is None:
        found.append(
            "memory_gb: not set; Ollama does not report its total memory, so Pharos cannot tell "
            "whether a cold model fits"
        )
    return found


def never_fit(report: BackendReport) -> list[str]:
    """Models larger than memory_gb: routing never loads them, so their requests wait."""
    memory = report.memory_bytes
    if memory is None:
        return []
    found: list[str] = []
    for model, info in sorted((report.snapshot.models or {}).items()):
        size = info.size_bytes if info.size_bytes is not None else info.vram_bytes
        if size is not None and size > memory:
            found.append(
                f'model "{model}" ({_bytes(size)}) can never fit memory_gb ({_bytes(memory)}): '
                "Pharos will not load it here, so its requests wait; raise memory_gb if the "
                "host has the room"
            )
    return found


def to_text(report: BackendReport) -> str:
    lines = [report.url]
    if report.error is not None:
        lines.append(f"  error     {report.error}")
        return "\n".join(lines) + "\n"
    kind = report.kind or report.requested_kind
    how = "detected" if report.requested_kind is Kind.AUTO else "as configured"
    lines.append(f"  kind      {kind.value} ({how})")
    lines.append(f"  version   {report.version or 'unknown'}")
    models = model_values(report.snapshot)
    if models:
        lines.append("  models (what routing sees)")
        for model, values in models.items():
            known = [
                _field_text(name, value) for name, value in values.items() if value is not None
            ]
            lines.append(f"    {model}: {', '.join(known) if known else 'no values'}")
    lines.append("  active probes")
    lines.extend(_probe_line(probe, report.snapshot) for probe in report.active)
    if not report.active:
        lines.append("    (none)")
    lines.append("  dropped probes")
    lines.extend(f"    {name:<28} {reason}" for name, reason in sorted(report.dropped.items()))
    if not report.dropped:
        lines.append("    (none)")
    unknown = [signal.value for signal in Signal if signal not in report.snapshot.sources]
    lines.append(f"  unknown   {', '.join(unknown) if unknown else '(none)'}")
    if report.log_feed is not None:
        read = "" if report.log_lines is None else f", {report.log_lines} lines read"
        note = "" if report.log_note is None else f" ({report.log_note})"
        lines.append(f"  log feed  {report.log_feed}{read}{note}")
    if report.routes:
        lines.append("  coding-agent routes")
        lines.extend(f"    {_route_text(path, check)}" for path, check in report.routes.items())
    found = notes(report)
    if found:
        lines.append("  notes")
        lines.extend(f"    {note}" for note in found)
    return "\n".join(lines) + "\n"
