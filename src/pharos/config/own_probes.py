"""The own-probe rules of spec §4: what config rejects before the engine ever sees a probe."""

from __future__ import annotations

import re
from collections.abc import Iterator, Set

from pharos.config.schema import LogProbe, OwnProbe
from pharos.engine import LIBRARY
from pharos.engine.logline import LOG_SIGNALS
from pharos.engine.types import LOAD_SIGNALS, Signal

RESIDENCY_VALUES = ("loaded", "loading", "cold")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def library_probe_names() -> frozenset[str]:
    """Names own probes may not take: every built-in probe in the engine's library."""
    return frozenset(LIBRARY)


def _names(signals: Set[Signal]) -> str:
    ordered = [signal.value for signal in Signal if signal in signals]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def check_own_probes(
    probes: tuple[OwnProbe, ...], at: str, library_names: Set[str]
) -> Iterator[str]:
    """Yields one `path: problem` line per broken rule, for the probes of one backend."""
    first_use: dict[str, int] = {}
    for index, probe in enumerate(probes):
        here = f"{at}[{index}]"
        yield from _check_name(probe, here, at, index, first_use, library_names)
        yield from _check_probe(probe, here)


def _check_name(
    probe: OwnProbe,
    here: str,
    at: str,
    index: int,
    first_use: dict[str, int],
    library_names: Set[str],
) -> Iterator[str]:
    name = probe.name.strip()
    if not name:
        yield f"{here}.name: required (doctor and /status show probes by name)"
    elif name in library_names:
        yield f'{here}.name: "{name}" is a built-in probe; give your probe another name'
    elif name in first_use:
        yield f'{here}.name: "{name}" is already used by {at}[{first_use[name]}]'
    else:
        first_use[name] = index


def _check_probe(probe: OwnProbe, here: str) -> Iterator[str]:
    if probe.signal is None:
        yield f"{here}.signal: required (one of {_names(set(Signal))})"
    if probe.prom is not None and probe.log is not None:
        yield f"{here}: has both prom and log; a probe reads exactly one feed"
        return
    if probe.prom is None and probe.log is None:
        yield f"{here}: needs prom (a Prometheus metric) or log (a log line pattern)"
        return
    if probe.prom is not None:
        if probe.signal is not None and probe.signal not in LOAD_SIGNALS:
            yield (
                f"{here}.signal: a prom probe reads only {_names(LOAD_SIGNALS)}, "
                f'not "{probe.signal.value}"'
            )
        if not probe.prom.path.startswith("/"):
            yield f'{here}.prom.path: must start with "/", like /metrics'
        if not _METRIC_NAME.fullmatch(probe.prom.metric):
            yield f'{here}.prom.metric: "{probe.prom.metric}" is not a Prometheus metric name'
        per_model = probe.prom.per_model
        if per_model is not None and not _LABEL_NAME.fullmatch(per_model):
            yield f'{here}.prom.per_model: "{per_model}" is not a Prometheus label name'
        if probe.prom.percent and probe.signal not in (None, Signal.KV_USAGE):
            yield f"{here}.prom.percent: only kv_usage is a percentage"
    if probe.log is not None:
        if probe.signal is not None and probe.signal not in LOG_SIGNALS:
            yield (
                f"{here}.signal: a log probe reads only {_names(LOG_SIGNALS)}, "
                f'not "{probe.signal.value}"'
            )
        yield from _check_log(probe.log, probe.signal, f"{here}.log")


def _check_log(log: LogProbe, signal: Signal | None, here: str) -> Iterator[str]:
    try:
        pattern = re.compile(log.match)
    except re.error as err:
        yield f"{here}.match: pattern does not compile: {err}"
        return
    has_value_group = "value" in pattern.groupindex
    if has_value_group and log.value is not None:
        yield f"{here}: the pattern has a (?P<value>...) group and a fixed value; keep one"
    elif not has_value_group and log.value is None:
        yield f"{here}: needs a (?P<value>...) group in match, or a fixed value"
    if signal is Signal.RESIDENCY and "model" not in pattern.groupindex:
        yield f"{here}.match: a residency pattern needs a (?P<model>...) group naming the model"
    if signal is Signal.VERSION and "model" in pattern.groupindex:
        yield f"{here}.match: the version is per backend; drop the (?P<model>...) group"
    if log.value is not None and signal is not None:
        problem = fixed_value_problem(signal, log.value)
        if problem is not None:
            yield f"{here}.value: {problem}"


def fixed_value_problem(signal: Signal, value: str | int | float) -> str | None:
    """Why a fixed log value cannot be this signal's value, or None when it can."""
    text = str(value).strip()
    if signal is Signal.RESIDENCY:
        if text not in RESIDENCY_VALUES:
            return f'residency is one of {", ".join(RESIDENCY_VALUES)}, not "{text}"'
    elif signal in (Signal.RUNNING, Signal.WAITING, Signal.CAPACITY):
        if not text.isdigit():
            return f'{signal.value} is a whole number >= 0, not "{text}"'
    elif signal is Signal.KV_USAGE:
        try:
            usage = float(text)
        except ValueError:
            return f'kv_usage is a number from 0 to 1, not "{text}"'
        if not 0.0 <= usage <= 1.0:
            return f"kv_usage is a number from 0 to 1, not {text}"
    elif not text:
        return "must not be empty"
    return None
