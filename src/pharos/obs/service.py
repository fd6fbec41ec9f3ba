"""Wires metrics, the status page, /usage and the per-request debug line into the app."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from aiohttp import web

from pharos import __version__
from pharos.clock import Clock
from pharos.obs.access import note_done
from pharos.obs.logfmt import field, seconds
from pharos.obs.metrics import Metrics
from pharos.obs.peers import PeerCollector, PeerRow, PeerStatuses, peer_rows
from pharos.obs.sessions import COOKIE, Sessions
from pharos.obs.status import RecentRequests, build_page, render_login, render_page
from pharos.obs.usage_api import usage_response
from pharos.proxy.app import Flags
from pharos.proxy.auth import KeyEntry
from pharos.proxy.done import RequestDone
from pharos.proxy.errors import ClientError, error_response
from pharos.proxy.keys import KeyRing
from pharos.sched import Scheduler
from pharos.state import State
from pharos.usage import UsageBook

log = logging.getLogger("pharos.request")
background_log = logging.getLogger("pharos.decision")

ROUTINE_DECISIONS = frozenset({("scrape", "ok"), ("resolve", "same_plan")})
"""Counted in /metrics but never logged: a round that found nothing new is no news (1,070
`scrape=ok` lines against 19 requests in eight minutes, before)."""

UNAUTHORIZED_STATUS = ClientError(
    401,
    "/status needs an admin key: send it as `Authorization: Bearer <key>`, or open "
    "/status in a browser and sign in.",
    "invalid_request_error",
    "invalid_api_key",
)

FORBIDDEN = ClientError(
    403,
    "This key may not read /status or /usage; an admin key is needed.",
    "permission_error",
    "insufficient_permissions",
)

METRICS_FORBIDDEN = ClientError(
    403,
    "This key may not read /metrics; an admin key or one marked `metrics: true` is needed.",
    "permission_error",
    "insufficient_permissions",
)


def request_line(done: RequestDone) -> str:
    """One logfmt line per request (spec §13). Never prompt text: only names, ids and numbers."""
    decisions = " ".join(f"{stage}={outcome}" for stage, outcome in done.decisions)
    fields = (
        ("id", done.request_id or "-"),
        ("key", done.key),
        ("model", done.model or "-"),
        ("route", done.route),
        ("target", done.target_key or "-"),
        ("status", done.status),
        ("reason", done.reason or "-"),
        ("decisions", decisions or "-"),
        ("ttft", seconds(done.ttft_s)),
        ("overhead", seconds(done.overhead_s)),
        ("queue_wait", seconds(done.queue_wait_s)),
        ("duration", seconds(done.duration_s)),
        ("prompt_tokens", "-" if done.prompt_tokens is None else done.prompt_tokens),
        ("cached_tokens", "-" if done.cached_tokens is None else done.cached_tokens),
        ("completion_tokens", "-" if done.completion_tokens is None else done.completion_tokens),
    )
    return "request " + " ".join(f"{name}={field(value)}" for name, value in fields)


class Observability:
    def __init__(
        self,
        *,
        state: State,
        sched: Scheduler,
        usage: UsageBook | None,
        clock: Clock,
        policy: str,
        keys: KeyRing,
        flags: Flags,
        peers: PeerStatuses | None = None,
    ) -> None:
        self._state = state
        self._sched = sched
        self._usage = usage
        self._clock = clock
        self._policy = policy
        self._keys = keys
        self._flags = flags
        self.metrics = Metrics(state, sched, clock.now)
        self.recent = RecentRequests()
        self._peers = peers
        if peers is not None:  # the peer series (spec §13)
            self.metrics.registry.register(PeerCollector(peers))
        self.sessions = Sessions(clock)

    def on_done(self, done: RequestDone) -> None:
        self.metrics.on_done(done)
        self.recent.add(done)
        note_done(done)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(request_line(done))

    def on_decision(self, backend: str, stage: str, outcome: str) -> None:
        self.metrics.on_decision(backend, stage, outcome)
        if (stage, outcome) in ROUTINE_DECISIONS:
            return
        if background_log.isEnabledFor(logging.DEBUG):
            background_log.debug("decision backend=%s %s=%s", backend, stage, outcome)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/status", self._status)
        app.router.add_post("/status/login", self._login)
        app.router.add_post("/status/logout", self._logout)
        app.router.add_get("/usage", self._usage_route)

    def _admin(self, request: web.Request) -> KeyEntry:
        key = self._keys.authenticate(request)
        if not key.admin:
            raise FORBIDDEN
        return key

    def _may_read_metrics(self, request: web.Request) -> None:
        """/metrics names every key and its usage: with keys configured, only an admin key or
        one marked `metrics: true` reads it (a Prometheus scrape), unless `metrics_public`."""
        table = self._keys.table
        if table.is_open or table.metrics_public:
            return
        key = self._keys.authenticate(request)
        if not (key.admin or key.metrics):
            raise METRICS_FORBIDDEN

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        try:
            self._may_read_metrics(request)
        except ClientError as err:
            return error_response(err)
        return web.Response(
            body=self.metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    def _session_viewer(self, request: web.Request) -> KeyEntry | None:
        """The admin key behind the browser's session cookie, if it is still in the config
        (same name, same digest, still admin); a session whose key went ends here."""
        session_id = request.cookies.get(COOKIE)
        session = self.sessions.get(session_id)
        if session is None:
            return None
        for entry in self._keys.table.entries:
            if entry.name == session.key_name and entry.sha256 == session.key_sha256:
                if entry.admin:
                    return entry
                break
        self.sessions.close(session_id)
        return None

    async def _status(self, request: web.Request) -> web.StreamResponse:
        session_key: str | None = None
        has_key = "Authorization" in request.headers or "x-api-key" in request.headers
        if self._keys.table.is_open or has_key:
            try:
                self._admin(request)
            except ClientError as err:
                return error_response(err)
        else:
            viewer = self._session_viewer(request)
            if viewer is None:
                if "text/html" in request.headers.get("Accept", ""):
                    return self._login_page(None, 401)
                return error_response(UNAUTHORIZED_STATUS)
            session_key = viewer.name
        page = build_page(
            state=self._state,
            sched=self._sched,
            usage=self._usage,
            recent=self.recent,
            clock=self._clock,
            policy=self._policy,
            ready=self._flags.ready(),
            draining=self._flags.draining,
            peers=self._peer_rows(),
            session_key=session_key,
        )
        # Rendering takes ~7 ms for a full page: off the event loop. The page is frozen values.
        html = await asyncio.to_thread(render_page, page)
        return web.Response(text=html, content_type="text/html")

    def _peer_rows(self) -> tuple[PeerRow, ...] | None:
        if self._peers is None:
            return None
        zone = self._usage.zone if self._usage is not None else None
        return peer_rows(self._peers(), self._clock.time(), zone)

    def _login_page(self, problem: str | None, status: int) -> web.Response:
        html = render_login(version=f"v{__version__}", problem=problem)
        return web.Response(text=html, content_type="text/html", status=status)

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        secret = form.get("key")
        keys = self._keys.table
        entry = None
        if isinstance(secret, str) and secret.strip():
            entry = keys.lookup(None, secret.strip())
        if entry is None or keys.is_open:
            return self._login_page("That key is not in this Pharos's config.", 401)
        if not entry.admin:
            return self._login_page(f"Key `{entry.name}` is not an admin key.", 403)
        response = web.Response(status=303, headers={"Location": "/status"})
        response.set_cookie(
            COOKIE,
            self.sessions.open(entry.name, entry.sha256),
            max_age=int(self.sessions.ttl_s),
            path="/status",
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.close(request.cookies.get(COOKIE))
        response = web.Response(status=303, headers={"Location": "/status"})
        response.del_cookie(COOKIE, path="/status")
        return response

    async def _usage_route(self, request: web.Request) -> web.StreamResponse:
        try:
            self._admin(request)
            if self._usage is None:
                raise ClientError(
                    404, "usage is not recorded", "invalid_request_error", "not_found"
                )
            today = dt.datetime.fromtimestamp(self._clock.time(), self._usage.zone).date()
            return usage_response(self._usage, dict(request.query), today)
        except ClientError as err:
            return error_response(err)
