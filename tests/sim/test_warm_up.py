"""The Warmer on simulated Ollama hosts, on virtual time: it sends one warm-up per target at a
time through the scheduler, bounded, none while draining; and what it did on cold-burst."""

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import pytest

from pharos.prefix import PrefixIndex
from pharos.sched import Feedback, RouteRequest, Scheduler
from pharos.sim import SCENARIOS, simulate
from pharos.sim.engines import Flavour, HostSpec, Prompt, SimEngine
from pharos.sim.targets import SimTargets
from pharos.sim.vloop import VirtualClock, VirtualTimeLoop, run_virtual
from pharos.sim.warming import Warmer
from pharos.state.view import TargetView

LOAD_S = 8.0


def host(name: str, *models: tuple[str, float]) -> HostSpec:
    return HostSpec(
        name,
        Flavour.OLLAMA,
        models=tuple(m for m, _ in models),
        model_gb=tuple(gb for _, gb in models),
        memory_gb=9.0,
        load_s=LOAD_S,
    )


class Fleet:
    """Two Ollama hosts serving model c, a scheduler over them, and a warmer. o1 also holds
    model d, which c fits beside only by unloading it: the cost policy's own second replica
    (a host with room beside everything loaded) never loads c there."""

    def __init__(self, send: Callable[["Fleet", TargetView], Awaitable[Feedback]] | None = None):
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        self.clock = VirtualClock(loop)
        self.engines = [
            SimEngine(host("o0", ("c", 4.0)), loop),
            SimEngine(host("o1", ("c", 4.0), ("d", 6.0)), loop),
        ]
        self.targets = SimTargets(self.engines, self.clock.now)
        self.sched = Scheduler(self.targets, PrefixIndex(clock=self.clock), self.clock)
        self.sends: list[int] = []
        chosen = send or Fleet.serve_warm_up

        async def recorded(view: TargetView) -> Feedback:
            self.sends.append(view.target_id)
            return await chosen(self, view)

        self.warmer = Warmer(self.targets, self.sched, self.clock, recorded, timeout_s=30.0)

    async def serve_warm_up(self, view: TargetView) -> Feedback:
        engine = self.targets.engine_of(view.target_id)
        served = await engine.serve(Prompt("c", (7,), (8,), 1, 8, 1))
        return Feedback(200, served.first_token_s, served.duration_s)

    async def client(self, index: int) -> int:
        """One request for c through the scheduler; the engine it was served on."""
        lease = await self.sched.acquire(f"k{index}", 1, RouteRequest("c", 100, None, index))
        engine = self.targets.engine_of(lease.target.target_id)
        served = await engine.serve(Prompt("c", (100 + index,), (100,), 300, 200 + index, 50))
        lease.release(Feedback(200, served.first_token_s, served.duration_s))
        return self.engines.index(engine)

    def scrape_round(self) -> None:
        self.targets.scrape()
        self.sched.kick()
        self.warmer.round(["c"])


async def warm_o0(fleet: Fleet) -> None:
    """d loaded on o1, then c on o0 (o1 would unload d for it: charged twice)."""
    await fleet.engines[1].serve(Prompt("d", (1,), (8,), 1, 2, 1))
    fleet.scrape_round()
    assert await fleet.client(0) == 0
    fleet.scrape_round()


def test_a_burst_behind_the_one_warm_replica_warms_the_other_host_once() -> None:
    # 7 requests of ~9 s each on o0's 2 slots: the 5 waiting would each wait 3-15 s, under
    # the 16 s a load that unloads d is charged, so no request's pick loads o1; together
    # they wait 58.5 s, 38.6 with o1 ready at 8 s: 20 s saved against d's 8 s reload
    async def main() -> tuple[list[int], list[int], int]:
        fleet = Fleet()
        await warm_o0(fleet)
        burst = [asyncio.create_task(fleet.client(i)) for i in range(1, 8)]
        served_on: list[int] = []
        for _ in range(40):
            await asyncio.sleep(1.0)
            fleet.scrape_round()
            assert len(fleet.warmer.warming) <= 1
        served_on = [await t for t in burst]
        assert fleet.warmer.failed == 0
        return served_on, fleet.sends, fleet.engines[1].loads

    served_on, sends, o1_loads = run_virtual(main())
    assert sends == [1]  # one warm-up, to o1's c, never repeated while it was in flight
    assert o1_loads == 2  # d, then c
    assert served_on.count(1) > 0  # the burst used the replica it warmed


