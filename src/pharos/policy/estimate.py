"""The estimate the `cost` policy decides on (spec §7): one scoring pass over the candidates.

est_ttft = wait (the first slot to free, then a service time per waiter ahead) (+ what the
engine lately queued requests sent there) + load (twice when it
unloads an idle model) + prefill
(+ KV pressure penalty) (+ rework: the cached prefix another
candidate holds that this one would prefill again, times config.rework_weight) (+ evict: the
recent conversation's prefix this prompt would push out of its slot, times config.evict_weight)
(+ away: config.away_s on every target but a new conversation's key home)
(+ spread: config.spread_s per conversation live on the target, per slot, for a new
conversation of a key many people share; config.person_s per person on it, per slot, for a
person's first chat).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pharos.policy.types import Candidate, PolicyConfig, Terms
from pharos.policy.util import median_of

_INF: Final = float("inf")  # Final: a C constant, not a module-dict lookup per candidate


class Fallbacks:
    """Values for unknown estimates: the candidates' median, else the config default."""

    __slots__ = ("load_s", "prefill_s_per_token", "service_s")

    def __init__(self, prefill_s_per_token: float, load_s: float, service_s: float) -> None:
        self.prefill_s_per_token = prefill_s_per_token
        self.load_s = load_s
        self.service_s = service_s


def fallbacks(candidates: Sequence[Candidate], config: PolicyConfig) -> Fallbacks:
    return list_fallbacks(as_list(candidates), config)


