"""The plain-dict request series give the exposition prometheus_client's Counter and Histogram
give for the same increments and observations, byte for byte (their `_created` samples left
out, as Metrics leaves them out)."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from pharos.obs.metrics import _NoCreated
from pharos.obs.series import CounterSeries, HistogramSeries

BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def reference_text(registry: CollectorRegistry) -> bytes:
    outer = CollectorRegistry()
    outer.register(_NoCreated(registry))
    return generate_latest(outer)


def series_text(*series: CounterSeries | HistogramSeries) -> bytes:
    registry = CollectorRegistry()
    for one in series:
        registry.register(one)
    return generate_latest(registry)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_counter_reads_the_same_as_prometheus_clients_after_the_same_increments(
    seed: int,
) -> None:
    rng = random.Random(seed)
    registry = CollectorRegistry()
    reference = Counter("pharos_things", "Things counted", ["key", "model"], registry=registry)
    series = CounterSeries("pharos_things", "Things counted", ["key", "model"])
    for _ in range(500):
        labels = (rng.choice(["alice", "bob", "-", 'we"ird']), rng.choice(["qwen", "", "a b"]))
        amount = rng.choice([1, 1, 3, 0, 8000, 0.5])
        reference.labels(*labels).inc(amount)
        series.inc(labels, amount)
    assert series_text(series) == reference_text(registry)


def test_a_counter_shows_no_series_before_its_first_count_and_its_help_and_type_lines() -> None:
    registry = CollectorRegistry()
    Counter("pharos_things", "Things counted", ["key"], registry=registry)
    series = CounterSeries("pharos_things", "Things counted", ["key"])
    assert series_text(series) == reference_text(registry)
    assert b"# TYPE pharos_things_total counter" in series_text(series)


@pytest.mark.parametrize(
    ("labelnames", "amounts"),
    [
        # (labels,              observed values)
        (("route", "status"), "random"),  # labelled, spread over every bucket
        ((), "random"),  # unlabelled: its zero series shows before any observation
        ((), "none"),
        (("route", "status"), "edges"),  # exactly on a bound, beyond the last, negative, inf, NaN
    ],
)
def test_a_histogram_reads_the_same_as_prometheus_clients_after_the_same_observations(
    labelnames: tuple[str, ...], amounts: str
) -> None:
    rng = random.Random(7)
    registry = CollectorRegistry()
    reference = Histogram(
        "pharos_wait_seconds", "Waits", labelnames, buckets=BUCKETS_S, registry=registry
    )
    series = HistogramSeries("pharos_wait_seconds", "Waits", labelnames, BUCKETS_S)
    if amounts == "random":
        values = [rng.random() * rng.choice([0.01, 1, 100]) for _ in range(400)]
    elif amounts == "edges":
        values = [*BUCKETS_S, 0.0, 61.0, -1.0, math.inf, math.nan]
    else:
        values = []
    for value in values:
        labels = tuple(rng.choice(["chat", "200", "499"]) for _ in labelnames)
        (reference.labels(*labels) if labels else reference).observe(value)
        series.observe(labels, value)
    assert series_text(series) == reference_text(registry)
