"""The capture driver: takes a real engine through its states and records each one.

States: idle -> loaded -> busy (4 slow streams on 2 slots) -> saturated (8) -> cancelled
(every stream dropped, slots free again) -> prefix (the same ~600-token prompt twice).
Each state is recorded with `pharos.engine.record.record` into `<out>/<state>/`; the replies
clients ask for go to `<out>/streams/` with `replies.tsv` (name TAB status). The layout is
the one of /work/shared/captures/engines. Every prompt here is synthetic.

The driver waits for each state with its own reading of the engine's metrics (the
`StateGauge` below), independent of the probes under test, so a probe bug cannot make the
driver think a state was reached.
"""

from __future__ import annotations

import asyncio
import json
import platform
import re
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from pharos.engine.record import meta_yaml, record

BUSY_REQUESTS = 4
SATURATED_REQUESTS = 8
STATE_TIMEOUT_S = 90.0
PROMPT_MARKER = "Pharos synthetic"
"""Every prompt we send contains this; recorded files must hold no other prompt text."""

SLOW_PROMPT = f"{PROMPT_MARKER} load test. Count upwards from 1 in digits, separated by spaces."
SHORT_PROMPT = f"{PROMPT_MARKER} greeting. Say hello in one word."
UNKNOWN_MODEL = "pharos-no-such-model"


def long_prefix_prompt() -> str:
    """About 600 tokens of deterministic synthetic text (checked live: prompt_tokens ~ 600)."""
    sentences = [
        f"{PROMPT_MARKER} prefix sentence {i}: the lighthouse keeper logs ship {i * 7 % 31} "
        f"at bearing {i * 13 % 360} degrees and notes calm water."
        for i in range(1, 21)
    ]
    return " ".join(sentences) + " Summarize the log in one word."


@dataclass(frozen=True)
class StateGauge:
    """How the driver itself reads running/waiting off the engine's Prometheus text."""

    path: str
    running_metric: str
    waiting_metric: str

    def read(self, body: bytes) -> tuple[float | None, float | None]:
        text = body.decode("utf-8", "replace")
        if text.startswith('"'):  # b7139 served its metrics as a JSON string
            text = json.loads(text)
        return _metric(text, self.running_metric), _metric(text, self.waiting_metric)


def _metric(text: str, name: str) -> float | None:
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)", re.MULTILINE)
    values = [float(m.group(1)) for m in pattern.finditer(text)]
    return sum(values) if values else None


LLAMACPP_GAUGE = StateGauge(
    "/metrics", "llamacpp:requests_processing", "llamacpp:requests_deferred"
)
VLLM_GAUGE = StateGauge("/metrics", "vllm:num_requests_running", "vllm:num_requests_waiting")


@dataclass(frozen=True)
class Reply:
    name: str  # file name under streams/
    status: int
    body: bytes


@dataclass
class CaptureResult:
    out_dir: Path  # <root>/<engine>/<version>
    version: str
    observed: dict[str, Any] = field(default_factory=dict)  # state -> what `observe` returned
    gauges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    replies: dict[str, Reply] = field(default_factory=dict)


Observe = Callable[[str], Awaitable[Any]]


