"""One simulated run: a fleet, a workload, a router, a seed; and what it measured.

Each user's sessions run one after another (a person has one conversation open), all
users at once. The workload is fixed before the run: the turns a user would send within
`duration_s` if every reply were instant (`planned_turns`), each run to its reply. So every
policy serves the same turns and the figures compare the same prompts; a run that cut at
`duration_s` instead let a faster policy serve more turns, late conversations' first turns
nearly all uncached, and its hit ratio read lower on equal routing (hetero seed 2 before this:
cost 15 turns more than sticky, 84.25% against 84.25% on the turns both served, 83.9% against
84.2% over each run's own). Traffic that
bypasses the router (noise) runs beside it and is left out of the figures, as are the side
calls a client sends beside each turn (Open WebUI's title and tags: `Session.side_calls`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pharos.sim import clipped, sharegpt
from pharos.sim.engines import HostSpec, SimEngine
from pharos.sim.routers import BASELINES, PharosRouter, make_router
from pharos.sim.traces import THINK_S, Mix, Session, build_request, build_side_request, sessions
from pharos.sim.vloop import VirtualClock, VirtualTimeLoop, run_virtual

SCRAPE_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    hosts: tuple[HostSpec, ...]
    mix: Mix
    duration_s: float = 600.0
    source: str = "synthetic"
    """Or "sharegpt": the mix's chat and noise users replay ShareGPT; "scenario": the same
    chats cut as `make scenario`'s client sends them (pharos.sim.clipped)."""
    think_scale: float = 1.0  # "scenario" sessions: multiplies think times, as --think-scale
    shared_key: bool = False
    """Every user sends with one API key, as through `make scenario`'s Pharos (no keys
    configured: one anonymous key) or one Open WebUI; else each user has its own."""
    engines_differ: bool = False
    """The engines differ in speed or in load the router can't see: where issue 15 asks cost
    to be strictly better than sticky sessions (`pharos sim --verdict`)."""

    def sessions(self, seed: int) -> list[Session]:
        if self.source == "sharegpt":
            return sharegpt.scenario_sessions_of(self.mix, self.duration_s, seed)
        if self.source == "scenario":
            return clipped.scenario_client_sessions(
                self.mix, self.duration_s, seed, self.think_scale
            )
        return list(sessions(self.mix, self.duration_s, seed))

    @property
    def uses_sharegpt(self) -> bool:
        return self.source in ("sharegpt", "scenario")

    def with_duration(self, duration_s: float) -> Scenario:
        return dataclasses.replace(self, duration_s=duration_s)


@dataclass(frozen=True)
class Sample:
    klass: str
    user: str
    ttft_s: float
    prompt_tokens: int
    cached_tokens: int
    router_wait_s: float
    turn_index: int = 0
    engine: str = ""
    session_index: int = 0  # the user's nth session: with user and turn_index, the same turn
    # under every policy


@dataclass(frozen=True)
class Result:
    scenario: str
    policy: str
    seed: int
    samples: tuple[Sample, ...]
    model_loads: int
    engine_of_turn: dict[str, list[str]] = field(default_factory=dict)

    @property
    def cache_hit_ratio(self) -> float:
        prompt = sum(s.prompt_tokens for s in self.samples)
        return 0.0 if prompt == 0 else sum(s.cached_tokens for s in self.samples) / prompt

    def ttft(self, q: float, klass: str | None = None) -> float:
        values = sorted(s.ttft_s for s in self.samples if klass is None or s.klass == klass)
        return percentile(values, q)

    @property
    def classes(self) -> list[str]:
        return sorted({s.klass for s in self.samples})

    @property
    def fairness(self) -> float:
        """Jain's index over the mean TTFT of users of one request class (1.0 when all wait
        alike), the worst class: a classifier and an agent are not expected to wait alike."""
        by_class: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for sample in self.samples:
            by_class[sample.klass][sample.user].append(sample.ttft_s)
        return min((_jain(users) for users in by_class.values()), default=1.0)


def _jain(by_user: dict[str, list[float]]) -> float:
    means = [statistics.fmean(v) for v in by_user.values()]
    if not means or sum(means) == 0:
        return 1.0
    return sum(means) ** 2 / (len(means) * sum(m * m for m in means))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def planned_turns(
    user_sessions: Sequence[Session], duration_s: float, open_after_s: float
) -> list[tuple[Session, int]]:
    """Each session, in order, with how many of its turns are sent before `duration_s` on a
    fleet that answers instantly (think times only): the same for every policy."""
    counts = planned_turn_counts(
        ((s.start_s, [t.think_s for t in s.turns]) for s in user_sessions),
        duration_s,
        open_after_s,
    )
    return list(zip(user_sessions, counts, strict=False))


