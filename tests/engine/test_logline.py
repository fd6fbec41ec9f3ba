"""log_line(): regex log probes, fixed values, and their errors."""

from __future__ import annotations

import pytest

from pharos.engine import ProbeError, Residency, Signal, log_line
from pharos.engine.library import ollama_log_num_parallel


def test_value_group_reads_a_count() -> None:
    probe = log_line("p", Signal.RUNNING, r"Running: (?P<value>\d+) reqs")
    assert probe.parse(b"INFO Running: 3 reqs, Waiting: 0 reqs").loads[""].running == 3
    assert probe.parse(b"unrelated line").loads == {}


def test_model_group_keys_the_value() -> None:
    probe = log_line("p", Signal.WAITING, r"<(?P<model>[^>]+)> waiting (?P<value>\d+)")
    assert probe.parse(b"<qwen> waiting 4").loads["qwen"].waiting == 4


def test_fixed_residency_value_for_the_named_model() -> None:
    probe = log_line("p", Signal.RESIDENCY, r"<(?P<model>[^>]+)> Unloading model", value="cold")
    out = probe.parse(b"[INFO] <qwen2.5-0.5b> Unloading model, TTL of 15s reached")
    assert out.models is not None
    assert out.models["qwen2.5-0.5b"].state is Residency.COLD


def test_version_from_a_line() -> None:
    probe = log_line("p", Signal.VERSION, r"\(version (?P<value>[^)]+)\)")
    assert probe.parse(b'msg="Listening on [::]:11434 (version 0.34.4)"').version == "0.34.4"


def test_matching_line_with_unusable_value_is_a_probe_error() -> None:
    probe = log_line("p", Signal.KV_USAGE, r"kv (?P<value>\S+)")
    with pytest.raises(ProbeError) as err:
        probe.parse(b"kv 7.5 secret prompt text")
    assert "secret" not in str(err.value)


@pytest.mark.parametrize("signal", [Signal.RUNNING, Signal.RESIDENCY])
def test_a_greedy_value_group_is_not_quoted_whole(signal: Signal) -> None:
    # an operator's `.*` group can take the rest of a line that carries a prompt
    probe = log_line("p", signal, r"(?P<model>m) state=(?P<value>.*)")
    line = b"m state=" + b"x" * 60 + b" user said: secret prompt text"
    with pytest.raises(ProbeError) as err:
        probe.parse(line)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("signal", "pattern", "value", "message"),
    [
        (Signal.RUNNING, r"(unclosed", None, "bad pattern"),
        (Signal.RUNNING, r"x (?P<value>\d+)", "3", "not both"),
        (Signal.RUNNING, r"x", None, "neither"),
        (Signal.CAPACITY, r"x", "0", "fixed value"),
        (Signal.RUNNING, r"x", "two", "fixed value"),
        (Signal.RESIDENCY, r"(?P<model>\w+) gone", "evicted", "fixed value"),
        (Signal.RESIDENCY, r"gone", "cold", "needs a"),
        (Signal.VERSION, r"(?P<model>\w+) v(?P<value>\S+)", None, "per backend"),
        (Signal.MODELS, r"(?P<value>\w+)", None, "cannot read"),
        (Signal.KV_USAGE, r"x", "1.5", "fixed value"),
    ],
)
def test_constructor_rejects(signal: Signal, pattern: str, value: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        log_line("p", signal, pattern, value=value)


def test_ollama_num_parallel_needs_the_server_config_line() -> None:
    line = (
        b'time=2026-09-27T08:38:03.846Z level=INFO source=routes.go:2005 msg="server config" '
        b'env="map[OLLAMA_MAX_QUEUE:512 OLLAMA_NUM_PARALLEL:2 OLLAMA_ORIGINS:[]]"'
    )
    assert ollama_log_num_parallel.parse(line).loads[""].capacity == 2
    unset = line.replace(b"OLLAMA_NUM_PARALLEL:2", b"OLLAMA_NUM_PARALLEL:0")
    assert ollama_log_num_parallel.parse(unset).loads == {}
    elsewhere = b"msg=other OLLAMA_NUM_PARALLEL:4"
    assert ollama_log_num_parallel.parse(elsewhere).loads == {}
