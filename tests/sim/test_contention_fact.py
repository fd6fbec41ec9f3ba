"""The simulator's prefill slowdown per other running request against llama-server's own.

tests/captures/engines/llamacpp/b11312/contention.json (tools/measure_contention.py, -np 2 -t 1,
SmolLM2): a ~1,060-token prefill took 14.9 ms a token alone (mean of 3) and 0.99-1.87x that
while a second one prefilled (median 1.54x of 6), on a shared 2-core machine.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from pharos.sim.engines import Flavour, HostSpec

CAPTURE = (
    Path(__file__).resolve().parents[1]
    / "captures"
    / "engines"
    / "llamacpp"
    / "b11312"
    / "contention.json"
)


def _ms_per_token(row: dict[str, float]) -> float:
    return row["prompt_ms"] / row["prompt_n"]


def test_a_simulated_prefill_beside_another_slows_as_much_as_on_llama_server() -> None:
    capture = json.loads(CAPTURE.read_text())
    alone = statistics.mean(_ms_per_token(row) for row in capture["alone"])
    ratios = [_ms_per_token(row) / alone for pair in capture["pairs"] for row in pair]
    simulated = 1.0 + HostSpec("e0", Flavour.LLAMACPP).contention * 1
    assert len(ratios) == 6
    assert min(ratios) <= simulated <= max(ratios)
    assert abs(simulated - statistics.median(ratios)) < 0.1
