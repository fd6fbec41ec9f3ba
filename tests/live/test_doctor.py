"""`pharos doctor` (the real CLI, as a subprocess) against idle real engines.

Doctor must read every signal SUPPORT.md claims for llama.cpp b11312 and vLLM 0.32.0, with
the probe SUPPORT.md names, and nothing SUPPORT.md calls unknown; in the idle state the
load values are known zeros, llama.cpp reports its 2 slots, and vLLM's capacity stays
unknown (null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pharos.engine.types import Signal
from tests.live.capture import LLAMACPP_GAUGE, VLLM_GAUGE, StateGauge
from tests.live.engines import SERVED_MODEL, SLOTS, RunningEngine
from tests.live.pharos_doctor import doctor, doctor_json, engine_gauge, post_json, support_row

pytestmark = pytest.mark.live


@dataclass(frozen=True)
class Case:
    engine: str  # SUPPORT.md's engine column
    release: str  # SUPPORT.md's release column
    gauge: StateGauge
    capacity: int | None  # what an idle engine reports; None = unknown


CASES = {
    "llamacpp": Case("llamacpp", "b11312", LLAMACPP_GAUGE, SLOTS),
    "vllm": Case("vllm", "v0.32.0", VLLM_GAUGE, None),
}


@pytest.fixture(params=list(CASES))
def idle(
    request: pytest.FixtureRequest,
) -> tuple[Case, RunningEngine]:
    case = CASES[request.param]
    if case.engine == "llamacpp":
        engine: RunningEngine = request.getfixturevalue("llamacpp_pair")[0]
    else:
        engine = request.getfixturevalue("vllm_engine")
    assert engine_gauge(engine.base_url, case.gauge) == (0, 0), "the engine is idle"
    return case, engine


def test_doctor_json_reads_every_signal_support_md_claims(idle: tuple[Case, RunningEngine]) -> None:
    case, engine = idle
    claims = support_row(case.engine, case.release)
    code, report = doctor_json(engine.base_url)
    print(f"{case.engine}: exit {code}; signals {report['signals']}; models {report['models']}")

    assert code == 0
    assert report["error"] is None
    assert report["kind"] == case.engine
    assert claims.reports is not None and report["version"] == claims.reports
    for signal in Signal:
        read: dict[str, str] | None = report["signals"][signal.value]
        claimed = claims.probes[signal.value]
        if claimed is None:
            assert read is None, f"{signal.value}: SUPPORT.md says unknown, doctor read {read}"
        else:
            assert read is not None, f"{signal.value}: SUPPORT.md claims {claimed}, doctor: none"
            assert read["probe"] == claimed, (signal.value, read, claimed)
            assert read["probe"] in report["active"]


def test_doctor_json_idle_values(idle: tuple[Case, RunningEngine]) -> None:
    case, engine = idle
    code, report = doctor_json(engine.base_url)
    assert code == 0
    model: dict[str, Any] = report["models"][SERVED_MODEL]
    assert model["running"] == 0
    assert model["waiting"] == 0
    assert model["capacity"] == case.capacity
    assert report["capacity"]["engine"] == case.capacity
    assert report["capacity"]["config_used"] is False
    claims = support_row(case.engine, case.release)
    if claims.probes[Signal.KV_USAGE.value] is None:
        assert model["kv_usage"] is None
    else:
        assert model["kv_usage"] == 0.0, "an idle engine holds no KV blocks"


def test_doctor_text_names_kind_version_and_probes(idle: tuple[Case, RunningEngine]) -> None:
    case, engine = idle
    _, report = doctor_json(engine.base_url)
    ran = doctor("--url", engine.base_url)
    print(ran.stdout)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == engine.base_url
    assert f"  kind      {case.engine} (detected)" in lines
    assert f"  version   {report['version']}" in lines
    assert "  active probes" in lines
    probe_lines = {line.split()[0]: line for line in lines if line.startswith("    ")}
    for name in report["active"]:
        assert name in probe_lines, f"probe {name} missing from the text"
    running = probe_lines[report["signals"]["running"]["probe"]]
    assert running.split()[1] == "running" and "=0" in running, running
    if case.capacity is None:
        note = "capacity: the engine does not report"
        assert any(line.strip().startswith(note) for line in lines)
        assert "capacity" in next(line for line in lines if line.startswith("  unknown"))


EXPECTED_ROUTES = {
    "llamacpp": {"/v1/responses": (400, True)},
    "vllm": {"/v1/messages": (400, True), "/v1/responses": (400, True)},
}
"""What doctor's POST {} gets per coding-agent route, and its verdict, where it is right."""


def test_doctor_reports_the_coding_agent_routes(idle: tuple[Case, RunningEngine]) -> None:
    case, engine = idle
    _, report = doctor_json(engine.base_url)
    for path, (status, served) in EXPECTED_ROUTES[case.engine].items():
        assert report["routes"][path] == {"status": status, "served": served}, path


def test_llamacpp_serves_messages_but_answers_an_empty_body_with_500(
    llamacpp_pair: tuple[RunningEngine, RunningEngine],
) -> None:
    """The engine fact doctor reads: b11312 serves /v1/messages, and answers POST {} with 500."""
    url = llamacpp_pair[0].base_url + "/v1/messages"
    empty = post_json(url, {})
    assert empty[0] == 500 and "'messages' is required" in empty[1], empty
    real = post_json(
        url,
        {
            "model": SERVED_MODEL,
            "max_tokens": 2,
            "messages": [{"role": "user", "content": "Pharos synthetic. Say hi."}],
        },
    )
    assert real[0] == 200 and '"type":"message"' in real[1], real


def test_doctor_sees_that_llamacpp_serves_the_claude_code_route(
    llamacpp_pair: tuple[RunningEngine, RunningEngine],
) -> None:
    _, report = doctor_json(llamacpp_pair[0].base_url)
    assert report["routes"]["/v1/messages"]["served"] is True, report["routes"]
