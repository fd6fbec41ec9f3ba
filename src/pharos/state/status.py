"""A backend's status for doctor-like views and /status."""

from __future__ import annotations

from types import MappingProxyType

from pharos.engine.types import Residency, Signal, Snapshot
from pharos.state.derive import kind_of, round_up
from pharos.state.records import BackendRuntime
from pharos.state.spec import BackendStatus, ProbeStatus, StateOptions

_MAX_SHOWN = 6


def _value_text(snapshot: Snapshot, signal: Signal) -> str | None:
    """A short human text of one signal's values in a snapshot (per model where it is)."""
    if signal is Signal.VERSION:
        return snapshot.version
    if signal is Signal.MODELS:
        if snapshot.models is None:
            return None
        names = sorted(snapshot.models)
        more = f" (+{len(names) - _MAX_SHOWN})" if len(names) > _MAX_SHOWN else ""
        return ", ".join(names[:_MAX_SHOWN]) + more if names else "none"
    parts: list[str] = []
    if signal in (Signal.RESIDENCY, Signal.VRAM_BYTES, Signal.SIZE_BYTES):
        for model, info in sorted((snapshot.models or {}).items()):
            value: object = {
                Signal.RESIDENCY: None if info.state is Residency.UNKNOWN else info.state.value,
                Signal.VRAM_BYTES: info.vram_bytes,
                Signal.SIZE_BYTES: info.size_bytes,
            }[signal]
            if value is not None:
                parts.append(f"{model}={value}")
    else:
        field = signal.value
        for model, load in sorted(snapshot.loads.items()):
            value = getattr(load, field)
            if value is not None:
                shown = f"{value:.3f}" if isinstance(value, float) else str(value)
                parts.append(shown if model == "" else f"{model}={shown}")
    if not parts:
        return None
    more = f" (+{len(parts) - _MAX_SHOWN})" if len(parts) > _MAX_SHOWN else ""
    return ", ".join(parts[:_MAX_SHOWN]) + more


def probe_statuses(backend: BackendRuntime) -> tuple[ProbeStatus, ...]:
    plan = backend.plan
    if plan is None:
        return ()
    observed = backend.observed
    snapshots = [s for s in (observed.fast, observed.full, backend.log_snapshot) if s is not None]
    rows = []
    for probe in plan.active:
        value = None
        for snapshot in snapshots:
            if snapshot.sources.get(probe.signal) == probe.name:
                value = _value_text(snapshot, probe.signal)
                if value is not None:
                    break
        where = "log" if probe.feed.log else (probe.feed.path or "")
        rows.append(
            ProbeStatus(
                name=probe.name,
                signal=probe.signal.value,
                value=value,
                source=f"own {where}" if probe.own else where,
                own=probe.own,
            )
        )
    return tuple(rows)


def backend_status(
    backend: BackendRuntime, options: StateOptions, now: float, *, follows_logs: bool
) -> BackendStatus:
    observed = backend.observed
    plan = backend.plan
    return BackendStatus(
        url=backend.spec.url,
        kind=kind_of(backend),
        version=observed.version,
        active_probes=() if plan is None else tuple(probe.name for probe in plan.active),
        dropped_probes=MappingProxyType({} if plan is None else dict(plan.dropped)),
        full_round_age_s=None if observed.full_at is None else now - observed.full_at,
        fast_round_age_s=None if observed.fast_at is None else now - observed.fast_at,
        up=not backend.draining and backend.ejected is None and round_up(backend, options, now),
        reachable=backend.reachable,
        down_reason=backend.down_reason,
        ejected=backend.ejected,
        log_feed=backend.spec.log_feed,
        log_feed_up=backend.log_connected if follows_logs else None,
        draining=backend.draining,
        target_ids=tuple(backend.target_ids),
        probes=probe_statuses(backend),
    )
