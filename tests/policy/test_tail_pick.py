"""cost.pick decides as the list-based pick it replaced (issue 13): that one kept every
candidate's estimate and utilization in lists and searched them; the scan now keeps only the
lowest two, the least utilized and the next cheapest beside it, the replica and the candidates
near the lowest. The reference below is the old selection over `score_candidates`' scores,
on random fleets whose few distinct values make ties, equal utilizations and replicas common."""

from __future__ import annotations

import random

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, PolicyConfig, RouteReq, cost, estimate
from pharos.policy.explain import why_against_least_loaded
from pharos.policy.types import Terms, Why
from pharos.policy.util import break_tie


def reference_pick(
    request: RouteReq, candidates: list[Candidate], config: PolicyConfig
) -> tuple[int | None, bool, Why]:
    """The pick before issue 13's tail work (main d49d453), over lists of every estimate."""
    scores = cost.score_candidates(request, candidates, config)
    ests = [s.est_ttft_s for s in scores]
    utils = [s.utilization for s in scores]
    inf = float("inf")
    best_est = second_est = least_util = least_est = inf
    best_i = second_i = least_i = -1
    feasible = 0
    for i, s in enumerate(scores):
        if not s.feasible:
            continue
        feasible += 1
        if s.est_ttft_s < best_est:
            second_est, second_i = best_est, best_i
            best_est, best_i = s.est_ttft_s, i
        elif s.est_ttft_s < second_est:
            second_est, second_i = s.est_ttft_s, i
        if s.utilization < least_util or (s.utilization == least_util and s.est_ttft_s < least_est):
            least_util, least_est, least_i = s.utilization, s.est_ttft_s, i
    if feasible == 0:
        return None, True, "only_choice" if len(candidates) == 1 else "least_loaded"
    lowest = best = best_i
    second = second_i
    if second >= 0 and ests[second] <= ests[lowest] + config.tie_s:
        limit = ests[lowest] + config.tie_s
        best = break_tie(
            [i for i in range(len(ests)) if ests[i] <= limit], utils, candidates, request.seed
        )
    enqueue = candidates[best].free_slots <= 0
    if enqueue and feasible > 1:
        replica, replica_est = -1, inf
        for i, c in enumerate(candidates):
            if c.warm is False and not c.loading:
                if (
                    c.fits_if_cold is True
                    and not c.evicts_loaded
                    and c.free_slots > 0
                    and ests[i] < replica_est
                ):
                    replica, replica_est = i, ests[i]
            elif c.free_slots > 0:
                replica = -1
                break
        if replica >= 0:
            best = replica
            enqueue = candidates[best].free_slots <= 0
    why: Why = "only_choice"
    if feasible > 1:
        least = least_i
        if utils[best] == utils[least]:
            least, cheapest = -1, inf
            for i, u in enumerate(utils):
                if i != best and u == utils[best] and ests[i] < cheapest:
                    least, cheapest = i, ests[i]
            if least < 0:
                least = second if best == lowest else lowest
        if least >= 0:
            pair: list[Terms] = []
            fb = estimate.fallbacks(candidates, config)
            estimate.scan(
                request.prompt_tokens, [candidates[best], candidates[least]], fb, config, pair
            )
            why = why_against_least_loaded(pair[0], pair[1])
        else:
            why = "least_loaded"
    return candidates[best].target_id, enqueue, why


def random_fleet(rng: random.Random, size: int) -> list[Candidate]:
    out = []
    for target_id in rng.sample(range(100), size):  # ids not in order: the tie break sorts them
        capacity = rng.choice((1, 2, 4))
        out.append(
            Candidate(
                target_id=target_id,
                capacity=capacity,
                free_slots=rng.randint(0, capacity),
                queue_ahead=rng.choice((0, 0, 1, 3)),
                warm=rng.choice((True, False, None)),
                kv_usage=rng.choice((None, 0.2, 0.95)),
                matched_tokens=rng.choice((0, 0, 512, 4096)),
                prefill_s_per_token=rng.choice((None, 0.002, 0.004)),
                load_s=rng.choice((None, 3.0)),
                service_s=rng.choice((None, 2.0)),
                fits_if_cold=rng.choice((None, True, False)),
                loading=rng.random() < 0.2,
                evicts_tokens=rng.choice((0, 0, 300)),
                engine_queued_s=rng.choice((None, None, 0.5)),
                evicts_loaded=rng.random() < 0.2,
            )
        )
    return out


# seed: each builds 400 fleets of 1-12 candidates (a few values each, so ties are common)
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_pick_chooses_labels_and_queues_as_the_list_based_pick_did(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        fleet = random_fleet(rng, rng.randint(1, 12))
        request = RouteReq(prompt_tokens=rng.choice((100, 3000, 6000)), seed=rng.randrange(1000))
        decision = cost.pick(request, fleet, DEFAULT_CONFIG)
        got = (decision.target_id, decision.enqueue, decision.why)
        assert got == reference_pick(request, fleet, DEFAULT_CONFIG), (request, fleet)


def test_the_fleets_reach_every_branch_the_scan_replaced() -> None:
    """The comparison above is only as good as its fleets: they must tie, queue onto a replica
    and label against a least loaded target of the chosen one's utilization."""
    rng = random.Random(1)
    ties = replicas = same_util = 0
    for _ in range(2000):  # the five seeds' fleets in number, one stream
        fleet = random_fleet(rng, rng.randint(1, 12))
        request = RouteReq(prompt_tokens=rng.choice((100, 3000, 6000)), seed=rng.randrange(1000))
        found = estimate.scan(
            request.prompt_tokens, fleet, estimate.fallbacks(fleet, DEFAULT_CONFIG), DEFAULT_CONFIG
        )
        if found.second >= 0 and found.second_est <= found.best_est + DEFAULT_CONFIG.tie_s:
            ties += 1
        if found.replica >= 0:
            replicas += 1
        if found.best >= 0 and found.best_util == found.least_util and found.least_next >= 0:
            same_util += 1
    assert ties > 100 and replicas > 10 and same_util > 100, (ties, replicas, same_util)