def as_list(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates as a list (the scheduler passes one): what the compiled loops index."""
    return candidates if isinstance(candidates, list) else list(candidates)


def list_fallbacks(candidates: list[Candidate], config: PolicyConfig) -> Fallbacks:
    """The median of each estimate over the candidates that know it, else the config default.
    One scan for unknowns first: a fleet that knows every estimate builds no list."""
    prefill_unknown = load_unknown = service_unknown = False
    for c in candidates:
        if c.prefill_s_per_token is None:
            prefill_unknown = True
        if c.load_s is None:
            load_unknown = True
        if c.service_s is None:
            service_unknown = True
        if prefill_unknown and load_unknown and service_unknown:
            break
    prefill = config.default_prefill_s_per_token
    load = config.default_load_s
    service = config.default_service_s
    if prefill_unknown or load_unknown or service_unknown:
        # one pass collects what the unknowns need: 3 list comprehensions over 64 candidates
        # and sorted() copies were 4.4 µs of a 13.7 µs pick (perf, pick-cost-64)
        # Any: mypyc appends the float object as it is; typed float it unboxed and boxed again,
        # a new float per known value (1 µs of pick-cost-64)
        prefills: list[Any] = []
        loads: list[Any] = []
        services: list[Any] = []
        known: Any
        for c in candidates:
            if prefill_unknown:
                known = c.prefill_s_per_token
                if known is not None:
                    prefills.append(known)
            if load_unknown:
                known = c.load_s
                if known is not None:
                    loads.append(known)
            if service_unknown:
                known = c.service_s
                if known is not None:
                    services.append(known)
        prefill = median_of(prefills, prefill)
        load = median_of(loads, load)
        service = median_of(services, service)
    return Fallbacks(prefill, load, service)


class Scan:
    """What one scoring pass found, in scalars: the indices of the lowest and second-lowest
    estimate (both estimates, the lowest's utilization), of the least utilized feasible target
    (the cheapest among equals; -1 when none) and of the next cheapest at that utilization, the
    candidates that may tie with the lowest (`near`, with their estimates and utilizations),
    where a second replica could load (`replica` and its utilization, -1 when none: see
    replica_with_room), and the count of feasible candidates.

    No list of every candidate's estimate and utilization: boxing two floats per candidate and
    freeing them was ~15k of pick-cost-64's ~95k instructions (callgrind). A candidate can tie
    with the final lowest only if it was within tie_s of the lowest seen when it was scored,
    since the lowest only falls, so `near` holds every candidate the tie break may need."""

    __slots__ = (
        "best",
        "best_est",
        "best_util",
        "feasible",
        "least",
        "least_next",
        "least_util",
        "near",
        "near_est",
        "near_util",
        "replica",
        "replica_util",
        "second",
        "second_est",
    )

    def __init__(
        self,
        best: int,
        best_est: float,
        best_util: float,
        second: int,
        second_est: float,
        least: int,
        least_util: float,
        least_next: int,
        near: list[int],
        near_est: list[float],
        near_util: list[float],
        replica: int,
        replica_util: float,
        feasible: int,
    ) -> None:
        self.best = best
        self.best_est = best_est
        self.best_util = best_util
        self.second = second
        self.second_est = second_est
        self.least = least
        self.least_util = least_util
        self.least_next = least_next
        self.near = near
        self.near_est = near_est
        self.near_util = near_util
        self.replica = replica
        self.replica_util = replica_util
        self.feasible = feasible


def shared_prefill_speed(candidates: list[Candidate], band: float) -> float:
    """One prefill speed for every candidate, the midpoint of theirs, when the request is
    cache-neutral (each candidate holds the same prefix, more than nothing, and evicts nothing)
    and their learned speeds lie within `band` of each other; -1.0 otherwise. A prompt the
    index predicts nowhere may be a follow-up whose cache it lost (webui seed 2 at 219 s: 2,622
    tokens in an e1 slot, 0 predicted on both), where the one speed sent it to idle e0 uncached
    and that seed's hit fell 61.3 -> 28.9%: there each target keeps its own speed.

    Why: equal engines learn speeds apart by what ran beside each sample (chat seed 2: 5.95
    and 6.87 ms/token), and a new conversation went to the one learned faster, busy or not,
    its later turns after it: at 600 s all six users were on e1 while e0 sat idle, their turns
    queued 4.8-11.1 s. With one speed the least utilized target wins the tie. Chat seed 2 at
    band 0.1: router queue wait summed 69.1 -> 10.2 s, TTFT p95 5.57 -> 3.26 s, hit 84.03%
    -> 84.02% (speeds within the band early on keep the fleet split; 10% was the best band
    tried, see PolicyConfig.same_speed_band)."""
    if band <= 0 or not candidates:
        return -1.0
    first = candidates[0].matched_tokens
    if first <= 0:
        return -1.0
    lowest = highest = -1.0
    for c in candidates:
        known = c.prefill_s_per_token
        if known is None or c.matched_tokens != first or c.evicts_tokens != 0:
            return -1.0
        if lowest < 0 or known < lowest:
            lowest = known
        if known > highest:
            highest = known
    return (lowest + highest) / 2 if highest <= lowest * (1 + band) else -1.0


def scan(
    prompt_tokens: int,
    candidates: list[Candidate],
    fb: Fallbacks,
    config: PolicyConfig,
    keep: list[Terms] | None = None,
    home: int = -1,
    conversations: dict[int, int] | None = None,
    new_conversation: bool = False,
    first_chat: bool = False,
) -> Scan:
    """One loop over the candidates, the routing hot path: scalars only, unless `keep` asks for
    every candidate's Terms too (the status page, explain, tests). The one place the terms are
    computed.
    A list, not any Sequence: mypyc indexes a list directly instead of PyIter_Next per item."""
    prefill_fb = fb.prefill_s_per_token
    load_fb = fb.load_s
    service_fb = fb.service_s
    kv_from = config.kv_pressure_from
    kv_span = 1.0 - kv_from
    tie_s = config.tie_s
    near: list[int] = []
    near_est: list[float] = []
    near_util: list[float] = []
    best_est = second_est = least_util = least_est = next_est = replica_est = _INF
    best_i = second_i = least_i = next_i = replica_i = -1
    best_util = replica_util = 0.0
    replica_room = -1
    warm_free = False
    feasible_count = 0
    # a person's new conversation: what another candidate holds of it is at most its first
    # message, a system prompt prefilled once for every later chat, not a conversation's
    # re-prefill (RouteReq.new_conversation); its own prefill is in the prefill term
    rework_weight = 0.0 if new_conversation else config.rework_weight
    evict_weight = config.evict_weight
    # no charge unless the home is a candidate (it may not serve this model, or be excluded
    # on a retry): charging every target alike would only inflate the estimates. A home the
    # engine lately queued at (traffic Pharos doesn't see) is still charged for: that queue is
    # in its wait term. Waived at an engine-side wait of 0.1 s (HOME_QUEUED_S until 2026-12-07
    # 14:45 UTC), the waiver sent a person's chats off home whenever our own batches queued
    # there, and the users wandered: tie streams 0-3, 1046 -> 982 comparisons lost without it
    # (real-equal-keys 91 -> 62, real-bypass-keys 160 -> 113; noisy 101 -> 107, sharegpt-noisy
    # 155 -> 163); at 0.5 s, 987
    away_charge = 0.0
    home_per_token = -1.0
    if home >= 0 and config.away_s > 0:
        for c in candidates:
            if c.target_id == home:
                away_charge = config.away_s
                known = c.prefill_s_per_token
                if known is not None:
                    home_per_token = known
                break
    top_matched = 0
    if rework_weight > 0:
        for c in candidates:
            if c.matched_tokens > top_matched:
                top_matched = c.matched_tokens
        if top_matched > prompt_tokens:
            top_matched = prompt_tokens
    shared_per_token = shared_prefill_speed(candidates, config.same_speed_band)
    if home_per_token > 0 and shared_per_token > 0:
        home_per_token = shared_per_token
    spread_s = config.person_s if first_chat else config.spread_s
    fastest_per_token = _INF  # for the spread charge: its units are the fastest target's
    if conversations is not None and spread_s > 0:
        for c in candidates:
            known = c.prefill_s_per_token
            if known is not None and known < fastest_per_token:
                fastest_per_token = known
    else:
        spread_s = 0.0
    i = -1
    for c in candidates:
        i += 1
        capacity = c.capacity
        if capacity < 1:
            capacity = 1
        free = c.free_slots
        queue_ahead = c.queue_ahead
        if free > 0:
            wait = 0.0
        else:
            # the (queue_ahead + 1)-th of `capacity` busy slots to free, each request in flight
            # part done: residuals uniform over a service time, k / (capacity + 1) of one. Was
            # k / capacity, a full service per slot: a 236-token follow-up left its engine for
            # a re-prefill though both slots freed 0.34 s later (sharegpt-noisy seed 1);
            # verdict, seeds 1-5: 42 -> 38 comparisons lost; (k - 0.5) / capacity: 40
            service_s = c.service_s
            wait = (
                (queue_ahead + 1)
                / (capacity + 1)
                * (service_fb if service_s is None else service_s)
            )
            # an average service time can't see what holds the slots: classifier calls taught
            # 0.6 s while cold 14k-token prefills held both (agents seed 3, waits of 34 s)
            slots_busy = c.slots_busy_s
            if slots_busy is not None and slots_busy > wait:
                wait = slots_busy
        engine_queued = c.engine_queued_s
        if engine_queued is not None:
            wait += engine_queued
        feasible = True
        load = 0.0
        cold = c.warm is False and not c.loading
        if cold:
            if c.fits_if_cold is False:
                feasible = False
            load_s = c.load_s
            load = load_fb if load_s is None else load_s
            if c.evicts_loaded:
                load += load  # the unloaded model's next request pays a load too
        known_per_token = c.prefill_s_per_token
        per_token = prefill_fb if known_per_token is None else known_per_token  # unboxed once
        if shared_per_token > 0:
            per_token = shared_per_token
        matched = c.matched_tokens
        if matched > prompt_tokens:
            matched = prompt_tokens
        elif matched < 0:
            matched = 0
        prefill = (prompt_tokens - matched) * per_token
        penalty = 0.0
        kv = c.kv_usage
        if kv is not None and kv > kv_from and matched > 0:
            trust_lost = (kv - kv_from) / kv_span if kv_span > 0 else 1.0
            penalty = matched * per_token * (trust_lost if trust_lost < 1.0 else 1.0)
        rework = 0.0
        if matched < top_matched:
            rework = (top_matched - matched) * per_token * rework_weight
        evict = 0.0
        evicts = c.evicts_tokens
        if evicts > 0:
            evict = evicts * per_token * evict_weight
        away = 0.0
        if away_charge > 0 and c.target_id != home:
            # a faster target is charged in the home's prefill time of the same work, so a
            # slow home keeps nobody from a fast host (hetero: 2 comparisons lost over 20
            # seeds at a flat charge, 0 scaled)
            away = away_charge
            if 0 < per_token < home_per_token:
                away *= per_token / home_per_token
        spread = 0.0
        if spread_s > 0 and conversations is not None:
            live = conversations.get(c.target_id, 0)
            if live > 0:
                # a conversation's turns hold a slot for this target's prefill time, so a
                # slower target is charged more per conversation (real-speed, the flat charge:
                # TTFT p50 pooled over seeds 1-20 0.707 -> 0.725 s; scaled: 0.707 -> 0.719)
                spread = spread_s * live / capacity
                if fastest_per_token < _INF and fastest_per_token > 0:
                    spread *= per_token / fastest_per_token
        # in floats: mypyc's int / int went through CPyTagged_TrueDivide (~70 instructions a
        # candidate); both are exact below 2**53, so the quotient is the same double
        util = float((capacity - free if free < capacity else 0) + queue_ahead) / float(capacity)
        if feasible:
            est = wait + load + prefill + penalty + rework + evict + away + spread
            feasible_count += 1
            if est < best_est:
                second_est, second_i = best_est, best_i
                best_est, best_i, best_util = est, i, util
            elif est < second_est:
                second_est, second_i = est, i
            if est <= best_est + tie_s:
                near.append(i)
                near_est.append(est)
                near_util.append(util)
            if util < least_util:
                least_util, least_est, least_i = util, est, i
                next_est, next_i = _INF, -1
            elif util == least_util:
                if est < least_est:
                    next_est, next_i = least_est, least_i
                    least_est, least_i = est, i
                elif est < next_est:
                    next_est, next_i = est, i
            if cold and c.fits_if_cold is True and not c.evicts_loaded and free > 0:
                room = c.room_bytes
                if room is None:
                    room = -1
                # of equal loads, the one leaving its host the most room (util.roomiest)
                if est < replica_est - tie_s or (
                    est <= replica_est + tie_s and room > replica_room
                ):
                    replica_est, replica_i, replica_util, replica_room = est, i, util, room
        else:
            est = _INF
        if free > 0 and not cold:
            warm_free = True
        if keep is not None:
            keep.append(
                Terms(
                    c.target_id,
                    feasible,
                    est,
                    wait,
                    load,
                    prefill,
                    penalty,
                    util,
                    rework,
                    evict,
                    away,
                    spread,
                )
            )
    return Scan(
        best_i,
        best_est,
        best_util,
        second_i,
        second_est,
        least_i,
        least_util,
        next_i,
        near,
        near_est,
        near_util,
        -1 if warm_free else replica_i,
        replica_util,
        feasible_count,
    )
