"""logfmt values for Pharos's key=value log lines."""

from __future__ import annotations

import logging
import re
import time
from json.encoder import encode_basestring


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
        # json.dumps(text, ensure_ascii=False) byte for byte, without building a JSONEncoder
        # per call: 0.78 -> 0.10 µs a quoted field.
        return encode_basestring(text)
    return text


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


class LineFormatter(logging.Formatter):
    """logging.Formatter whose `%(asctime)s` text is built once per second, not per record:
    localtime + strftime took 4.4 of an access record's 33.6 µs (the text is the same)."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._second_text: tuple[int, str] = (-1, "")  # one tuple: a thread reads a whole pair
        self._fmt_text = fmt
        self.formats_plainly = set(_FIELD.findall(fmt)) <= _PLAIN_FIELDS
        """The format names only asctime, levelname, name and message: `plain_line` gives
        exactly what `format` gives for a record of those, without a LogRecord."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self._asctime(record.created, record.msecs)

    def _asctime(self, created_s: float, msecs: float) -> str:
        second = int(created_s)
        cached_second, text = self._second_text
        if second != cached_second:
            text = time.strftime(self.default_time_format, self.converter(created_s))
            self._second_text = (second, text)
        msec_format = self.default_msec_format
        return text if not msec_format else msec_format % (text, msecs)

    def plain_line(self, name: str, levelname: str, message: str, created_s: float) -> str:
        """`format` of a record with these fields made at `created_s` (its msecs the way
        LogRecord computes them), when `formats_plainly`."""
        msecs = int((created_s - int(created_s)) * 1000) + 0.0
        return self._fmt_text % {
            "asctime": self._asctime(created_s, msecs),
            "levelname": levelname,
            "name": name,
            "message": message,
        }


_FIELD = re.compile(r"%\((\w+)\)")
_PLAIN_FIELDS = frozenset({"asctime", "levelname", "name", "message"})
