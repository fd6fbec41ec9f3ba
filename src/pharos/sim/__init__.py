"""Layer-5 routing simulator (spec §14): Pharos's real scheduler, prefix index and policy
against simulated engines on virtual time, beside the baseline routers it must beat."""

from pharos.sim.plot import ttft_cdf_svg
from pharos.sim.report import (
    across_streams,
    class_table,
    format_judged_alike,
    format_losses_by_baseline,
    judged_alike,
    losses_by_baseline,
    lost_comparisons,
    moves,
    table,
    verdict,
)
from pharos.sim.routers import BASELINES, PHAROS_POLICIES
from pharos.sim.run import Result, Sample, Scenario, simulate, simulate_streams
from pharos.sim.scenarios import SCENARIOS

ALL_POLICIES = (*PHAROS_POLICIES, *BASELINES)

__all__ = [
    "ALL_POLICIES",
    "BASELINES",
    "PHAROS_POLICIES",
    "SCENARIOS",
    "Result",
    "Sample",
    "Scenario",
    "across_streams",
    "class_table",
    "format_judged_alike",
    "format_losses_by_baseline",
    "judged_alike",
    "losses_by_baseline",
    "lost_comparisons",
    "moves",
    "simulate",
    "simulate_streams",
    "table",
    "ttft_cdf_svg",
    "verdict",
]
