"""The routing policy's own inputs and outputs (spec §7). Nothing here imports other Pharos code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, final

Why = Literal["only_choice", "least_loaded", "cache", "warm"]
"""Why the target won (spec §13 `route` stage): a fixed set so metric series stay few."""

WHY_VALUES: tuple[Why, ...] = ("only_choice", "least_loaded", "cache", "warm")


@final
class RouteReq:
    """A slotted class with Final attributes, not a frozen dataclass: mypyc compiles it to a C
    struct, where the dataclass's generated __init__ ran interpreted, one object.__setattr__ per
    field (timeit, compiled: 281 -> 69 ns positional, 400 -> 233 ns by keyword)."""

    __slots__ = (
        "conversations",
        "first_chat",
        "home_target_id",
        "new_conversation",
        "prompt_tokens",
        "seed",
    )

    def __init__(
        self,
        prompt_tokens: int,
        seed: int,
        home_target_id: int = -1,
        conversations: dict[int, int] | None = None,
        new_conversation: bool = False,
        first_chat: bool = False,
    ) -> None:
        self.prompt_tokens: Final = prompt_tokens  # estimated: request text bytes / 4
        self.seed: Final = seed  # random per request; breaks exact ties so requests don't herd
        self.home_target_id: Final = home_target_id
        """A new conversation's key home: where the key's one recent conversation ended
        (sched/held_affinity.py); every other target is charged PolicyConfig.away_s. -1: none."""
        self.conversations: Final = conversations
        """For a new conversation of a key many people share: the conversations live on each
        target id (a reply ended there within SPREAD_WINDOW_S, or a first turn in flight; a
        target not in it has none), each charged PolicyConfig.spread_s per slot. For a person's
        first chat (`first_chat`): the people on each target, each charged
        PolicyConfig.person_s per slot. None: no charge (sched/held_affinity.py)."""
        self.new_conversation: Final = new_conversation
        """One person's new conversation (no target holds more than its first message; the key
        neither shared nor sending side calls: KeyHomes.one_person): no rework is charged, since
        the first message another target holds is the app's system prompt, prefilled once there
        for every later chat. With the charge, chat seed 12's six first chats all queued for the
        engine that had served the first (8.7 s at most) while the other idled. A shared key
        keeps it (real-bypass lost 19 -> 25 comparisons without it, tie stream 0)."""
        self.first_chat: Final = first_chat
        """One person's first chat (KeyHomes.newcomer): `conversations` counts people, and
        the target it picks is where this person's later chats go home to."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RouteReq)
            and self.prompt_tokens == other.prompt_tokens
            and self.seed == other.seed
            and self.home_target_id == other.home_target_id
            and self.conversations == other.conversations
            and self.new_conversation == other.new_conversation
            and self.first_chat == other.first_chat
        )

    def __hash__(self) -> int:  # conversations left out: a dict; equal requests still hash alike
        return hash((self.prompt_tokens, self.seed, self.home_target_id))

    def __repr__(self) -> str:
        return (
            f"RouteReq(prompt_tokens={self.prompt_tokens!r}, seed={self.seed!r}, "
            f"home_target_id={self.home_target_id!r}, conversations={self.conversations!r}, "
            f"new_conversation={self.new_conversation!r}, first_chat={self.first_chat!r})"
        )


