"""Words and units for /status: why a request was refused, sizes in binary units."""

from __future__ import annotations

import re

from pharos.proxy.done import RequestDone

REFUSALS: dict[tuple[str, str], str] = {
    ("admission", "unauthorized"): "no key, or a key this config does not hold",
    ("admission", "bad_request"): "the request body did not parse",
    ("admission", "too_large"): "the request body is over the size limit",
    ("admission", "model_not_allowed"): "the model is outside this key's allow-list",
    ("admission", "rate_limited"): "over this key's requests per minute",
    ("admission", "quota_exceeded"): "out of this key's tokens for today",
    ("route", "unknown_model"): "no backend lists this model",
    ("route", "unavailable"): "no backend serving this model is up",
    ("route", "queue_full"): "the fair queue is full",
    ("route", "client_left"): "the client left while it waited",
}
"""Why a request got no engine, from its decisions, for rows whose reason is empty."""


def refusal_reason(done: RequestDone) -> str:
    if done.reason:
        return done.reason
    for decision in done.decisions:
        if decision in REFUSALS:
            return REFUSALS[decision]
    return "" if done.status < 400 else f"refused with {done.status}"


def human_bytes(value: int | None) -> str | None:
    if value is None:
        return None
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


BYTE_SIGNALS = frozenset({"vram_bytes", "size_bytes"})


def human_value(signal: str, value: str | None) -> str | None:
    """`model=1321098329` -> `model=1.2 GiB` for the byte signals; other values as they are."""
    if value is None or signal not in BYTE_SIGNALS:
        return value
    return re.sub(r"(?<![\w.])(\d+)(?![\w.])", lambda m: human_bytes(int(m[1])) or m[1], value)
