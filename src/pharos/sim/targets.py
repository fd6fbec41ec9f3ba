"""The simulated fleet as the scheduler sees it: what a scrape read, one view per target.

It plays `pharos.state.State`'s part behind the scheduler's TargetSource protocol: views
carry what each engine flavour reports (llama.cpp: running, waiting, capacity; Ollama:
residency and sizes, capacity from config; vLLM: running and waiting), as of the last
scrape (every `scrape_interval_s`, 1 s as in serve), and the speed EWMAs learned from
feedback (pharos.state.stats). A model that goes cold bumps its target's generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pharos.engine.types import Kind, Residency
from pharos.sim.engines import EngineCounts, Flavour, SimEngine
from pharos.state.stats import TargetStats
from pharos.state.view import TargetView

_KINDS = {Flavour.LLAMACPP: Kind.LLAMACPP, Flavour.OLLAMA: Kind.OLLAMA, Flavour.VLLM: Kind.VLLM}


@dataclass
class _Target:
    target_id: int
    engine: SimEngine
    model: str
    size_bytes: int
    stats: TargetStats
    generation: int = 0
    loaded_since_reply: bool = False


class SimTargets:
    def __init__(self, engines: Sequence[SimEngine], now: Callable[[], float]) -> None:
        self._now = now
        self._targets: list[_Target] = []
        for engine in engines:
            for model, gb in zip(engine.spec.models, engine.spec.model_gb, strict=True):
                self._targets.append(
                    _Target(len(self._targets), engine, model, int(gb * (1 << 30)), TargetStats())
                )
        self._counts: dict[int, EngineCounts] = {}
        self._scraped_at: float | None = None
        self.scrape()

    def engine_of(self, target_id: int) -> SimEngine:
        return self._targets[target_id].engine

    def scrape(self) -> None:
        """One round over every engine: the next views show what it read."""
        counts: dict[int, EngineCounts] = {}
        for target in self._targets:
            if id(target.engine) not in counts:
                counts[id(target.engine)] = target.engine.counts()
        for target in self._targets:
            loaded_before = bool(self._counts) and self._residency(target) is Residency.LOADED
            if loaded_before and not counts[id(target.engine)].loaded[target.model]:
                target.generation += 1
            target.loaded_since_reply = False
        self._counts = counts
        self._scraped_at = self._now()

    def _residency(self, target: _Target) -> Residency:
        if target.engine.spec.flavour is not Flavour.OLLAMA:
            return Residency.UNKNOWN
        counts = self._counts[id(target.engine)]
        if counts.loaded[target.model] or target.loaded_since_reply:
            return Residency.LOADED
        return Residency.LOADING if counts.loading[target.model] else Residency.COLD

    def _view(self, target: _Target) -> TargetView:
        spec = target.engine.spec
        counts = self._counts[id(target.engine)]
        flavour = spec.flavour
        reports_load = flavour is not Flavour.OLLAMA
        return TargetView(
            target_id=target.target_id,
            key=f"http://{spec.name} {target.model}",
            backend_url=f"http://{spec.name}",
            model=target.model,
            served_model=target.model,
            kind=_KINDS[flavour],
            up=True,
            draining=False,
            residency=self._residency(target),
            running=counts.running if reports_load else None,
            waiting=counts.waiting if reports_load else None,
            capacity=spec.slots if flavour is Flavour.LLAMACPP else None,
            kv_usage=None,
            size_bytes=target.size_bytes if flavour is Flavour.OLLAMA else None,
            vram_bytes=None,
            config_capacity=spec.slots if flavour is Flavour.OLLAMA else None,
            memory_bytes=int(spec.memory_gb * (1 << 30)) if flavour is Flavour.OLLAMA else None,
            generation=target.generation,
            prefill_s_per_token=target.stats.prefill_s_per_token,
            load_s=target.stats.load_s,
            service_s=target.stats.service_s,
            last_fast_scrape_at=self._scraped_at,
        )

    # ---- TargetSource ---------------------------------------------------------------------

    def targets_for_model(self, model: str, _now: float) -> Sequence[TargetView]:
        return [self._view(t) for t in self._targets if t.model == model]

    def targets_of_backend(self, backend_url: str, _now: float) -> Sequence[TargetView]:
        return [
            self._view(t) for t in self._targets if f"http://{t.engine.spec.name}" == backend_url
        ]

    def model_listed(self, model: str) -> bool:
        return any(t.model == model for t in self._targets)

    def observe(
        self,
        target_id: int,
        *,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> None:
        target = self._targets[target_id]
        target.stats = target.stats.observed(
            prefill_s_per_token=prefill_s_per_token, load_s=load_s, service_s=service_s
        )

    def reply_succeeded(self, target_id: int, _now: float) -> None:
        self._targets[target_id].loaded_since_reply = True
