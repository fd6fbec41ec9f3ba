"""/metrics: every series of spec §13 in one prometheus_client registry owned by this object.

Request series are counted from proxy's RequestDone and state's background
decisions; backend and target gauges are read from State and the scheduler
at scrape time by a collector, so they are never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pharos.engine.types import Residency
from pharos.obs.looplag import LoopLag
from pharos.proxy.done import RequestDone
from pharos.sched import Scheduler
from pharos.state import State

DECISIONS: dict[str, tuple[str, ...]] = {
    "admission": (
        "ok",
        "unauthorized",
        "bad_request",
        "too_large",
        "model_not_allowed",
        "rate_limited",
        "quota_exceeded",
        "too_busy",
        "body_timeout",
    ),
    "usage": ("pharos_asked", "client_asked"),
    "route": (
        "only_choice",
        "least_loaded",
        "cache",
        "warm",
        "unknown_model",
        "unavailable",
        "queue_full",
        "queue_timeout",
        "never_fits",
        "client_left",
    ),
    "queue": ("immediate", "waited"),
    "load": ("cold_start", "unexpected_load", "control"),
    "prefix": ("predicted_hit", "wrong_prediction", "unpredicted_hit", "miss", "unknown"),
    "upstream": (
        "ok",
        "error_status",
        "connect_failed",
        "busy_retried",
        "error_retried",
        "died_mid_reply",
        "idle_timeout",
        "client_left",
        "pharos_error",
    ),
    "resolve": ("new_plan", "same_plan", "failed"),
    "scrape": ("ok", "probe_failed", "new_version", "unreachable"),
    "generation": ("unloaded", "unlisted", "new_version"),
    "log_feed": ("connected", "ended", "open_failed"),
}
"""The fixed set of decision branches: a new branch gets a row here and in the spec's table."""

UNLISTED_MODEL = "(unlisted)"
"""The model label of requests for a model no backend ever listed."""

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_OVERHEAD_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1)


class _LiveGauges(Collector):
    def __init__(self, state: State, sched: Scheduler, now: Callable[[], float]) -> None:
        self._state = state
        self._sched = sched
        self._now = now

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "pharos_backend_up",
            "1 while the backend answers and is not ejected",
            labels=["backend", "kind", "version"],
        )
        feed = GaugeMetricFamily(
            "pharos_backend_log_feed_up",
            "1 while the backend's log feed is connected",
            labels=["backend"],
        )
        probes = GaugeMetricFamily(
            "pharos_backend_probes_active",
            "Probes in the backend's plan; a change after an upgrade is engine drift",
            labels=["backend"],
        )
        for backend in self._state.backends():
            up.add_metric(
                [backend.url, backend.kind.value, backend.version or ""], 1.0 if backend.up else 0.0
            )
            if backend.log_feed_up is not None:
                feed.add_metric([backend.url], 1.0 if backend.log_feed_up else 0.0)
            probes.add_metric([backend.url], float(len(backend.active_probes)))
        inflight = GaugeMetricFamily(
            "pharos_target_inflight",
            "Requests this instance has in flight on the target",
            labels=["target"],
        )
        cluster = GaugeMetricFamily(
            "pharos_target_inflight_cluster",
            "In flight here plus what live peers reported",
            labels=["target"],
        )
        unknown = GaugeMetricFamily(
            "pharos_target_signals_unknown",
            "How many of residency, running, waiting, capacity and KV usage are unknown now",
            labels=["target"],
        )
        for view in self._state.all_targets(self._now()):
            inflight.add_metric([view.key], float(self._sched.inflight(view.target_id)))
            cluster.add_metric(
                [view.key], float(self._sched.inflight_cluster(view.target_id, view.key))
            )
            missing = sum(
                value is None
                for value in (view.running, view.waiting, view.capacity, view.kv_usage)
            ) + (view.residency is Residency.UNKNOWN)
            unknown.add_metric([view.key], float(missing))
        waiting = GaugeMetricFamily(
            "pharos_queue_waiting", "Requests waiting in this instance's fair queue"
        )
        waiting.add_metric([], float(self._sched.waiting_count()))
        yield from (up, feed, probes, inflight, cluster, unknown, waiting)


class Metrics:
    """Counters fed by the proxy and state, plus live gauges read at scrape time."""

    def __init__(self, state: State, sched: Scheduler, now: Callable[[], float]) -> None:
        self._state = state
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "pharos_requests",
            "Requests by key, model and status (499: the client left first)",
            ["key", "model", "status"],
            registry=r,
        )
        self.tokens = Counter(
            "pharos_tokens", "Tokens this instance metered", ["key", "model", "type"], registry=r
        )
        self.unmetered = Counter(
            "pharos_unmetered_requests",
            "Served requests whose reply reported no token counts",
            ["key", "model"],
            registry=r,
        )
        self.ttft = Histogram(
            "pharos_ttft_seconds",
            "Time to the first engine byte",
            ["model"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.overhead = Histogram(
            "pharos_overhead_seconds",
            "Pharos's own time before the first upstream send, queue wait excluded",
            buckets=_OVERHEAD_BUCKETS_S,
            registry=r,
        )
        self.queue_wait = Histogram(
            "pharos_queue_wait_seconds",
            "Time requests that reached an engine spent in the fair queue",
            ["key"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.decisions = Counter(
            "pharos_decisions",
            "Every branch a request or background round took",
            ["stage", "outcome"],
            registry=r,
        )
        self.predictions = Counter(
            "pharos_prefix_predictions",
            "Prefix predictions by where the slot came from and how they turned out",
            ["source", "outcome"],
            registry=r,
        )
        for stage, outcomes in DECISIONS.items():
            for outcome in outcomes:
                self.decisions.labels(stage, outcome)
        r.register(_LiveGauges(state, sched, now))
        self.loop_lag = LoopLag(r)  # started by the runtime once the loop runs

    def _model_label(self, model: str | None) -> str:
        """The model as a label only when a backend listed it: the name comes from the client,
        and an arbitrary string must not become a series (nor leak into the exposition)."""
        if model is None:
            return ""
        return model if self._state.model_listed(model) else UNLISTED_MODEL

    def on_done(self, done: RequestDone) -> None:
        model = self._model_label(done.model)
        self.requests.labels(done.key, model, str(done.status)).inc()
        self.count_decisions(done.decisions)
        for stage, outcome in done.decisions:
            if (
                stage == "prefix"
                and done.prefix_source is not None
                and outcome in ("predicted_hit", "wrong_prediction", "unknown")
            ):
                self.predictions.labels(done.prefix_source, outcome).inc()
        if done.overhead_s is not None:
            self.overhead.observe(done.overhead_s)
        if done.ttft_s is not None:
            self.ttft.labels(model).observe(done.ttft_s)
        if done.queue_wait_s is not None and done.backend_url is not None:
            self.queue_wait.labels(done.key).observe(done.queue_wait_s)
        if done.metered is True:
            for kind, count in (
                ("prompt", done.prompt_tokens),
                ("cached", done.cached_tokens),
                ("completion", done.completion_tokens),
            ):
                if count is not None:
                    self.tokens.labels(done.key, model, kind).inc(count)
        elif done.metered is False:
            self.unmetered.labels(done.key, model).inc()

    def count_decisions(self, decisions: Iterable[tuple[str, str]]) -> None:
        for stage, outcome in decisions:
            if outcome in DECISIONS.get(stage, ()):
                self.decisions.labels(stage, outcome).inc()

    def on_decision(self, _backend: str, stage: str, outcome: str) -> None:
        self.count_decisions(((stage, outcome),))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
