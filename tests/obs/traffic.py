"""A router worth looking at: three fake engines, own and dropped probes, traffic and history.

Shared by the /status HTML test and the browser test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pharos.fakeengine import FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep
from pharos.usage import DAY, Cell, day_at
from tests.obs.rig import MODEL, SECRET_PROMPT, BackendSpecYaml, KeySpec, Router, StartRouter

ALIAS = {"qwen2.5-0.5b": MODEL}  # the llama.cpp and vLLM fakes' model, as in `pharos demo`
OWN_PROBE = {
    "name": "my-deferred",
    "signal": "waiting",
    "prom": {"path": "/metrics", "metric": "llamacpp:requests_deferred"},
}
MISSING_PROBE = {
    "name": "my-kv",
    "signal": "kv_usage",
    "prom": {"path": "/metrics", "metric": "my_engine_kv_cache_usage_ratio"},
}
HISTORY_ORIGIN = 99  # another instance's cells, as a restored state file brings them
HISTORY_KEYS = ("ci-bot", "notebook", "research")


def rich_backends(tmp_path: Path) -> list[BackendSpecYaml]:
    log_file = tmp_path / "ollama.log"
    log_file.write_text(
        'time=2026-09-27T08:38:03.846Z level=INFO source=routes.go:2005 msg="server config" '
        'env="map[OLLAMA_NUM_PARALLEL:2]"\n'
    )
    return [
        BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama", {"logs": f"file://{log_file}"}),
        BackendSpecYaml(
            FakeLlamaCpp(sleep=no_sleep),
            "llamacpp",
            {"aliases": ALIAS, "probes": [OWN_PROBE, MISSING_PROBE]},
        ),
        BackendSpecYaml(FakeVLLM(sleep=no_sleep), "vllm", {"aliases": ALIAS}),
    ]


async def rich_router(
    start_router: StartRouter, tmp_path: Path, keys: list[KeySpec] | None = None
) -> Router:
    return await start_router(rich_backends(tmp_path), keys=keys or [])


async def make_traffic(router: Router, secrets: list[str | None]) -> None:
    """Requests from every key: plain, streamed, a repeated long prompt, an unknown model."""
    long_prompt = SECRET_PROMPT + " you are a careful assistant. " * 60
    for index, secret in enumerate(secrets):
        await router.chat(secret, MODEL, request_id=f"req-{index}")
        await router.chat(secret, MODEL, stream=True, content=SECRET_PROMPT)
        await asyncio.gather(*(router.chat(secret, MODEL, content=long_prompt) for _ in range(3)))
    await router.chat(secrets[0], "no-such-model")


def seed_history(router: Router, days: int = 29) -> None:
    """Usage of earlier days from another origin (as a state file restores it)."""
    pharos = router.pharos
    now = pharos.clock.time()
    cells = []
    for back in range(1, days + 1):
        bucket = day_at(now - back * 86_400, pharos.usage.zone)
        for n, key in enumerate(HISTORY_KEYS):
            scale = 1 + (back * 7 + n * 3) % 11
            cells.append(
                Cell(
                    origin=HISTORY_ORIGIN,
                    kind=DAY,
                    bucket=bucket,
                    key=key,
                    model=MODEL,
                    requests=scale * 4,
                    prompt_tokens=scale * 900,
                    cached_tokens=scale * 500,
                    completion_tokens=scale * 150,
                    unmetered=1 if back % 9 == 0 else 0,
                )
            )
    pharos.usage.merge(cells)