@final
class Candidate:
    """One target as the policy sees it. None always means unknown, never 0.

    A slotted class, read by name: building 64 costs 11 µs against 15 µs for a NamedTuple, and
    mypyc compiles it to a C struct the scoring loop reads without boxing (0.8 µs a loop over 64
    against 1.3 µs for a compiled NamedTuple). Final attributes: a value, never changed.
    """

    __slots__ = (
        "capacity",
        "engine_queued_s",
        "evicts_loaded",
        "evicts_tokens",
        "fits_if_cold",
        "free_slots",
        "kv_usage",
        "load_s",
        "loading",
        "matched_tokens",
        "prefill_s_per_token",
        "queue_ahead",
        "room_bytes",
        "service_s",
        "slots_busy_s",
        "target_id",
        "warm",
    )

    def __init__(
        self,
        target_id: int,
        capacity: int,
        free_slots: int,
        queue_ahead: int = 0,
        warm: bool | None = None,
        kv_usage: float | None = None,
        matched_tokens: int = 0,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
        fits_if_cold: bool | None = None,
        loading: bool = False,
        evicts_tokens: int = 0,
        engine_queued_s: float | None = None,
        evicts_loaded: bool = False,
        slots_busy_s: float | None = None,
        room_bytes: int | None = None,
    ) -> None:
        self.target_id: Final = target_id
        self.capacity: Final = capacity  # slots: engine-reported, config, or the fallback
        self.free_slots: Final = free_slots  # capacity - occupied
        self.queue_ahead: Final = queue_ahead  # router waiters (all instances) + engine's
        self.warm: Final = warm  # None: residency not reported (its one model is loaded)
        self.kv_usage: Final = kv_usage  # 0..1
        self.matched_tokens: Final = matched_tokens  # cached prefix the prefix index predicts
        self.prefill_s_per_token: Final = prefill_s_per_token
        self.load_s: Final = load_s
        self.service_s: Final = service_s
        self.fits_if_cold: Final = fits_if_cold  # memory headroom; None = unknown (feasible)
        self.loading: Final = loading  # a load of the cold model is under way: counts as warm
        # a recent conversation's cached prefix a fresh prompt would push out of its slot
        self.evicts_tokens: Final = evicts_tokens
        # what requests sent here lately waited inside the engine before their prefill (traffic
        # Pharos doesn't see); None: not known (no reply with the engine's prefill time yet)
        self.engine_queued_s: Final = engine_queued_s
        # the cold load fits only by unloading an idle model, whose next request reloads it
        self.evicts_loaded: Final = evicts_loaded
        # no slot frees before this: the earliest expected prefill end of the requests holding
        # them, all ours (sched/prefills.py); None: a slot is free or someone else's holds one
        self.slots_busy_s: Final = slots_busy_s
        # a cold target: the host memory left beside every model it holds once this one has
        # loaded (negative: the load unloads an idle model); None: warm, or memory unknown
        self.room_bytes: Final = room_bytes

    def has_fields(
        self,
        target_id: int,
        capacity: int,
        free_slots: int,
        queue_ahead: int,
        warm: bool | None,
        kv_usage: float | None,
        matched_tokens: int,
        prefill_s_per_token: float | None,
        load_s: float | None,
        service_s: float | None,
        fits_if_cold: bool | None,
        loading: bool,
        evicts_tokens: int,
        engine_queued_s: float | None,
        evicts_loaded: bool,
        slots_busy_s: float | None,
        room_bytes: int | None,
    ) -> bool:
        """Whether a Candidate built from these would be this one, so the scheduler can reuse
        it (every field, in CANDIDATE_FIELDS' order; tests/policy/test_tail_reuse.py checks).
        Estimates by identity (a view's own float objects, unchanged while the view is), the
        engine's queued time by value (recomputed each pick): a miss only builds a new one."""
        return (
            self.target_id == target_id
            and self.capacity == capacity
            and self.free_slots == free_slots
            and self.queue_ahead == queue_ahead
            and self.warm is warm
            and self.kv_usage is kv_usage
            and self.matched_tokens == matched_tokens
            and self.prefill_s_per_token is prefill_s_per_token
            and self.load_s is load_s
            and self.service_s is service_s
            and self.fits_if_cold is fits_if_cold
            and self.loading == loading
            and self.evicts_tokens == evicts_tokens
            and _same_float(self.engine_queued_s, engine_queued_s)
            and self.evicts_loaded == evicts_loaded
            and _same_float(self.slots_busy_s, slots_busy_s)
            and self.room_bytes == room_bytes
        )

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in CANDIDATE_FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Candidate) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in CANDIDATE_FIELDS)
        return f"Candidate({inner})"


