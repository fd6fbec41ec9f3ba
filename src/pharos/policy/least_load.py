"""The `least-load` policy: the escape hatch when estimates misbehave (spec §7).

Same signature as `cost.pick`; scores on utilization only. Cold loads that would
evict a busy model stay excluded: that is a safety rule, not an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pharos.policy.cost import no_feasible_target
from pharos.policy.explain import ENGINE_QUEUE_NOTE, residency_word
from pharos.policy.types import Candidate, Decision, PolicyConfig, RouteReq, Score, Why
from pharos.policy.util import break_tie

_INF = float("inf")


def _scan(
    candidates: Sequence[Candidate], keep: list[Score] | None
) -> tuple[list[float], list[int]]:
    """Utilization per candidate and the indices of the feasible ones; every Score in `keep`
    when asked (status page, tests). The one place least-load's terms are computed."""
    utils: list[float] = []
    feasible_idx: list[int] = []
    for i, c in enumerate(candidates):
        capacity = c.capacity if c.capacity > 0 else 1
        free = c.free_slots
        util = ((capacity - free if free < capacity else 0) + c.queue_ahead) / capacity
        utils.append(util)
        feasible = not (c.warm is False and not c.loading and c.fits_if_cold is False)
        if feasible:
            feasible_idx.append(i)
        if keep is not None:
            keep.append(
                Score(c.target_id, feasible, util if feasible else _INF, 0.0, 0.0, 0.0, 0.0, util)
            )
    return utils, feasible_idx


def _scores(candidates: Sequence[Candidate]) -> tuple[Score, ...]:
    keep: list[Score] = []
    _scan(candidates, keep)
    return tuple(keep)


def pick_least_load(
    request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig
) -> Decision:
    del config  # same signature as cost; nothing to configure
    utils, feasible_idx = _scan(candidates, None)
    if not feasible_idx:
        return no_feasible_target(len(candidates), partial(_scores, candidates))
    best = break_tie(feasible_idx, utils, candidates, request.seed)
    chosen = candidates[best]
    enqueue = chosen.free_slots <= 0
    why: Why = "only_choice" if len(feasible_idx) == 1 else "least_loaded"
    return Decision(
        chosen.target_id,
        enqueue,
        why,
        partial(_scores, candidates),
        partial(_reason, chosen, utils[best], enqueue),
    )


def _reason(chosen: Candidate, utilization: float, enqueue: bool) -> str:
    reason = f"least loaded, {residency_word(chosen)}, utilization {utilization:.2f}"
    return f"{reason}, {ENGINE_QUEUE_NOTE}" if enqueue else reason
