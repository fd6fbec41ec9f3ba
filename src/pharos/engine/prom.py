"""`prom`: one metric from a Prometheus text body, read by a targeted scanner.

Parsing the whole body (prometheus_client) takes ~8 ms for a vLLM /metrics page
and would stall the event loop every round; this scans only the lines of the
wanted metric (an exact name match, so `vllm:num_requests_waiting` never matches
`vllm:num_requests_waiting_by_reason`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from types import MappingProxyType

import msgspec

from pharos.engine import values
from pharos.engine.types import (
    LOAD_SIGNALS,
    WHOLE_BACKEND,
    Feed,
    Load,
    Probe,
    ProbeError,
    Signal,
    Snapshot,
    VersionGuard,
)

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,?)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def prom_text(body: bytes) -> str:
    """The Prometheus text of a body.

    llama.cpp b7139 serves /metrics as a JSON-encoded string (captured:
    llamacpp/b7139/*/metrics); decode that one shape, then scan as usual.
    """
    stripped = body.lstrip()
    if stripped.startswith(b'"'):
        try:
            return msgspec.json.decode(stripped, type=str)
        except msgspec.DecodeError as err:
            raise ProbeError(f"metrics body is a broken JSON string: {err}") from None
    return body.decode("utf-8", errors="replace")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return re.sub(r"\\.", lambda m: _ESCAPES.get(m.group(0), m.group(0)[1]), value)


def _labels(line: str, start: int) -> tuple[dict[str, str], int]:
    """Parses `{a="b",...}` from line[start] == "{"; returns labels and the index after "}"."""
    labels: dict[str, str] = {}
    pos = start + 1
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        match = _LABEL.match(line, pos)
        if match is None:
            raise ProbeError(f"bad label set in series {line[:120]!r}")
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
        if not match.group(3):
            while pos < len(line) and line[pos] in " \t":
                pos += 1
            if pos >= len(line) or line[pos] != "}":
                raise ProbeError(f"bad label set in series {line[:120]!r}")
            return labels, pos + 1


def series(text: str, metric: str) -> Iterator[tuple[dict[str, str], str]]:
    """Yields (labels, value text) for every sample line of exactly `metric`."""
    size = len(metric)
    start = 0
    while True:
        at = text.find(metric, start)
        if at < 0:
            return
        end = text.find("\n", at)
        if end < 0:
            end = len(text)
        start = end
        if at > 0 and text[at - 1] != "\n":
            continue
        after = text[at + size : at + size + 1]
        if after not in ("{", " ", "\t"):
            continue
        line = text[at:end].rstrip("\r")
        labels: dict[str, str] = {}
        pos = size
        if after == "{":
            labels, pos = _labels(line, size)
        fields = line[pos:].split()
        if not fields or len(fields) > 2:
            raise ProbeError(f"bad sample line for {metric}")
        yield labels, fields[0]


def read_metric(
    body: bytes, signal: Signal, metric: str, per_model: str | None, percent: bool
) -> Snapshot:
    """The one signal from the wanted metric; no series = nothing known; NaN = unknown."""
    loads: dict[str, Load] = {}
    seen: set[str] = set()
    for labels, text in series(prom_text(body), metric):
        raw = values.number(text, signal)
        if per_model is None:
            key = WHOLE_BACKEND
        else:
            found = labels.get(per_model)
            if found is None:
                raise ProbeError(f"{metric}: a series has no {per_model} label")
            key = found
        if key in seen:
            where = "the backend" if key == WHOLE_BACKEND else f"model {key!r}"
            raise ProbeError(f"{metric}: two series for {where}")
        seen.add(key)
        if math.isnan(raw):
            continue
        loads[key] = values.load_with(signal, raw / 100.0 if percent else raw)
    return Snapshot(loads=MappingProxyType(loads))


def prom(
    name: str,
    path: str,
    signal: Signal,
    metric: str,
    *,
    per_model: str | None = None,
    percent: bool = False,
    when: VersionGuard | None = None,
    own: bool = False,
) -> Probe:
    """A probe reading one load signal from one metric of a Prometheus-text endpoint."""
    if not name:
        raise ValueError("prom probe: empty name")
    if signal not in LOAD_SIGNALS:
        raise ValueError(f"prom probe {name!r}: {signal.value} is not a load signal")
    if not path.startswith("/"):
        raise ValueError(f"prom probe {name!r}: path {path!r} must start with /")
    if _METRIC_NAME.match(metric) is None:
        raise ValueError(f"prom probe {name!r}: {metric!r} is not a metric name")
    if per_model is not None and _LABEL_NAME.match(per_model) is None:
        raise ValueError(f"prom probe {name!r}: {per_model!r} is not a label name")
    if percent and signal is not Signal.KV_USAGE:
        raise ValueError(f"prom probe {name!r}: percent applies only to kv_usage")

    def parse(body: bytes) -> Snapshot:
        return read_metric(body, signal, metric, per_model, percent)

    return Probe(name=name, signal=signal, feed=Feed(path=path), parse=parse, when=when, own=own)
