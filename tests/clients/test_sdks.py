"""The openai, anthropic and ollama Python SDKs' own request shapes (recorded through the sink
by scripts/clients/record_sdks.py: a three-turn chat with a system message and a tool, streamed
and not), replayed through Pharos in front of two fake engines (spec §14 client captures,
issue 16): answered as recorded, later turns routed and predicted where the first one ran,
and every reply metered to the key."""

from __future__ import annotations

import pytest

from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeModel, FakeOllama
from tests.clients.replay import CLIENTS, KEY_NAME, REPLAY_CONFIG, Gates, Replayed, load, replay
from tests.proxy.rig import Backend, Rig, RigFactory

MODEL = "qwen2.5:0.5b"

# sdk        version  engines    routes recorded
# openai     3.57.0   llama.cpp  /v1/models, /v1/chat/completions (stream, not), /v1/completions
# anthropic  2.15.0   llama.cpp  /v1/messages/count_tokens, /v1/messages (stream, not)
# ollama     0.6.3    Ollama     /api/tags, /api/ps, /api/chat (stream, not), /api/generate
SDKS = [("openai", "3.57.0"), ("anthropic", "2.15.0"), ("ollama", "0.6.3")]


async def replayed(rig: RigFactory, sdk: str, version: str) -> tuple[Rig, list[Replayed]]:
    gates = Gates()
    engines: list[FakeEngine]
    if sdk == "ollama":
        engines = [FakeOllama([FakeModel(MODEL)], sleep=gates.sleep) for _ in "ab"]
        backends = [Backend(gates.gate(e), capacity=2) for e in engines]
    else:
        engines = [FakeLlamaCpp(sleep=gates.sleep) for _ in "ab"]
        backends = [Backend(gates.gate(e), aliases={"qwen2.5-0.5b": MODEL}) for e in engines]
    r = await rig(*backends, config=REPLAY_CONFIG)
    if sdk == "ollama":
        for url in r.urls:  # the recording's engines were warm; a load is not judged here
            body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            async with r.client.post(url + "/api/chat", json={**body, "stream": False}) as reply:
                assert reply.status == 200
            await r.until_loaded(url, MODEL)
    return r, await replay(r, load(CLIENTS / f"{sdk}-python" / version), gates)


@pytest.mark.parametrize(("sdk", "version"), SDKS)
async def test_an_sdks_recorded_requests_are_answered_routed_and_metered(
    rig: RigFactory, sdk: str, version: str
) -> None:
    r, results = await replayed(rig, sdk, version)
    for x in results:
        assert x.status == x.request.status == 200, (x.request.seq, x.request.path, x.reply[:200])
    turns = [x for x in results if x.request.is_turn and x.done is not None]
    assert len(turns) == 3
    first = turns[0].done
    assert first is not None
    for x in turns[1:]:
        done = x.done
        assert done is not None
        assert done.backend_url == first.backend_url, (x.request.seq, done.reason)
        assert ("prefix", "predicted_hit") in done.decisions, (x.request.seq, done.decisions)
        cached, predicted = done.cached_tokens, x.predicted_tokens()
        assert cached is not None and predicted is not None, (x.request.seq, done.reason)
        assert cached / 1.5 <= predicted <= cached * 1.5, (x.request.seq, predicted, cached)
    served = [x.done for x in results if x.done is not None]
    assert all(d.model == MODEL and d.key == KEY_NAME for d in served)
    metered = [d for d in served if d.metered]
    # Only counting tokens reports no usage (anthropic's count_tokens): unmetered, never 0.
    counting = [d for d in served if d.route == "count_tokens"]
    assert [d for d in served if not d.metered] == counting
    (row,) = [row for row in r.pharos.usage.today_by_key() if row.key == KEY_NAME]
    assert row.requests == len(served) and row.unmetered == len(counting)
    assert row.prompt_tokens == sum(d.prompt_tokens or 0 for d in metered) > 0