def planned_turn_counts(
    user_sessions: Iterable[tuple[float, Sequence[float]]], duration_s: float, open_after_s: float
) -> list[int]:
    """planned_turns for one user's sessions given as (start_s, each turn's think time): a
    session opens open_after_s after the last turn was sent at the earliest, at start_s at the
    earliest; the list ends with the first session cut short. Also the real-engine
    scenario's plan (benchmarks/scenario)."""
    counts: list[int] = []
    sent_s = 0.0
    for start_s, thinks_s in user_sessions:
        sent_s = max(sent_s + open_after_s, start_s)
        turns = 0
        for think_s in thinks_s:
            sent_s += think_s
            if sent_s >= duration_s:
                break
            turns += 1
        if turns == 0:
            break
        counts.append(turns)
        if turns < len(thinks_s):
            break
    return counts


async def _simulate(scenario: Scenario, policy: str, seed: int, tie_stream: int = 0) -> Result:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    clock = VirtualClock(loop)
    engines = [SimEngine(spec, loop) for spec in scenario.hosts]
    router = make_router(
        policy, engines, clock, seed, shared_key=scenario.shared_key, tie_stream=tie_stream
    )
    # the scenario's client opens the next chat one think time after the last reply; a
    # simulated person at least THINK_S[0] after it
    open_after_s = 0.0 if scenario.source == "scenario" else THINK_S[0]
    samples: list[Sample] = []
    engine_of_turn: dict[str, list[str]] = defaultdict(list)

    async def run_user(user_sessions: list[Session]) -> None:
        plan = planned_turns(user_sessions, scenario.duration_s, open_after_s)
        for session_index, (session, turns) in enumerate(plan):
            # a person opens the next chat a few seconds after the last reply at the earliest
            await asyncio.sleep(max(open_after_s, session.start_s - clock.now()))
            for index, turn in enumerate(session.turns[:turns]):
                await asyncio.sleep(turn.think_s)
                request = build_request(session, index)
                sent_s = clock.now()
                if session.bypasses_router:
                    await engines[0].serve(request.prompt)
                    continue
                routed = await router.send(request)
                samples.append(
                    Sample(
                        session.klass,
                        session.user,
                        routed.router_wait_s + routed.served.first_token_s,
                        routed.served.prompt_tokens,
                        routed.served.cached_tokens,
                        routed.router_wait_s,
                        index,
                        routed.engine.spec.name,
                        session_index,
                    )
                )
                engine_of_turn[f"{session.user}#{session_index}"].append(routed.engine.spec.name)
                assert clock.now() >= sent_s
                for which in range(session.side_calls):
                    side = build_side_request(session, index, which)
                    side_tasks.add(asyncio.create_task(router.send(side)))

    async def scrape_forever() -> None:
        while True:
            await asyncio.sleep(SCRAPE_INTERVAL_S)
            router.scrape()

    side_tasks: set[asyncio.Task[object]] = set()  # side calls: served, left out of the figures
    by_user: dict[str, list[Session]] = defaultdict(list)
    for session in scenario.sessions(seed):
        by_user[session.user].append(session)
    scraper = asyncio.create_task(scrape_forever()) if isinstance(router, PharosRouter) else None
    try:
        await asyncio.gather(
            *(run_user(sorted(s, key=lambda x: x.start_s)) for s in by_user.values())
        )
        await asyncio.gather(*side_tasks)
    finally:
        if scraper is not None:
            scraper.cancel()
    return Result(
        scenario.name,
        policy,
        seed,
        tuple(samples),
        sum(e.loads for e in engines),
        dict(engine_of_turn),
    )


def simulate(scenario: Scenario, policy: str, seed: int, tie_stream: int = 0) -> Result:
    """Run one (scenario, policy, seed) on its own virtual-time loop; deterministic.

    `tie_stream`: another draw of the seeds Pharos's requests break exact ties with (0: the
    default run); the workload, the engines and the baselines' runs stay the same. With the
    policy unchanged, streams 0-3 lost 155 / 159 / 180 / 159 `--verdict` comparisons over seeds
    1-20 (README, "How much of the verdict is ties")."""
    return run_virtual(_simulate(scenario, policy, seed, tie_stream))


def simulate_streams(
    scenario: Scenario, policies: Sequence[str], seeds: Sequence[int], streams: Sequence[int]
) -> list[list[Result]]:
    """Per tie stream, every policy's run on every seed, in that order. A baseline breaks no
    ties by the stream (tests/sim/test_tie_stream.py): it runs once and serves every stream."""
    baseline_runs = {
        (p, s): simulate(scenario, p, s) for p in policies if p in BASELINES for s in seeds
    }
    return [
        [
            baseline_runs[(p, s)] if p in BASELINES else simulate(scenario, p, s, tie_stream=k)
            for p in policies
            for s in seeds
        ]
        for k in streams
    ]
