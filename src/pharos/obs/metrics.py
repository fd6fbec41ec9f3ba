"""/metrics: every series of spec §13 in one prometheus_client registry owned by this object.

Request series are counted from proxy's RequestDone and state's background
decisions; backend and target gauges are read from State and the scheduler
at scrape time by a collector, so they are never stale.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

import pharos.policy.cost
from pharos.obs.live import LiveGauges
from pharos.obs.looplag import LoopLag
from pharos.policy._load import implementation
from pharos.prefix import chain, links
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
    "resolve": ("new_plan", "same_plan", "failed", "busy_timeout"),
    "scrape": ("ok", "probe_failed", "new_version", "unreachable", "busy_timeout"),
    "generation": ("unloaded", "unlisted", "new_version"),
    "log_feed": ("connected", "ended", "open_failed"),
}
"""The fixed set of decision branches: a new branch gets a row here and in the spec's table."""

_COUNTED_PREDICTIONS = ("predicted_hit", "wrong_prediction", "unknown")
"""The prefix outcomes pharos_prefix_predictions counts, by where the predicted slot came from."""

UNLISTED_MODEL = "(unlisted)"
"""The model label of requests for a model no backend ever listed."""

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_OVERHEAD_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1)


_M = TypeVar("_M", bound=MetricWrapperBase)


class _Children(Generic[_M]):
    """A labelled metric's children by their label values. prometheus_client's `labels()` takes
    a lock and str()s every value on each call; the request series' values are already str and
    keep the same few children, so a dict hit serves them."""

    def __init__(self, metric: _M) -> None:
        self._metric = metric
        self._by_values: dict[tuple[str, ...], _M] = {}

    def get(self, *values: str) -> _M:
        child = self._by_values.get(values)
        if child is None:
            child = self._by_values[values] = self._metric.labels(*values)
        return child


class _NoCreated(Collector):
    """The registry's families without their `*_created` samples, which double the series
    count and which no dashboard reads. prometheus_client turns them off only process-wide
    (`disable_created_metrics`), so this filters one registry of our own instead."""

    def __init__(self, inner: CollectorRegistry) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            if family.type in ("counter", "histogram", "summary", "gaugehistogram"):
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


def build_info() -> GaugeMetricFamily:
    """Also which build of the hot path runs: `policy` mypyc or python, `chain` and `index`
    (the prefix chain's and the index's per-link loops) c or python. An install without a
    compiler, a stale build or PHAROS_PURE_PYTHON=1 runs the source, ~5x slower per pick."""
    info = GaugeMetricFamily(
        "pharos_build_info",
        "Always 1: the running Pharos and Python versions, and which hot-path builds loaded",
        labels=["version", "python", "policy", "chain", "index"],
    )
    builds = [implementation(pharos.policy.cost), chain.IMPLEMENTATION, links.IMPLEMENTATION]
    info.add_metric([package_version(), platform.python_version(), *builds], 1.0)
    return info


def package_version() -> str:
    try:
        return version("pharos")
    except PackageNotFoundError:
        return "unknown"


class _Static(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


class Metrics:
    """Counters fed by the proxy and state, plus live gauges read at scrape time."""

    def __init__(self, state: State, sched: Scheduler, now: Callable[[], float]) -> None:
        self._state = state
        self.registry = CollectorRegistry(auto_describe=True)
        r = CollectorRegistry(auto_describe=True)  # counters and histograms, before _NoCreated
        self.requests = Counter(
            "pharos_requests",
            "Requests by key, model, route, backend (empty: none served it) and status "
            "(499: the client left first)",
            ["key", "model", "route", "backend", "status"],
            registry=r,
        )
        self.tokens = Counter(
            "pharos_tokens",
            "Tokens this instance metered, by type: prompt (every prompt token, the cached ones "
            "included), cached (the part of prompt the engine's cache served) and completion",
            ["key", "model", "type"],
            registry=r,
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
            ["model", "backend", "route"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.duration = Histogram(
            "pharos_request_duration_seconds",
            "Whole request time, from arrival to the last byte sent, by route and status",
            ["route", "status"],
            buckets=_DURATION_BUCKETS_S,
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
        self._decision_children = {
            (stage, outcome): self.decisions.labels(stage, outcome)
            for stage, outcomes in DECISIONS.items()
            for outcome in outcomes
        }
        self._requests = _Children(self.requests)
        self._tokens = _Children(self.tokens)
        self._unmetered = _Children(self.unmetered)
        self._ttft = _Children(self.ttft)
        self._duration = _Children(self.duration)
        self._queue_wait = _Children(self.queue_wait)
        self._predictions = _Children(self.predictions)
        self.registry.register(_NoCreated(r))
        self.registry.register(_Static([build_info()]))
        self.registry.register(LiveGauges(state, sched, now))
        self.loop_lag = LoopLag(r)  # started by the runtime once the loop runs

    def _model_label(self, model: str | None) -> str:
        """The model as a label only when a backend listed it: the name comes from the client,
        and an arbitrary string must not become a series (nor leak into the exposition)."""
        if model is None:
            return ""
        return model if self._state.model_listed(model) else UNLISTED_MODEL

    def on_done(self, done: RequestDone) -> None:
        model = self._model_label(done.model)
        status = str(done.status)
        backend = done.backend_url or ""
        self._requests.get(done.key, model, done.route, backend, status).inc()
        self._duration.get(done.route, status).observe(done.duration_s)
        self.count_decisions(done.decisions)
        if done.prefix_source is not None:
            for stage, outcome in done.decisions:
                if stage == "prefix" and outcome in _COUNTED_PREDICTIONS:
                    self._predictions.get(done.prefix_source, outcome).inc()
        if done.overhead_s is not None:
            self.overhead.observe(done.overhead_s)
        if done.ttft_s is not None:
            self._ttft.get(model, backend, done.route).observe(done.ttft_s)
        if done.queue_wait_s is not None and done.backend_url is not None:
            self._queue_wait.get(done.key).observe(done.queue_wait_s)
        if done.metered is True:
            for kind, count in (
                ("prompt", done.prompt_tokens),
                ("cached", done.cached_tokens),
                ("completion", done.completion_tokens),
            ):
                if count is not None:
                    self._tokens.get(done.key, model, kind).inc(count)
        elif done.metered is False:
            self._unmetered.get(done.key, model).inc()

    def count_decisions(self, decisions: Iterable[tuple[str, str]]) -> None:
        """Branches outside DECISIONS are not counted: the series set stays fixed."""
        children = self._decision_children
        for decision in decisions:
            child = children.get(decision)
            if child is not None:
                child.inc()

    def on_decision(self, _backend: str, stage: str, outcome: str) -> None:
        self.count_decisions(((stage, outcome),))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
