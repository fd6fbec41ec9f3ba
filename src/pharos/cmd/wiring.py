"""Config values -> engine probes and state specs. Lives in cmd, the one layer that sees both."""

from __future__ import annotations

from pharos.config import Backend, Config, ConfigError
from pharos.engine.logline import log_line
from pharos.engine.prom import prom
from pharos.engine.types import Probe
from pharos.proxy.auth import KeyEntry
from pharos.state import BackendSpec


def own_probes(
    backend: Backend, *, at: str = "backend", source: str = "config"
) -> tuple[Probe, ...]:
    """The backend's own probes, built with the engine's constructors.

    Config already checked every rule; a constructor that still refuses a probe
    becomes a ConfigError naming `<at>.probes[i]`.
    """
    built: list[Probe] = []
    problems: list[str] = []
    for index, probe in enumerate(backend.probes):
        here = f"{at}.probes[{index}]"
        if probe.signal is None:
            problems.append(f"{here}.signal: required")
            continue
        try:
            if probe.prom is not None:
                built.append(
                    prom(
                        probe.name,
                        probe.prom.path,
                        probe.signal,
                        probe.prom.metric,
                        per_model=probe.prom.per_model,
                        percent=probe.prom.percent,
                        own=True,
                    )
                )
            elif probe.log is not None:
                fixed = None if probe.log.value is None else str(probe.log.value)
                built.append(
                    log_line(probe.name, probe.signal, probe.log.match, value=fixed, own=True)
                )
            else:
                problems.append(f"{here}: needs prom or log")
        except ValueError as err:
            problems.append(f"{here}: {err}")
    if problems:
        raise ConfigError(source, problems)
    return tuple(built)


def backend_spec(backend: Backend, *, at: str = "backend", source: str = "config") -> BackendSpec:
    return BackendSpec(
        url=backend.url,
        kind=backend.kind,
        memory_bytes=backend.memory_bytes,
        capacity=backend.capacity,
        aliases=backend.aliases,
        log_feed=backend.logs,
        own_probes=own_probes(backend, at=at, source=source),
    )


def backend_specs(config: Config, *, source: str = "config") -> list[BackendSpec]:
    """Every static backend of the config, ready for `State.set_backends`."""
    return [
        backend_spec(backend, at=f"backends[{index}]", source=source)
        for index, backend in enumerate(config.backends)
    ]


def key_entries(config: Config) -> list[KeyEntry]:
    """The config's keys as the proxy's key table holds them (SHA-256 only)."""
    return [
        KeyEntry(
            name=key.name,
            sha256=key.sha256,
            rpm=key.rpm,
            tokens_per_day=key.tokens_per_day,
            weight=key.weight,
            models=frozenset(key.models),
            admin=key.admin,
            metrics=key.metrics,
        )
        for key in config.keys
    ]
