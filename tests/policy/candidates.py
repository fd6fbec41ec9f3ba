"""A warm two-slot Candidate for policy tests: 1 ms a prompt token, a 4 s service time, both
slots free unless a test says otherwise."""

from __future__ import annotations

from pharos.policy import Candidate


def cand(target_id: int, **kw: object) -> Candidate:
    base: dict[str, object] = {
        "target_id": target_id,
        "capacity": 2,
        "free_slots": 2,
        "warm": True,
        "prefill_s_per_token": 0.001,
        "service_s": 4.0,
    }
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]
