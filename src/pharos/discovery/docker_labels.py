"""A labelled container (one item of GET /containers/json) -> the backend it makes (spec §10).

Label                  Default
pharos.enable          required, "true"
pharos.url             http://<container IP>:<port>, the IP from the first network by name
pharos.port            the container's one exposed TCP port; required when it exposes several
pharos.kind            auto
pharos.memory_gb       unset
pharos.capacity        unset

The backend's log feed is the container's own log (docker://<id>), so a restarted container
(same id) makes the same spec and gets its old state back. Pure: no I/O, no logging.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pharos.config import BYTES_PER_GB
from pharos.engine.types import Kind
from pharos.state import BackendSpec

ENABLE_LABEL = "pharos.enable"
ENABLE_LABELS: Mapping[str, str] = {ENABLE_LABEL: "true"}
DOCKER_FEED_SCHEME = "docker://"


@dataclass(frozen=True)
class LeftOut:
    """A labelled container whose labels make no backend, and why (logged once)."""

    container_id: str
    name: str
    reason: str


def container_name(container: Mapping[str, Any]) -> str:
    names = container.get("Names")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0].lstrip("/")
    name = container.get("Name")
    if isinstance(name, str) and name:
        return name.lstrip("/")
    return str(container.get("Id", ""))[:12]


def _labels(container: Mapping[str, Any]) -> Mapping[str, str]:
    labels = container.get("Labels")
    if not isinstance(labels, dict):
        return {}
    return {str(key): str(value) for key, value in labels.items()}


def first_network_ip(container: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(network name, IP) of the container's first network by name; IP None when it has none
    (network_mode: host, or a container being torn down)."""
    settings = container.get("NetworkSettings")
    networks = settings.get("Networks") if isinstance(settings, dict) else None
    if not isinstance(networks, dict) or not networks:
        return None, None
    name = sorted(networks)[0]
    network = networks[name]
    address = network.get("IPAddress") if isinstance(network, dict) else None
    return name, address if isinstance(address, str) and address else None


def exposed_tcp_ports(container: Mapping[str, Any]) -> tuple[int, ...]:
    """The container's private TCP ports, each once (a port published on IPv4 and IPv6
    appears twice in the list)."""
    ports = container.get("Ports")
    found: set[int] = set()
    if isinstance(ports, list):
        for port in ports:
            if not isinstance(port, dict) or port.get("Type", "tcp") != "tcp":
                continue
            private = port.get("PrivatePort")
            if isinstance(private, int):
                found.add(private)
    return tuple(sorted(found))


def _port(labels: Mapping[str, str], container: Mapping[str, Any]) -> int | str:
    """The port number, or the reason there is none."""
    text = labels.get("pharos.port")
    if text is not None:
        if not text.strip().isdigit() or not 0 < int(text) <= 65535:
            return f"pharos.port: {text!r} is not a port number from 1 to 65535"
        return int(text)
    ports = exposed_tcp_ports(container)
    if len(ports) == 1:
        return ports[0]
    if not ports:
        return "exposes no TCP port; set pharos.port (or pharos.url)"
    listed = ", ".join(str(port) for port in ports)
    return f"exposes TCP ports {listed}; set pharos.port to the engine's"


def _number(labels: Mapping[str, str], key: str, whole: bool) -> float | None:
    """The label's number, None when unset; ValueError naming the label when it isn't one."""
    text = labels.get(key)
    if text is None:
        return None
    try:
        return int(text.strip()) if whole else float(text.strip())
    except ValueError:
        what = "a whole number" if whole else "a number"
        raise ValueError(f"{key}: {text!r} is not {what}") from None


def backend_of_container(container: Mapping[str, Any]) -> BackendSpec | LeftOut:
    """The backend a labelled container makes, or why it makes none."""
    container_id = str(container.get("Id", ""))
    name = container_name(container)
    labels = _labels(container)

    def left_out(reason: str) -> LeftOut:
        return LeftOut(container_id, name, reason)

    if labels.get(ENABLE_LABEL) != "true":
        return left_out(f'{ENABLE_LABEL} is {labels.get(ENABLE_LABEL)!r}, not "true"')
    if not container_id:
        return left_out("the container has no Id")
    url = labels.get("pharos.url")
    if url is None:
        port = _port(labels, container)
        if isinstance(port, str):
            return left_out(port)
        network, address = first_network_ip(container)
        if address is None:
            where = f"network {network!r}" if network is not None else "any network"
            return left_out(f"has no IP on {where}; set pharos.url")
        host = f"[{address}]" if ":" in address else address
        url = f"http://{host}:{port}"
    try:
        return _spec(container_id, url, labels)
    except ValueError as error:
        return left_out(str(error))


def _spec(container_id: str, url: str, labels: Mapping[str, str]) -> BackendSpec:
    """ValueError naming the label whose value makes no backend."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"pharos.url: {url!r} is not an http:// or https:// URL")
    kind_text = labels.get("pharos.kind", "auto").strip()
    try:
        kind = Kind(kind_text)
    except ValueError:
        kinds = ", ".join(k.value for k in Kind)
        raise ValueError(f"pharos.kind: {kind_text!r} is not one of {kinds}") from None
    memory_gb = _number(labels, "pharos.memory_gb", whole=False)
    if memory_gb is not None and (not math.isfinite(memory_gb) or memory_gb <= 0):
        raise ValueError(f"pharos.memory_gb: {memory_gb!r} must be a positive number")
    capacity = _number(labels, "pharos.capacity", whole=True)
    if capacity is not None and capacity < 1:
        raise ValueError(f"pharos.capacity: {int(capacity)!r} must be at least 1")
    return BackendSpec(
        url=url.rstrip("/"),
        kind=kind,
        memory_bytes=None if memory_gb is None else int(memory_gb * BYTES_PER_GB),
        capacity=None if capacity is None else int(capacity),
        log_feed=f"{DOCKER_FEED_SCHEME}{container_id}",
    )


def backends_of_containers(
    containers: Sequence[Mapping[str, Any]],
) -> tuple[list[BackendSpec], list[LeftOut]]:
    """Every running labelled container's backend, in list order, and the ones left out."""
    specs: list[BackendSpec] = []
    left: list[LeftOut] = []
    for container in containers:
        made = backend_of_container(container)
        if isinstance(made, LeftOut):
            left.append(made)
        else:
            specs.append(made)
    return specs, left
