"""deploy/peers/kubernetes.yaml against the Kubernetes 1.37 API schemas, offline (no cluster
here): deploy/peers/validate-kubernetes.sh runs PyPI's kubernetes-validate, strict. The
manifests pass, and the validator really checks: each broken copy below is refused.
(What the manifests must say for peers, grace and rollout: tests/peer/test_deploy.py.)"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.discovery.docker_live import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy" / "peers"
SCRIPT = DEPLOY / "validate-kubernetes.sh"


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(path)], capture_output=True, text=True, timeout=600, check=False
    )


def test_the_manifests_validate_against_the_kubernetes_schemas() -> None:
    done = validate(DEPLOY / "kubernetes.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line for line in done.stdout.splitlines() if " passed for resource " in line]
    resources = {line.split(" passed for resource ")[1].split()[0] for line in passed}
    assert resources == {
        "configmap/pharos",
        "deployment/pharos",
        "service/pharos-peers",
        "service/pharos",
    }


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "Deployment"]
    return found


def headless(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["metadata"]["name"] == "pharos-peers"]
    return found


def _grace_as_text(docs: list[dict[str, Any]]) -> None:
    deployment(docs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "660s"


def _typo_in_rollout(docs: list[dict[str, Any]]) -> None:
    deployment(docs)["spec"]["strategy"]["rollingUpdate"] = {"maxUnavailable": 0, "maxSurg": 1}


def _port_out_of_type(docs: list[dict[str, Any]]) -> None:
    headless(docs)["spec"]["ports"][0]["port"] = "peer"


def _probe_without_handler_field(docs: list[dict[str, Any]]) -> None:
    probe = deployment(docs)["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    probe["httpGet"] = {"path": "/healthz", "port": "http", "schema": "HTTP"}


# broken copy                    | what the schema refuses
# _grace_as_text                 | terminationGracePeriodSeconds is an integer
# _typo_in_rollout               | strict: rollingUpdate has no field maxSurg
# _port_out_of_type              | a Service port is an integer (targetPort may be a name)
# _probe_without_handler_field   | strict: httpGet has no field schema (it is scheme)
@pytest.mark.parametrize(
    "breaks",
    [_grace_as_text, _typo_in_rollout, _port_out_of_type, _probe_without_handler_field],
)
def test_a_broken_copy_of_the_manifests_is_refused(
    breaks: Callable[[list[dict[str, Any]]], None], tmp_path: Path
) -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    breaks(docs)
    broken = tmp_path / "kubernetes.yaml"
    broken.write_text(yaml.safe_dump_all(docs))
    done = validate(broken)
    assert done.returncode != 0, done.stdout
    assert "did not validate" in done.stdout + done.stderr
