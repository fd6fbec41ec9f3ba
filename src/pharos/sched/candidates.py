"""From a target's view and our counts to the policy's Candidate (spec §7, §8). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable

from pharos.engine.types import Residency
from pharos.policy import Candidate
from pharos.state.view import TargetView


def engine_counts_fresh(view: TargetView, last_reply_end_at: float | None) -> bool:
    """The engine's Running and Waiting still count: no reply on the target ended since the last
    fast scrape. Until the next one they still hold the slot that reply freed (spec §8)."""
    if last_reply_end_at is None:
        return True
    if view.last_fast_scrape_at is None:
        return False
    return last_reply_end_at < view.last_fast_scrape_at


def occupied(view: TargetView, cluster_inflight: int, fresh: bool) -> int:
    """max(our + live peers' in-flight, the engine's Running when known and fresh)."""
    running = view.running
    if fresh and running is not None and running > cluster_inflight:
        return running
    return cluster_inflight


def warm_of(residency: Residency) -> bool | None:
    if residency is Residency.LOADED:
        return True
    if residency is Residency.UNKNOWN:
        return None
    return False


def fits_if_cold(view: TargetView, others: Iterable[tuple[TargetView, int]]) -> bool | None:
    """Whether loading this cold model evicts nothing busy (spec §7 "Cold loads and memory").

    `others`: the other targets of the same backend with their occupancy. A loaded model with no
    requests in flight is evictable; one with requests, or one loading, holds its memory. None
    when the host memory, this model's size or a busy model's footprint is unknown.
    """
    memory = view.memory_bytes
    size = view.size_bytes
    if memory is None or size is None:
        return None
    held_bytes = 0
    for other, occupancy in others:
        if other.target_id == view.target_id:
            continue
        busy = occupancy > 0 or other.residency is Residency.LOADING
        if not busy:
            continue
        footprint = other.vram_bytes if other.vram_bytes is not None else other.size_bytes
        if footprint is None:
            return None
        held_bytes += footprint
    return size <= memory - held_bytes


def capacity_of(view: TargetView) -> int | None:
    """Slots from the engine, else from config; None = unknown (the fallback applies)."""
    if view.capacity is not None and view.capacity > 0:
        return view.capacity
    if view.config_capacity is not None and view.config_capacity > 0:
        return view.config_capacity
    return None


def build_candidate(
    view: TargetView,
    *,
    occupancy: int,
    fresh: bool,
    router_waiting: int,
    matched_tokens: int,
    default_capacity: int,
    fits: bool | None,
) -> Candidate:
    """`router_waiting`: waiters for the model on every instance, not counting this request."""
    engine_waiting = view.waiting if fresh else None
    capacity = capacity_of(view)
    if capacity is None:
        capacity = default_capacity
        saturated = engine_waiting is not None and engine_waiting > 0
        free = 0 if saturated else max(0, capacity - occupancy)
    else:
        free = max(0, capacity - occupancy)
    queue_ahead = router_waiting + (engine_waiting if engine_waiting is not None else 0)
    residency = view.residency
    warm = warm_of(residency)
    loading = residency is Residency.LOADING or (warm is False and occupancy > 0)
    return Candidate(
        target_id=view.target_id,
        capacity=capacity,
        free_slots=free,
        queue_ahead=queue_ahead,
        warm=warm,
        kv_usage=view.kv_usage,
        matched_tokens=matched_tokens,
        prefill_s_per_token=view.prefill_s_per_token,
        load_s=view.load_s,
        service_s=view.service_s,
        fits_if_cold=fits,
        loading=loading,
    )
