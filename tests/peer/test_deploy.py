"""The files of README "Several instances" stay true: the configs parse with Pharos's own
parser, the pod outlives its drain, the peer DNS names a headless Service, and the alert
rules name series that /metrics exports."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pharos.config import parse_config

DEPLOY = Path(__file__).parents[2] / "deploy" / "peers"


def test_the_compose_config_parses_and_lists_every_instance() -> None:
    config = parse_config((DEPLOY / "pharos.yaml").read_text(), "pharos.yaml")
    assert config.peers is not None
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    instances = sorted(name for name in compose["services"] if name.startswith("pharos-"))
    assert sorted(m.split(":")[0] for m in config.peers.members) == instances
    grace_s = config.drain.grace.seconds + config.drain.timeout.seconds
    assert all(compose["services"][n]["stop_grace_period"] == "3m" for n in instances)
    assert grace_s < 180
    haproxy = (DEPLOY / "haproxy.cfg").read_text()
    assert "option httpchk GET /healthz" in haproxy and "balance roundrobin" in haproxy
    assert {f"{n}:8090" for n in instances} <= set(re.findall(r"pharos-\w:8090", haproxy))


def test_the_kubernetes_pods_outlive_their_drain_and_find_peers_through_a_headless_service() -> (
    None
):
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    config = parse_config(by_kind[("ConfigMap", "pharos")]["data"]["pharos.yaml"], "configmap")
    assert config.peers is not None and config.peers.dns is not None
    deployment = by_kind[("Deployment", "pharos")]["spec"]
    assert deployment["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    grace_s = config.drain.grace.seconds + config.drain.timeout.seconds
    assert deployment["template"]["spec"]["terminationGracePeriodSeconds"] > grace_s
    headless = by_kind[("Service", "pharos-peers")]["spec"]
    assert headless["clusterIP"] == "None"
    assert config.peers.dns.split(".")[0] == "pharos-peers"
    assert headless["ports"][0]["port"] == config.peers.listen.port


def test_the_alert_rules_use_exported_peer_series() -> None:
    rules = yaml.safe_load((DEPLOY / "alerts.yaml").read_text())["groups"][0]["rules"]
    exported = {
        "pharos_peer_up",
        "pharos_peer_mismatch",
        "pharos_peer_proto_mismatch",
        "pharos_peer_dropped_prefix_ops",
        "pharos_peer_last_heard_timestamp_seconds",
    }
    used = {name for rule in rules for name in re.findall(r"pharos_\w+", rule["expr"])}
    assert used == exported
    source = (Path(__file__).parents[2] / "src/pharos/obs/peers.py").read_text()
    assert all(f'"{name}"' in source for name in exported)


def test_the_headless_service_selects_the_pods_and_names_their_peer_port() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    config = parse_config(by_kind[("ConfigMap", "pharos")]["data"]["pharos.yaml"], "configmap")
    assert config.peers is not None
    pod = by_kind[("Deployment", "pharos")]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    headless = by_kind[("Service", "pharos-peers")]["spec"]
    assert headless["selector"].items() <= pod["metadata"]["labels"].items()
    assert headless["publishNotReadyAddresses"] is True  # pods starting together find each other
    assert ports[headless["ports"][0]["targetPort"]] == config.peers.listen.port
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert config.peers.dns is not None and config.peers.members == ()


def test_the_compose_front_is_built_from_debians_haproxy_on_the_pharos_base_image() -> None:
    dockerfile = (DEPLOY / "front.Dockerfile").read_text()
    base = (Path(__file__).parents[2] / "Dockerfile").read_text()

    def bases(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("FROM ")]

    assert bases(dockerfile) == bases(base) == ["FROM python:3.11-slim"]
    assert "apt-get install" in dockerfile and "haproxy" in dockerfile
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert compose["services"]["front"]["build"]["dockerfile"] == "front.Dockerfile"
