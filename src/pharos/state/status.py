"""A backend's status for doctor-like views and /status."""

from __future__ import annotations

from types import MappingProxyType

from pharos.state.derive import fresh, kind_of
from pharos.state.records import BackendRuntime
from pharos.state.spec import BackendStatus, StateOptions


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
        up=not backend.draining
        and backend.ejected is None
        and fresh(observed.full_at, options.full_interval_s, options, now),
        reachable=backend.reachable,
        down_reason=backend.down_reason,
        ejected=backend.ejected,
        log_feed=backend.spec.log_feed,
        log_feed_up=backend.log_connected if follows_logs else None,
        draining=backend.draining,
        target_ids=tuple(backend.target_ids),
    )
