"""/status: one server-rendered page of what the router sees and did (spec §13).

`build_page` turns live state into plain frozen values; the Jinja2 template only
lays them out, with autoescape on (model names and reasons come from engines and
clients). A value nobody reported is None and the page prints "unknown", never 0.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import tzinfo

import jinja2

from pharos import __version__
from pharos.clock import Clock
from pharos.engine.types import Residency
from pharos.obs.chart import Chart, daily_chart
from pharos.obs.peers import PeerRow
from pharos.obs.status_text import human_bytes, human_value, refusal_reason
from pharos.proxy.done import RequestDone
from pharos.sched import Scheduler
from pharos.state import BackendStatus, State, TargetView
from pharos.state.spec import ProbeStatus
from pharos.usage import UsageBook

RECENT_REQUESTS = 50
USAGE_DAYS = 30

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pharos.obs", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)
_ENV.filters["thousands"] = lambda n: f"{n:,}"
_ENV.filters["bytes"] = lambda n: human_bytes(n)


class RecentRequests:
    """The last 50 finished requests, newest first."""

    def __init__(self, size: int = RECENT_REQUESTS) -> None:
        self._items: deque[RequestDone] = deque(maxlen=size)

    def add(self, done: RequestDone) -> None:
        self._items.appendleft(done)

    def __iter__(self) -> Iterator[RequestDone]:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class ProbeRow:
    name: str
    signal: str
    value: str | None
    source: str
    own: bool


@dataclass(frozen=True, slots=True)
class BackendRow:
    url: str
    kind: str
    version: str | None
    up: bool
    draining: bool
    full_age: str
    fast_age: str
    down_reason: str | None
    log_feed: str | None
    log_feed_up: bool | None
    probes: tuple[ProbeRow, ...]
    dropped: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class TargetRow:
    model: str
    backend: str
    up: bool
    residency: str | None
    running: int | None
    waiting: int | None
    capacity: str | None
    kv: str | None
    inflight: int
    inflight_cluster: int
    prefill_ms_per_token: str | None
    load_s: str | None
    service_s: str | None
    unknown_signals: int


@dataclass(frozen=True, slots=True)
class RecentRow:
    time: str
    request_id: str | None
    key: str
    model: str
    route: str
    status: int
    target: str | None
    reason: str
    prompt: int | None
    cached: int | None
    completion: int | None
    served: bool  # it reached an engine: its token counts are known or unknown, not absent
    unmetered: bool
    ttft: str | None
    duration: str


@dataclass(frozen=True, slots=True)
class QueueRow:
    key: str
    model: str
    since: str
    why: str


@dataclass(frozen=True, slots=True)
class UsageRow:
    key: str
    requests: int
    prompt: int
    cached: int
    completion: int
    unmetered: int
    tokens_30d: int
    requests_30d: int
    unmetered_30d: int


@dataclass(frozen=True, slots=True)
class Page:
    version: str
    policy: str
    ready: bool
    draining: bool
    generated: str
    backends: tuple[BackendRow, ...]
    targets: tuple[TargetRow, ...]
    inflight: int
    waiting: int
    recent: tuple[RecentRow, ...]
    usage: tuple[UsageRow, ...] | None  # None: no usage book
    chart: Chart | None
    timezone: str
    requests_today: int
    peers: tuple[PeerRow, ...] | None = None  # None: no peer plane configured
    queue: tuple[QueueRow, ...] = ()
    session_key: str | None = None  # the key name of a browser session, for its logout button

    @property
    def backends_up(self) -> int:
        return sum(1 for backend in self.backends if backend.up)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.1f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _num(value: float | None, scale: float = 1.0) -> str | None:
    return None if value is None else f"{value * scale:.3g}"


def _probe_value(probe: ProbeStatus, residency_now: str | None) -> str | None:
    """The residency row shows what routing sees now (the targets table's column), which a
    cold dispatch or an unload updates between full rounds; the rest as last read."""
    if probe.signal == "residency" and residency_now is not None:
        return residency_now
    return human_value(probe.signal, probe.value)


def _residency_now(url: str, views: tuple[TargetView, ...]) -> str | None:
    known = [
        f"{view.model}={view.residency.value}"
        for view in sorted(views, key=lambda v: v.model)
        if view.backend_url == url and view.residency is not Residency.UNKNOWN
    ]
    return ", ".join(known) if known else None


def _backend_row(status: BackendStatus, views: tuple[TargetView, ...] = ()) -> BackendRow:
    residency_now = _residency_now(status.url, views)
    return BackendRow(
        url=status.url,
        kind=status.kind.value,
        version=status.version,
        up=status.up,
        draining=status.draining,
        full_age=_age(status.full_round_age_s),
        fast_age=_age(status.fast_round_age_s),
        down_reason=status.ejected or status.down_reason,
        log_feed=status.log_feed,
        log_feed_up=status.log_feed_up,
        probes=tuple(
            ProbeRow(p.name, p.signal, _probe_value(p, residency_now), p.source, p.own)
            for p in status.probes
        ),
        dropped=tuple(sorted(status.dropped_probes.items())),
    )


def _target_row(view: TargetView, sched: Scheduler) -> TargetRow:
    capacity: str | None = None
    if view.capacity is not None:
        capacity = str(view.capacity)
    elif view.config_capacity is not None:
        capacity = f"{view.config_capacity} (config)"
    signals = (view.running, view.waiting, view.capacity, view.kv_usage)
    return TargetRow(
        model=view.model,
        backend=view.backend_url,
        up=view.up,
        residency=None if view.residency is Residency.UNKNOWN else view.residency.value,
        running=view.running,
        waiting=view.waiting,
        capacity=capacity,
        kv=None if view.kv_usage is None else f"{view.kv_usage:.0%}",
        inflight=sched.inflight(view.target_id),
        inflight_cluster=sched.inflight_cluster(view.target_id, view.key),
        prefill_ms_per_token=_num(view.prefill_s_per_token, 1000.0),
        load_s=_num(view.load_s),
        service_s=_num(view.service_s),
        unknown_signals=sum(v is None for v in signals) + (view.residency is Residency.UNKNOWN),
    )


def _wait_reason(model: str, targets: tuple[TargetView, ...], sched: Scheduler) -> str:
    """Why a queued request for `model` waits, from the targets routing saw."""
    mine = [view for view in targets if view.model == model and view.up]
    if not mine:
        return "no backend serving the model is up"
    if any(view.residency is Residency.LOADING for view in mine):
        return "cold load under way"
    sizes = [(view.size_bytes, view.memory_bytes) for view in mine]
    if all(size is not None and memory is not None and size > memory for size, memory in sizes):
        return "does not fit any backend's memory_gb"

    def full(view: TargetView) -> bool:
        slots = view.capacity if view.capacity is not None else view.config_capacity
        return slots is not None and sched.inflight_cluster(view.target_id, view.key) >= slots

    if not all(full(view) for view in mine) and all(
        view.residency is Residency.COLD for view in mine
    ):
        return "cold: loading it would evict a busy model"
    return "no free slot"


def _recent_row(done: RequestDone, zone: tzinfo | None) -> RecentRow:
    return RecentRow(
        time=dt.datetime.fromtimestamp(done.finished_wall_s, zone).strftime("%H:%M:%S"),
        request_id=done.request_id,
        key=done.key,
        model=done.model or "",
        route=done.route,
        status=done.status,
        target=done.backend_url,
        reason=refusal_reason(done),
        prompt=done.prompt_tokens,
        cached=done.cached_tokens,
        completion=done.completion_tokens,
        served=done.metered is not None,
        unmetered=done.metered is False,
        ttft=None if done.ttft_s is None else f"{done.ttft_s:.2f} s",
        duration=f"{done.duration_s:.2f} s",
    )


def _usage(usage: UsageBook, today: dt.date) -> tuple[tuple[UsageRow, ...], Chart, int]:
    """Usage by key today and over the last 30 days, and the chart of those 30 days."""
    first = today - dt.timedelta(days=USAGE_DAYS - 1)
    month = usage.daily(first, today, by="key")
    totals: dict[str, tuple[int, int, int]] = {}
    for row in month:
        tokens, requests, unmetered = totals.get(row.key or "", (0, 0, 0))
        totals[row.key or ""] = (
            tokens + row.prompt_tokens + row.completion_tokens,
            requests + row.requests,
            unmetered + row.unmetered,
        )
    today_rows = {row.key or "": row for row in usage.today_by_key()}
    rows = []
    for key in sorted(set(totals) | set(today_rows)):
        day = today_rows.get(key)
        tokens_30d, requests_30d, unmetered_30d = totals.get(key, (0, 0, 0))
        rows.append(
            UsageRow(
                key=key,
                requests=0 if day is None else day.requests,
                prompt=0 if day is None else day.prompt_tokens,
                cached=0 if day is None else day.cached_tokens,
                completion=0 if day is None else day.completion_tokens,
                unmetered=0 if day is None else day.unmetered,
                tokens_30d=tokens_30d,
                requests_30d=requests_30d,
                unmetered_30d=unmetered_30d,
            )
        )
    requests_today = sum(row.requests for row in today_rows.values())
    return tuple(rows), daily_chart(month, first, today), requests_today


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
    peers: tuple[PeerRow, ...] | None = None,
    session_key: str | None = None,
) -> Page:
    now = clock.now()
    zone = usage.zone if usage is not None else None
    views = tuple(sorted(state.all_targets(now), key=lambda v: (v.model, v.backend_url)))
    targets = tuple(_target_row(view, sched) for view in views)
    queue = tuple(
        QueueRow(key, model, f"{max(0.0, now - since):.1f} s", _wait_reason(model, views, sched))
        for key, model, since in sorted(sched.queued(), key=lambda q: q[2])
    )
    usage_rows: tuple[UsageRow, ...] | None = None
    chart: Chart | None = None
    requests_today = 0
    if usage is not None:
        today = dt.datetime.fromtimestamp(clock.time(), usage.zone).date()
        usage_rows, chart, requests_today = _usage(usage, today)
    return Page(
        version=f"v{__version__}",
        policy=policy,
        ready=ready,
        draining=draining,
        generated=dt.datetime.fromtimestamp(clock.time(), zone).strftime("%Y-%m-%d %H:%M:%S %Z"),
        backends=tuple(_backend_row(status, views) for status in state.backends()),
        targets=targets,
        inflight=sum(t.inflight for t in targets),
        waiting=sched.waiting_count(),
        recent=tuple(_recent_row(done, zone) for done in recent),
        usage=usage_rows,
        chart=chart,
        timezone=str(zone) if zone is not None else "no usage book",
        requests_today=requests_today,
        peers=peers,
        queue=queue,
        session_key=session_key,
    )


def render_page(page: Page) -> str:
    return _ENV.get_template("status.html").render(page=page)


def render_login(*, version: str, problem: str | None) -> str:
    return _ENV.get_template("login.html").render(version=version, problem=problem)
