"""Layer 4 for issue 16's tools caveat: Open WebUI's recorded turns (36 tools, 24.7 KB) sent
through Pharos to two real llama-servers b11312 serving SmolLM2, whose chat template drops the
tools. Pharos first predicts the tools as cached, learns from the engine's cached count that
this target does not reuse them, and predicts the later turns within the spec's 1.5x (§6)."""

from __future__ import annotations

import json
import re

import pytest

from pharos.state import BackendSpec
from tests.clients.replay import CLIENTS, load, replay_headers
from tests.live.engines import SERVED_MODEL, RunningEngine
from tests.live.pharos_rig import decision, open_router

pytestmark = pytest.mark.live
PREDICTED = re.compile(r"([\d.]+)(k?) cached tok")


def predicted_tokens(reason: str) -> float | None:
    found = PREDICTED.search(reason)
    return None if found is None else float(found.group(1)) * (1000 if found.group(2) else 1)


async def test_smollm2_drops_open_webuis_tools_and_pharos_learns_to_predict_without_them(
    llamacpp_pair: tuple[RunningEngine, RunningEngine],
) -> None:
    turns = [r for r in load(CLIENTS / "open-webui" / "0.12.4-openai") if r.is_turn]
    assert len(turns) == 4 and all(len(t.json["tools"]) == 36 for t in turns)
    urls = [llamacpp_pair[0].base_url]  # one target learns; routing is layer 3's (tests/clients)
    async with open_router([BackendSpec(url) for url in urls]) as router:
        await router.wait_up(SERVED_MODEL, urls)
        for count, turn in enumerate(turns, start=1):
            # As Open WebUI sent it, but for the model's name and a short reply.
            body = {**turn.json, "model": SERVED_MODEL, "max_tokens": 8, "temperature": 0}
            headers = {
                k: v for k, v in replay_headers(turn.headers).items() if k != "Authorization"
            }
            async with router.client.post(
                router.base_url + turn.path, data=json.dumps(body), headers=headers
            ) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()
            await router.wait_done(count)
        done = router.done[-4:]
    first, second, *later = done
    assert all(d.status == 200 and d.backend_url == urls[0] for d in done), done
    # The template dropped the tools: the engine saw the messages only (~6,200 tokens else).
    assert first.prompt_tokens is not None and first.prompt_tokens < 500, first.prompt_tokens
    # routed on the tools counted (6.2k), judged by its messages once the reply taught that
    # the tools are dropped: kept in the index, so not a wrong_prediction
    assert decision(second, "prefix") == "predicted_hit", second.reason
    for d in later:
        predicted = predicted_tokens(d.reason)
        # Measured: predicted 33 / 47 where the engine cached 79 / 112 (of 105 / 134): SmolLM2's
        # template adds its own system prompt and role tokens, which Pharos leaves out so that
        # it errs low (prefix/chain.py); before learning, 6.2k was predicted.
        assert decision(d, "prefix") == "predicted_hit", (d.reason, d.cached_tokens)
        assert d.cached_tokens is not None and predicted is not None, d.reason
        assert predicted <= d.cached_tokens * 1.5, (predicted, d.cached_tokens)
