"""The JSON probes of the library: absent is unknown, wrong type is an error, emulation guards."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.engine import LIBRARY, ProbeError, Residency, Signal
from pharos.engine.snapshots import known
from pharos.engine.versions import llamacpp_build, llamacpp_deferred_trusted


def parse(name: str, body: str) -> object:
    return LIBRARY[name].parse(body.encode())


def test_probe_names_are_kebab_case_and_unique() -> None:
    for name, probe in LIBRARY.items():
        assert name == probe.name
        assert name == name.lower() and " " not in name and "_" not in name


def test_ollama_version_rejects_non_digit_versions() -> None:
    assert LIBRARY["ollama-version"].parse(b'{"version":"0.34.4"}').version == "0.34.4"
    assert LIBRARY["ollama-version"].parse(b'{"version":"v260"}').version is None
    assert LIBRARY["ollama-version"].parse(b"{}").version is None


def test_llamaswap_version_needs_its_build_fields() -> None:
    swap = b'{"build_date":"2026-01-17T07:12:54Z","commit":"75fced5","version":"185"}'
    assert LIBRARY["llamaswap-version"].parse(swap).version == "185"
    assert LIBRARY["llamaswap-version"].parse(b'{"version":"0.34.4"}').version is None


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("ollama-version", '{"version": 3}'),
        ("openai-models", '{"data": [{"object": "model"}]}'),
        ("ollama-ps-vram", '{"models": [{"name": "a", "size_vram": "0"}]}'),
        ("ollama-tags-size", '{"models": [{"name": "a", "size": ""}]}'),
        ("llamacpp-props-capacity", '{"total_slots": 1.5}'),
        ("llamacpp-slots-running", '{"error": "slots disabled"}'),
        ("sglang-capacity", '{"max_running_requests": "2"}'),
        ("llamaswap-running", '{"running": [{"state": "ready"}]}'),
        ("vllm-version", "not json"),
    ],
)
def test_wrong_type_is_a_probe_error(name: str, body: str) -> None:
    with pytest.raises(ProbeError):
        parse(name, body)


@pytest.mark.parametrize(
    "name",
    [
        "ollama-version",
        "openai-models",
        "ollama-ps-residency",
        "ollama-ps-vram",
        "ollama-tags-size",
        "llamacpp-props-version",
        "llamacpp-props-capacity",
        "llamaswap-version",
        "llamaswap-running",
        "vllm-version",
        "sglang-version",
        "sglang-capacity",
    ],
)
def test_absent_field_is_unknown(name: str) -> None:
    probe = LIBRARY[name]
    assert not known(probe.parse(b"{}"), probe.signal)


def test_openai_models_empty_list_is_known() -> None:
    out = LIBRARY["openai-models"].parse(b'{"object":"list","data":[]}')
    assert out.models == {}
    assert known(out, Signal.MODELS)


def test_ps_residency_lists_loaded_models() -> None:
    out = LIBRARY["ollama-ps-residency"].parse(b'{"models":[{"name":"a:1b","size_vram":0}]}')
    assert out.models is not None
    assert out.models["a:1b"].state is Residency.LOADED
    empty = LIBRARY["ollama-ps-residency"].parse(b'{"models":[]}')
    assert empty.models == {}
    assert known(empty, Signal.RESIDENCY)


def test_ps_vram_zero_is_a_real_zero() -> None:
    out = LIBRARY["ollama-ps-vram"].parse(b'{"models":[{"name":"a","size_vram":0}]}')
    assert out.models is not None and out.models["a"].vram_bytes == 0
    assert known(out, Signal.VRAM_BYTES)
    absent = LIBRARY["ollama-ps-vram"].parse(b'{"models":[{"name":"a"}]}')
    assert not known(absent, Signal.VRAM_BYTES)
    with pytest.raises(ProbeError):
        LIBRARY["ollama-ps-vram"].parse(b'{"models":[{"name":"a","size_vram":-1}]}')


def test_tags_size_zero_is_unknown() -> None:
    # SGLang serves Ollama's /api/tags with size 0 (captures sglang/*/api_tags)
    out = LIBRARY["ollama-tags-size"].parse(b'{"models":[{"name":"q","size":0}]}')
    assert out.models is not None and out.models["q"].size_bytes is None
    assert not known(out, Signal.SIZE_BYTES)
    real = LIBRARY["ollama-tags-size"].parse(b'{"models":[{"name":"q","size":397821319}]}')
    assert real.models is not None and real.models["q"].size_bytes == 397821319


def test_slots_running_counts_processing_slots() -> None:
    probe = LIBRARY["llamacpp-slots-running"]
    body = b'[{"id":0,"is_processing":true},{"id":1,"is_processing":false}]'
    assert probe.parse(body).loads[""].running == 1
    assert not known(probe.parse(b'[{"id":0}]'), Signal.RUNNING)


def test_llamaswap_running_other_states_unknown() -> None:
    body = b'{"running":[{"model":"a","state":"ready"},{"model":"b","state":"starting"}]}'
    out = LIBRARY["llamaswap-running"].parse(body)
    assert out.models is not None
    assert out.models["a"].state is Residency.LOADED
    assert out.models["b"].state is Residency.UNKNOWN


def test_capacity_probes_reject_zero() -> None:
    with pytest.raises(ProbeError):
        parse("llamacpp-props-capacity", '{"total_slots": 0}')
    with pytest.raises(ProbeError):
        parse("sglang-capacity", '{"max_running_requests": 0}')


@pytest.mark.parametrize(
    ("name", "field"),
    [("llamacpp-props-capacity", "total_slots"), ("sglang-capacity", "max_running_requests")],
)
def test_capacity_too_large_for_a_float_is_a_probe_error(name: str, field: str) -> None:
    # resolve catches only ProbeError: an OverflowError here marked the whole backend down
    with pytest.raises(ProbeError, match="not a count"):
        parse(name, f'{{"{field}": {"9" * 400}}}')


@pytest.mark.parametrize(
    ("version", "build", "trusted"),
    [
        ("b11146-7fe450e19", 11146, True),
        ("b8772", 8772, True),
        ("b8771-abc", 8771, False),
        ("b6602-72b24d96", 6602, False),
        ("v0.5.0", None, False),
        ("", None, False),
        (None, None, False),
        ("b12x", None, False),
    ],
)
def test_llamacpp_build_guard(version: str | None, build: int | None, trusted: bool) -> None:
    assert llamacpp_build(version) == build
    assert llamacpp_deferred_trusted(version) is trusted


_NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["9" * 400, "1e400", "-0", "NaN", "+Inf", '"2"', "true", "null", "[]"]),
)
_TEMPLATES = (
    '{{"total_slots": {n}, "build_info": "b{n}", "max_running_requests": {n}, "version": {n}}}',
    '{{"models": [{{"name": "a", "size_vram": {n}, "size": {n}}}]}}',
    '[{{"is_processing": {n}}}]',
    '{{"running": [{{"model": "a", "state": {n}}}]}}',
    '{{"data": [{{"id": {n}}}]}}',
    'vllm:num_requests_running{{model_name="a"}} {n}\n'
    'vllm:num_requests_waiting{{model_name="a"}} {n}\n'
    'vllm:kv_cache_usage_perc{{model_name="a"}} {n}\nllamacpp:requests_processing {n}\n'
    'llamacpp:requests_deferred {n}\nsglang:num_running_reqs{{model_name="a"}} {n}\n'
    'sglang:num_queue_reqs{{model_name="a"}} {n}\n',
)


@settings(max_examples=300, deadline=None)
@given(
    template=st.sampled_from(_TEMPLATES),
    number=_NUMBERS,
    noise=st.binary(max_size=8),
)
def test_any_body_is_a_snapshot_or_a_probe_error(
    template: str, number: object, noise: bytes
) -> None:
    """resolve and scrape catch ProbeError: anything else would fail the backend's whole round."""
    body = template.format(n=number).encode() + noise
    for probe in LIBRARY.values():
        if probe.feed.log:
            continue
        with contextlib.suppress(ProbeError):
            probe.parse(body)
