"""What a side call is (issue 16): one message soon after its key's previous reply ended."""

from __future__ import annotations

from pharos.sched.types import RouteRequest

SIDE_CALL_GAP_S = 1.0
"""A request a key sends within this of its previous reply's end is a side call (Open WebUI's
title and tags calls follow each turn within milliseconds; people think 5 s or more), when it
is a single message (SIDE_CALL_MAX_LINKS). Only a side call is charged for the conversation it
would push out of a slot (Candidate.evicts_tokens), and its own slot is not kept: it never
comes back (issue 16)."""
SIDE_CALL_MAX_LINKS = 1
"""A side call is one message (Open WebUI 0.12.4's title, tags and follow-up calls are one user
message). With one key for many people (`make scenario`'s anonymous key, one Open WebUI) other
people's turns come within SIDE_CALL_GAP_S of a reply: real-equal, seeds 1-20, 1,495 of 4,101
turns were judged side calls, charged for an idle engine's slots (8.16 s at seed 1, 162.8 s),
and queued for the busy one (docs/routing-log.md, "A shared key's turns are no side calls")."""


def is_side_call(ended_at: float | None, sent_at: float, request: RouteRequest) -> bool:
    """Whether `request`, sent at `sent_at`, is a side call: its key's previous reply ended
    (`ended_at`; None: it has had none) within SIDE_CALL_GAP_S, and it is one message."""
    if ended_at is None or sent_at - ended_at >= SIDE_CALL_GAP_S:
        return False
    chain = request.chain
    return chain is None or len(chain.hashes) <= SIDE_CALL_MAX_LINKS
