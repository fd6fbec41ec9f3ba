"""The `cost` policy: lowest estimated time to first token wins (spec §7).

The decision built from one scoring pass (policy/estimate.py, which says what est_ttft adds up):
the lowest estimate, ties, a second replica, the `why` label and the reason.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pharos.policy.estimate import Fallbacks, Scan, as_list, list_fallbacks, scan
from pharos.policy.explain import describe, why_against_least_loaded
from pharos.policy.types import Candidate, Decision, PolicyConfig, RouteReq, Score, Terms, Why
from pharos.policy.util import break_tie_of


def score_candidates(
    request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig
) -> tuple[Score, ...]:
    """Each candidate's Score, in candidate order."""
    listed = as_list(candidates)
    terms: list[Terms] = []
    scan(
        request.prompt_tokens,
        listed,
        list_fallbacks(listed, config),
        config,
        terms,
        request.home_target_id,
        request.conversations,
        request.new_conversation,
        request.first_chat,
    )
    return tuple([t.score() for t in terms])


def _scores_of(
    request: RouteReq, candidates: list[Candidate], fb: Fallbacks, config: PolicyConfig
) -> tuple[Score, ...]:
    terms: list[Terms] = []
    scan(
        request.prompt_tokens,
        candidates,
        fb,
        config,
        terms,
        request.home_target_id,
        request.conversations,
        request.new_conversation,
        request.first_chat,
    )
    return tuple([t.score() for t in terms])


def replica_with_room(found: Scan) -> int:
    """Where to load a second replica for a request that would queue: the cheapest cold target
    whose host holds the model beside everything it has loaded (it unloads nothing), of equal
    ones the one leaving its host the most memory (Candidate.room_bytes), when no target that
    serves the model now has a free slot; -1 when there is none (scan finds it).

    Not the lowest estimate: the load costs this request more than its wait (cold-burst: a
    ~3.5 s wait against an 8 s load), but it pays once and every later request gets the
    replica's slots, and with nothing unloaded it can't thrash (at most one load per host
    with room). Cold-burst, seeds 1-5: chat TTFT p95 6.30 -> 5.06 s, 10 -> 6 comparisons lost.
    A warm target with a free slot means this pick's reason to queue is its own: no replica.
    """
    return found.replica


def _no_feasible_reason(candidates: int) -> str:
    return f"no feasible target: {candidates} cold loads would evict busy models"


def no_feasible_target(count: int, scored: partial[tuple[Score, ...]]) -> Decision:
    return Decision(
        target_id=None,
        enqueue=True,
        why="only_choice" if count == 1 else "least_loaded",
        scored=scored,
        explain=partial(_no_feasible_reason, count),
    )


def _describe(
    request: RouteReq,
    candidates: list[Candidate],
    fb: Fallbacks,
    config: PolicyConfig,
    best: int,
    runner_up: int,
    infeasible: int,
    enqueue: bool,
    replica: bool = False,
) -> str:
    """Scores only the chosen target and the runner-up: the sentence needs no other."""
    pair = [candidates[best]] if runner_up < 0 else [candidates[best], candidates[runner_up]]
    scores = _scores_of(request, pair, fb, config)
    text = describe(candidates[best], scores, 0, 1 if runner_up >= 0 else -1, infeasible, enqueue)
    return f"a second replica, where its host has room: {text}" if replica else text


def pick(request: RouteReq, sequence: Sequence[Candidate], config: PolicyConfig) -> Decision:
    """Lowest est_ttft; ties (within config.tie_s) on utilization, then on the memory a cold
    load leaves its host (util.roomiest), then on the request's seed."""
    candidates = as_list(sequence)
    fb = list_fallbacks(candidates, config)
    found = scan(
        request.prompt_tokens,
        candidates,
        fb,
        config,
        None,
        request.home_target_id,
        request.conversations,
        request.new_conversation,
        request.first_chat,
    )
    if found.feasible == 0:
        return no_feasible_target(
            len(candidates), partial(_scores_of, request, candidates, fb, config)
        )
    lowest = best = found.best
    best_util = found.best_util
    second = found.second
    if second >= 0 and found.second_est <= found.best_est + config.tie_s:
        limit = found.best_est + config.tie_s
        near, near_est, near_util = found.near, found.near_est, found.near_util
        tied: list[int] = []
        tied_utils: list[float] = []
        for k in range(len(near)):
            if near_est[k] <= limit:
                tied.append(near[k])
                tied_utils.append(near_util[k])
        best = break_tie_of(tied, tied_utils, candidates, request.seed, True)
        best_util = tied_utils[tied.index(best)]
    chosen = candidates[best]
    enqueue = chosen.free_slots <= 0
    replica = -1
    if enqueue and found.feasible > 1:
        replica = replica_with_room(found)
        if replica >= 0:
            best = replica
            best_util = found.replica_util
            chosen = candidates[best]
            enqueue = chosen.free_slots <= 0
    why: Why = "only_choice"
    if found.feasible > 1:
        # against the least utilized target (the cheapest of them, if several); when
        # the chosen one is among them, against the cheapest of the others, since
        # utilization did not tell them apart
        least = found.least
        if best_util == found.least_util:
            # the cheapest other target at that utilization
            least = found.least_next if best == found.least else found.least
            if least < 0:
                # the one least utilized target: utilization alone would have picked it, but
                # what it saved against the next best may still be its cache (issue 15: a
                # waiter granted its cached target's freed slot was labelled least_loaded)
                least = second if best == lowest else lowest
        if least >= 0:
            pair: list[Terms] = []
            scan(
                request.prompt_tokens,
                [chosen, candidates[least]],
                fb,
                config,
                pair,
                request.home_target_id,
                request.conversations,
                request.new_conversation,
                request.first_chat,
            )
            why = why_against_least_loaded(pair[0], pair[1])
        else:
            why = "least_loaded"
    runner_up = second if best == lowest else lowest
    return Decision(
        target_id=chosen.target_id,
        enqueue=enqueue,
        why=why,
        scored=partial(_scores_of, request, candidates, fb, config),
        explain=partial(
            _describe,
            request,
            candidates,
            fb,
            config,
            best,
            runner_up,
            len(candidates) - found.feasible,
            enqueue,
            replica >= 0,
        ),
    )
