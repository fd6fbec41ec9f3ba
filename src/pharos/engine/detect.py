"""Auto-detection of an engine kind from fingerprint probes (spec §4).

Fingerprints in order; the first whose probes all read a value wins:
llama-swap (/running) -> ollama (/api/version) -> llama.cpp (/props build_info)
-> vLLM (/version plus the vllm running metric) -> SGLang (/get_server_info)
-> else the generic openai recipe. If no fingerprint matched and one of them
got no answer or a 5xx, detection fails (an engine under load drops requests;
one loading its model answers 503 everywhere) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from pharos.engine import library as lib
from pharos.engine.errors import BackendUnreachable, DetectionFailed
from pharos.engine.fetch import Fetched, all_silent, fetch_all
from pharos.engine.snapshots import known
from pharos.engine.types import Kind, Probe, ProbeError

FINGERPRINTS: tuple[tuple[Kind, tuple[Probe, ...]], ...] = (
    (Kind.LLAMA_SWAP, (lib.llamaswap_running,)),
    (Kind.OLLAMA, (lib.ollama_version,)),
    (Kind.LLAMACPP, (lib.llamacpp_props_version,)),
    (Kind.VLLM, (lib.vllm_version, lib.vllm_running)),
    (Kind.SGLANG, (lib.sglang_version,)),
)


def _path(probe: Probe) -> str:
    assert probe.feed.path is not None
    return probe.feed.path


FINGERPRINT_PATHS: tuple[str, ...] = tuple(
    dict.fromkeys(_path(p) for _, probes in FINGERPRINTS for p in probes)
)


def _reads(probe: Probe, fetched: Fetched) -> bool:
    if not fetched.ok:
        return False
    try:
        return known(probe.parse(fetched.body), probe.signal)
    except ProbeError:
        return False


def kind_from(fetched: Mapping[str, Fetched]) -> Kind:
    """The kind the fingerprint answers show; raises DetectionFailed / BackendUnreachable."""
    answers = [fetched[p] for p in FINGERPRINT_PATHS]
    if all(a.status is None for a in answers):
        raise BackendUnreachable(
            f"no answer on any fingerprint path: {answers[0].reason()}", silent=all_silent(answers)
        )
    unanswered: list[str] = []
    for kind, probes in FINGERPRINTS:
        if all(_reads(p, fetched[_path(p)]) for p in probes):
            # llama-swap v185/v219 answer /api/version with digits ollama accepts:
            # trust an ollama match only if /running (llama-swap) answered for sure.
            if kind is Kind.OLLAMA and fetched[_path(lib.llamaswap_running)].no_answer:
                raise DetectionFailed(
                    "ollama fingerprint matched but /running (llama-swap) got no answer"
                )
            return kind
        for probe in probes:
            answer = fetched[_path(probe)]
            if answer.no_answer:
                unanswered.append(f"{_path(probe)}: {answer.reason()}")
    if unanswered:
        raise DetectionFailed("no fingerprint matched; " + "; ".join(dict.fromkeys(unanswered)))
    return Kind.OPENAI


async def detect_fetched(
    session: aiohttp.ClientSession, base_url: str, *, timeout_s: float = 3.0
) -> tuple[Kind, dict[str, Fetched]]:
    """Detects the kind; also returns the fingerprint answers so resolve can reuse them."""
    fetched = await fetch_all(session, base_url, FINGERPRINT_PATHS, timeout_s)
    return kind_from(fetched), fetched


async def detect(session: aiohttp.ClientSession, base_url: str, *, timeout_s: float = 3.0) -> Kind:
    kind, _ = await detect_fetched(session, base_url, timeout_s=timeout_s)
    return kind
