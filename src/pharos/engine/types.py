"""The signal vocabulary, snapshots and probes (spec §4).

Every signal value is `X | None`, where None means unknown. Unknown is never 0:
compare with `is None`, never test a signal for truthiness.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class Signal(enum.Enum):
    """The fixed vocabulary: each signal maps to one Snapshot field."""

    VERSION = "version"  # per backend
    MODELS = "models"  # which models the backend serves
    RESIDENCY = "residency"  # per model: loaded | loading | cold
    VRAM_BYTES = "vram_bytes"  # per model
    SIZE_BYTES = "size_bytes"  # per model
    RUNNING = "running"  # per model, or "" = whole backend
    WAITING = "waiting"
    CAPACITY = "capacity"
    KV_USAGE = "kv_usage"  # 0..1


LOAD_SIGNALS = frozenset({Signal.RUNNING, Signal.WAITING, Signal.CAPACITY, Signal.KV_USAGE})
"""Signals read every fast (1 s) round; the rest are read every full (5 s) round."""

FAST_SIGNALS = frozenset({Signal.RUNNING, Signal.WAITING, Signal.KV_USAGE})


class Residency(enum.Enum):
    """Where a model is. UNKNOWN is the zero value: no probe said."""

    UNKNOWN = "unknown"
    LOADED = "loaded"
    LOADING = "loading"
    COLD = "cold"


class Kind(enum.Enum):
    AUTO = "auto"
    OLLAMA = "ollama"
    LLAMACPP = "llamacpp"
    LLAMA_SWAP = "llama-swap"
    VLLM = "vllm"
    SGLANG = "sglang"
    OPENAI = "openai"


WHOLE_BACKEND = ""
"""The Load key for values that cover the whole backend rather than one model."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    state: Residency = Residency.UNKNOWN
    vram_bytes: int | None = None
    size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Load:
    running: int | None = None
    waiting: int | None = None
    capacity: int | None = None
    kv_usage: float | None = None  # 0..1


_EMPTY: Mapping[str, object] = MappingProxyType({})


def _frozen(mapping: Mapping[str, object] | None) -> Mapping[str, object]:
    return _EMPTY if mapping is None else MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Signals from one scrape round (or one log line) of one backend.

    `models is None` means no probe knew the model list; an empty mapping is a
    known "serves nothing". Residency, VRAM and size live in `models`; the load
    signals live in `loads`, keyed by model or WHOLE_BACKEND. `sources` records
    the probe that filled each signal. `at` is stamped by the owner of the clock
    (state), never by a probe.
    """

    version: str | None = None
    models: Mapping[str, ModelInfo] | None = None
    loads: Mapping[str, Load] = field(default_factory=lambda: MappingProxyType({}))
    sources: Mapping[Signal, str] = field(default_factory=lambda: MappingProxyType({}))
    at: float | None = None


class ProbeError(Exception):
    """A body that is present but cannot be read as the probe's signal (surfaced, never guessed)."""


@dataclass(frozen=True, slots=True)
class Feed:
    """Where a probe's input comes from: one HTTP path (GET each round) or the log stream.

    `per_model`: the path is asked once per model the plan lists, as
    `path?model=NAME&autoload=false` (llama.cpp router mode); the probe reads the
    whole-backend value of that model's child server, which Resolve keys by the model.
    """

    path: str | None = None
    log: bool = False
    per_model: bool = False


ParseFn = Callable[[bytes], Snapshot]
"""Parses a whole HTTP body or one log line; ProbeError for a value that cannot be the signal."""

VersionGuard = Callable[[str | None], bool]


@dataclass(frozen=True, slots=True)
class Probe:
    name: str  # "vllm-kv-cache-usage-perc"; shown by doctor and /status
    signal: Signal
    feed: Feed
    parse: ParseFn = field(compare=False)
    when: VersionGuard | None = field(default=None, compare=False)  # None = any version
    own: bool = False  # an operator's probe from config
