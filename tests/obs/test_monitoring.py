"""monitoring/: the alert rules and the Grafana dashboard lint clean and use only series Pharos
exports, and a live /metrics passes `promtool check metrics` with no findings.

promtool comes from Debian's prometheus package (scripts/install-promtool.sh, run by
`make test`). Locally the promtool tests skip when it is missing; with CI set they fail."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pharos.fakeengine import FakeLlamaCpp, FakeOllama, no_sleep
from tests.obs.rig import MODEL, BackendSpecYaml, Router, StartRouter

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "pharos-alerts.yaml"
DASHBOARD = MONITORING / "pharos-dashboard.json"
SERIES = re.compile(r"\bpharos_[a-z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: scripts/install-promtool.sh should install it")
        pytest.skip("promtool is missing (run scripts/install-promtool.sh)")
    return found


async def run(*args: str, stdin: bytes = b"") -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(stdin), timeout=60)
    assert process.returncode is not None
    return process.returncode, output.decode()


@pytest.fixture
async def router(start_router: StartRouter) -> Router:
    router = await start_router(
        [
            BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama", {"memory_gb": 4}),
            BackendSpecYaml(FakeLlamaCpp(sleep=no_sleep), "llamacpp", {}),
        ]
    )
    for model in (MODEL, "qwen2.5-0.5b"):
        status, _, _ = await router.chat(None, model)
        assert status == 200
    return router


def exported_names(exposition: str) -> set[str]:
    """Every series name a query may use: family names plus a histogram's sample names, also
    for families with no sample yet (a labeled histogram nobody observed)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + suffix for suffix in HISTOGRAM_SUFFIXES)
        names.update(sample.name for sample in family.samples)
    return names


def queried_names(text: str) -> set[str]:
    return set(SERIES.findall(text))


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    queries += [v.get("query", "") for v in dashboard["templating"]["list"]]
    return queries


async def test_alert_rules_pass_promtool_check_rules() -> None:
    status, output = await run(promtool(), "check", "rules", str(RULES))
    assert status == 0, output
    assert "SUCCESS" in output


async def test_live_metrics_pass_promtool_check_metrics_with_no_findings(router: Router) -> None:
    _, _, body = await router.get("/metrics")
    status, output = await run(promtool(), "check", "metrics", stdin=body)
    assert (status, output.strip()) == (0, "")


async def test_every_series_in_the_dashboard_and_rules_is_exported(router: Router) -> None:
    _, _, body = await router.get("/metrics")
    exported = exported_names(body.decode())
    rules = yaml.safe_load(RULES.read_text())
    rule_exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    used = {name for expr in rule_exprs + dashboard_queries() for name in queried_names(expr)}
    assert len(used) >= 10  # the check below is not vacuous
    assert used - exported == set()


def test_a_series_missing_from_the_exposition_is_caught() -> None:
    exposition = (
        "# HELP pharos_ttft_seconds t\n# TYPE pharos_ttft_seconds histogram\n"
        "# HELP pharos_requests_total r\n# TYPE pharos_requests_total counter\n"
    )
    exported = exported_names(exposition)
    assert {"pharos_ttft_seconds_bucket", "pharos_requests_total"} <= exported
    assert queried_names("rate(pharos_tokens_total[5m]) / pharos_ttft_seconds_count") - (
        exported
    ) == {"pharos_tokens_total"}
