"""The fakes' synthetic prompt caches (spec §14 ledger: per-slot for Ollama and llama.cpp,
one shared block cache for vLLM). Prompts are decoded text bytes; a token is
`bytes_per_token` bytes of it, so an escaped and a raw UTF-8 body are the same prompt.
"""

from __future__ import annotations

import math
from collections import OrderedDict


def prompt_tokens(prompt: bytes, bytes_per_token: float) -> int:
    return max(1, math.ceil(len(prompt) / bytes_per_token))


def _common_prefix_bytes(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class SlotCaches:
    """Each slot holds the last prompt it served; a request takes the free slot with the
    longest common prefix (ties: the least recently used). At least one prompt token is
    always computed, as every recorded engine did (3208 cached of 3209)."""

    def __init__(self, slots: int, bytes_per_token: float) -> None:
        self._prompts: list[bytes] = [b""] * slots
        self._busy = [False] * slots
        self._used_at = [0] * slots
        self._tick = 0
        self._bytes_per_token = bytes_per_token

    @property
    def free(self) -> int:
        return self._busy.count(False)

    def used(self, slot: int) -> bool:
        return self._used_at[slot] > 0

    def busy(self, slot: int) -> bool:
        return self._busy[slot]

    def take(self, prompt: bytes) -> tuple[int, int]:
        """(slot, cached tokens) for a request; there must be a free slot."""
        best, best_common = -1, -1
        for slot, held in enumerate(self._prompts):
            if self._busy[slot]:
                continue
            common = _common_prefix_bytes(held, prompt)
            if common > best_common or (
                common == best_common and self._used_at[slot] < self._used_at[best]
            ):
                best, best_common = slot, common
        if best < 0:
            raise RuntimeError("no free slot")
        total = prompt_tokens(prompt, self._bytes_per_token)
        cached = min(int(best_common // self._bytes_per_token), total - 1)
        self._busy[best] = True
        self._prompts[best] = prompt
        self._tick += 1
        self._used_at[best] = self._tick
        return best, cached

    def give_back(self, slot: int) -> None:
        self._busy[slot] = False


class BlockCache:
    """vLLM's shared prefix cache: full blocks of a prompt, chained by hash, LRU-evicted."""

    def __init__(self, block_tokens: int, capacity_tokens: int, bytes_per_token: float) -> None:
        self._block_tokens = block_tokens
        self._block_bytes = max(1, int(block_tokens * bytes_per_token))
        self._capacity_blocks = max(1, capacity_tokens // block_tokens)
        self._bytes_per_token = bytes_per_token
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def _chain(self, prompt: bytes) -> list[int]:
        hashes: list[int] = []
        previous = 0
        for start in range(0, len(prompt) - self._block_bytes + 1, self._block_bytes):
            previous = hash((previous, prompt[start : start + self._block_bytes]))
            hashes.append(previous)
        return hashes

    @property
    def used_blocks(self) -> int:
        return len(self._blocks)

    @property
    def capacity_blocks(self) -> int:
        return self._capacity_blocks

    def lookup(self, prompt: bytes) -> int:
        """Cached tokens: the leading blocks present, leaving at least one token to compute."""
        hit = 0
        for block in self._chain(prompt):
            if block not in self._blocks:
                break
            self._blocks.move_to_end(block)
            hit += 1
        total = prompt_tokens(prompt, self._bytes_per_token)
        limit = (total - 1) // self._block_tokens
        return min(hit, limit) * self._block_tokens

    def store(self, prompt: bytes) -> int:
        """Adds the prompt's full blocks; returns how many tokens were newly stored."""
        added = 0
        for block in self._chain(prompt):
            if block in self._blocks:
                self._blocks.move_to_end(block)
                continue
            self._blocks[block] = None
            added += 1
            if len(self._blocks) > self._capacity_blocks:
                self._blocks.popitem(last=False)
        return added * self._block_tokens
