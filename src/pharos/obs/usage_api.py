"""/usage: daily usage history as JSON or CSV (spec §11).

`from` and `to` are dates in usage.timezone; each row's `day` is that day's
start in RFC 3339 with the zone's offset, so a reader elsewhere knows which day.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Literal

import msgspec
from aiohttp import web

from pharos.proxy.errors import ClientError, bad_request
from pharos.usage import UsageBook
from pharos.usage.report import DailyRow

DEFAULT_DAYS = 30
_FIELDS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "unmetered")


class UsageQuery(msgspec.Struct, frozen=True):
    from_day: dt.date
    to_day: dt.date
    by: Literal["key", "model"]
    format: Literal["json", "csv"]


def _date(text: str, name: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise bad_request(f"`{name}` must be a date like 2026-09-28, not {text!r}") from None


def parse_query(params: dict[str, str], today: dt.date) -> UsageQuery:
    """The query of /usage with its defaults (the last 30 days by key, JSON); 400 on bad input."""
    unknown = sorted(set(params) - {"from", "to", "by", "format"})
    if unknown:
        raise bad_request(f"unknown query parameter `{unknown[0]}`; use from, to, by, format")
    to_day = _date(params["to"], "to") if "to" in params else today
    if "from" in params:
        from_day = _date(params["from"], "from")
    else:
        days_back = min(DEFAULT_DAYS - 1, (to_day - dt.date.min).days)  # `to` near year 1
        from_day = to_day - dt.timedelta(days=days_back)
    if from_day > to_day:
        raise bad_request("`from` is after `to`")
    by = params.get("by", "key")
    if by not in ("key", "model"):
        raise bad_request("`by` must be key or model")
    fmt = params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise bad_request("`format` must be json or csv")
    return UsageQuery(from_day, to_day, by, fmt)  # type: ignore[arg-type]


def to_csv(rows: list[DailyRow], by: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("day", by, *_FIELDS))
    for row in rows:
        name = row.key if by == "key" else row.model
        writer.writerow((row.day, name or "", *(getattr(row, f) for f in _FIELDS)))
    return out.getvalue()


def usage_response(book: UsageBook, params: dict[str, str], today: dt.date) -> web.Response:
    """Raises ClientError for a bad query."""
    query = parse_query(params, today)
    rows = book.daily(query.from_day, query.to_day, by=query.by)
    if query.format == "csv":
        return web.Response(text=to_csv(rows, query.by), content_type="text/csv")
    body = {
        "from": query.from_day.isoformat(),
        "to": query.to_day.isoformat(),
        "by": query.by,
        "timezone": str(book.zone),
        "rows": rows,
    }
    return web.Response(body=msgspec.json.encode(body), content_type="application/json")


__all__ = ["ClientError", "UsageQuery", "parse_query", "to_csv", "usage_response"]
