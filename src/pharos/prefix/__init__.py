"""Prefix index: chained message hashes and a bounded LRU of which targets hold them (spec §6)."""

from pharos.prefix.chain import (
    EMPTY_CHAIN,
    PROMPT_BLOCK_BYTES,
    Chain,
    chain_for_chat,
    chain_for_prompt,
)
from pharos.prefix.index import DEFAULT_CAP_ENTRIES, PrefixIndex
from pharos.prefix.slots import MAX_SLOTS, Match, Slot, Source
from pharos.prefix.tools import ToolsCaching
from pharos.prefix.wire import ExportedSlot, PrefixEntry, PrefixOp

__all__ = [
    "DEFAULT_CAP_ENTRIES",
    "EMPTY_CHAIN",
    "MAX_SLOTS",
    "PROMPT_BLOCK_BYTES",
    "Chain",
    "ExportedSlot",
    "Match",
    "PrefixEntry",
    "PrefixIndex",
    "PrefixOp",
    "Slot",
    "Source",
    "ToolsCaching",
    "chain_for_chat",
    "chain_for_prompt",
]
