"""Per-target speed estimates: EWMAs from request feedback (spec §5 Stats)."""

from __future__ import annotations

from dataclasses import dataclass

ALPHA = 0.3


def ewma(previous: float | None, sample: float, alpha: float = ALPHA) -> float:
    """The first sample is the estimate; later ones move it by alpha."""
    if previous is None:
        return sample
    return alpha * sample + (1.0 - alpha) * previous


@dataclass(frozen=True, slots=True)
class TargetStats:
    """Local estimates (None = no local sample yet)."""

    prefill_s_per_token: float | None = None
    load_s: float | None = None
    service_s: float | None = None

    def observed(
        self,
        *,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> TargetStats:
        return TargetStats(
            prefill_s_per_token=self.prefill_s_per_token
            if prefill_s_per_token is None
            else ewma(self.prefill_s_per_token, prefill_s_per_token),
            load_s=self.load_s if load_s is None else ewma(self.load_s, load_s),
            service_s=self.service_s if service_s is None else ewma(self.service_s, service_s),
        )

    def over(self, restored: TargetStats | None) -> TargetStats:
        """Local values win; a restored value fills only a stat with no local sample."""
        if restored is None:
            return self
        return TargetStats(
            prefill_s_per_token=_first(self.prefill_s_per_token, restored.prefill_s_per_token),
            load_s=_first(self.load_s, restored.load_s),
            service_s=_first(self.service_s, restored.service_s),
        )


def _first(local: float | None, restored: float | None) -> float | None:
    return restored if local is None else local


def valid_sample(value: float | None) -> bool:
    """A sample a caller may feed: known, finite and not negative."""
    return value is not None and value >= 0.0 and value == value and value != float("inf")