class Driver:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        engine: str,
        base_url: str,
        model: str,
        gauge: StateGauge,
        version: str,
        out_root: Path,
        meta: Mapping[str, str],
        observe: Observe | None = None,
    ) -> None:
        self._session = session
        self._engine = engine
        self._url = base_url.rstrip("/")
        self._model = model
        self._gauge = gauge
        self._observe = observe
        self._meta = dict(meta)
        self.result = CaptureResult(out_dir=out_root / engine / version, version=version)

    async def run(self) -> CaptureResult:
        out = self.result.out_dir
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / "meta.yaml").write_text(meta_yaml(self._version_meta()))
        await self._state("idle")
        await self._chat_once(SHORT_PROMPT, max_tokens=4)
        await self._state("loaded")
        slow: list[asyncio.Task[None]] = []
        try:
            slow += [self._slow() for _ in range(BUSY_REQUESTS)]
            await self._wait_for(running=2, waiting=BUSY_REQUESTS - 2)
            await self._state("busy")
            slow += [self._slow() for _ in range(SATURATED_REQUESTS - BUSY_REQUESTS)]
            await self._wait_for(running=2, waiting=SATURATED_REQUESTS - 2)
            await self._state("saturated")
        finally:
            for task in slow:
                task.cancel()
            await asyncio.gather(*slow, return_exceptions=True)
        await self._wait_for(running=0, waiting=0)
        await self._state("cancelled")
        await self._replies()
        await self._state("prefix")
        self._write_replies()
        return self.result

    def _version_meta(self) -> dict[str, str]:
        return {
            "engine": self._engine,
            "version": self.result.version,
            "capacity": "2",
            "busy_requests": str(BUSY_REQUESTS),
            "saturated_requests": str(SATURATED_REQUESTS),
            "captured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "PHAROS_RECORD=1 .venv/bin/pytest -m live tests/live",
            "host": f"{platform.system()}/{platform.machine()}",
            **self._meta,
        }

    async def _state(self, state: str) -> None:
        self.result.gauges[state] = await self._read_gauge()
        if self._observe is not None:
            self.result.observed[state] = await self._observe(state)
        await record(
            self._session,
            self._url,
            self.result.out_dir / state,
            meta={**self._version_meta(), "state": state},
        )

    async def _read_gauge(self) -> tuple[float | None, float | None]:
        async with self._session.get(self._url + self._gauge.path) as reply:
            return self._gauge.read(await reply.read())

    async def _wait_for(self, *, running: int, waiting: int) -> None:
        deadline = time.monotonic() + STATE_TIMEOUT_S
        seen: tuple[float | None, float | None] = (None, None)
        while time.monotonic() < deadline:
            seen = await self._read_gauge()
            if seen == (running, waiting):
                return
            await asyncio.sleep(0.25)
        raise AssertionError(
            f"{self._engine} never reached running={running} waiting={waiting} "
            f"within {STATE_TIMEOUT_S:.0f} s; last read {seen}"
        )

    def _slow(self) -> asyncio.Task[None]:
        async def stream() -> None:
            body = {
                "model": self._model,
                "messages": [{"role": "user", "content": SLOW_PROMPT}],
                "max_tokens": 1500,
                "ignore_eos": True,
                "stream": True,
            }
            async with self._session.post(self._url + "/v1/chat/completions", json=body) as reply:
                async for _ in reply.content:
                    pass

        return asyncio.create_task(stream())

    async def _chat_once(self, prompt: str, *, max_tokens: int) -> None:
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
        }
        async with self._session.post(self._url + "/v1/chat/completions", json=body) as reply:
            await reply.read()
            if reply.status != 200:
                raise AssertionError(f"{self._engine}: chat answered {reply.status}")

    async def _post(self, name: str, path: str, body: Mapping[str, Any]) -> None:
        async with self._session.post(self._url + path, json=body) as reply:
            self.result.replies[name] = Reply(name, reply.status, await reply.read())

    async def _replies(self) -> None:
        messages = [{"role": "user", "content": long_prefix_prompt()}]
        streamed = {
            "model": self._model,
            "messages": messages,
            "max_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        await self._post("openai-chat.1.sse", "/v1/chat/completions", streamed)
        await self._post("openai-chat.2.sse", "/v1/chat/completions", streamed)
        short = [{"role": "user", "content": SHORT_PROMPT}]
        await self._post(
            "openai-chat.json",
            "/v1/chat/completions",
            {"model": self._model, "messages": short, "max_tokens": 8},
        )
        await self._post(
            "openai-completion.json",
            "/v1/completions",
            {"model": self._model, "prompt": f"{PROMPT_MARKER} completion:", "max_tokens": 8},
        )
        await self._post(
            "openai-embeddings.json",
            "/v1/embeddings",
            {"model": self._model, "input": f"{PROMPT_MARKER} embedding input"},
        )
        await self._post(
            "unknown-model.txt",
            "/v1/chat/completions",
            {"model": UNKNOWN_MODEL, "messages": short, "max_tokens": 4},
        )

    def _write_replies(self) -> None:
        streams = self.result.out_dir / "streams"
        streams.mkdir(exist_ok=True)
        lines = []
        for reply in self.result.replies.values():
            (streams / reply.name).write_bytes(reply.body)
            lines.append(f"{reply.name}\t{reply.status}\n")
        (streams / "replies.tsv").write_text("".join(lines))


async def engine_version(session: aiohttp.ClientSession, engine: str, base_url: str) -> str:
    """The version directory name, from what the engine itself reports."""
    if engine.startswith("llamacpp"):
        async with session.get(base_url + "/props") as reply:
            build = (await reply.json())["build_info"]
        return str(build).split("-")[0]
    async with session.get(base_url + "/version") as reply:
        return "v" + str((await reply.json())["version"])


def copy_log_if_clean(log_path: Path, out_dir: Path) -> bool:
    """Copies the engine log beside the capture unless it echoes a prompt we sent.

    Every prompt carries PROMPT_MARKER, so a log holding the marker echoes prompt text.
    """
    text = log_path.read_text("utf-8", "replace")
    if PROMPT_MARKER in text:
        return False
    shutil.copyfile(log_path, out_dir / "engine.log")
    return True
