"""Where each turn goes, per policy, on a freshly started fleet (cold caches every time).

- pharos-cost, pharos-least-load: Pharos in this process, the engines as static backends;
  which engine served a turn comes from Pharos's own per-request report (on_done), matched
  by the X-Request-Id the client sent.
- round-robin: no router, turn by turn across the engines.
- sticky: no router, every turn of a user to the engine its name hashes to.
The bypassing client (fleet bypass) always goes straight to engine 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import msgspec
from benchmarks.scenario.client import REQUEST_TIMEOUT_S, Route, TurnResult, replay, user_key
from benchmarks.scenario.conversations import Conversation
from benchmarks.scenario.fleets import Fleet, fleet_running, model_loads

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Config
from pharos.engine.types import Kind
from pharos.proxy.done import RequestDone
from pharos.sim.routers import sticky_index
from pharos.state import BackendSpec

POLICIES = ("pharos-cost", "pharos-least-load", "round-robin", "sticky")
OVERRUN_FACTOR = 4.0
"""A run's bound: its planned turns (conversations.planned) get this many times the duration,
then whatever is still unsent is dropped (it shows as fewer turns served)."""
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PolicyRun:
    policy: str
    engines: tuple[str, ...]  # base URLs, engine 0 first
    turns: tuple[TurnResult, ...]
    load_before: float  # 1-minute load average as the traffic started
    load_after: float
    wall_s: float
    model_loads: int | None = None  # router fleets: loads the routers logged; None: not counted


def _direct_route(policy: str, bases: list[str], bypass_base: str) -> Route:
    turn = itertools.count()

    def base_for(conv: Conversation) -> str:
        if conv.bypasses_router:
            return bypass_base
        if policy == "sticky":
            # unsalted: the same map on every run (the simulator salts it with the seed)
            return bases[sticky_index("", conv.user, len(bases))]
        return bases[next(turn) % len(bases)]

    return base_for


async def _traffic(
    policy: str,
    conversations: list[Conversation],
    route: Route,
    http: aiohttp.ClientSession,
    duration_s: float,
    echo: bool,
    keyed: bool = False,
) -> list[TurnResult]:
    by_user: dict[str, list[Conversation]] = {}
    for conv in conversations:
        by_user.setdefault(conv.user, []).append(conv)
    out: list[TurnResult] = []
    started = time.monotonic()
    end_at = started + OVERRUN_FACTOR * duration_s
    await asyncio.gather(
        *(
            replay(policy, mine, route, http, started, end_at, out, echo, keyed)
            for mine in by_user.values()
        )
    )
    return out


async def run_policy(
    policy: str,
    fleet: Fleet,
    conversations: list[Conversation],
    duration_s: float,
    log_dir: Path,
    tag: str,
    echo: bool = False,
    key_per_user: bool = False,
) -> PolicyRun:
    """`key_per_user`: Pharos runs with one API key per user and each user sends theirs (as a
    team gives each person a key); without it every client is Pharos's one anonymous key."""
    async with fleet_running(fleet, log_dir, tag) as bases:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            load_before = os.getloadavg()[0]
            began = time.monotonic()
            if policy.startswith("pharos-"):
                turns = await _through_pharos(
                    policy, bases, conversations, http, duration_s, echo, key_per_user
                )
            else:
                route = _direct_route(policy, bases, bases[0])
                turns = await _traffic(policy, conversations, route, http, duration_s, echo)
            wall_s = time.monotonic() - began
    loads = model_loads(fleet, log_dir, tag)
    return PolicyRun(
        policy, tuple(bases), tuple(turns), load_before, os.getloadavg()[0], wall_s, loads
    )


async def _through_pharos(
    policy: str,
    bases: list[str],
    conversations: list[Conversation],
    http: aiohttp.ClientSession,
    duration_s: float,
    echo: bool,
    key_per_user: bool,
) -> list[TurnResult]:
    served: dict[str, RequestDone] = {}

    def on_done(done: RequestDone) -> None:
        if done.request_id is not None:
            served[done.request_id] = done

    specs = [BackendSpec(url=base, kind=Kind.LLAMACPP) for base in bases]
    users = sorted({conv.user for conv in conversations if not conv.bypasses_router})
    keys = [
        {"name": user, "sha256": hashlib.sha256(user_key(user).encode()).hexdigest()}
        for user in users
    ]
    config = msgspec.convert(
        {"policy": policy.removeprefix("pharos-"), "keys": keys if key_per_user else []}, Config
    )
    pharos = Pharos(config, backends=specs, options=RuntimeOptions(on_done=on_done))
    async with running(pharos) as pharos_base:
        if not await pharos.wait_ready(READY_TIMEOUT_S):
            raise RuntimeError(f"Pharos saw no engine ready within {READY_TIMEOUT_S:.0f} s")

        def base_for(conv: Conversation) -> str:
            return bases[0] if conv.bypasses_router else pharos_base

        turns = await _traffic(
            policy, conversations, base_for, http, duration_s, echo, key_per_user
        )
    return [
        t if t.sent_to != pharos_base else _as_served(t, served.get(t.request_id)) for t in turns
    ]


def _as_served(turn: TurnResult, done: RequestDone | None) -> TurnResult:
    if done is None:
        return turn
    return dataclasses.replace(
        turn,
        engine=done.backend_url,
        queue_wait_s=done.queue_wait_s,
        reason=done.reason,
        decisions=done.decisions,
    )