def _same_float(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b


CANDIDATE_FIELDS: tuple[str, ...] = (
    "target_id",
    "capacity",
    "free_slots",
    "queue_ahead",
    "warm",
    "kv_usage",
    "matched_tokens",
    "prefill_s_per_token",
    "load_s",
    "service_s",
    "fits_if_cold",
    "loading",
    "evicts_tokens",
    "engine_queued_s",
    "evicts_loaded",
    "slots_busy_s",
    "room_bytes",
)
"""Candidate's fields in constructor order (repr, equality)."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Fallbacks for unknown estimates, used after the candidates' median (spec §7, §14)."""

    default_prefill_s_per_token: float = 0.005  # measured on CPU, Qwen2.5-0.5B: 3.1-15 ms
    default_load_s: float = 10.0  # assumed
    default_service_s: float = 5.0  # assumed
    tie_s: float = 0.001  # costs this close are a tie
    kv_pressure_from: float = 0.9  # above this KV usage a cached prefix is trusted less
    rework_weight: float = 3.5
    """Seconds charged per second of prefill a target would redo of a prefix another candidate
    holds cached: the request's own prefill counts it once, but the re-prefill also holds the
    slot (and slows the engine's other requests) and leaves the cached copy unused. 0 = off.
    pharos sim, 600 s, chat/noisy/hetero and their ShareGPT variants, seeds 1-5: the cost
    policy's hit ratio summed -42.9 points under the best baseline's at 0, -13.9 at 1, -4.5
    at 2, -2.9 at 3; TTFT p95 summed -23.1 s, -29.0 s, -33.0 s, -32.0 s below it. Later, every
    scenario, 20 seeds (`--verdict` losses, seeds 1-5 in brackets), with evict_weight 1.5:
    2.5 -> 186 (29), 3 -> 185 (27); both at 1.0/2.0 before: 194 (31) (docs/routing-log.md). On
    the simulator's llama-server batch loop (2026-12-07), with evict_weight 2: 3 -> 213 (54), 3.5 ->
    209 (54), 4 -> 209 (56); 3 with 1.5, the old defaults: 224 (58)."""
    evict_weight: float = 2.0
    """Seconds charged per second of prefill a recent conversation would redo because this
    prompt takes the slot holding it (Candidate.evicts_tokens; issue 16). 0 = off. Alone, 20
    seeds: 0.5 -> 198 losses, 1 -> 194, 1.5 -> 192, 2 -> 187 but seeds 1-5 31 -> 32. On the
    batch loop, with rework_weight 3.5: 1.5 -> 218 (57), 2 -> 209 (54), 2.5 -> 213 (53)."""
    same_speed_band: float = 0.1
    """Learned prefill speeds this close (0.1: the fastest at most 10% under the slowest) count
    as one speed for a cache-neutral request, so a new conversation goes where load says, not
    where sampling noise does (estimate.shared_prefill_speed). 0 = off. pharos sim --verdict, all
    scenarios, seeds 1-5: 45 comparisons lost at 0, 39 at 0.05, 39 at 0.1, 43 at 0.15, 44 at
    0.2, 53 at 0.3; 41 at 0.1 applied to every request, not only cache-neutral ones."""
    away_s: float = 0.5
    """Seconds charged on every target but a new conversation's key home (RouteReq
    .home_target_id): a person's next chat goes where their last one went unless another
    target saves more than this. 0 = off. See sched/held_affinity.py for what it bought."""
    spread_s: float = 0.1
    """Seconds charged per conversation live on a target, per slot, for a new conversation of a
    key many people share (RouteReq.conversations), times the target's prefill time per token
    over the fastest candidate's: such a key has no home, and a new chat went wherever a slot
    was free at that moment (real-equal seed 6: with 5 of the other users' chats on e1, 3 of 8
    new chats went to e1 too). 0 = off. Comparisons lost over seeds 1-20 (docs/routing-log.md,
    "A shared key's new chats spread"): 0 -> 170, 0.1 -> 155; flat 0.05 / 0.15 / 0.25 -> 169 /
    167 / 168."""
    person_s: float = 0.3
    """Seconds charged per person on a target, per slot, for a person's first chat
    (RouteReq.first_chat), scaled by speed as spread_s is. The people are the keys whose latest
    conversation ended there within AFFINITY_WINDOW_S, first chats in flight, and the requests
    the engine reports beyond ours (traffic Pharos doesn't see). Where a person's first chat
    goes, their later chats go home to, so it sets the fleet's split of people for the run; a
    sticky map that splits them evenly beat cost's p95 on chat (docs/routing-log.md, "A
    person's first chat"). 0 = off. Comparisons lost over seeds 1-20 on tie streams 0-3: off
    857, 0.3 -> 841. Measured while an engine's counts stale since one of our replies ended
    there were read as unseen requests: 0.3 -> 829, 0.5 -> 831; on streams 0 / 1 (off: 206 /
    216) 1 -> 193 / 223, 2 -> 199 / 232, 100 (people first) -> 228 / 253."""


DEFAULT_CONFIG = PolicyConfig()


class Score(NamedTuple):
    """One candidate's estimated TTFT and its terms, in seconds. Built only when read (status page,
    debug log, tests): the scoring loop keeps just the estimate and the utilization."""

    target_id: int
    feasible: bool  # False: a cold load that would evict a model with requests in flight
    est_ttft_s: float  # inf when infeasible
    wait_s: float
    load_s: float
    prefill_s: float
    kv_penalty_s: float
    utilization: float  # (occupied + queue ahead) / capacity
    rework_s: float = 0.0  # re-prefill of a prefix another candidate holds, weighted
    evict_s: float = 0.0  # re-prefill a recent conversation pays for the slot this takes
    away_s: float = 0.0  # a new conversation sent off its key's home (PolicyConfig.away_s)
    spread_s: float = 0.0  # a shared key's new conversation beside others (PolicyConfig.spread_s)


@final
class Terms:
    """One candidate's estimate and its terms as the scoring loop computed them: a native struct,
    where a Score (a NamedTuple, whose __new__ runs interpreted) cost ~3k instructions to build;
    pick scores its chosen target against the least loaded one through two of these."""

    __slots__ = (
        "away_s",
        "est_ttft_s",
        "evict_s",
        "feasible",
        "kv_penalty_s",
        "load_s",
        "prefill_s",
        "rework_s",
        "spread_s",
        "target_id",
        "utilization",
        "wait_s",
    )

    def __init__(
        self,
        target_id: int,
        feasible: bool,
        est_ttft_s: float,
        wait_s: float,
        load_s: float,
        prefill_s: float,
        kv_penalty_s: float,
        utilization: float,
        rework_s: float,
        evict_s: float,
        away_s: float = 0.0,
        spread_s: float = 0.0,
    ) -> None:
        self.target_id: Final = target_id
        self.feasible: Final = feasible
        self.est_ttft_s: Final = est_ttft_s
        self.wait_s: Final = wait_s
        self.load_s: Final = load_s
        self.prefill_s: Final = prefill_s
        self.kv_penalty_s: Final = kv_penalty_s
        self.utilization: Final = utilization
        self.rework_s: Final = rework_s
        self.evict_s: Final = evict_s
        self.away_s: Final = away_s
        self.spread_s: Final = spread_s

    def score(self) -> Score:
        return Score(
            self.target_id,
            self.feasible,
            self.est_ttft_s,
            self.wait_s,
            self.load_s,
            self.prefill_s,
            self.kv_penalty_s,
            self.utilization,
            self.rework_s,
            self.evict_s,
            self.away_s,
            self.spread_s,
        )


@final
class Decision:
    """The pick. target_id is None only when no candidate is feasible (then enqueue is True).

    Equal by target_id, enqueue and why. A slotted class with Final attributes rather than a
    frozen dataclass, for the reason RouteReq gives: its interpreted __init__ was 1.5 µs of
    the 13 µs pick-cost-64 (perf)."""

    __slots__ = ("enqueue", "explain", "scored", "target_id", "why")

    def __init__(
        self,
        target_id: int | None,
        enqueue: bool,
        why: Why,
        scored: Callable[[], tuple[Score, ...]],
        explain: Callable[[], str],
    ) -> None:
        self.target_id: Final = target_id
        self.enqueue: Final = enqueue  # no free slot: the fair queue, or the engine's (a join)
        self.why: Final = why
        self.scored: Final = scored  # the scores, on demand
        self.explain: Final = explain  # builds `reason` on demand

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Decision)
            and self.target_id == other.target_id
            and self.enqueue == other.enqueue
            and self.why == other.why
        )

    def __hash__(self) -> int:
        return hash((self.target_id, self.enqueue, self.why))

    def __repr__(self) -> str:
        return f"Decision(target_id={self.target_id!r}, enqueue={self.enqueue!r}, why={self.why!r})"

    @property
    def reason(self) -> str:
        """Human-readable, for logs and the status page: `warm, 1.2k cached tok, est 0.4s vs
        3.1s (cold)`. Built only when read, keeping string formatting off the routing path."""
        return self.explain()

    @property
    def scores(self) -> tuple[Score, ...]:
        """Per-candidate scores in candidate order, for debugging, the status page and tests."""
        return self.scored()

    def score_of(self, target_id: int) -> Score | None:
        for score in self.scored():
            if score.target_id == target_id:
                return score
        return None
