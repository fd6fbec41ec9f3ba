"""Replays a recorded client's requests (tests/captures/clients/<client>/<version>/, written by
scripts/clients/sink.py) through Pharos in front of two fake engines, at layer 3 (spec §14).

Each request is sent as recorded, in recorded order, with its own headers minus the hop-by-hop
ones; the redacted Authorization becomes the rig's key. Requests that overlapped in the
recording (one arrived before another's reply ended: Open WebUI sends its title call beside the
turn) run at once: the fakes hold every reply until each request of the group has taken its
slot, one after the other in recorded order, so which slot each takes is what the recording's
overlap makes it, with no sleeping. What Pharos decided for each inference request
(RequestDone) is kept beside the record for the tests to judge.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from pharos.config import Config, Key
from pharos.fakeengine import FakeEngine
from pharos.proxy.done import RequestDone
from tests.proxy.rig import WAIT_S, Rig, add_middleware

CLIENTS = Path(__file__).resolve().parents[1] / "captures" / "clients"
KEY = "replay-key-not-secret"
KEY_NAME = "replayer"
REPLAY_CONFIG = Config(keys=(Key(name=KEY_NAME, sha256=hashlib.sha256(KEY.encode()).hexdigest()),))
DROPPED_HEADERS = frozenset({"host", "content-length", "accept-encoding", "connection"})
INFO_PATHS = ("/v1/models", "/api/tags", "/api/ps", "/api/version")
SEQ_HEADER = "X-Replay-Seq"
PREDICTED = re.compile(r"([\d.]+)(k?) cached tok")


@dataclass(frozen=True)
class Recorded:
    seq: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at_s: float | None  # when it arrived at the sink, s since the first request
    done_s: float | None  # when its reply ended

    @property
    def json(self) -> dict[str, Any]:
        value = json.loads(self.body) if self.body else {}
        return value if isinstance(value, dict) else {}

    @property
    def is_turn(self) -> bool:
        """One of the conversation's own turns: it carries tools (the side requests of Open
        WebUI and the SDK recordings' completions carry none); counting tokens is no turn."""
        return bool(self.json.get("tools")) and not self.path.endswith("/count_tokens")


@dataclass(frozen=True)
class Replayed:
    request: Recorded
    status: int
    reply: bytes
    done: RequestDone | None  # None for info routes (/v1/models, /api/tags, ...)

    def predicted_tokens(self) -> float | None:
        """What the prefix index predicted as cached, from the decision's reason line."""
        if self.done is None:
            return None
        found = PREDICTED.search(self.done.reason)
        if found is None:
            return None
        return float(found.group(1)) * (1000 if found.group(2) else 1)


def load(directory: Path) -> list[Recorded]:
    records = []
    for path in sorted(directory.glob("*.json")):
        raw = json.loads(path.read_text())
        body = raw.get("body_base64")
        data = base64.b64decode(body) if body else str(raw["body"]).encode()
        headers = {str(k): str(v) for k, v in dict(raw["headers"]).items()}
        records.append(
            Recorded(
                int(raw["seq"]),
                str(raw["method"]),
                str(raw["path"]),
                headers,
                data,
                raw["status"],
                raw.get("at_s"),
                raw.get("done_s"),
            )
        )
    return records


def replay_headers(recorded: dict[str, str]) -> dict[str, str]:
    headers = {k: v for k, v in recorded.items() if k.lower() not in DROPPED_HEADERS}
    for name in list(headers):
        if name.lower() in ("authorization", "x-api-key") and headers[name] == "<redacted>":
            headers[name] = f"Bearer {KEY}" if name.lower() == "authorization" else KEY
    return headers


async def send(r: Rig, request: Recorded) -> Replayed:
    async with r.client.request(
        request.method,
        r.base + request.path,
        data=request.body or None,
        headers={**replay_headers(request.headers), SEQ_HEADER: str(request.seq)},
    ) as response:
        reply = await response.read()
        status = response.status
        request_id = response.headers.get("X-Request-Id")
    done: RequestDone | None = None
    if not request.path.startswith(INFO_PATHS):
        assert request_id is not None, f"seq {request.seq}: no X-Request-Id"

        def finished(rid: str = request_id) -> list[RequestDone]:
            return [d for d in r.done if d.request_id == rid]

        await r.until(finished, f"seq {request.seq} recorded as done")
        (done,) = finished()
    return Replayed(request, status, reply, done)


class Gates:
    """Holds each replayed request in its engine slot until the replay lets it end, so
    requests overlap exactly as they did in the recording. Fakes are built with `sleep` and
    get `middleware`; the replay marks each request with an X-Replay-Seq header, which Pharos
    forwards with the client's other headers."""

    def __init__(self) -> None:
        self.in_slot: dict[int, asyncio.Event] = {}
        self.may_end: dict[int, asyncio.Event] = {}
        self._seq: contextvars.ContextVar[int | None] = contextvars.ContextVar("seq", default=None)

    def events(self, seq: int) -> tuple[asyncio.Event, asyncio.Event]:
        return (
            self.in_slot.setdefault(seq, asyncio.Event()),
            self.may_end.setdefault(seq, asyncio.Event()),
        )

    async def sleep(self, _seconds_s: float) -> None:
        """The fakes' only pause (prefill, each token), so the first call means the request
        has its slot; it then waits (bounded) until the replay lets it end."""
        seq = self._seq.get()
        if seq is not None:
            in_slot, may_end = self.events(seq)
            in_slot.set()
            async with asyncio.timeout(WAIT_S):
                await may_end.wait()
        await asyncio.sleep(0)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        seq = request.headers.get(SEQ_HEADER)
        token = self._seq.set(int(seq) if seq is not None else None)
        try:
            return await handler(request)
        finally:
            self._seq.reset(token)

    def gate(self, fake: FakeEngine) -> FakeEngine:
        add_middleware(fake, self.middleware)
        return fake


def timeline(records: list[Recorded]) -> list[tuple[float, int, Recorded]]:
    """(time, 0 = end / 1 = start, record) in recorded order; an end at the same time as a
    start comes first. Records without timing run one after the other."""
    events: list[tuple[float, int, Recorded]] = []
    for index, record in enumerate(records):
        at_s = record.at_s if record.at_s is not None else float(index)
        done_s = record.done_s if record.done_s is not None else at_s + 0.5
        events += [(at_s, 1, record), (max(done_s, at_s), 0, record)]
    return sorted(events, key=lambda e: (e[0], e[1], e[2].seq))


async def replay(r: Rig, records: list[Recorded], gates: Gates) -> list[Replayed]:
    """Sends each request at its recorded start and lets it end at its recorded end."""
    tasks: dict[int, asyncio.Task[Replayed]] = {}
    for _time_s, is_start, record in timeline(records):
        in_slot, may_end = gates.events(record.seq)
        if is_start:
            task = asyncio.create_task(send(r, record))
            tasks[record.seq] = task

            def running(t: asyncio.Task[Replayed] = task, e: asyncio.Event = in_slot) -> bool:
                return e.is_set() or t.done()

            await r.until(running, f"seq {record.seq} in an engine slot")
        else:
            may_end.set()
            await tasks[record.seq]
    return [tasks[record.seq].result() for record in records]
