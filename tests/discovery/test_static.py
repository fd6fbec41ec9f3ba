"""Static backends from config, checked field by field."""

from __future__ import annotations

import math

import pytest

from pharos.discovery import merge_specs, static_spec
from pharos.engine.types import Feed, Kind, Probe, Signal, Snapshot
from pharos.state import BackendSpec


def _probe(name: str) -> Probe:
    return Probe(name, Signal.RUNNING, Feed(path="/metrics"), lambda body: Snapshot())


def test_full_entry() -> None:
    spec = static_spec(
        "http://gpu-box:11434/",
        kind="ollama",
        memory_gb=24,
        capacity=4,
        aliases={"qwen2.5:3b-instruct-q4_K_M": "qwen2.5:3b"},
        logs="file:///var/log/ollama.log",
        probes=[_probe("my-running")],
    )
    assert spec.url == "http://gpu-box:11434"
    assert spec.kind is Kind.OLLAMA
    assert spec.memory_bytes == 24 * 1024**3
    assert spec.capacity == 4
    assert dict(spec.aliases) == {"qwen2.5:3b-instruct-q4_K_M": "qwen2.5:3b"}
    assert spec.log_feed == "file:///var/log/ollama.log"
    assert [p.name for p in spec.own_probes] == ["my-running"]


def test_defaults_and_equality_for_diffing() -> None:
    spec = static_spec("http://gpu-box:8000")
    assert spec == BackendSpec(url="http://gpu-box:8000")
    assert spec.kind is Kind.AUTO and spec.memory_bytes is None and spec.log_feed is None
    assert static_spec("http://a:1", aliases={"x": "y"}) != static_spec("http://a:1")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": "gpu-box:8000"}, "backends[2].url"),
        ({"url": "ftp://gpu-box"}, "backends[2].url"),
        ({"kind": "trtllm"}, "backends[2].kind"),
        ({"memory_gb": 0}, "backends[2].memory_gb"),
        ({"memory_gb": math.nan}, "backends[2].memory_gb"),
        ({"capacity": 0}, "backends[2].capacity"),
        ({"logs": "/var/log/x.log"}, "backends[2].logs"),
        ({"logs": "file://relative/x.log"}, "backends[2].logs"),
        ({"probes": [_probe("p"), _probe("p")]}, "backends[2].probes"),
    ],
)
def test_bad_fields_name_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"url": "http://gpu-box:8000", **kwargs}
    url = args.pop("url")
    with pytest.raises(ValueError) as raised:
        static_spec(url, where="backends[2]", **args)  # type: ignore[arg-type]
    assert str(raised.value).startswith(field + ":")


def test_merge_first_source_wins() -> None:
    static = [static_spec("http://a:1", capacity=2)]
    docker = [static_spec("http://a:1"), static_spec("http://b:2")]
    merged = merge_specs(static, docker)
    assert [(s.url, s.capacity) for s in merged] == [("http://a:1", 2), ("http://b:2", None)]
