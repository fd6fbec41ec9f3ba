"""Per target: does its engine cache a chat's tools? (issue 16)

A chain's `cum_bytes` count the tools once a link matches past them, which is right where the
chat template renders tools as prompt text (Open WebUI's 35 tools: 6,257 of 6,258 tokens
cached, llama.cpp --jinja, Qwen) and far too much where it drops them (SmolLM2's --jinja
template: 6,122 predicted, 52 cached, live). Which one a target is, nothing but the engine's
reported cached tokens tells, so it is learned from them: unknown until a request with tools
and a prediction reports its cached count, then the side its count falls on. Unknown counts
the tools (the measured common case); a count explained by neither side (a slot another
request took: cached near 0) teaches nothing.
"""

from __future__ import annotations

from pharos.prefix.chain import Chain

BYTES_PER_TOKEN = 4
"""The router's estimate of decoded text bytes per token (spec §6), as in sched."""


class ToolsCaching:
    """State: target_id -> True (caches tools) / False (drops them); absent = unknown."""

    def __init__(self) -> None:
        self._cached: dict[int, bool] = {}

    def cached(self, target_id: int) -> bool | None:
        return self._cached.get(target_id)

    def matched_bytes(self, target_id: int, chain: Chain, matched: int) -> int:
        """What the engine will reuse of `matched` bytes of `chain`: without the tools on a
        target known to drop them. Any matched link lies past the tools (they are in h0)."""
        if chain.tools_bytes and self._cached.get(target_id) is False:
            return max(0, matched - chain.tools_bytes)
        return matched

    def observe(
        self, target_id: int, chain: Chain, predicted_bytes: int, cached_tokens: int | None
    ) -> int:
        """One reply's cached tokens against the prediction this instance made for it
        (`predicted_bytes`, as `matched_bytes` returned it). Returns the prediction as it
        stands with what was learned, to judge the reply by: a turn predicted with its tools
        on a target found to drop them was a hit on its messages, and is kept, not pruned."""
        tools = chain.tools_bytes
        if not tools or cached_tokens is None or predicted_bytes <= 0:
            return predicted_bytes
        known = self._cached.get(target_id)
        with_tools = predicted_bytes + (tools if known is False else 0)
        without_tools = with_tools - tools
        if cached_tokens * 2 >= with_tools // BYTES_PER_TOKEN:
            self._cached[target_id] = True
            return with_tools
        if without_tools > 0 and cached_tokens * 2 >= without_tools // BYTES_PER_TOKEN:
            self._cached[target_id] = False
            return without_tools
        return predicted_bytes
