"""Request series as plain dicts, turned into Prometheus families only when /metrics is read.

prometheus_client's children check observability and take a lock on every `inc` and
`observe`: a streamed chat's on_done made ~20 such calls, 18.4 µs a request. Everything here
is fed on the event loop, so a float per label tuple (a list of bucket counts for a
histogram) serves; the exposition is the same text prometheus_client's Counter and
Histogram give (tests/obs/test_series.py).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]


class CounterSeries(Collector):
    """A labelled counter; series appear in the order first counted, as prometheus_client's."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        """`amount` >= 0, as a counter's (callers pass counts they validated)."""
        values = self.values
        values[labels] = values.get(labels, 0.0) + amount

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        yield family


class HistogramSeries(Collector):
    """A histogram, labelled or not (an unlabelled one shows its zeros from the start)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._bounds = (*(float(b) for b in buckets), math.inf)
        self._les = tuple(floatToGoString(b) for b in self._bounds)  # type: ignore[no-untyped-call]
        self.values: dict[Labels, list[float]] = {}  # per bucket (not cumulative), then the sum
        if not self._labelnames:
            self.values[()] = [0.0] * (len(self._bounds) + 1)

    def observe(self, labels: Labels, amount: float) -> None:
        counts = self.values.get(labels)
        if counts is None:
            counts = self.values[labels] = [0.0] * (len(self._bounds) + 1)
        if not math.isnan(amount):  # NaN: in the sum, in no bucket, as prometheus_client
            counts[bisect_left(self._bounds, amount)] += 1.0
        counts[-1] += amount

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for labels, counts in list(self.values.items()):
            cumulative = 0.0
            buckets: list[tuple[str, float]] = []
            for le, count in zip(self._les, counts, strict=False):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(list(labels), buckets, counts[-1])
        yield family
