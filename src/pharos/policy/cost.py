"""The `cost` policy: lowest estimated time to first token wins (spec §7).

est_ttft = wait + load + prefill (+ KV pressure penalty). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

from pharos.policy.explain import describe, why_against_least_loaded
from pharos.policy.types import Candidate, Decision, PolicyConfig, RouteReq, Terms, Why
from pharos.policy.util import break_tie, median_or

_INF = math.inf
FEASIBLE = 1  # indexes into Terms
EST = 2  # est_ttft_s
UTIL = 7


def fallbacks(candidates: Sequence[Candidate], config: PolicyConfig) -> tuple[float, float, float]:
    """Values for unknown estimates: the candidates' median, else the config default."""
    n = len(candidates)
    prefill = [c.prefill_s_per_token for c in candidates if c.prefill_s_per_token is not None]
    load = [c.load_s for c in candidates if c.load_s is not None]
    service = [c.service_s for c in candidates if c.service_s is not None]
    return (
        config.default_prefill_s_per_token
        if len(prefill) == n
        else median_or(prefill, config.default_prefill_s_per_token),
        config.default_load_s if len(load) == n else median_or(load, config.default_load_s),
        config.default_service_s
        if len(service) == n
        else median_or(service, config.default_service_s),
    )


def score_candidates(
    request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig
) -> list[Terms]:
    """Each candidate's (target_id, feasible, est_ttft_s, ...) in candidate order."""
    return _score(request, candidates, config)[0]


def _score(
    request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig
) -> tuple[list[Terms], int, int, int, int]:
    """Terms per candidate (an infeasible cold load gets est_ttft_s = inf), with the indices of
    the lowest and second-lowest estimate, of the least utilized target (the cheapest among
    equals), and the count of feasible candidates. One loop: this is the routing hot path."""
    prefill_fb, load_fb, service_fb = fallbacks(candidates, config)
    prompt_tokens = request.prompt_tokens
    kv_from = config.kv_pressure_from
    kv_span = 1.0 - kv_from
    terms: list[Terms] = []
    append = terms.append
    best_est = second_est = least_util = _INF
    best_i = second_i = least_i = -1
    least_est = _INF
    feasible_count = 0
    i = -1
    for (
        target_id,
        capacity,
        free,
        queue_ahead,
        warm,
        kv,
        matched,
        per_token,
        load_s,
        service_s,
        fits_if_cold,
        loading,
    ) in candidates:
        i += 1
        if capacity < 1:
            capacity = 1
        if free > 0:
            wait = 0.0
        else:
            wait = (queue_ahead + 1) / capacity * (service_fb if service_s is None else service_s)
        feasible = True
        load = 0.0
        if warm is False and not loading:
            if fits_if_cold is False:
                feasible = False
            load = load_fb if load_s is None else load_s
        if per_token is None:
            per_token = prefill_fb
        if matched > prompt_tokens:
            matched = prompt_tokens
        elif matched < 0:
            matched = 0
        prefill = (prompt_tokens - matched) * per_token
        penalty = 0.0
        if kv is not None and kv > kv_from and matched > 0:
            trust_lost = (kv - kv_from) / kv_span if kv_span > 0 else 1.0
            penalty = matched * per_token * (trust_lost if trust_lost < 1.0 else 1.0)
        util = ((capacity - free if free < capacity else 0) + queue_ahead) / capacity
        if feasible:
            est = wait + load + prefill + penalty
            feasible_count += 1
            if est < best_est:
                second_est, second_i = best_est, best_i
                best_est, best_i = est, i
            elif est < second_est:
                second_est, second_i = est, i
            if util < least_util or (util == least_util and est < least_est):
                least_util, least_est, least_i = util, est, i
        else:
            est = _INF
        append((target_id, feasible, est, wait, load, prefill, penalty, util))
    return terms, best_i, second_i, least_i, feasible_count


def _cheapest_other_at(terms: list[Terms], chosen: int, util: float) -> int:
    """The cheapest feasible target other than `chosen` with this utilization; -1 if none."""
    found, found_est = -1, _INF
    for i, t in enumerate(terms):
        if i != chosen and t[FEASIBLE] and t[UTIL] == util and t[EST] < found_est:
            found, found_est = i, t[EST]
    return found


def _no_feasible_reason(candidates: int) -> str:
    return f"no feasible target: {candidates} cold loads would evict busy models"


def no_feasible_target(terms: list[Terms]) -> Decision:
    return Decision(
        target_id=None,
        enqueue=True,
        why="only_choice" if len(terms) == 1 else "least_loaded",
        terms=tuple(terms),
        explain=partial(_no_feasible_reason, len(terms)),
    )


def pick(request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig) -> Decision:
    """Lowest est_ttft; ties (within config.tie_s) on utilization, then on the request's seed."""
    terms, lowest, second, least, feasible_count = _score(request, candidates, config)
    if feasible_count == 0:
        return no_feasible_target(terms)
    best = lowest
    if second >= 0 and terms[second][EST] <= terms[lowest][EST] + config.tie_s:
        limit = terms[lowest][EST] + config.tie_s
        best = break_tie([i for i, t in enumerate(terms) if t[EST] <= limit], terms, request.seed)
    chosen = candidates[best]
    enqueue = chosen.free_slots <= 0
    why: Why = "only_choice"
    if feasible_count > 1:
        # against the least utilized target (the cheapest of them, if several); when
        # the chosen one is among them, against the cheapest of the others, since
        # utilization did not tell them apart
        if terms[best][UTIL] == terms[least][UTIL]:
            least = _cheapest_other_at(terms, best, terms[best][UTIL])
        why = why_against_least_loaded(terms[best], terms[least]) if least >= 0 else "least_loaded"
    runner_up = second if best == lowest else lowest
    return Decision(
        target_id=chosen.target_id,
        enqueue=enqueue,
        why=why,
        terms=tuple(terms),
        explain=partial(
            describe, chosen, terms, best, runner_up, len(terms) - feasible_count, enqueue
        ),
    )
