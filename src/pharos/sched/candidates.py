"""From a target's view and our counts to the policy's Candidate (spec §7, §8). Pure functions."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from pharos.engine.types import Kind, Residency
from pharos.policy import Candidate
from pharos.prefix import Match
from pharos.sched.fits import FitsIfCold
from pharos.sched.prefills import PrefillsInFlight
from pharos.state.view import TargetView

BYTES_PER_TOKEN = 4

SLOT_KEEP_S = 120.0
"""How long a finished prompt's slot counts as holding a conversation that will come back:
chat users think 5-30 s between turns in the simulator, minutes at most in Open WebUI."""

PER_SLOT_KINDS: Final = frozenset({Kind.LLAMACPP, Kind.OLLAMA, Kind.LLAMA_SWAP})
"""Engines that cache per slot: a fresh prompt on a free slot overwrites what it held."""

_RESIDENCIES: Final = (Residency.LOADED, Residency.UNKNOWN, Residency.LOADING, Residency.COLD)
"""Read once here: on Python 3.11 each `Residency.X` goes through EnumType.__getattr__, ~700
instructions (callgrind), 7 of them an acquire in bench_sched."""


def evicted_tokens(
    recent: Sequence[tuple[float, int, int]], free: int, now: float, keep_s: float = SLOT_KEEP_S
) -> int:
    """Tokens of the conversation a fresh prompt pushes out of a slot (issue 16), 0 if none.

    `recent`: the target's last finished prompts (end time, estimated tokens, last link),
    oldest first, at most one per slot. The free slots hold the newest of them; when each
    of those `free` ended within `keep_s`, the fresh prompt takes the least recently used
    of them: the oldest."""
    if free <= 0 or len(recent) < free:
        return 0
    ended_at, tokens, _ = recent[-free]
    return tokens if now - ended_at <= keep_s else 0


def engine_counts_fresh(view: TargetView, last_reply_end_at: float | None) -> bool:
    """The engine's Running and Waiting still count: no reply on the target ended since the last
    fast scrape. Until the next one they still hold the slot that reply freed (spec §8)."""
    if last_reply_end_at is None:
        return True
    if view.last_fast_scrape_at is None:
        return False
    return last_reply_end_at < view.last_fast_scrape_at


def unseen_requests(
    views: Sequence[TargetView],
    local_inflight: dict[int, int],
    peer_inflight: dict[str, int],
    last_reply_end: dict[int, float],
) -> dict[int, int]:
    """Per target, the requests its engine last reported (Running + Waiting) beyond ours and
    live peers': traffic Pharos doesn't see, each one a person for a first chat's spread
    (KeyHomes.people). A target whose engine reports no Running, or nothing beyond ours, or
    whose counts are stale (one of our replies ended there since the scrape: they still hold
    its slot, `engine_counts_fresh`) is left out."""
    out: dict[int, int] = {}
    for view in views:
        running = view.running
        if running is None or not engine_counts_fresh(view, last_reply_end.get(view.target_id)):
            continue
        waiting = view.waiting
        ours = local_inflight.get(view.target_id, 0) + peer_inflight.get(view.key, 0)
        unseen = running + (waiting if waiting is not None else 0) - ours
        if unseen > 0:
            out[view.target_id] = unseen
    return out


def occupied(view: TargetView, cluster_inflight: int, fresh: bool) -> int:
    """max(our + live peers' in-flight, the engine's Running when known and fresh)."""
    running = view.running
    if fresh and running is not None and running > cluster_inflight:
        return running
    return cluster_inflight


def usable_views(views: Iterable[TargetView], exclude: frozenset[int]) -> list[TargetView]:
    """The views a new lease may go to: up, not draining, not excluded by a retry. `views`
    itself when it is a list and every view is usable (a new list of 64 was ~9k instructions an
    acquire, callgrind): the caller reads it, never changes it."""
    if isinstance(views, list) and not exclude:
        listed: list[TargetView] = views  # typed: mypyc reads the views' fields natively
        all_usable = True
        for view in listed:
            if not view.up or view.draining:
                all_usable = False
                break
        if all_usable:
            return listed
    usable: list[TargetView] = []
    for view in views:
        if view.up and not view.draining and (not exclude or view.target_id not in exclude):
            usable.append(view)
    return usable


class Generations:
    """`generation_of` for the prefix lookup: the generation of a usable target, None for any
    other. A scan of the views for the few targets the index names, where a dict of all 64
    views' generations was built for every acquire (17k of bench_sched's 382k instructions a
    round, callgrind)."""

    def __init__(self, usable: list[TargetView]) -> None:
        self._usable = usable

    def __call__(self, target_id: int) -> int | None:
        for view in self._usable:
            if view.target_id == target_id:
                return view.generation
        return None


def index_of(candidates: Sequence[Candidate], target_id: int) -> int:
    """Where the chosen target is among the candidates (and its view among the views)."""
    for index, candidate in enumerate(candidates):
        if candidate.target_id == target_id:
            return index
    raise ValueError(f"target {target_id} is not a candidate")


def build_candidates(
    views: list[TargetView],
    *,
    local_inflight: dict[int, int],
    peer_inflight: dict[str, int],
    last_reply_end: dict[int, float],
    router_waiting: int,
    matches: dict[int, Match],
    default_capacity: int,
    fits_of: Callable[[TargetView], bool | None],
    prompt_tokens: int = 0,
    recent: dict[int, deque[tuple[float, int, int]]] | None = None,
    now: float = 0.0,
    engine_queued: dict[int, float] | None = None,
    free_fit_of: FitsIfCold | None = None,
    prefills: PrefillsInFlight | None = None,
    previous: list[Candidate] | None = None,
) -> tuple[list[Candidate], bool]:
    """Candidates for every view, and whether any has a free slot (spec §7, §8).

    - occupancy: max(ours + live peers', the engine's Running if known and fresh); after one
      of our replies ended since the scrape, Running still counts (and Waiting one less) when
      the engine reported waiters: the slot that reply freed went to the engine's deferred
      request, not to our next one, which was sent into a full engine (`pharos sim --verdict`,
      seeds 1-5: noisy 12 -> 11 comparisons lost, real-bypass 7 -> 6, sharegpt-noisy 4 -> 3)
    - capacity: the engine's, else config's, else `default_capacity`, saturated when the
      engine reports waiters
    - warm: residency LOADED; None when the engine does not report residency
    - loading: residency LOADING, or a cold target with requests in flight
    - queue ahead: router waiters (all instances) + the engine's fresh Waiting
    - `fits_of` is asked only about idle cold targets whose host memory and size are known
      (fits_if_cold is None otherwise): 16 Python calls an acquire fewer in bench_sched
    - evicts: on a per-slot engine, for a prompt under half cached there, the recent
      conversation it would push out of a free slot (`recent`: finished prompts per target)
    - engine queued: what replies on the target lately waited inside the engine (`engine_queued`)
    - evicts loaded: the cold load fits only by unloading an idle model one of our replies used
      within IDLE_MODEL_STALE_S (`free_fit_of`'s room_beside_loaded negative; a native call, where a
      Callable cost ~300 instructions a target)
    - slots busy: on a full target whose slots all hold our requests, the earliest of their
      expected prefill ends (`prefills`)
    - room: for a cold target that fits, the host memory its load leaves beside every model
      held, stale ones not (`free_fit_of`'s room_beside_loaded); None otherwise

    `previous`: the list this returned last time for these views. A candidate equal to the one
    at its position there is that one, and when all are, so is the list: building and freeing
    64 Candidates was ~30k of acquire-release-64's ~240k instructions a round (callgrind).

    One inlined loop: it runs for every acquire and queue re-run, over up to 64 targets. A list
    and dicts, not any Sequence and Mapping: mypyc indexes the list and calls PyDict_GetItem,
    where a Mapping's .get was a method lookup and a Python call, 3 a view (10.4 -> 8.1 µs
    over bench_sched's 64 views).
    """
    candidates: list[Candidate] | None = None  # None: so far every one is previous's
    reusable = 0 if previous is None else len(previous)
    position = -1
    any_free = False
    loaded, unknown, loading_state, cold = _RESIDENCIES
    # bit (id & 31) of each target the prefix index matched (a few of 64): a view whose bit is
    # clear skips the dict lookup (~150 instructions each, callgrind)
    match_bits = 0
    for matched_id in matches:
        match_bits |= 1 << (matched_id & 31)
    for view in views:
        position += 1
        target_id = view.target_id
        occupancy = local_inflight.get(target_id, 0) if local_inflight else 0  # ~150 a lookup
        if peer_inflight:
            occupancy += peer_inflight.get(view.key, 0)
        ended_at = last_reply_end.get(target_id)
        scraped_at = view.last_fast_scrape_at
        fresh = ended_at is None or (scraped_at is not None and ended_at < scraped_at)
        engine_waiting = None
        running = view.running
        if fresh:
            if running is not None and running > occupancy:
                occupancy = running
            engine_waiting = view.waiting
        elif running is not None and scraped_at is not None:
            waiting = view.waiting
            if waiting is not None and waiting > 0:  # the freed slot went to the engine's waiter
                engine_waiting = waiting - 1
                if running > occupancy:
                    occupancy = running
        capacity = view.capacity
        if capacity is None or capacity < 1:
            capacity = view.config_capacity
        if capacity is None or capacity < 1:
            capacity = default_capacity
            if engine_waiting is not None and engine_waiting > 0:
                free = 0
            else:
                free = capacity - occupancy if occupancy < capacity else 0
        else:
            free = capacity - occupancy if occupancy < capacity else 0
        residency = view.residency
        if residency is loaded:
            warm: bool | None = True
            loading = False
        elif residency is unknown:
            warm = None
            loading = False
        else:
            warm = False
            loading = residency is loading_state or occupancy > 0
        fits = None
        evicts_loaded = False
        room: int | None = None
        if (
            residency is cold
            and occupancy == 0
            and view.memory_bytes is not None
            and view.size_bytes is not None
        ):
            fits = fits_of(view)
            if fits is True and free_fit_of is not None:
                room = free_fit_of.room_beside_loaded(view)
                evicts_loaded = room is not None and room < 0
        match = matches.get(target_id) if match_bits >> (target_id & 31) & 1 else None
        matched = 0 if match is None else match.matched_bytes // BYTES_PER_TOKEN
        evicts = 0
        if recent and free > 0 and matched * 2 < prompt_tokens:  # int tests before the dict
            finished = recent.get(target_id)
            if finished and view.kind in PER_SLOT_KINDS:
                evicts = evicted_tokens(finished, free, now)
        slots_busy: float | None = None
        if free > 0:
            any_free = True
        elif prefills:
            bound = prefills.busy_for_s(target_id, occupancy, now)
            if bound >= 0:
                slots_busy = bound
        queue_ahead = router_waiting if engine_waiting is None else router_waiting + engine_waiting
        queued_s = engine_queued.get(target_id) if engine_queued else None
        if previous is not None and position < reusable:
            before = previous[position]
            if before.has_fields(
                target_id,
                capacity,
                free,
                queue_ahead,
                warm,
                view.kv_usage,
                matched,
                view.prefill_s_per_token,
                view.load_s,
                view.service_s,
                fits,
                loading,
                evicts,
                queued_s,
                evicts_loaded,
                slots_busy,
                room,
            ):
                if candidates is not None:
                    candidates.append(before)
                continue
        if candidates is None:
            candidates = [] if previous is None else previous[:position]
        candidates.append(  # not a bound `append`: mypyc calls PyList_Append directly
            Candidate(
                target_id,
                capacity,
                free,
                queue_ahead,
                warm,
                view.kv_usage,
                matched,
                view.prefill_s_per_token,
                view.load_s,
                view.service_s,
                fits,
                loading,
                evicts,
                queued_s,
                evicts_loaded,
                slots_busy,
                room,
            )
        )
    if candidates is None:  # each was previous's
        if previous is None:
            return [], any_free
        return (previous if position + 1 == reusable else previous[: position + 1]), any_free
    return candidates, any_free
