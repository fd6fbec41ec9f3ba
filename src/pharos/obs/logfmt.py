"""logfmt values for Pharos's key=value log lines."""

from __future__ import annotations

import json


def field(value: object) -> str:
    """A logfmt value, JSON-quoted when it holds a space, quote, `=` or a control character
    (model names, paths and request ids come from clients: one request stays one line)."""
    text = str(value)
    if (
        text == ""
        or " " in text
        or '"' in text
        or "=" in text
        or "\\" in text
        or not text.isprintable()
    ):  # four `in` scans: 80 ns on a model name, where any() over a generator took 295
        return json.dumps(text, ensure_ascii=False)
    return text


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
