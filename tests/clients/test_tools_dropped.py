"""Open WebUI's recorded chat against engines whose chat template drops tools (SmolLM2's
--jinja template, live: 52 tokens cached where counting the 36 tools predicted 6,122). Pharos
learns per target from the reported cached tokens that the tools are not reused, and predicts
what the engine does reuse again (issue 16)."""

from __future__ import annotations

import pytest

from pharos.fakeengine import FakeLlamaCpp, Ledger
from tests.clients.replay import CLIENTS, REPLAY_CONFIG, Gates, load, replay
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5:0.5b"


# tools rendered  turn 2 (first prediction with tools)  turns 3-4 (after learning)
# yes             predicted_hit: 6.2k of 6,202           predicted_hit: 6.2k of 6,223 / 6,241
# no              predicted_hit: routed on 6.2k, 18      predicted_hit: 33 of 38, 47 of 57
#                 cached: judged by its messages once
#                 the tools are learned dropped, kept
#                 in the index, so no wrong_prediction
@pytest.mark.parametrize(("rendered", "turn2"), [(True, "predicted_hit"), (False, "predicted_hit")])
async def test_turns_are_predicted_as_the_engine_caches_them_with_or_without_tools(
    rig: RigFactory, rendered: bool, turn2: str
) -> None:
    gates = Gates()
    ledger = Ledger(slots=4, tools_in_prompt=rendered)
    engines = [FakeLlamaCpp(ledger=ledger, sleep=gates.sleep) for _ in "ab"]
    r = await rig(
        *[Backend(gates.gate(e), aliases={"qwen2.5-0.5b": MODEL}) for e in engines],
        config=REPLAY_CONFIG,
    )
    # The conversation's own turns only: with the tools gone every side request's prompt
    # starts as the turn's does, and the fakes' slot choice then hands them its slot.
    records = [x for x in load(CLIENTS / "open-webui" / "0.12.4-openai") if x.is_turn]
    turns = await replay(r, records, gates)
    assert len(turns) == 4
    dones = [x.done for x in turns]
    first = dones[0]
    assert first is not None
    assert all(d is not None and d.backend_url == first.backend_url for d in dones), dones
    assert turns[1].done is not None and ("prefix", turn2) in turns[1].done.decisions
    for turn in turns[2:]:
        done = turn.done
        assert done is not None
        assert ("prefix", "predicted_hit") in done.decisions, done.reason
        cached, predicted = done.cached_tokens, turn.predicted_tokens()
        assert cached is not None and predicted is not None
        assert cached / 1.5 <= predicted <= cached * 1.5, (predicted, cached, done.reason)
        assert (cached > 6000) is rendered  # the tools are in what the engine cached, or not
