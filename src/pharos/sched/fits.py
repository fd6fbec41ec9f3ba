"""Host memory: whether a cold model's load fits beside what its host holds (spec §7)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from pharos.engine.types import Residency
from pharos.sched.types import NeverFits
from pharos.state.view import TargetView

BYTES_PER_GIB = 1024**3  # memory_gb counts GiB

IDLE_MODEL_STALE_S = 45.0
"""A loaded model none of our replies used for this long holds no memory a second replica of
another model may need (`fits_beside_loaded`): its unload is not charged as a reload, and the
replica counts as unloading nothing. Cold-burst-heavy, where the burst's model stayed loaded
on all three hosts after its one turn and kept chat model b on one host's 2 slots for the
rest of the run (seed 1: 19 chat turns queued, 50 s summed): comparisons lost over seeds
1-20, never / 15 / 30 / 45 / 60 / 90 / 120 s: 32 / 25 / 22 / 21 / 22 / 25 / 29; seeds 1-5:
9 -> 6. Chat users there think 5-30 s between turns."""

_LOADING: Final = Residency.LOADING  # read once, as candidates._RESIDENCIES
_LOADED: Final = Residency.LOADED


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


def never_fits(model: str, views: Sequence[TargetView]) -> NeverFits | None:
    """NeverFits when the model is cold and larger than every host's memory_gb: waiting would
    never help (the demo's llama3.2:1b once waited forever on a host too small for it)."""
    largest: int | None = None
    size_bytes: int | None = None
    for view in views:
        if view.residency is not Residency.COLD:
            return None  # loaded, loading or not reported: the engine holds it already
        if view.size_bytes is None or view.memory_bytes is None:
            return None
        if view.size_bytes <= view.memory_bytes:
            return None
        size_bytes = view.size_bytes
        largest = view.memory_bytes if largest is None else max(largest, view.memory_bytes)
    if size_bytes is None or largest is None:
        return None
    return NeverFits(
        f"model {model!r} is {size_bytes / BYTES_PER_GIB:.1f} GB and fits on no host serving "
        f"it: the largest has {largest / BYTES_PER_GIB:.1f} GB (backends[].memory_gb)"
    )
