"""The tie-break stream: which random seeds Pharos's requests carry to break exact ties
(RouteReq.seed), so a verdict can be re-run on other draws with the workload unchanged.

Measured 2026-12-07 (README, "How much of the verdict is ties"): with the policy unchanged,
streams 0-3 lost 155 / 159 / 180 / 159 comparisons over seeds 1-20.
"""

from __future__ import annotations

from pharos.sim import SCENARIOS
from pharos.sim.run import simulate

CHAT = SCENARIOS["chat"].with_duration(120.0)


def _turns(result: object) -> list[tuple[str, int, int, str, float]]:
    return [
        (s.user, s.session_index, s.turn_index, s.engine, s.ttft_s)
        for s in result.samples  # type: ignore[attr-defined]
    ]


def test_stream_0_is_the_run_without_a_stream() -> None:
    assert _turns(simulate(CHAT, "cost", 3, tie_stream=0)) == _turns(simulate(CHAT, "cost", 3))


def test_another_stream_serves_the_same_turns_and_breaks_ties_otherwise() -> None:
    """Chat's first turns tie on two idle equal engines: another draw sends some elsewhere."""
    plain, other = simulate(CHAT, "cost", 3), simulate(CHAT, "cost", 3, tie_stream=1)
    key = [t[:3] for t in _turns(plain)]
    assert sorted(key) == sorted(t[:3] for t in _turns(other))
    assert [t[3] for t in sorted(_turns(plain))] != [t[3] for t in sorted(_turns(other))]


def test_a_baseline_has_no_stream() -> None:
    """Baselines break no ties by these seeds: their runs are the same on every stream."""
    for policy in ("sticky", "round-robin", "cache-aware"):
        assert _turns(simulate(CHAT, policy, 3, tie_stream=2)) == _turns(simulate(CHAT, policy, 3))
