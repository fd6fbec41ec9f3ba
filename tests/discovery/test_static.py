"""Static backends from config through the one builder, checked field by field, and
how sources combine into the list State serves."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pharos.config import ConfigError, parse_config
from pharos.discovery import BackendSources, backend_specs, merge_specs
from pharos.discovery.combine import DOCKER, STATIC
from pharos.engine.types import Kind
from pharos.state import BackendSpec

GOOD = "http://gpu-box:8000"


def test_full_entry() -> None:
    config = parse_config(
        """
backends:
  - url: http://gpu-box:11434/
    kind: ollama
    memory_gb: 24
    capacity: 4
    aliases: {"qwen2.5:3b-instruct-q4_K_M": "qwen2.5:3b"}
    logs: file:///var/log/ollama.log
    probes:
      - {name: my-running, signal: running, prom: {path: /metrics, metric: r}}
"""
    )
    (spec,) = backend_specs(config)
    assert spec.url == "http://gpu-box:11434"
    assert spec.kind is Kind.OLLAMA
    assert spec.memory_bytes == 24 * 1024**3
    assert spec.capacity == 4
    assert dict(spec.aliases) == {"qwen2.5:3b-instruct-q4_K_M": "qwen2.5:3b"}
    assert spec.log_feed == "file:///var/log/ollama.log"
    assert [p.name for p in spec.own_probes] == ["my-running"]


def test_defaults_and_equality_for_diffing() -> None:
    (spec,) = backend_specs(parse_config(f"backends: [{{url: {GOOD}}}]"))
    assert spec == BackendSpec(url=GOOD)
    assert spec.kind is Kind.AUTO and spec.memory_bytes is None and spec.log_feed is None
    (aliased,) = backend_specs(parse_config(f"backends: [{{url: {GOOD}, aliases: {{x: y}}}}]"))
    assert aliased != spec


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        # the third backend's entry                        the field its error names
        ("url: gpu-box:8000", "backends[2].url"),
        ("url: ftp://gpu-box", "backends[2].url"),
        ("{url: 'http://c:1', kind: trtllm}", "backends[2].kind"),
        ("{url: 'http://c:1', memory_gb: 0}", "backends[2].memory_gb"),
        ("{url: 'http://c:1', memory_gb: .nan}", "backends[2].memory_gb"),
        ("{url: 'http://c:1', capacity: 0}", "backends[2].capacity"),
        ("{url: 'http://c:1', logs: /var/log/x.log}", "backends[2].logs"),
        ("{url: 'http://c:1', logs: 'file://relative/x.log'}", "backends[2].logs"),
        (
            "{url: 'http://c:1', probes: [{name: p, signal: running, log: {match: a}},"
            " {name: p, signal: waiting, log: {match: b}}]}",
            "backends[2].probes",
        ),
    ],
)
def test_bad_fields_name_the_field(entry: str, field: str) -> None:
    text = f"backends:\n  - url: http://a:1\n  - url: http://b:1\n  - {entry}\n"
    if entry.startswith("url:"):
        text = f"backends:\n  - url: http://a:1\n  - url: http://b:1\n  - {{{entry}}}\n"
    with pytest.raises(ConfigError) as raised:
        backend_specs(parse_config(text))
    assert any(problem.startswith(field) for problem in raised.value.problems), raised.value


def test_merge_first_source_wins() -> None:
    static = [BackendSpec("http://a:1", capacity=2)]
    docker = [BackendSpec("http://a:1"), BackendSpec("http://b:2")]
    merged = merge_specs(static, docker)
    assert [(s.url, s.capacity) for s in merged] == [("http://a:1", 2), ("http://b:2", None)]


def test_each_source_replaces_only_its_own_list_and_static_wins_a_shared_url() -> None:
    applied: list[list[str]] = []

    def apply(specs: Sequence[BackendSpec]) -> None:
        applied.append([f"{s.url}:{s.capacity}" for s in specs])

    sources = BackendSources(apply)
    sources.set(DOCKER, [BackendSpec("http://a:1", capacity=9), BackendSpec("http://d:1")])
    sources.set(STATIC, [BackendSpec("http://a:1", capacity=2)])
    sources.set(DOCKER, [BackendSpec("http://a:1", capacity=9)])
    assert applied == [
        ["http://a:1:9", "http://d:1:None"],
        ["http://a:1:2", "http://d:1:None"],
        ["http://a:1:2"],
    ]
    with pytest.raises(ValueError, match="unknown backend source"):
        sources.set("consul", [])
