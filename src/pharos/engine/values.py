"""Checks that a raw number or string can be the signal it claims to be.

A value that cannot be its signal (a fractional or negative count, KV usage
outside 0..1, a capacity of 0) raises ProbeError: surfaced, never guessed.
"""

from __future__ import annotations

import math

from pharos.engine.types import Load, ProbeError, Residency, Signal

COUNT_SIGNALS = frozenset({Signal.RUNNING, Signal.WAITING, Signal.CAPACITY})
SHOWN_CHARS = 24


def shown(text: str) -> str:
    """The start of a bad value, for an error: a greedy log group can hold the rest of a line
    that carries a prompt, and errors never quote log lines."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return repr(text[:SHOWN_CHARS]) + f"... ({len(text)} chars)"


def count(value: float, signal: Signal) -> int:
    """A request count: a whole number >= 0 (capacity >= 1)."""
    try:
        finite = math.isfinite(value)  # an int past float range raises OverflowError here
    except OverflowError:
        finite = False
    if not finite:
        raise ProbeError(f"{signal.value}: {value} is not a count")
    if value != int(value):
        raise ProbeError(f"{signal.value}: fractional count {value}")
    minimum = 1 if signal is Signal.CAPACITY else 0
    if value < minimum:
        raise ProbeError(f"{signal.value}: {value} is below {minimum}")
    return int(value)


def fraction(value: float) -> float:
    """KV-cache usage as a 0..1 fraction."""
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ProbeError(f"kv_usage: {value} is outside 0..1")
    return value


def load_with(signal: Signal, value: float) -> Load:
    """A Load holding one checked value for one load signal."""
    if signal is Signal.KV_USAGE:
        return Load(kv_usage=fraction(value))
    checked = count(value, signal)
    if signal is Signal.RUNNING:
        return Load(running=checked)
    if signal is Signal.WAITING:
        return Load(waiting=checked)
    if signal is Signal.CAPACITY:
        return Load(capacity=checked)
    raise ProbeError(f"{signal.value} is not a load signal")


def residency(text: str) -> Residency:
    """A residency word from a log line or config: loaded, loading or cold."""
    try:
        state = Residency(text.strip().lower())
    except ValueError:
        raise ProbeError(f"residency: {shown(text)} is not loaded, loading or cold") from None
    if state is Residency.UNKNOWN:
        raise ProbeError("residency: 'unknown' is not a value a probe can report")
    return state


def number(text: str, signal: Signal) -> float:
    try:
        return float(text)
    except ValueError:
        raise ProbeError(f"{signal.value}: {shown(text)} is not a number") from None


def byte_size(value: int, what: str) -> int:
    if value < 0:
        raise ProbeError(f"{what}: negative size {value}")
    return value
