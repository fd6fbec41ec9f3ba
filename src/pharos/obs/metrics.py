"""/metrics: every series of spec §13 in one prometheus_client registry owned by this object.

Request series are counted from proxy's RequestDone and state's background
decisions; backend and target gauges are read from State and the scheduler
at scrape time by a collector, so they are never stale.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import pharos.policy.cost
from pharos.obs.live import LiveGauges
from pharos.obs.looplag import LoopLag
from pharos.obs.series import CounterSeries, HistogramSeries
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
    "queue": ("immediate", "waited", "engine_queue"),
    "load": ("cold_start", "unexpected_load", "control"),
    "prefix": ("predicted_hit", "wrong_prediction", "unpredicted_hit", "miss", "unknown"),
    "upstream": (
        "ok",
        "error_status",
        "connect_failed",
        "bad_reply",
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
        self._requests = CounterSeries(
            "pharos_requests",
            "Requests by key, model, route, backend (empty: none served it) and status "
            "(499: the client left first)",
            ["key", "model", "route", "backend", "status"],
        )
        self._tokens = CounterSeries(
            "pharos_tokens",
            "Tokens this instance metered, by type: prompt (every prompt token, the cached ones "
            "included), cached (the part of prompt the engine's cache served) and completion",
            ["key", "model", "type"],
        )
        self._unmetered = CounterSeries(
            "pharos_unmetered_requests",
            "Served requests whose reply reported no token counts",
            ["key", "model"],
        )
        self._ttft = HistogramSeries(
            "pharos_ttft_seconds",
            "Time to the first engine byte",
            ["model", "backend", "route"],
            _LATENCY_BUCKETS_S,
        )
        self._duration = HistogramSeries(
            "pharos_request_duration_seconds",
            "Whole request time, from arrival to the last byte sent, by route and status",
            ["route", "status"],
            _DURATION_BUCKETS_S,
        )
        self._overhead = HistogramSeries(
            "pharos_overhead_seconds",
            "Pharos's own time before the first upstream send, queue wait excluded",
            [],
            _OVERHEAD_BUCKETS_S,
        )
        self._queue_wait = HistogramSeries(
            "pharos_queue_wait_seconds",
            "Time requests that reached an engine spent in the fair queue",
            ["key"],
            _LATENCY_BUCKETS_S,
        )
        self._decisions = CounterSeries(
            "pharos_decisions",
            "Every branch a request or background round took",
            ["stage", "outcome"],
        )
        for stage, outcomes in DECISIONS.items():
            for outcome in outcomes:
                self._decisions.inc((stage, outcome), 0.0)
        self._predictions = CounterSeries(
            "pharos_prefix_predictions",
            "Prefix predictions by where the slot came from and how they turned out",
            ["source", "outcome"],
        )
        for series in (
            self._requests,
            self._tokens,
            self._unmetered,
            self._ttft,
            self._duration,
            self._overhead,
            self._queue_wait,
            self._decisions,
            self._predictions,
        ):
            r.register(series)
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
        key, route = done.key, done.route
        self._requests.inc((key, model, route, backend, status))
        self._duration.observe((route, status), done.duration_s)
        self.count_decisions(done.decisions)
        if done.prefix_source is not None:
            for stage, outcome in done.decisions:
                if stage == "prefix" and outcome in _COUNTED_PREDICTIONS:
                    self._predictions.inc((done.prefix_source, outcome))
        if done.overhead_s is not None:
            self._overhead.observe((), done.overhead_s)
        if done.ttft_s is not None:
            self._ttft.observe((model, backend, route), done.ttft_s)
        if done.queue_wait_s is not None and done.backend_url is not None:
            self._queue_wait.observe((key,), done.queue_wait_s)
        if done.metered is True:
            for kind, count in (
                ("prompt", done.prompt_tokens),
                ("cached", done.cached_tokens),
                ("completion", done.completion_tokens),
            ):
                if count is not None:
                    self._tokens.inc((key, model, kind), count)
        elif done.metered is False:
            self._unmetered.inc((key, model))

    def count_decisions(self, decisions: Iterable[tuple[str, str]]) -> None:
        """Branches outside DECISIONS are not counted: the series set stays fixed."""
        counts = self._decisions.values
        for decision in decisions:
            if decision in counts:
                counts[decision] += 1.0

    def on_decision(self, _backend: str, stage: str, outcome: str) -> None:
        self.count_decisions(((stage, outcome),))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
