"""`log_line`: one regular expression over one line of a backend's log.

Lines are matched in memory and dropped; only the captured value (a number, a
model name) leaves this module. Error messages never quote the line.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from pharos.engine import values
from pharos.engine.types import (
    LOAD_SIGNALS,
    Feed,
    ModelInfo,
    Probe,
    ProbeError,
    Signal,
    Snapshot,
)

LOG_SIGNALS = frozenset({Signal.VERSION, Signal.RESIDENCY}) | LOAD_SIGNALS


def _snapshot(signal: Signal, raw: str, model: str | None) -> Snapshot:
    """Checks `raw` as the signal's value and wraps it; raises ProbeError."""
    if signal is Signal.VERSION:
        version = raw.strip()
        if not version:
            raise ProbeError("version: empty")
        return Snapshot(version=version)
    if signal is Signal.RESIDENCY:
        if not model:
            raise ProbeError("residency: the line names no model")
        info = ModelInfo(state=values.residency(raw))
        return Snapshot(models=MappingProxyType({model: info}))
    key = model if model else ""
    load = values.load_with(signal, values.number(raw.strip(), signal))
    return Snapshot(loads=MappingProxyType({key: load}))


def log_line(
    name: str, signal: Signal, pattern: str, *, value: str | None = None, own: bool = False
) -> Probe:
    """A probe matching one log line.

    The named group `value` holds the value, or `value` is the fixed value a
    matching line reports; an optional named group `model` keys it per model.
    Raises ValueError on a bad pattern or a fixed value that can't be the signal.
    """
    if not name:
        raise ValueError("log probe: empty name")
    if signal not in LOG_SIGNALS:
        raise ValueError(f"log probe {name!r}: a log line cannot read {signal.value}")
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise ValueError(f"log probe {name!r}: bad pattern: {err}") from None
    groups = regex.groupindex
    has_value = "value" in groups
    has_model = "model" in groups
    if has_value == (value is not None):
        raise ValueError(
            f"log probe {name!r}: give either a (?P<value>...) group or a fixed value, not "
            + ("both" if has_value else "neither")
        )
    if signal is Signal.VERSION and has_model:
        raise ValueError(f"log probe {name!r}: version is per backend, drop the model group")
    if signal is Signal.RESIDENCY and not has_model:
        raise ValueError(f"log probe {name!r}: residency needs a (?P<model>...) group")
    if value is not None:
        try:
            _snapshot(signal, value, "m")
        except ProbeError as err:
            raise ValueError(f"log probe {name!r}: fixed value {value!r}: {err}") from None

    def parse(line: bytes) -> Snapshot:
        match = regex.search(line.decode("utf-8", errors="replace"))
        if match is None:
            return Snapshot()
        model = match.group("model") if has_model else None
        raw = match.group("value") if has_value else value
        if raw is None:
            raise ProbeError(f"{name}: the value group did not take part in the match")
        if has_model and not model:
            raise ProbeError(f"{name}: the model group matched nothing")
        try:
            return _snapshot(signal, raw, model)
        except ProbeError as err:
            raise ProbeError(f"{name}: {err}") from None

    return Probe(name=name, signal=signal, feed=Feed(log=True), parse=parse, own=own)
