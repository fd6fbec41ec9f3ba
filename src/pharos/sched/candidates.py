"""From a target's view and our counts to the policy's Candidate (spec §7, §8). Pure functions."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from pharos.engine.types import Kind, Residency
from pharos.policy import Candidate
from pharos.prefix import Match
from pharos.sched.prefills import PrefillsInFlight
from pharos.state.view import TargetView

BYTES_PER_TOKEN = 4

IDLE_MODEL_STALE_S = 45.0
"""A loaded model none of our replies used for this long holds no memory a second replica of
another model may need (`fits_beside_loaded`): its unload is not charged as a reload, and the
replica counts as unloading nothing. Cold-burst-heavy, where the burst's model stayed loaded
on all three hosts after its one turn and kept chat model b on one host's 2 slots for the
rest of the run (seed 1: 19 chat turns queued, 50 s summed): comparisons lost over seeds
1-20, never / 15 / 30 / 45 / 60 / 90 / 120 s: 32 / 25 / 22 / 21 / 22 / 25 / 29; seeds 1-5:
9 -> 6. Chat users there think 5-30 s between turns."""

SLOT_KEEP_S = 120.0
"""How long a finished prompt's slot counts as holding a conversation that will come back:
chat users think 5-30 s between turns in the simulator, minutes at most in Open WebUI."""

PER_SLOT_KINDS: Final = frozenset({Kind.LLAMACPP, Kind.OLLAMA, Kind.LLAMA_SWAP})
"""Engines that cache per slot: a fresh prompt on a free slot overwrites what it held."""

_RESIDENCIES: Final = (Residency.LOADED, Residency.UNKNOWN, Residency.LOADING, Residency.COLD)
"""Read once here: on Python 3.11 each `Residency.X` goes through EnumType.__getattr__, ~700
instructions (callgrind), 7 of them an acquire in bench_sched."""
_LOADING: Final = Residency.LOADING
_LOADED: Final = Residency.LOADED


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


def fits_if_cold(view: TargetView, others: Iterable[tuple[TargetView, int]]) -> bool | None:
    """Whether loading this cold model evicts nothing busy (spec §7 "Cold loads and memory").

    `others`: the other targets of the same backend with their occupancy. A loaded model with no
    requests in flight is evictable; one with requests, or one loading, holds its memory. None
    when the host memory, this model's size or a busy model's footprint is unknown.
    """
    return _fits(view, others, idle_loaded_holds=False)


def fits_beside_loaded(
    view: TargetView,
    others: Iterable[tuple[TargetView, int]],
    idle_ended: dict[int, float] | None = None,
    stale_before: float = -1.0,
) -> bool | None:
    """Whether loading this cold model fits beside every model the host holds, idle ones too:
    False when the load would unload an idle model (whose next request then reloads it). None
    when the host memory or a size is unknown.
    `idle_ended`: when our last reply on each target ended; an idle model whose last reply
    ended before `stale_before` holds nothing (IDLE_MODEL_STALE_S). One we never served holds."""
    return _fits(view, others, True, idle_ended, stale_before)


def _fits(
    view: TargetView,
    others: Iterable[tuple[TargetView, int]],
    idle_loaded_holds: bool,
    idle_ended: dict[int, float] | None = None,
    stale_before: float = -1.0,
) -> bool | None:
    """Whether the model fits in the host memory the others hold: a busy or loading model
    always holds its footprint, an idle loaded one only when `idle_loaded_holds`."""
    room = _room(view, others, idle_loaded_holds, idle_ended, stale_before)
    return None if room is None else room >= 0


def room_beside_loaded(
    view: TargetView,
    others: Iterable[tuple[TargetView, int]],
    idle_ended: dict[int, float] | None = None,
    stale_before: float = -1.0,
) -> int | None:
    """The host memory left once this cold model has loaded beside every model the host
    holds (idle ones too, stale ones not: fits_beside_loaded), negative when it doesn't fit;
    None when the host memory or a size is unknown."""
    return _room(view, others, True, idle_ended, stale_before)


def _room(
    view: TargetView,
    others: Iterable[tuple[TargetView, int]],
    idle_loaded_holds: bool,
    idle_ended: dict[int, float] | None,
    stale_before: float,
) -> int | None:
    memory_bytes = view.memory_bytes
    size_bytes = view.size_bytes
    if memory_bytes is None or size_bytes is None:
        return None
    held_bytes = 0
    for other, occupancy in others:
        if other.target_id == view.target_id:
            continue
        residency = other.residency
        holds = occupancy > 0 or residency is _LOADING
        if not holds and not (idle_loaded_holds and residency is _LOADED):
            continue
        if not holds and idle_ended is not None:
            ended_at = idle_ended.get(other.target_id)
            if ended_at is not None and ended_at < stale_before:
                continue
        vram_bytes = other.vram_bytes  # 0 on the CPU (Ollama's size_vram): it holds its size
        footprint = vram_bytes if vram_bytes is not None and vram_bytes > 0 else other.size_bytes
        if footprint is None:
            return None
        held_bytes += footprint
    return memory_bytes - held_bytes - size_bytes


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


def backend_occupancy(
    views: Iterable[TargetView],
    *,
    local_inflight: dict[int, int],
    peer_inflight: dict[str, int],
    last_reply_end: dict[int, float],
) -> list[tuple[TargetView, int]]:
    """Each of a backend's targets with its occupancy, for `fits_if_cold` (one loop, inlined:
    a helper call per target cost ~1 µs each)."""
    out: list[tuple[TargetView, int]] = []
    for view in views:
        target_id = view.target_id
        occupancy = local_inflight.get(target_id, 0)
        if peer_inflight:
            occupancy += peer_inflight.get(view.key, 0)
        ended_at = last_reply_end.get(target_id)
        scraped_at = view.last_fast_scrape_at
        running = view.running
        if running is not None and running > occupancy:
            if ended_at is None or (scraped_at is not None and ended_at < scraped_at):
                occupancy = running
            elif scraped_at is not None and view.waiting is not None and view.waiting > 0:
                occupancy = running  # the engine's waiter took the slot our reply freed
        out.append((view, occupancy))
    return out


class FitsIfCold:
    """`fits_of` for build_candidates: a backend's occupancy is built once a pick, when the first
    of its idle cold targets is asked about. Compiled, where the closure it replaces ran
    interpreted in the scheduler (3 calls an acquire in bench_sched)."""

    def __init__(
        self,
        targets_of_backend: Callable[[str, float], Sequence[TargetView]],
        now: float,
        *,
        local_inflight: dict[int, int],
        peer_inflight: dict[str, int],
        last_reply_end: dict[int, float],
    ) -> None:
        self._targets_of_backend = targets_of_backend
        self._now = now
        self._local_inflight = local_inflight
        self._peer_inflight = peer_inflight
        self._last_reply_end = last_reply_end
        self._by_backend: dict[str, list[tuple[TargetView, int]]] = {}

    def __call__(self, view: TargetView) -> bool | None:
        return fits_if_cold(view, self._others(view.backend_url))

    def room_beside_loaded(self, view: TargetView) -> int | None:
        """`room_beside_loaded` over this pick's occupancy of the view's backend."""
        return room_beside_loaded(
            view,
            self._others(view.backend_url),
            self._last_reply_end,
            self._now - IDLE_MODEL_STALE_S,
        )

    def _others(self, backend_url: str) -> list[tuple[TargetView, int]]:
        others = self._by_backend.get(backend_url)
        if others is None:
            others = backend_occupancy(
                self._targets_of_backend(backend_url, self._now),
                local_inflight=self._local_inflight,
                peer_inflight=self._peer_inflight,
                last_reply_end=self._last_reply_end,
            )
            self._by_backend[backend_url] = others
        return others


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