def test_no_warm_up_is_sent_while_draining() -> None:
    async def main() -> list[int]:
        fleet = Fleet()
        await warm_o0(fleet)
        fleet.warmer.drain()
        burst = [asyncio.create_task(fleet.client(i)) for i in range(1, 8)]
        for _ in range(10):
            await asyncio.sleep(1.0)
            fleet.scrape_round()
        for task in burst:
            await task
        return fleet.sends

    assert run_virtual(main()) == []


def test_a_warm_up_that_never_answers_is_given_up_after_its_timeout_and_frees_its_slot() -> None:
    async def never(_fleet: Fleet, _view: TargetView) -> Feedback:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def main() -> tuple[frozenset[int], int, frozenset[int], int]:
        fleet = Fleet(send=never)
        await warm_o0(fleet)
        burst = [asyncio.create_task(fleet.client(i)) for i in range(1, 8)]
        await asyncio.sleep(1.0)
        fleet.scrape_round()
        await asyncio.sleep(0.1)  # the warm-up took its lease; no kick since: no client on o1
        warming, held = fleet.warmer.warming, fleet.sched.inflight(1)
        for task in burst:
            task.cancel()
        await asyncio.gather(*burst, return_exceptions=True)
        await asyncio.sleep(30.0)
        return warming, held, fleet.warmer.warming, fleet.sched.inflight(1)

    warming, held, warming_after, held_after = run_virtual(main())
    assert (warming, held) == (frozenset({1}), 1)  # the warm-up's lease counts on its target
    assert (warming_after, held_after) == (frozenset(), 0)  # given up at 30 s, lease returned


# cold-burst's own 8 burst users no longer leave a host cold to warm (seeds 1-12): since the
# room tie break (README, "A cold load goes where it leaves its host the most room") cost's own
# picks load c beside a chat model on two hosts. With 10, as benchmarks/sim_warm.py runs it:
# burst p95 14.28 / 15.75 s under cost, 11.50 / 12.88 s warmed (seeds 1, 2).
BURST_USERS = 10


@pytest.mark.parametrize("seed", [1, 2])
def test_on_cold_burst_warming_serves_the_burst_sooner_and_its_replica_is_used(seed: int) -> None:
    base = SCENARIOS["cold-burst"]
    scenario = dataclasses.replace(base, mix=dataclasses.replace(base.mix, burst_users=BURST_USERS))
    cost, warm = simulate(scenario, "cost", seed), simulate(scenario, "cost-warm", seed)
    assert warm.ttft(0.95, "burst") < cost.ttft(0.95, "burst")
    assert warm.model_loads > cost.model_loads  # the warm-up's load, and what it unloaded
    burst_hosts = {s.engine for s in warm.samples if s.klass == "burst"}
    assert len(burst_hosts) > len({s.engine for s in cost.samples if s.klass == "burst"})


def test_a_second_round_before_the_warm_up_has_its_lease_sends_no_second_one() -> None:
    async def main() -> list[int]:
        fleet = Fleet()
        await warm_o0(fleet)
        burst = [asyncio.create_task(fleet.client(i)) for i in range(1, 8)]
        await asyncio.sleep(1.0)
        fleet.scrape_round()
        fleet.scrape_round()  # no await between: the first warm-up's task has not run yet
        await asyncio.gather(*burst)
        assert fleet.warmer.failed == 0
        return fleet.sends

    assert run_virtual(main()) == [1]
