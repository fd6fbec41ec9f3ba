"""Pre-emptive warming against the cost policy alone, on cold-burst and its variants (issue 15,
spec §16 "Should a cold target ever be chosen pre-emptively"). Reported, not asserted.

Run: .venv/bin/python benchmarks/sim_warm.py [--seeds 1,...,10] [--bursts 6,8,10,12]

Per burst size (users bursting on model c at 120 s, cold-burst's hosts: 9 GB, each holding 2
of the 3 models; then hosts with room for all three, 13 GB) and policy: comparisons lost
against the best baseline (`pharos sim --verdict`'s rule, summed over the seeds), model loads
summed, and the burst and chat classes' TTFT p50 / p95 / p99 with every seed pooled.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

from pharos.sim import BASELINES, SCENARIOS, Result, simulate, verdict
from pharos.sim.routers import WARM_VARIANTS
from pharos.sim.run import Scenario, percentile

POLICIES = ("cost", *WARM_VARIANTS)


def variant(burst_users: int, memory_gb: float) -> Scenario:
    base = SCENARIOS["cold-burst"]
    return dataclasses.replace(
        base,
        hosts=tuple(dataclasses.replace(h, memory_gb=memory_gb) for h in base.hosts),
        mix=dataclasses.replace(base.mix, burst_users=burst_users),
    )


def pooled(results: Sequence[Result], klass: str) -> str:
    values = sorted(s.ttft_s for r in results for s in r.samples if s.klass == klass)
    return "/".join(f"{percentile(values, q):.2f}" for q in (0.5, 0.95, 0.99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10")
    parser.add_argument("--bursts", default="6,8,10,12")
    parser.add_argument("--memory", default="9,13", help="host memory_gb values")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    header = f"{'hosts':6} {'burst':5} {'policy':16} {'lost':>4} {'loads':>5}"
    print(f"{header}  burst p50/p95/p99  chat")
    for memory_gb in (float(m) for m in args.memory.split(",")):
        for burst_users in (int(b) for b in args.bursts.split(",")):
            scenario = variant(burst_users, memory_gb)
            baselines = [simulate(scenario, b, s) for b in BASELINES for s in seeds]
            for policy in POLICIES:
                mine = [simulate(scenario, policy, s) for s in seeds]
                as_cost = [dataclasses.replace(r, policy="cost") for r in mine]
                _, lost = verdict([*as_cost, *baselines], "cost", list(BASELINES))
                loads = sum(r.model_loads for r in mine)
                print(
                    f"{memory_gb:4.0f}GB {burst_users:5} {policy:16} {lost:4} {loads:5}  "
                    f"{pooled(mine, 'burst'):17}  {pooled(mine, 'chat')}"
                )


if __name__ == "__main__":
    main()
