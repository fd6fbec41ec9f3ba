"""`pharos sim --verdict` over several scenarios: each scenario's verdict text, and the sums
printed after the last one. The per-seed judging is sim/report.py's; this only adds up."""

from __future__ import annotations

from collections.abc import Sequence

from pharos.sim.report import (
    across_streams,
    format_judged_alike,
    format_losses_by_baseline,
    judged_alike,
    losses_by_baseline,
    lost_comparisons,
    verdict,
)
from pharos.sim.run import Result

ALIKE = (
    "every router judged as cost is, against the best of the others (comparisons lost, three "
    "a seed: hit, p50, p95)"
)


class VerdictTally:
    """The comparisons cost loses, scenario by scenario, on one or several tie streams."""

    def __init__(self, streams: Sequence[int]) -> None:
        self._streams = ",".join(map(str, streams))
        self._per_stream = [0] * len(streams)
        self._losses = 0  # the first stream's, the verdict proper
        self._every_stream = 0
        self._some_streams = 0
        self._lost_to: dict[str, tuple[int, ...]] = {}  # per baseline alone
        self._alike: dict[str, int] = {}  # every router judged as cost is

    @property
    def losses(self) -> int:
        """Comparisons lost so far: on the first stream, or summed over several."""
        return sum(self._per_stream) if len(self._per_stream) > 1 else self._losses

    def add(
        self,
        runs: Sequence[Sequence[Result]],
        baselines: Sequence[str],
        *,
        strictly_beats: str | None,
        engines_differ: bool,
    ) -> str:
        """One scenario's verdict: `runs` holds each stream's results, the first printed."""
        results = runs[0]
        text, lost = verdict(results, "cost", baselines, strictly_beats=strictly_beats)
        self._losses += lost
        alone = losses_by_baseline(results, "cost", baselines)
        for baseline, counts in alone.items():
            before = self._lost_to.get(baseline, (0,) * len(counts))
            self._lost_to[baseline] = tuple(a + b for a, b in zip(before, counts, strict=True))
        text += "\nseeds lost to each baseline alone (hit / p50 / p95): "
        text += format_losses_by_baseline(alone)
        alike = judged_alike(results, ["cost", *baselines])
        for policy, count in alike.items():
            self._alike[policy] = self._alike.get(policy, 0) + count
        text += f"\n{ALIKE}: {format_judged_alike(alike)}"
        if len(runs) > 1:
            lost_sets = [
                lost_comparisons(run, "cost", baselines, strictly_beats=strictly_beats)
                for run in runs
            ]
            every, some = across_streams(lost_sets)
            self._every_stream += every
            self._some_streams += some
            for i, lost_set in enumerate(lost_sets):
                self._per_stream[i] += len(lost_set)
            per_stream = " / ".join(str(len(lost_set)) for lost_set in lost_sets)
            text += (
                f"\ntie streams {self._streams}: loses {per_stream} comparisons; "
                f"{every} on every stream, {some} on some only (tie breaks)"
            )
        if engines_differ and strictly_beats is None:
            text += "\n(its engines differ: cost against sticky is not judged, no sticky run)"
        return text

    def summary(self) -> str:
        """The lines after the last scenario."""
        lines = []
        if self._lost_to:
            lines.append(
                "seeds lost to each baseline alone, every scenario (hit / p50 / p95): "
                f"{format_losses_by_baseline(self._lost_to)}"
            )
            lines.append(f"{ALIKE}, every scenario: {format_judged_alike(self._alike)}")
        if len(self._per_stream) > 1:
            per_stream = " / ".join(map(str, self._per_stream))
            lines.append(
                f"verdict over every scenario, tie streams {self._streams}: cost loses "
                f"{per_stream} comparisons; {self._every_stream} on every stream, "
                f"{self._some_streams} on some only (tie breaks)"
            )
        else:
            lines.append(f"verdict over every scenario: cost loses {self._losses} comparisons")
        return "\n".join(lines) + "\n"
