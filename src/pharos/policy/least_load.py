"""The `least-load` policy: the escape hatch when estimates misbehave (spec §7).

Same signature as `cost.pick`; scores on utilization only. Cold loads that would
evict a busy model stay excluded: that is a safety rule, not an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

from pharos.policy.cost import no_feasible_target
from pharos.policy.explain import residency_word
from pharos.policy.types import Candidate, Decision, PolicyConfig, RouteReq, Terms, Why
from pharos.policy.util import break_tie


def pick_least_load(
    request: RouteReq, candidates: Sequence[Candidate], config: PolicyConfig
) -> Decision:
    del config  # same signature as cost; nothing to configure
    terms: list[Terms] = []
    for c in candidates:
        capacity = c.capacity if c.capacity > 0 else 1
        free = c.free_slots
        occupied = capacity - free if free < capacity else 0
        util = (occupied + c.queue_ahead) / capacity
        feasible = not (c.warm is False and not c.loading and c.fits_if_cold is False)
        terms.append(
            (c.target_id, feasible, util if feasible else math.inf, 0.0, 0.0, 0.0, 0.0, util)
        )
    feasible_idx = [i for i, t in enumerate(terms) if t[1]]
    if not feasible_idx:
        return no_feasible_target(terms)
    best = break_tie(feasible_idx, terms, request.seed)
    chosen = candidates[best]
    enqueue = chosen.free_slots <= 0
    why: Why = "only_choice" if len(feasible_idx) == 1 else "least_loaded"
    return Decision(
        chosen.target_id,
        enqueue,
        why,
        tuple(terms),
        partial(_reason, chosen, terms[best][7], enqueue),
    )


def _reason(chosen: Candidate, utilization: float, enqueue: bool) -> str:
    reason = f"least loaded, {residency_word(chosen)}, utilization {utilization:.2f}"
    return reason + ", queued: no free slot" if enqueue else reason
