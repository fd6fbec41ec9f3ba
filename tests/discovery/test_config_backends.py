"""Config own probes -> engine probes, and config backends -> state specs."""

from __future__ import annotations

import pytest

from pharos.config import BYTES_PER_GB, ConfigError, parse_config
from pharos.discovery.static import backend_specs, own_probes
from pharos.engine.types import Kind, Load, Signal

CONFIG = r"""
backends:
  - url: http://gpu:8000/
    kind: vllm
    memory_gb: 24
    capacity: 3
    aliases: {Qwen/Qwen2.5-0.5B-Instruct: qwen}
    logs: file:///var/log/vllm.log
    probes:
      - name: my-running
        signal: running
        prom: {path: /metrics, metric: my_running, per_model: model_name}
      - name: my-capacity
        signal: capacity
        log: {match: 'slots=(?P<value>\d+)'}
      - name: my-waiting
        signal: waiting
        log: {match: 'queue drained', value: 0}
"""


def test_own_probes_are_built_with_the_engine_constructors() -> None:
    config = parse_config(CONFIG)
    running, capacity, waiting = own_probes(config.backends[0])
    assert all(probe.own for probe in (running, capacity, waiting))
    assert running.feed.path == "/metrics" and running.signal is Signal.RUNNING
    body = b'# TYPE my_running gauge\nmy_running{model_name="qwen"} 3\n'
    assert running.parse(body).loads["qwen"].running == 3
    assert capacity.feed.log and capacity.parse(b"ready slots=4 ok").loads[""] == Load(capacity=4)
    assert waiting.parse(b"queue drained").loads[""].waiting == 0


def test_backend_specs_carry_every_setting() -> None:
    (spec,) = backend_specs(parse_config(CONFIG))
    assert spec.url == "http://gpu:8000"
    assert spec.kind is Kind.VLLM
    assert spec.memory_bytes == 24 * BYTES_PER_GB
    assert spec.capacity == 3
    assert dict(spec.aliases) == {"Qwen/Qwen2.5-0.5B-Instruct": "qwen"}
    assert spec.log_feed == "file:///var/log/vllm.log"
    assert [probe.name for probe in spec.own_probes] == ["my-running", "my-capacity", "my-waiting"]


def test_a_probe_the_constructor_refuses_is_a_config_error_naming_it() -> None:
    # Built directly, skipping parse_config's rules, to reach the constructor's own check.
    from pharos.config import Backend, OwnProbe, PromProbe

    backend = Backend(
        url="http://gpu:8000",
        probes=(
            OwnProbe(name="x", signal=Signal.VERSION, prom=PromProbe(path="/metrics", metric="m")),
        ),
    )
    with pytest.raises(ConfigError) as caught:
        own_probes(backend, at="backends[2]", source="pharos.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("backends[2].probes[0]: ")
    assert str(caught.value).startswith("pharos.yaml: backends[2].probes[0]: ")
