"""The files of README "Several instances" stay true: the configs parse with Pharos's own
parser, the pod outlives its drain, the peer DNS names a headless Service, and the alert
rules name series that /metrics exports."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pharos.config import parse_config

REPO = Path(__file__).parents[2]
DEPLOY = REPO / "deploy" / "peers"


def stages(dockerfile: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each its (INSTRUCTION, arguments) in order, FROM first;
    continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    found: list[list[tuple[str, str]]] = []
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            found.append([])
        found[-1].append((instruction.upper(), " ".join(arguments.split())))
    return found


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
    base = (REPO / "Dockerfile").read_text()

    def bases(text: str) -> list[str]:
        return [stage[0][1].split()[0] for stage in stages(text)]

    assert bases(dockerfile) == ["python:3.11-slim"]
    assert set(bases(base)) == {"python:3.11-slim"}  # the build stage and the final one
    assert "apt-get install" in dockerfile and "haproxy" in dockerfile
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert compose["services"]["front"]["build"]["dockerfile"] == "front.Dockerfile"


def test_the_image_compiles_in_a_build_stage_and_ships_no_compiler() -> None:
    """setup.py compiles the policy (mypyc) and the chain's C links only where it and a
    compiler are: the image once copied no setup.py into a base with no gcc and ran the
    pure-Python build (pick p50 ~45 instead of ~8 us). The live proof is
    tests/live/test_docker_e2e.py's first test; this one fails fast on the Dockerfile."""
    found = stages((REPO / "Dockerfile").read_text())
    assert len(found) == 2, [stage[0] for stage in found]  # build, final
    build, final = found
    assert build[0] == ("FROM", "python:3.11-slim AS build"), build[0]
    runs = " ".join(args for instruction, args in build if instruction == "RUN")
    assert re.search(r"apt-get install .*\bgcc\b.*\blibc6-dev\b", runs), runs
    assert "python3-dev" in runs and "Python.h" in runs  # headers only where the base has none
    copied = [args.split()[:-1] for instruction, args in build if instruction == "COPY"]
    sources = {source for paths in copied for source in paths}
    assert {"setup.py", "pyproject.toml", "src"} <= sources, copied
    assert "pip install" in runs and "'mypyc', 'c', 'c'" in runs  # the build fails if it fell back

    assert final[0] == ("FROM", "python:3.11-slim"), final[0]
    final_text = " ".join(f"{instruction} {args}" for instruction, args in final)
    assert "COPY --from=build /opt/pharos /opt/pharos" in final_text
    assert "apt-get" not in final_text and "gcc" not in final_text
    kept = {instruction: args for instruction, args in final}
    assert kept["USER"] == "pharos"
    assert kept["VOLUME"] == '["/etc/pharos", "/var/lib/pharos"]'
    assert kept["ENTRYPOINT"] == '["pharos"]'
    assert "/healthz" in kept["HEALTHCHECK"]


def test_a_local_build_left_in_the_tree_stays_out_of_the_image() -> None:
    """An editable install compiles in place (src/**/*.so, src/pharos.egg-info): the host's
    build must not reach the image's wheel, and what setup.py compiles must."""
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    assert not any(pattern.startswith("!") for pattern in ignored)  # excluded() has no `!`

    def regex(pattern: str) -> re.Pattern[str]:
        """Docker's .dockerignore glob: `**` any directories, `*` and `?` within one name."""
        parts = re.split(r"(\*\*/?|\*|\?)", pattern)
        glob = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
        return re.compile("".join(glob.get(part, re.escape(part)) for part in parts))

    def excluded(path: str) -> bool:
        """Docker excludes a path when it or a directory above it matches a pattern."""
        names = path.split("/")
        prefixes = ["/".join(names[: n + 1]) for n in range(len(names))]
        return any(regex(p).fullmatch(prefix) for p in ignored for prefix in prefixes)

    # path in the build context                                  | excluded
    table = [
        ("src/pharos/policy/cost.cpython-311-x86_64-linux-gnu.so", True),
        ("src/pharos_policy__mypyc.cpython-311-x86_64-linux-gnu.so", True),
        ("src/pharos.egg-info/SOURCES.txt", True),
        ("build/lib.linux-x86_64-cpython-311/pharos/policy/cost.py", True),
        ("src/pharos/prefix/_chainc.c", False),
        ("src/pharos/policy/cost.py", False),
        ("setup.py", False),
    ]
    assert [(path, excluded(path)) for path, _ in table] == table
