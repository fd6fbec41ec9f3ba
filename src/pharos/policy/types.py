"""The routing policy's own inputs and outputs (spec §7). Nothing here imports other Pharos code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

Why = Literal["only_choice", "least_loaded", "cache", "warm"]
"""Why the target won (spec §13 `route` stage): a fixed set so metric series stay few."""

WHY_VALUES: tuple[Why, ...] = ("only_choice", "least_loaded", "cache", "warm")


@dataclass(frozen=True, slots=True)
class RouteReq:
    prompt_tokens: int  # estimated: request text bytes / 4
    seed: int  # random per request; breaks exact ties so identical requests don't herd


class Candidate(NamedTuple):
    """One target as the policy sees it. None always means unknown, never 0.

    A NamedTuple so the scoring loop can unpack it in one step (keep the field order).
    """

    target_id: int
    capacity: int  # slots: engine-reported, config, or the scheduler's fallback
    free_slots: int  # capacity - occupied
    queue_ahead: int = 0  # router waiters (all instances) + engine-reported waiting
    warm: bool | None = None  # None: the engine doesn't report residency (its one model is loaded)
    kv_usage: float | None = None  # 0..1
    matched_tokens: int = 0  # cached prefix predicted by the prefix index
    prefill_s_per_token: float | None = None
    load_s: float | None = None
    service_s: float | None = None
    fits_if_cold: bool | None = None  # memory headroom; None = unknown (then feasible)
    loading: bool = False  # a load of the cold model is already under way: it counts as warm


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Fallbacks for unknown estimates, used after the candidates' median (spec §7, §14)."""

    default_prefill_s_per_token: float = 0.005  # measured on CPU, Qwen2.5-0.5B: 3.1-15 ms
    default_load_s: float = 10.0  # assumed
    default_service_s: float = 5.0  # assumed
    tie_s: float = 0.001  # costs this close are a tie
    kv_pressure_from: float = 0.9  # above this KV usage a cached prefix is trusted less


DEFAULT_CONFIG = PolicyConfig()


class Score(NamedTuple):
    """One candidate's estimated TTFT and its terms, in seconds."""

    target_id: int
    feasible: bool  # False: a cold load that would evict a model with requests in flight
    est_ttft_s: float  # inf when infeasible
    wait_s: float
    load_s: float
    prefill_s: float
    kv_penalty_s: float
    utilization: float  # (occupied + queue ahead) / capacity


Terms = tuple[int, bool, float, float, float, float, float, float]
"""A Score's fields as a plain tuple: the scoring loop builds these (cheaper than NamedTuples)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The pick. target_id is None only when no candidate is feasible (then enqueue is True)."""

    target_id: int | None
    enqueue: bool  # the best target has no free slot: wait in the fair queue
    why: Why
    terms: tuple[Terms, ...]  # per candidate, in candidate order; read them through `scores`
    explain: Callable[[], str] = field(compare=False, repr=False)  # builds `reason` on demand

    @property
    def reason(self) -> str:
        """Human-readable, for logs and the status page: `warm, 1.2k cached tok, est 0.4s vs
        3.1s (cold)`. Built only when read, keeping string formatting off the routing path."""
        return self.explain()

    @property
    def scores(self) -> tuple[Score, ...]:
        """Per-candidate scores, for debugging, the status page and tests."""
        return tuple(Score._make(t) for t in self.terms)

    def score_of(self, target_id: int) -> Score | None:
        for t in self.terms:
            if t[0] == target_id:
                return Score._make(t)
        return None
