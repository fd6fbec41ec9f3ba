"""Labels -> BackendSpec (spec §10), replayed on Docker 29.1.3's recorded containers list."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pharos.config import BYTES_PER_GB
from pharos.discovery.docker_labels import LeftOut, backend_of_container, backends_of_containers
from pharos.engine.types import Kind
from tests.discovery.docker_rig import captured_containers

SPIKE_ID = "358f252335fb487678d2ca0787325f545b6f42b02493739b0bb39c500686c608"


def spike(**labels: str) -> dict[str, Any]:
    """The recorded pharos-spike container (Ollama 0.34.4, one exposed port 11434, bridge
    IP 172.17.0.2, labels pharos.enable=true and pharos.memory_gb=8), labels changed."""
    container = copy.deepcopy(captured_containers()[0])
    container["Labels"].update(labels)
    return container


def test_the_recorded_container_makes_an_auto_backend_with_its_log_as_feed() -> None:
    specs, left_out = backends_of_containers(captured_containers())
    assert left_out == []
    assert len(specs) == 1
    spec = specs[0]
    assert spec.url == "http://172.17.0.2:11434"
    assert spec.kind is Kind.AUTO
    assert spec.memory_bytes == 8 * BYTES_PER_GB
    assert spec.capacity is None
    assert spec.log_feed == f"docker://{SPIKE_ID}"


@pytest.mark.parametrize(
    ("labels", "url", "kind", "capacity"),
    [
        # labels                                         url                           kind
        ({"pharos.port": "8080"}, "http://172.17.0.2:8080", Kind.AUTO, None),
        ({"pharos.kind": "ollama"}, "http://172.17.0.2:11434", Kind.OLLAMA, None),
        (
            {"pharos.kind": "llamacpp", "pharos.capacity": "4"},
            "http://172.17.0.2:11434",
            Kind.LLAMACPP,
            4,
        ),
        ({"pharos.url": "http://127.0.0.1:11434/"}, "http://127.0.0.1:11434", Kind.AUTO, None),
    ],
)
def test_labels_set_url_kind_and_capacity(
    labels: dict[str, str], url: str, kind: Kind, capacity: int | None
) -> None:
    spec = backend_of_container(spike(**labels))
    assert not isinstance(spec, LeftOut)
    assert (spec.url, spec.kind, spec.capacity) == (url, kind, capacity)


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        # labels                               the reason logged names the label
        ({"pharos.kind": "tgi"}, "pharos.kind: 'tgi' is not one of"),
        ({"pharos.port": "http"}, "pharos.port: 'http' is not a port number"),
        ({"pharos.port": "70000"}, "pharos.port: '70000' is not a port number"),
        ({"pharos.memory_gb": "lots"}, "pharos.memory_gb: 'lots' is not a number"),
        ({"pharos.memory_gb": "-1"}, "pharos.memory_gb: -1.0 must be a positive number"),
        ({"pharos.capacity": "2.5"}, "pharos.capacity: '2.5' is not a whole number"),
        ({"pharos.capacity": "0"}, "pharos.capacity: 0 must be at least 1"),
        ({"pharos.url": "gpu-box:11434"}, "pharos.url: 'gpu-box:11434' is not an http://"),
        ({"pharos.enable": "yes"}, "pharos.enable is 'yes', not \"true\""),
    ],
)
def test_labels_that_make_no_backend_leave_the_container_out(
    labels: dict[str, str], reason: str
) -> None:
    made = backend_of_container(spike(**labels))
    assert isinstance(made, LeftOut)
    assert made.name == "pharos-spike"
    assert made.container_id == SPIKE_ID
    assert reason in made.reason


def test_several_ports_need_pharos_port() -> None:
    container = spike()
    container["Ports"] = [
        {"PrivatePort": 8080, "Type": "tcp"},
        {"PrivatePort": 9090, "Type": "tcp"},
        {"PrivatePort": 5353, "Type": "udp"},
    ]
    made = backend_of_container(container)
    assert isinstance(made, LeftOut)
    assert made.reason == "exposes TCP ports 8080, 9090; set pharos.port to the engine's"
    container["Labels"]["pharos.port"] = "9090"
    chosen = backend_of_container(container)
    assert not isinstance(chosen, LeftOut)
    assert chosen.url == "http://172.17.0.2:9090"


def test_a_port_published_on_ipv4_and_ipv6_counts_once_and_udp_not_at_all() -> None:
    container = spike()
    container["Ports"] = [
        {"IP": "0.0.0.0", "PrivatePort": 8000, "PublicPort": 32768, "Type": "tcp"},
        {"IP": "::", "PrivatePort": 8000, "PublicPort": 32768, "Type": "tcp"},
        {"PrivatePort": 5353, "Type": "udp"},
    ]
    made = backend_of_container(container)
    assert not isinstance(made, LeftOut)
    assert made.url == "http://172.17.0.2:8000"


def test_no_port_at_all_asks_for_pharos_port() -> None:
    container = spike()
    container["Ports"] = []
    made = backend_of_container(container)
    assert isinstance(made, LeftOut)
    assert "exposes no TCP port; set pharos.port" in made.reason


def test_the_ip_comes_from_the_first_network_by_name() -> None:
    container = spike()
    networks = container["NetworkSettings"]["Networks"]
    networks["zeta"] = dict(networks.pop("bridge"), IPAddress="10.0.9.9")
    networks["alpha"] = {"IPAddress": "10.0.1.5"}
    made = backend_of_container(container)
    assert not isinstance(made, LeftOut)
    assert made.url == "http://10.0.1.5:11434"


def test_host_networking_has_no_ip_and_needs_pharos_url() -> None:
    container = spike()
    container["NetworkSettings"]["Networks"] = {"host": {"IPAddress": ""}}
    made = backend_of_container(container)
    assert isinstance(made, LeftOut)
    assert made.reason == "has no IP on network 'host'; set pharos.url"
    container["Labels"]["pharos.url"] = "http://127.0.0.1:11434"
    assert not isinstance(backend_of_container(container), LeftOut)


def test_one_bad_container_leaves_the_others_in() -> None:
    good = spike()
    bad = spike(**{"pharos.kind": "nope"})
    bad["Id"] = "b" * 64
    bad["Names"] = ["/broken"]
    specs, left_out = backends_of_containers([bad, good])
    assert [spec.log_feed for spec in specs] == [f"docker://{SPIKE_ID}"]
    assert [item.name for item in left_out] == ["broken"]


def test_the_same_container_makes_an_equal_spec_every_time() -> None:
    """State keeps a backend's state only for an equal spec: a restart must not change it."""
    assert backend_of_container(spike()) == backend_of_container(spike())
