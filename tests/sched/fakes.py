"""A fake TargetSource and helpers for scheduler tests (unique module name: no test packages)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pharos.engine.types import Kind, Residency
from pharos.engine.usage import Usage
from pharos.policy import Candidate
from pharos.sched import Feedback
from pharos.sched.candidates import build_candidates
from pharos.sched.fits import FitsIfCold
from pharos.state.view import TargetView

GB = 1_000_000_000


def make_view(
    target_id: int, model: str = "m", backend: str | None = None, **kw: Any
) -> TargetView:
    """A warm, up target with 2 engine-reported slots and nothing else known."""
    url = backend if backend is not None else f"http://b{target_id}"
    fields: dict[str, Any] = {
        "target_id": target_id,
        "key": f"{url} {model}",
        "backend_url": url,
        "model": model,
        "served_model": model,
        "kind": Kind.LLAMACPP,
        "up": True,
        "draining": False,
        "residency": Residency.LOADED,
        "running": None,
        "waiting": None,
        "capacity": 2,
        "kv_usage": None,
        "size_bytes": None,
        "vram_bytes": None,
        "config_capacity": None,
        "memory_bytes": None,
        "generation": 1,
        "prefill_s_per_token": 0.001,
        "load_s": 8.0,
        "service_s": 4.0,
        "last_fast_scrape_at": None,
    }
    fields.update(kw)
    return TargetView(**fields)


class FakeTargets:
    """In-memory TargetSource: tests edit `views` and read what was observed."""

    def __init__(self) -> None:
        self.views: dict[int, TargetView] = {}
        self.listed: set[str] = set()
        self.observed: list[tuple[int, object, object, object]] = []
        """(target id, prefill s/token, load s, service s): objects, to compare with approx."""
        self.succeeded: list[tuple[int, float]] = []

    def add(self, view: TargetView) -> TargetView:
        self.views[view.target_id] = view
        self.listed.add(view.model)
        return view

    def update(self, target_id: int, **kw: Any) -> None:
        self.views[target_id] = dataclasses.replace(self.views[target_id], **kw)

    def targets_for_model(self, model: str, _now: float) -> Sequence[TargetView]:
        return [v for v in self.views.values() if v.model == model]

    def targets_of_backend(self, backend_url: str, _now: float) -> Sequence[TargetView]:
        return [v for v in self.views.values() if v.backend_url == backend_url]

    def model_listed(self, model: str) -> bool:
        return model in self.listed

    def observe(
        self,
        target_id: int,
        *,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> None:
        self.observed.append((target_id, prefill_s_per_token, load_s, service_s))

    def reply_succeeded(self, target_id: int, now: float) -> None:
        self.succeeded.append((target_id, now))


USAGE_FIELDS = (
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "engine_load_s",
    "engine_prefill_s",
)


def ok(**kw: Any) -> Feedback:
    """A 200 reply; usage fields given by name (completion_tokens=10 unless given)."""
    usage: dict[str, Any] = dict.fromkeys(USAGE_FIELDS)
    usage["completion_tokens"] = 10
    fields: dict[str, Any] = {"status": 200, "ttft_s": 0.5, "duration_s": 3.0}
    for name, value in kw.items():
        (usage if name in USAGE_FIELDS else fields)[name] = value
    return Feedback(**fields, usage=Usage(**usage))


def candidates_with_fits(
    views: list[TargetView],
    last_reply_end: dict[int, float],
    local: dict[int, int],
    now: float,
) -> list[Candidate]:
    """build_candidates over `views` with the scheduler's cold-fit reading of their hosts."""
    fits_of = FitsIfCold(
        lambda url, _now: [v for v in views if v.backend_url == url],
        now,
        local_inflight=local,
        peer_inflight={},
        last_reply_end=last_reply_end,
    )
    candidates, _ = build_candidates(
        views,
        local_inflight=local,
        peer_inflight={},
        last_reply_end=last_reply_end,
        router_waiting=0,
        matches={},
        default_capacity=2,
        fits_of=fits_of,
        free_fit_of=fits_of,
        now=now,
    )
    return list(candidates)
