"""Layer-3 engine doubles (spec §14): Ollama v0.34.4, llama.cpp v0.5.0 and vLLM v0.30.0,
every body cloned from the recorded capture; only latency, memory and cache are
synthetic, with every number in `ledger.Ledger`."""

from pharos.fakeengine.engine import Counters, FakeEngine, FakeModel, Sleep, no_sleep, scaled_sleep
from pharos.fakeengine.ledger import DEFAULT_LEDGER, Ledger
from pharos.fakeengine.llamacpp import FakeLlamaCpp
from pharos.fakeengine.ollama import FakeOllama
from pharos.fakeengine.server import serve
from pharos.fakeengine.vllm import FakeVLLM

__all__ = [
    "DEFAULT_LEDGER",
    "Counters",
    "FakeEngine",
    "FakeLlamaCpp",
    "FakeModel",
    "FakeOllama",
    "FakeVLLM",
    "Ledger",
    "Sleep",
    "no_sleep",
    "scaled_sleep",
    "serve",
]
