"""/status: one server-rendered page of what the router sees and did (spec §13).

`build_page` turns live state into plain values; the Jinja2 template only
lays them out, with autoescape on (model names and reasons come from engines).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jinja2

from pharos import __version__
from pharos.clock import Clock
from pharos.engine.types import Residency
from pharos.proxy.done import RequestDone
from pharos.sched import Scheduler
from pharos.state import State
from pharos.usage import UsageBook
from pharos.usage.report import DailyRow

RECENT_REQUESTS = 50

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pharos.obs", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)


class RecentRequests:
    """The last 50 finished requests, newest first."""

    def __init__(self, size: int = RECENT_REQUESTS) -> None:
        self._items: deque[RequestDone] = deque(maxlen=size)

    def add(self, done: RequestDone) -> None:
        self._items.appendleft(done)

    def __iter__(self) -> Any:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)


def _age(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}s ago"


def _num(value: float | None, digits: int = 3) -> str | None:
    return None if value is None else f"{value:.{digits}g}"


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str
    tokens: int
    requests: int


def _chart(rows: Iterable[DailyRow], first: dt.date, last: dt.date) -> dict[str, Any]:
    days = (last - first).days + 1
    tokens = [0] * days
    requests = [0] * days
    for row in rows:
        day = dt.date.fromisoformat(row.day[:10])
        index = (day - first).days
        if 0 <= index < days:
            tokens[index] += row.prompt_tokens + row.completion_tokens
            requests[index] += row.requests
    width, height, gap = 300.0, 60.0, 1.0
    slot = width / days
    peak = max(tokens) or 1
    bars = []
    for index in range(days):
        bar_h = height * tokens[index] / peak
        day = first + dt.timedelta(days=index)
        bars.append(Bar(index * slot, height - bar_h, max(slot - gap, 0.5), bar_h,
                        day.isoformat(), tokens[index], requests[index]))
    return {"width": width, "height": height, "bars": bars,
            "first": first.isoformat(), "last": last.isoformat()}


def build_page(
    *,
    state: State,
    sched: Scheduler,
    usage: UsageBook | None,
    recent: RecentRequests,
    clock: Clock,
    policy: str,
    ready: bool,
    draining: bool,
) -> dict[str, Any]:
    now = clock.now()
    backends = []
    for status in state.backends():
        backends.append({
            "url": status.url, "kind": status.kind.value, "version": status.version,
            "up": status.up, "draining": status.draining,
            "full_age": _age(status.full_round_age_s), "fast_age": _age(status.fast_round_age_s),
            "down_reason": status.ejected or status.down_reason,
            "log_feed": status.log_feed, "log_feed_up": status.log_feed_up,
            "probes": status.probes,
            "dropped": sorted(status.dropped_probes.items()),
        })
    targets = []
    for view in sorted(state.all_targets(now), key=lambda v: (v.model, v.backend_url)):
        targets.append({
            "model": view.model, "backend": view.backend_url,
            "residency": None if view.residency is Residency.UNKNOWN else view.residency.value,
            "running": view.running, "waiting": view.waiting,
            "capacity": view.capacity if view.capacity is not None else (
                f"{view.config_capacity} (config)" if view.config_capacity is not None else None),
            "kv": None if view.kv_usage is None else f"{view.kv_usage:.0%}",
            "inflight": sched.inflight(view.target_id),
            "inflight_cluster": sched.inflight_cluster(view.target_id, view.key),
            "prefill": _num(view.prefill_s_per_token), "load": _num(view.load_s),
            "service": _num(view.service_s),
        })
    recent_rows = []
    for done in recent:
        recent_rows.append({
            "time": dt.datetime.fromtimestamp(done.finished_wall_s).strftime("%H:%M:%S"),
            "key": done.key, "model": done.model or "", "status": done.status,
            "target": done.backend_url or "", "reason": done.reason,
            "prompt": done.prompt_tokens, "cached": done.cached_tokens,
            "completion": done.completion_tokens,
            "ttft": "" if done.ttft_s is None else f"{done.ttft_s:.2f}s",
        })
    usage_rows: list[dict[str, Any]] = []
    chart: dict[str, Any] = _chart((), dt.date.today(), dt.date.today())
    timezone = "no usage book"
    requests_today = 0
    if usage is not None:
        timezone = str(usage.zone)
        today = dt.datetime.fromtimestamp(clock.time(), usage.zone).date()
        first = today - dt.timedelta(days=29)
        month = usage.daily(first, today, by="key")
        chart = _chart(month, first, today)
        totals: dict[str, list[int]] = {}
        for row in month:
            acc = totals.setdefault(row.key or "", [0, 0])
            acc[0] += row.prompt_tokens + row.completion_tokens
            acc[1] += row.requests
        for row in usage.today_by_key():
            requests_today += row.requests
            month_totals = totals.get(row.key or "", [0, 0])
            usage_rows.append({
                "key": row.key, "requests": row.requests, "prompt": row.prompt_tokens,
                "cached": row.cached_tokens, "completion": row.completion_tokens,
                "unmetered": row.unmetered, "tokens_30d": month_totals[0],
                "requests_30d": month_totals[1],
            })
    return {
        "version": f"v{__version__}", "policy": policy, "ready": ready, "draining": draining,
        "generated": dt.datetime.fromtimestamp(clock.time()).strftime("%Y-%m-%d %H:%M:%S"),
        "backends": backends, "backends_up": sum(1 for b in backends if b["up"]),
        "targets": targets, "inflight": sum(t["inflight"] for t in targets),
        "waiting": sched.waiting_count(), "recent": recent_rows, "usage": usage_rows,
        "chart": chart, "timezone": timezone, "requests_today": requests_today,
    }


def render_page(page: dict[str, Any]) -> str:
    return _ENV.get_template("status.html").render(page=page)
