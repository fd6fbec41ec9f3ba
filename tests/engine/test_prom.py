"""prom(): the targeted Prometheus scanner and its value rules."""

from __future__ import annotations

import json

import pytest

from pharos.engine import ProbeError, Signal, prom
from pharos.engine.snapshots import known

VLLM_LIKE = b"""# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="a",reason="capacity"} 7.0
vllm:num_requests_waiting{engine="0",model_name="a"} 2.0
vllm:num_requests_waiting{engine="0",model_name="b"} 0.0
vllm:num_requests_waiting_total 9
"""


def waiting(per_model: str | None = "model_name") -> object:
    return prom("w", "/metrics", Signal.WAITING, "vllm:num_requests_waiting", per_model=per_model)


def test_exact_name_per_model() -> None:
    out = waiting().parse(VLLM_LIKE)  # type: ignore[attr-defined]
    assert {k: v.waiting for k, v in out.loads.items()} == {"a": 2, "b": 0}


def test_prefix_only_match_is_not_the_metric() -> None:
    body = b'vllm:num_requests_waiting_by_reason{model_name="a"} 7\n'
    out = waiting().parse(body)  # type: ignore[attr-defined]
    assert not known(out, Signal.WAITING)


def test_missing_metric_is_unknown_not_zero() -> None:
    probe = prom("r", "/metrics", Signal.RUNNING, "x:running")
    out = probe.parse(b"# HELP x:running nothing\nother 1\n")
    assert out.loads == {}
    assert not known(out, Signal.RUNNING)


def test_whole_backend_without_labels_and_with_timestamp() -> None:
    probe = prom("r", "/metrics", Signal.RUNNING, "llamacpp:requests_processing")
    out = probe.parse(b"llamacpp:requests_processing 3 1700000000000\n")
    assert out.loads[""].running == 3


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        (b"m 1.5\n", Signal.RUNNING),
        (b"m -1\n", Signal.WAITING),
        (b"m 0\n", Signal.CAPACITY),
        (b"m +Inf\n", Signal.RUNNING),
        (b"m 1.2\n", Signal.KV_USAGE),
        (b"m -0.1\n", Signal.KV_USAGE),
        (b"m abc\n", Signal.RUNNING),
    ],
)
def test_value_that_cannot_be_the_signal_is_an_error(line: bytes, signal: Signal) -> None:
    with pytest.raises(ProbeError):
        prom("p", "/metrics", signal, "m").parse(line)


def test_two_series_for_one_model_is_an_error() -> None:
    body = b'm{model_name="a",engine="0"} 1\nm{model_name="a",engine="1"} 2\n'
    with pytest.raises(ProbeError, match="two series"):
        prom("p", "/metrics", Signal.RUNNING, "m", per_model="model_name").parse(body)


def test_two_series_without_per_model_is_an_error() -> None:
    with pytest.raises(ProbeError):
        prom("p", "/metrics", Signal.RUNNING, "m").parse(b'm{a="1"} 1\nm{a="2"} 1\n')


def test_series_missing_the_model_label_is_an_error() -> None:
    with pytest.raises(ProbeError, match="no model_name"):
        prom("p", "/metrics", Signal.RUNNING, "m", per_model="model_name").parse(b'm{x="1"} 1\n')


def test_nan_is_unknown() -> None:
    probe = prom("p", "/metrics", Signal.KV_USAGE, "m", per_model="model_name")
    out = probe.parse(b'm{model_name="a"} NaN\nm{model_name="b"} 0.25\n')
    assert "a" not in out.loads
    assert out.loads["b"].kv_usage == 0.25


def test_percent_scale() -> None:
    probe = prom("p", "/metrics", Signal.KV_USAGE, "m", percent=True)
    assert probe.parse(b"m 42\n").loads[""].kv_usage == pytest.approx(0.42)
    with pytest.raises(ProbeError):
        probe.parse(b"m 142\n")


def test_label_values_with_quotes_braces_and_commas() -> None:
    body = b'm{note="a}\\"b,c",model_name="x\\\\y",} 4\n'
    out = prom("p", "/metrics", Signal.RUNNING, "m", per_model="model_name").parse(body)
    assert out.loads["x\\y"].running == 4


def test_broken_label_set_is_an_error() -> None:
    with pytest.raises(ProbeError):
        prom("p", "/metrics", Signal.RUNNING, "m").parse(b'm{model_name="a" 1\n')


def test_crlf_lines() -> None:
    out = prom("p", "/metrics", Signal.RUNNING, "m").parse(b"# x\r\nm 5\r\n")
    assert out.loads[""].running == 5


def test_json_quoted_body_is_decoded_first() -> None:
    # llama.cpp b7139 serves /metrics as a JSON string (captures llamacpp/b7139/*/metrics)
    text = "# HELP llamacpp:requests_processing x\nllamacpp:requests_processing 2\n"
    body = json.dumps(text).encode()
    out = prom("p", "/metrics", Signal.RUNNING, "llamacpp:requests_processing").parse(body)
    assert out.loads[""].running == 2


def test_broken_json_string_is_an_error() -> None:
    with pytest.raises(ProbeError):
        prom("p", "/metrics", Signal.RUNNING, "m").parse(b'"m 1\\')


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"signal": Signal.MODELS}, "not a load signal"),
        ({"metric": "bad metric"}, "not a metric name"),
        ({"path": "metrics"}, "must start with /"),
        ({"per_model": "bad-label"}, "not a label name"),
        ({"percent": True}, "percent applies only"),
        ({"name": ""}, "empty name"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "name": "p",
        "path": "/metrics",
        "signal": Signal.RUNNING,
        "metric": "m",
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        prom(**args)  # type: ignore[arg-type]
