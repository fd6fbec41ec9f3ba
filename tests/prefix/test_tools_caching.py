"""Per-target learning of whether an engine caches a chat's tools (issue 16): SmolLM2's --jinja
template drops them, so counting tools predicted 6,122 tokens where llama.cpp cached 52; Qwen's
renders them (6,257 of 6,258 cached). Learned from the engine's reported cached tokens."""

from __future__ import annotations

import pytest

from pharos.clock import FakeClock
from pharos.prefix import Chain, PrefixIndex, ToolsCaching, chain_for_chat

TOOLS = b'[{"type":"function","function":{"name":"x","description":"' + b"d" * 24_000 + b'"}}]'
MODEL = "smollm2"


def chat(*contents: str) -> Chain:
    roles = ("user", "assistant")
    messages = [(roles[i % 2], c) for i, c in enumerate(contents)]
    return chain_for_chat(MODEL, TOOLS, messages)


def test_a_chain_knows_how_many_of_its_bytes_are_tools() -> None:
    assert chat("hi").tools_bytes == len(TOOLS)
    assert chain_for_chat(MODEL, None, [("user", "hi")]).tools_bytes == 0
    assert chain_for_chat(MODEL, b"[]", [("user", "hi")]).tools_bytes == 0


def test_an_unknown_target_is_predicted_with_its_tools() -> None:
    tools = ToolsCaching()
    turn = chat("hello " * 40)
    assert tools.cached(7) is None
    assert tools.matched_bytes(7, turn, turn.cum_bytes[-1]) == turn.cum_bytes[-1]


# engine reports (tokens)  what it says about the target's template        learned
# 6,100 of ~6,120 bytes/4  tools are prompt text it caches (Qwen, --jinja)  True
# 60                       only the messages were cached (SmolLM2)          False
# 1                        neither: the slot went to another request        unknown
# None                     no cached count at all                           unknown
@pytest.mark.parametrize(
    ("cached_tokens", "learned"), [(6_100, True), (60, False), (1, None), (None, None)]
)
def test_the_engines_cached_count_teaches_whether_tools_are_cached(
    cached_tokens: int | None, learned: bool | None
) -> None:
    tools = ToolsCaching()
    turn = chat("hello " * 40)  # 240 bytes of messages beside ~24 KB of tools
    judged = tools.observe(3, turn, turn.cum_bytes[-1], cached_tokens)
    assert tools.cached(3) is learned
    # The reply is judged by what was learned: a hit on its messages when tools are dropped.
    assert judged == (240 if learned is False else turn.cum_bytes[-1])
    assert tools.cached(4) is None  # learned per target


def test_once_a_target_drops_tools_its_predictions_leave_them_out_and_relearn() -> None:
    tools = ToolsCaching()
    turn = chat("hello " * 40)
    raw = turn.cum_bytes[-1]
    tools.observe(3, turn, raw, 60)
    adjusted = tools.matched_bytes(3, turn, raw)
    assert adjusted == raw - len(TOOLS) == 240
    # The adjusted prediction is what the scheduler hands back: re-judged on the raw bytes.
    tools.observe(3, turn, adjusted, 6_100)  # the model was swapped for one that renders tools
    assert tools.cached(3) is True
    assert tools.matched_bytes(3, turn, raw) == raw


def test_a_chain_without_tools_teaches_nothing() -> None:
    tools = ToolsCaching()
    turn = chain_for_chat(MODEL, None, [("user", "hello " * 40)])
    tools.observe(3, turn, turn.cum_bytes[-1], 1)
    assert tools.cached(3) is None


def test_the_index_predicts_what_the_engine_will_reuse_after_learning() -> None:
    index = PrefixIndex(clock=FakeClock())
    first, second = chat("hello " * 40), chat("hello " * 40, "hi", "and now?")

    def generation_of(_target_id: int) -> int:
        return 0

    index.record(first, 1, 0, 0.0)
    index.record(first, 2, 0, 0.0)
    before = index.lookup(second, generation_of)
    assert before[1].matched_bytes == before[2].matched_bytes == first.cum_bytes[-1]
    index.observe_cached(first, 1, first.cum_bytes[-1], 60)  # target 1's template drops tools
    after = index.lookup(second, generation_of)
    assert after[1].matched_bytes == first.cum_bytes[-1] - len(TOOLS)
    assert after[2].matched_bytes == first.cum_bytes[-1]
