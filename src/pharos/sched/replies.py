"""Credit the reply an engine generated to the prefix it holds (spec §6 Record).

The index records a request's own messages when its reply ends, not the reply: the proxy
never hashes what the engine streams back. But a per-slot engine keeps prompt and reply
in the slot (llama.cpp, Ollama; issue 16: a turn 2 served with 6,192 of 6,210 tokens
cached), and a chat client sends that reply back as the next assistant message. Without
the credit a ShareGPT turn 2 (82 chars asked, 1,245 answered at the median) was predicted
as ~25 cached tokens of ~350, and the cost policy moved 4-11 of ~110 follow-up turns per
run off the engine that held them (pharos sim -s sharegpt, seeds 1-3).
"""

from __future__ import annotations

from bisect import bisect_right

from pharos.prefix import Chain, Match


def with_reply_credited(matches: dict[int, Match], chain: Chain) -> dict[int, Match]:
    """A match that ends two links before the request's end (the previous turn's prompt:
    `..., asked, reply, new question`) extended over the next link, the reply the engine
    generated for it (a client that edited it gets a wrong prediction, which the index then
    corrects). Any other match is left as it is: one ending earlier matched only a shared
    part (another user's system prompt), so the message after it is not this engine's."""
    cum_bytes = chain.cum_bytes
    last = len(cum_bytes) - 1
    if last < 2 or not matches:
        return matches
    out: dict[int, Match] | None = None
    for target_id, match in matches.items():
        index = bisect_right(cum_bytes, match.matched_bytes) - 1
        if index != last - 2:
            continue
        if out is None:
            out = dict(matches)
        out[target_id] = Match(cum_bytes[index + 1], match.source)
    return matches if out is None else out


def without_reply_credit(matched_bytes: int, chain: Chain) -> int:
    """What the index itself recorded of a match with_reply_credited may have extended: a
    match ending at the reply link (`..., asked, reply, new question`) ends at `asked`.

    A reply is judged by this: a client that sends back another reply than the engine
    generated (make scenario sends ShareGPT's answers) makes the credit wrong on every
    follow-up, while the previous prompt was cached as recorded (diagnostic run, equal fleet:
    172 tokens predicted with the reply, cache_n 31). Judged with the credit, the whole chain
    was forgotten and the next turn went by load: 3 of 3 moved follow-ups."""
    cum_bytes = chain.cum_bytes
    last = len(cum_bytes) - 1
    if last >= 2 and matched_bytes == cum_bytes[last - 1]:
        return cum_bytes[last - 2]
    return matched_bytes
