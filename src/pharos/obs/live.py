"""Gauges read from State and the scheduler at scrape time, so they are never stale.

`backend` and `model` are separate labels (a query filters by either), and an
engine signal nobody reported has no sample at all: unknown is never exported as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pharos.engine.types import Residency
from pharos.sched import Scheduler
from pharos.state import State

TARGET_LABELS = ["backend", "model"]


def _gauge(name: str, help_text: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=labels)


class LiveGauges(Collector):
    def __init__(self, state: State, sched: Scheduler, now: Callable[[], float]) -> None:
        self._state = state
        self._sched = sched
        self._now = now

    def collect(self) -> Iterator[Metric]:
        yield from self._backends()
        yield from self._targets()
        waiting = _gauge(
            "pharos_queue_waiting", "Requests waiting in this instance's fair queue", []
        )
        waiting.add_metric([], float(self._sched.waiting_count()))
        yield waiting

    def _backends(self) -> Iterator[Metric]:
        up = _gauge(
            "pharos_backend_up",
            "1 while the backend answers and is not ejected (no version label: an upgrade keeps "
            "the series)",
            ["backend"],
        )
        info = _gauge(
            "pharos_backend_info",
            "Always 1: the backend's detected engine kind and version (empty when unknown)",
            ["backend", "kind", "version"],
        )
        feed = _gauge(
            "pharos_backend_log_feed_up",
            "1 while the backend's log feed is connected",
            ["backend"],
        )
        probes = _gauge(
            "pharos_backend_probes_active",
            "Probes in the backend's plan; a change after an upgrade is engine drift",
            ["backend"],
        )
        for backend in self._state.backends():
            up.add_metric([backend.url], 1.0 if backend.up else 0.0)
            info.add_metric([backend.url, backend.kind.value, backend.version or ""], 1.0)
            if backend.log_feed_up is not None:
                feed.add_metric([backend.url], 1.0 if backend.log_feed_up else 0.0)
            probes.add_metric([backend.url], float(len(backend.active_probes)))
        yield from (up, info, feed, probes)

    def _targets(self) -> Iterator[Metric]:
        inflight = _gauge(
            "pharos_target_inflight",
            "Requests this instance has in flight on the target",
            TARGET_LABELS,
        )
        cluster = _gauge(
            "pharos_target_inflight_cluster",
            "In flight here plus what live peers reported",
            TARGET_LABELS,
        )
        unknown = _gauge(
            "pharos_target_signals_unknown",
            "How many of residency, running, waiting, capacity and KV usage are unknown now",
            TARGET_LABELS,
        )
        running = _gauge(
            "pharos_target_running",
            "Requests the engine reports running for the model (no sample: not reported)",
            TARGET_LABELS,
        )
        waiting = _gauge(
            "pharos_target_waiting",
            "Requests the engine reports queued for the model (no sample: not reported)",
            TARGET_LABELS,
        )
        capacity = _gauge(
            "pharos_target_capacity",
            "Requests the model runs at once: the engine's own number, else backends[].capacity "
            "(no sample: neither)",
            TARGET_LABELS,
        )
        kv = _gauge(
            "pharos_target_kv_usage_ratio",
            "The engine's KV-cache usage, 0 to 1 (no sample: not reported)",
            TARGET_LABELS,
        )
        residency = _gauge(
            "pharos_target_residency",
            "1 for the model's residency as the engine reports it: loaded, loading or cold "
            "(no sample: not reported)",
            [*TARGET_LABELS, "state"],
        )
        for view in self._state.all_targets(self._now()):
            labels = [view.backend_url, view.model]
            inflight.add_metric(labels, float(self._sched.inflight(view.target_id)))
            cluster.add_metric(
                labels, float(self._sched.inflight_cluster(view.target_id, view.key))
            )
            missing = sum(
                value is None
                for value in (view.running, view.waiting, view.capacity, view.kv_usage)
            ) + (view.residency is Residency.UNKNOWN)
            unknown.add_metric(labels, float(missing))
            if view.running is not None:
                running.add_metric(labels, float(view.running))
            if view.waiting is not None:
                waiting.add_metric(labels, float(view.waiting))
            slots = view.capacity if view.capacity is not None else view.config_capacity
            if slots is not None:
                capacity.add_metric(labels, float(slots))
            if view.kv_usage is not None:
                kv.add_metric(labels, view.kv_usage)
            if view.residency is not Residency.UNKNOWN:
                residency.add_metric([*labels, view.residency.value], 1.0)
        yield from (inflight, cluster, unknown, running, waiting, capacity, kv, residency)
