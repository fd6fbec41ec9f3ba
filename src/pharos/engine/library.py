"""The built-in probes (spec §4). Each one was seen answering in a capture.

Guards a probe makes against another engine emulating its endpoint live here
too: ollama-version rejects a version that doesn't start with a digit
(llama-swap v260 answers /api/version with "v260"), llamaswap-version needs the
build fields only llama-swap sends, ollama-tags-size reads size 0 as unknown
(SGLang serves /api/tags with size 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import msgspec

from pharos.engine import values
from pharos.engine.jsonprobe import json_probe
from pharos.engine.logline import log_line
from pharos.engine.prom import prom
from pharos.engine.router_mode import ROUTER_PROBES
from pharos.engine.types import (
    WHOLE_BACKEND,
    Load,
    ModelInfo,
    Probe,
    Residency,
    Signal,
    Snapshot,
)
from pharos.engine.versions import llamacpp_deferred_trusted


def _models(names: Mapping[str, ModelInfo]) -> Snapshot:
    return Snapshot(models=MappingProxyType(dict(names)))


def _version(text: str | None) -> Snapshot:
    if text is None or not text.strip():
        return Snapshot()
    return Snapshot(version=text.strip())


def _whole(load: Load) -> Snapshot:
    return Snapshot(loads=MappingProxyType({WHOLE_BACKEND: load}))


# --- shapes (only the fields a probe reads; unknown fields are ignored) ---


class _VersionBody(msgspec.Struct):
    version: str | None = None


class _LlamaSwapVersionBody(msgspec.Struct):
    version: str | None = None
    commit: str | None = None
    build_date: str | None = None


class _OpenAIModel(msgspec.Struct):
    id: str


class _OpenAIModels(msgspec.Struct):
    data: list[_OpenAIModel] | None = None


class _PSModel(msgspec.Struct):
    name: str
    size_vram: int | None = None


class _PS(msgspec.Struct):
    models: list[_PSModel] | None = None


class _Tag(msgspec.Struct):
    name: str
    size: int | None = None


class _Tags(msgspec.Struct):
    models: list[_Tag] | None = None


class _Props(msgspec.Struct):
    build_info: str | None = None
    total_slots: int | None = None


class _Slot(msgspec.Struct):
    is_processing: bool | None = None


class _Running(msgspec.Struct):
    model: str
    state: str | None = None


class _RunningBody(msgspec.Struct):
    running: list[_Running] | None = None


class _ServerInfo(msgspec.Struct):
    version: str | None = None
    max_running_requests: int | None = None


# --- extractors ---


def _ollama_version(body: _VersionBody) -> Snapshot:
    text = (body.version or "").strip()
    return _version(text) if text[:1].isdigit() else Snapshot()


def _plain_version(body: _VersionBody) -> Snapshot:
    return _version(body.version)


def _llamaswap_version(body: _LlamaSwapVersionBody) -> Snapshot:
    if body.commit is None or body.build_date is None:
        return Snapshot()
    return _version(body.version)


def _openai_models(body: _OpenAIModels) -> Snapshot:
    if body.data is None:
        return Snapshot()
    return _models({entry.id: ModelInfo() for entry in body.data})


def _ps_residency(body: _PS) -> Snapshot:
    if body.models is None:
        return Snapshot()
    return _models({m.name: ModelInfo(state=Residency.LOADED) for m in body.models})


def _ps_vram(body: _PS) -> Snapshot:
    if body.models is None:
        return Snapshot()
    return _models(
        {
            m.name: ModelInfo(
                vram_bytes=None
                if m.size_vram is None
                else values.byte_size(m.size_vram, "size_vram")
            )
            for m in body.models
        }
    )


def _vram(size_vram: int | None) -> int | None:
    return None if size_vram is None else values.byte_size(size_vram, "size_vram")


def _tags_size(body: _Tags) -> Snapshot:
    if body.models is None:
        return Snapshot()
    sizes: dict[str, ModelInfo] = {}
    for tag in body.models:
        if tag.size is None or tag.size == 0:
            sizes[tag.name] = ModelInfo()
        else:
            sizes[tag.name] = ModelInfo(size_bytes=values.byte_size(tag.size, "size"))
    return _models(sizes)


def _props_version(body: _Props) -> Snapshot:
    return _version(body.build_info)


def _props_capacity(body: _Props) -> Snapshot:
    if body.total_slots is None:
        return Snapshot()
    return _whole(Load(capacity=values.count(body.total_slots, Signal.CAPACITY)))


def _slots_running(slots: list[_Slot]) -> Snapshot:
    flags = [slot.is_processing for slot in slots]
    if not flags or any(flag is None for flag in flags):
        return Snapshot()
    return _whole(Load(running=sum(1 for flag in flags if flag)))


def _llamaswap_running(body: _RunningBody) -> Snapshot:
    if body.running is None:
        return Snapshot()
    states = {
        entry.model: ModelInfo(
            state=Residency.LOADED if entry.state == "ready" else Residency.UNKNOWN
        )
        for entry in body.running
    }
    return _models(states)


def _server_info_version(body: _ServerInfo) -> Snapshot:
    return _version(body.version)


def _server_info_capacity(body: _ServerInfo) -> Snapshot:
    if body.max_running_requests is None:
        return Snapshot()
    return _whole(Load(capacity=values.count(body.max_running_requests, Signal.CAPACITY)))


# --- the library ---

openai_models = json_probe(
    "openai-models", "/v1/models", Signal.MODELS, _OpenAIModels, _openai_models
)

ollama_version = json_probe(
    "ollama-version", "/api/version", Signal.VERSION, _VersionBody, _ollama_version
)
ollama_ps_residency = json_probe(
    "ollama-ps-residency", "/api/ps", Signal.RESIDENCY, _PS, _ps_residency
)
ollama_ps_vram = json_probe("ollama-ps-vram", "/api/ps", Signal.VRAM_BYTES, _PS, _ps_vram)
ollama_tags_size = json_probe("ollama-tags-size", "/api/tags", Signal.SIZE_BYTES, _Tags, _tags_size)
ollama_log_num_parallel = log_line(
    "ollama-log-num-parallel",
    Signal.CAPACITY,
    # the startup "server config" line (ollama/v0.34.4/engine.log); 0 or empty is no capacity
    r'msg="server config".*?\bOLLAMA_NUM_PARALLEL:(?P<value>[1-9][0-9]*)\b',
)

llamacpp_props_version = json_probe(
    "llamacpp-props-version", "/props", Signal.VERSION, _Props, _props_version
)
llamacpp_props_capacity = json_probe(
    "llamacpp-props-capacity", "/props", Signal.CAPACITY, _Props, _props_capacity
)
llamacpp_running = prom(
    "llamacpp-running", "/metrics", Signal.RUNNING, "llamacpp:requests_processing"
)
llamacpp_waiting = prom(
    "llamacpp-waiting",
    "/metrics",
    Signal.WAITING,
    "llamacpp:requests_deferred",
    when=llamacpp_deferred_trusted,
)
llamacpp_slots_running = json_probe(
    "llamacpp-slots-running", "/slots", Signal.RUNNING, list[_Slot], _slots_running
)

llamaswap_version = json_probe(
    "llamaswap-version", "/api/version", Signal.VERSION, _LlamaSwapVersionBody, _llamaswap_version
)
llamaswap_running = json_probe(
    "llamaswap-running", "/running", Signal.RESIDENCY, _RunningBody, _llamaswap_running
)

vllm_version = json_probe("vllm-version", "/version", Signal.VERSION, _VersionBody, _plain_version)
vllm_running = prom(
    "vllm-running", "/metrics", Signal.RUNNING, "vllm:num_requests_running", per_model="model_name"
)
vllm_waiting = prom(
    "vllm-waiting", "/metrics", Signal.WAITING, "vllm:num_requests_waiting", per_model="model_name"
)
vllm_kv_cache_usage_perc = prom(
    "vllm-kv-cache-usage-perc",
    "/metrics",
    Signal.KV_USAGE,
    "vllm:kv_cache_usage_perc",  # 0..1 despite the name (vllm/v0.30.0/busy/metrics)
    per_model="model_name",
)

sglang_version = json_probe(
    "sglang-version", "/get_server_info", Signal.VERSION, _ServerInfo, _server_info_version
)
sglang_capacity = json_probe(
    "sglang-capacity", "/get_server_info", Signal.CAPACITY, _ServerInfo, _server_info_capacity
)
sglang_running = prom(
    "sglang-running", "/metrics", Signal.RUNNING, "sglang:num_running_reqs", per_model="model_name"
)
sglang_waiting = prom(
    "sglang-waiting", "/metrics", Signal.WAITING, "sglang:num_queue_reqs", per_model="model_name"
)
# sglang:token_usage: no probe, it reads 0 under load from v0.5.11 on (ENGINE-FACTS)

LIBRARY: Mapping[str, Probe] = MappingProxyType(
    {
        probe.name: probe
        for probe in (
            openai_models,
            ollama_version,
            ollama_ps_residency,
            ollama_ps_vram,
            ollama_tags_size,
            ollama_log_num_parallel,
            llamacpp_props_version,
            llamacpp_props_capacity,
            llamacpp_running,
            llamacpp_waiting,
            llamacpp_slots_running,
            llamaswap_version,
            llamaswap_running,
            vllm_version,
            vllm_running,
            vllm_waiting,
            vllm_kv_cache_usage_perc,
            sglang_version,
            sglang_capacity,
            sglang_running,
            sglang_waiting,
            *ROUTER_PROBES,
        )
    }
)
