"""The simulator's sessions on real engines: Pharos against round-robin and sticky sessions.

Starts N llama-server b11312 (the live tests' build, SmolLM2-135M; cold caches for every
policy), replays the same seeded multi-turn chats (pharos.sim.traces) through Pharos, or
straight to the engines (round-robin, sticky by user), and prints what the clients saw
(TTFT to the first content chunk) and what the engines reported (timings.cache_n and
prompt_n: hit = cached / (cached + prefilled)). Reports, never asserts.

    .venv/bin/python -m benchmarks.scenario_real                       # 2 equal engines
    .venv/bin/python -m benchmarks.scenario_real --threads 2,1         # engines differ in speed
    .venv/bin/python -m benchmarks.scenario_real --bypass              # a client loads engine 0
Needs `bash scripts/engines/install-all.sh` first (make live does it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import msgspec
from tests.live.engines import SERVED_MODEL, RunningEngine, start_llamacpp

from pharos.cmd.runtime import Pharos, running
from pharos.config import Config
from pharos.engine.types import Kind
from pharos.sim.traces import Mix, Session, sessions
from pharos.state import BackendSpec

MAX_COMPLETION_TOKENS = 48
MAX_TURNS = 4
MAX_TEXT_CHARS = 400  # two slots of -c 4096 hold 2,048 tokens each


@dataclass(frozen=True)
class Turn:
    policy: str
    user: str
    ttft_s: float
    cached: int | None
    prefilled: int | None


class _Chunk(msgspec.Struct):
    choices: list[dict[str, object]] = []
    timings: dict[str, float] | None = None


async def _chat(
    http: aiohttp.ClientSession, base: str, messages: list[dict[str, str]], max_tokens: int
) -> tuple[float, int | None, int | None]:
    body = {
        "model": SERVED_MODEL,
        "messages": messages,
        "stream": True,
        "max_tokens": max_tokens,
        # Asked for by the client, so Pharos leaves the stream whole: llama.cpp sends its
        # timings on the usage chunk, which Pharos strips when it asked for usage itself.
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    ttft: float | None = None
    cached = prefilled = None
    async with http.post(base + "/v1/chat/completions", json=body) as reply:
        reply.raise_for_status()
        async for line in reply.content:
            if not line.startswith(b"data: {"):
                continue
            chunk = msgspec.json.decode(line[6:], type=_Chunk)
            if ttft is None and any(c.get("delta") for c in chunk.choices):
                ttft = time.perf_counter() - sent
            if chunk.timings is not None:
                cached = int(chunk.timings.get("cache_n", 0))
                prefilled = int(chunk.timings.get("prompt_n", 0))
    return (time.perf_counter() - sent if ttft is None else ttft), cached, prefilled


async def _run_user(
    policy: str,
    user_sessions: list[Session],
    pick_base: Callable[[str], str],
    http: aiohttp.ClientSession,
    end_at: float,
    out: list[Turn],
    counted: bool,
) -> None:
    started = time.monotonic()
    for session in user_sessions:
        await asyncio.sleep(max(0.0, started + session.start_s - time.monotonic()))
        messages = [{"role": "system", "content": session.system}]
        for turn in session.turns[:MAX_TURNS]:
            await asyncio.sleep(turn.think_s)
            if time.monotonic() >= end_at:
                return
            messages.append({"role": "user", "content": turn.user_text[:MAX_TEXT_CHARS]})
            base = pick_base(session.user)
            try:
                ttft, cached, prefilled = await _chat(
                    http, base, messages, min(MAX_COMPLETION_TOKENS, turn.completion_tokens)
                )
            except aiohttp.ClientError as err:
                print(f"  {policy} {session.user}: {type(err).__name__}", file=sys.stderr)
                return
            if counted:
                out.append(Turn(policy, session.user, ttft, cached, prefilled))
            messages.append({"role": "assistant", "content": turn.reply_text[:MAX_TEXT_CHARS]})


async def run_policy(policy: str, args: argparse.Namespace, log_dir: Path) -> list[Turn]:
    threads = [int(t) for t in args.threads.split(",")]
    engines: list[RunningEngine] = []
    try:
        for index, count in enumerate(threads):
            engines.append(
                await asyncio.to_thread(
                    start_llamacpp, log_dir, name=f"{policy}-e{index}", threads=count
                )
            )
        mix = Mix(chat_users=args.users, noise_users=1 if args.bypass else 0)
        by_user: dict[str, list[Session]] = {}
        for session in sessions(mix, args.duration, args.seed):
            by_user.setdefault(session.user, []).append(session)
        out: list[Turn] = []
        end_at = time.monotonic() + args.duration
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if policy.startswith("pharos-"):
                specs = [BackendSpec(url=e.base_url, kind=Kind.LLAMACPP) for e in engines]
                config = msgspec.convert({"policy": policy.removeprefix("pharos-")}, Config)
                pharos = Pharos(config, backends=specs)
                async with running(pharos) as base:
                    await pharos.wait_ready(30.0)
                    await _traffic(policy, by_user, lambda _u: base, engines, http, end_at, out)
            else:
                turn = iter(range(1 << 30))
                bases = [e.base_url for e in engines]

                def pick(user: str) -> str:
                    if policy == "sticky":
                        digest = hashlib.sha256(user.encode()).digest()
                        return bases[int.from_bytes(digest[:8], "big") % len(bases)]
                    return bases[next(turn) % len(bases)]

                await _traffic(policy, by_user, pick, engines, http, end_at, out)
        return out
    finally:
        for engine in engines:
            engine.stop()


async def _traffic(
    policy: str,
    by_user: dict[str, list[Session]],
    pick: Callable[[str], str],
    engines: list[RunningEngine],
    http: aiohttp.ClientSession,
    end_at: float,
    out: list[Turn],
) -> None:
    tasks = []
    for user, user_sessions in by_user.items():
        noise = user.startswith("noise")
        chooser: Callable[[str], str] = (lambda _u: engines[0].base_url) if noise else pick
        tasks.append(_run_user(policy, user_sessions, chooser, http, end_at, out, not noise))
    await asyncio.gather(*tasks)


def report(turns: list[Turn]) -> str:
    rows = [("policy", "TTFT p50 s", "TTFT p95 s", "engine cache hit", "turns")]
    for policy in dict.fromkeys(t.policy for t in turns):
        mine = [t for t in turns if t.policy == policy]
        ttfts = sorted(t.ttft_s for t in mine)
        cached = sum(t.cached or 0 for t in mine)
        total = cached + sum(t.prefilled or 0 for t in mine)
        p95 = ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))]
        rows.append(
            (
                policy,
                f"{statistics.median(ttfts):.2f}",
                f"{p95:.2f}",
                f"{100 * cached / total:.1f}%" if total else "unknown",
                str(len(mine)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="pharos-cost,round-robin,sticky")
    parser.add_argument("--threads", default="1,1", help="llama-server threads per engine")
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--duration", type=float, default=240.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bypass", action="store_true", help="a client loads engine 0 directly")
    args = parser.parse_args()
    turns: list[Turn] = []
    with tempfile.TemporaryDirectory(prefix="pharos-scenario-") as log_dir:
        for policy in args.policies.split(","):
            print(f"running {policy} for {args.duration:.0f} s ...", file=sys.stderr)
            turns += asyncio.run(run_policy(policy, args, Path(log_dir)))
    print(
        f"# {args.users} users, engines with threads {args.threads}, "
        f"{'bypass client on e0, ' if args.bypass else ''}{args.duration:.0f} s, seed {args.seed}"
    )
    print(report(turns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
