"""Routers the simulator compares: Pharos's own policies and the baselines it must beat.

Pharos runs its real code: the scheduler (fair queue, leases, occupancy, learning), the
prefix index and the policy, over SimTargets. The baselines send every request straight
to an engine, which queues what it can't run, as a plain load balancer would:
- round-robin: the next engine serving the model;
- least-outstanding: fewest requests this router has in flight there (LiteLLM's
  `least-busy` strategy counts the same thing);
- sticky: a hash of the user picks the engine (session affinity), salted with the seed;
- cache-aware: SGLang gateway (SMG) style: when load is balanced, the engine whose
  router-side prefix tree matches at least `CACHE_THRESHOLD` of the prompt, else the least
  loaded; when load is imbalanced, the least loaded. Thresholds are SMG's shape scaled to
  2-slot engines (its defaults, 64 requests absolute and 1.5x relative, never trigger on a
  fleet this small).
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from pharos.clock import Clock
from pharos.engine.usage import Usage
from pharos.prefix import Chain, PrefixIndex
from pharos.sched import Scheduler
from pharos.sched.types import Feedback, RouteRequest
from pharos.sim.engines import Flavour, Prompt, Served, SimEngine
from pharos.sim.targets import SimTargets
from pharos.sim.traces import SimRequest
from pharos.sim.warming import Warmer
from pharos.state.view import TargetView

CACHE_THRESHOLD = 0.5
BALANCE_ABS = 2
BALANCE_REL = 1.5
TREE_CAP_HASHES = 50_000

PHAROS_POLICIES = ("cost", "least-load")

BASELINES = ("round-robin", "least-outstanding", "sticky", "cache-aware")


@dataclass(frozen=True)
class WarmVariant:
    """cost with pre-emptive warming (pharos.sim.warming), as `simulate` policy names only:
    measured not to pay (docs/routing-log.md, "Pre-emptive warming"), so not in `pharos sim`'s
    policies."""

    reload_loads: float = 1.0
    unload_spare_only: bool = False


WARM_VARIANTS: Mapping[str, WarmVariant] = MappingProxyType(
    {
        "cost-warm": WarmVariant(),  # an unloaded idle model charged one reload
        "cost-warm-x2": WarmVariant(reload_loads=2.0),
        "cost-warm-spare": WarmVariant(unload_spare_only=True),
    }
)


@dataclass(frozen=True)
class Routed:
    engine: SimEngine
    served: Served
    router_wait_s: float


class Router(Protocol):
    name: str

    async def send(self, request: SimRequest) -> Routed: ...

    def scrape(self) -> None:
        """A scrape round (only Pharos reads engines)."""
        ...


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def sticky_index(salt: str, user: str, engines: int) -> int:
    """Which engine sticky sends `user` to. The salt is the seed: the scenarios' users are
    named user0, user1, ... on every seed, and unsalted their hash put 5 of chat's 6 users on
    e1 on all 20 seeds: one draw of sticky's map, judged 20 times. That draw is a poor map
    for equal engines (chat: sticky's mean p95 7.67 s, 4.57 over per-seed draws) and a good
    one for noisy, whose unseen client loads e0 (7.86 s, 10.07 over per-seed draws). A team's
    names are as arbitrary to a hash as a seed (docs/routing-log.md, "Sticky's map, one draw
    per seed")."""
    return _stable_hash(salt + user) % engines


SHARED_KEY = "anonymous"


TIE_STREAM_STRIDE = 1000
"""Stream k draws its requests' tie-break seeds from random.Random(seed + 1000 k)."""


class PharosRouter:
    def __init__(
        self,
        policy: str,
        engines: Sequence[SimEngine],
        clock: Clock,
        seed: int,
        *,
        shared_key: bool = False,
        warm: WarmVariant | None = None,
        name: str | None = None,
        tie_stream: int = 0,
    ):
        self.name = policy if name is None else name
        self._shared_key = shared_key
        self._clock = clock
        self._targets = SimTargets(engines, clock.now)
        self._prefix = PrefixIndex(clock=clock)
        self._sched = Scheduler(self._targets, self._prefix, clock, policy=policy)
        # each request's RouteReq.seed, which breaks exact ties in the policy: another stream
        # is another draw of them over the same workload (`pharos sim --tie-stream`)
        self._rng = random.Random(seed + TIE_STREAM_STRIDE * tie_stream)
        self._models = sorted({m for e in engines for m in e.spec.models})
        self._warmer = None
        if warm is not None:
            self._warmer = Warmer(
                self._targets,
                self._sched,
                clock,
                self._warm_up,
                seed=seed,
                reload_loads=warm.reload_loads,
                unload_spare_only=warm.unload_spare_only,
            )

    def scrape(self) -> None:
        """A scrape round, as serve's: the queue re-run, then the warm-up decision."""
        self._targets.scrape()
        self._sched.kick()
        if self._warmer is not None:
            self._warmer.round(self._models)

    @property
    def warm_ups(self) -> int:
        """Warm-ups sent (0 without warming)."""
        return 0 if self._warmer is None else self._warmer.sent

    async def _warm_up(self, view: TargetView) -> Feedback:
        """A warm-up: one token for the model, a prompt of a few tokens."""
        engine = self._targets.engine_of(view.target_id)
        served = await engine.serve(_warm_up_prompt(view.model))
        return _feedback(engine, served)

    async def send(self, request: SimRequest) -> Routed:
        started_s = self._clock.now()
        route = RouteRequest(
            model=request.session.model,
            prompt_tokens=request.estimated_tokens,
            chain=Chain(request.chain_hashes, request.chain_cum_bytes),
            seed=self._rng.getrandbits(64),
        )
        key = SHARED_KEY if self._shared_key else request.session.user
        lease = await self._sched.acquire(key, 1, route)
        waited_s = self._clock.now() - started_s
        engine = self._targets.engine_of(lease.target.target_id)
        try:
            served = await engine.serve(request.prompt)
        except BaseException:
            lease.abandon()
            raise
        lease.release(_feedback(engine, served))
        return Routed(engine, served, waited_s)


def _warm_up_prompt(model: str) -> Prompt:
    return Prompt(model, (_WARM_UP_HASH,), (8,), 1, _WARM_UP_HASH + 1, 1)


_WARM_UP_HASH = _stable_hash("pharos warm-up")


def _feedback(engine: SimEngine, served: Served) -> Feedback:
    """What the tap reads from each flavour's reply (ENGINE-FACTS.md): llama.cpp timings
    (prompt_ms, cache_n), Ollama's durations and cached count, vLLM's cached tokens only.
    TTFT and duration are measured from dispatch, after the router's queue."""
    flavour = engine.spec.flavour
    return Feedback(
        status=200,
        ttft_s=served.first_token_s,
        duration_s=served.duration_s,
        usage=Usage(
            prompt_tokens=served.prompt_tokens,
            cached_tokens=served.cached_tokens,
            completion_tokens=served.completion_tokens,
            engine_load_s=(served.load_s or 0.0) if flavour is Flavour.OLLAMA else None,
            engine_prefill_s=served.prefill_s if flavour is not Flavour.VLLM else None,
        ),
    )


class DirectRouter:
    """A baseline: picks an engine at once and lets it queue."""

    def __init__(self, strategy: str, engines: Sequence[SimEngine], seed: int) -> None:
        if strategy not in BASELINES:
            raise ValueError(f"unknown baseline {strategy!r}, expected one of {BASELINES}")
        self.name = strategy
        self._engines = list(engines)
        self._outstanding = {id(e): 0 for e in engines}
        self._next: dict[str, int] = {}
        self._trees: dict[int, OrderedDict[int, None]] = {id(e): OrderedDict() for e in engines}
        self._rng = random.Random(seed)
        self._sticky_salt = f"{seed}/"

    def scrape(self) -> None:
        return None

    def _serving(self, model: str) -> list[SimEngine]:
        return [e for e in self._engines if e.serves(model)]

    def _least_outstanding(self, engines: Sequence[SimEngine]) -> SimEngine:
        fewest = min(self._outstanding[id(e)] for e in engines)
        return self._rng.choice([e for e in engines if self._outstanding[id(e)] == fewest])

    def _choose(self, request: SimRequest) -> SimEngine:
        engines = self._serving(request.session.model)
        if self.name == "round-robin":
            turn = self._next.get(request.session.model, 0)
            self._next[request.session.model] = turn + 1
            return engines[turn % len(engines)]
        if self.name == "sticky":
            return engines[sticky_index(self._sticky_salt, request.session.user, len(engines))]
        if self.name == "least-outstanding":
            return self._least_outstanding(engines)
        return self._cache_aware(engines, request)

    def _cache_aware(self, engines: Sequence[SimEngine], request: SimRequest) -> SimEngine:
        loads = [self._outstanding[id(e)] for e in engines]
        if max(loads) - min(loads) > BALANCE_ABS and max(loads) > BALANCE_REL * min(loads):
            return self._least_outstanding(engines)
        total = request.chain_cum_bytes[-1] if request.chain_cum_bytes else 0
        best, best_bytes = None, 0
        for engine in engines:
            tree = self._trees[id(engine)]
            matched = 0
            for link, covered in zip(request.chain_hashes, request.chain_cum_bytes, strict=True):
                if link not in tree:
                    break
                matched = covered
            if matched > best_bytes:
                best, best_bytes = engine, matched
        if best is not None and total > 0 and best_bytes / total >= CACHE_THRESHOLD:
            return best
        return self._least_outstanding(engines)

    def _insert(self, engine: SimEngine, request: SimRequest) -> None:
        tree = self._trees[id(engine)]
        for link in request.chain_hashes:
            tree[link] = None
            tree.move_to_end(link)
        while len(tree) > TREE_CAP_HASHES:
            tree.popitem(last=False)

    async def send(self, request: SimRequest) -> Routed:
        engine = self._choose(request)
        self._insert(engine, request)
        self._outstanding[id(engine)] += 1
        try:
            served = await engine.serve(request.prompt)
        finally:
            self._outstanding[id(engine)] -= 1
        return Routed(engine, served, 0.0)


def make_router(
    policy: str,
    engines: Sequence[SimEngine],
    clock: Clock,
    seed: int,
    *,
    shared_key: bool = False,
    tie_stream: int = 0,
) -> PharosRouter | DirectRouter:
    """`tie_stream`: Pharos's requests' tie-break seeds (PharosRouter); baselines have none."""
    if policy in PHAROS_POLICIES:
        return PharosRouter(
            policy, engines, clock, seed, shared_key=shared_key, tie_stream=tie_stream
        )
    warm = WARM_VARIANTS.get(policy)
    if warm is not None:
        return PharosRouter(
            "cost",
            engines,
            clock,
            seed,
            shared_key=shared_key,
            warm=warm,
            name=policy,
            tie_stream=tie_stream,
        )
    return DirectRouter(policy, engines, seed)
