"""What the scheduler sees of one target at one instant (spec §5 `Target.View`).

A view is immutable and already has the staleness rule applied: a scraped
signal older than 3 × its interval, or a log value whose feed dropped, is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from pharos.engine.types import Kind, Residency


@dataclass(frozen=True, slots=True)
class TargetView:
    target_id: int  # small, stable for the life of the process
    key: str  # backend URL + " " + model: the name peers use
    backend_url: str
    model: str  # the name clients use (after aliases)
    served_model: str  # the engine's own name: what the forwarded body carries
    kind: Kind
    up: bool  # last full round fresh and not ejected
    draining: bool  # removed from config: no new leases
    residency: Residency  # UNKNOWN = the engine does not report it (its one model is loaded)
    running: int | None
    waiting: int | None
    capacity: int | None  # engine-reported, else None (config capacity is `config_capacity`)
    kv_usage: float | None
    size_bytes: int | None
    vram_bytes: int | None
    config_capacity: int | None  # backends[].capacity
    memory_bytes: int | None  # backends[].memory_gb, in bytes
    generation: int  # bumped on unload, unlisted, new engine version
    prefill_s_per_token: float | None  # EWMA from feedback; None = no samples
    load_s: float | None
    service_s: float | None
    last_fast_scrape_at: float | None  # monotonic time of the last load round that answered
