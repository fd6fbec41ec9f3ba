"""Prefix herding corrects itself: piling onto the cached target raises its wait (spec §7, §16)."""

from __future__ import annotations

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick


def test_piling_onto_a_cached_target_raises_its_wait_until_another_wins():
    # Both warm, 2 slots each, 4.5 s per request. The prompt is 8k tokens at 1 ms: 8 s uncached.
    # Target 1 holds 7k of it, so it saves 7 s of prefill, and target 2 would redo those 7 s
    # (rework, weight 3.5: 24.5 s more): target 1 wins until its queue outweighs 31.5 s.
    slots = {1: 2, 2: 2}
    queued = {1: 0, 2: 0}
    chosen: list[int] = []
    for seed in range(24):
        cands = [
            Candidate(
                target_id=tid,
                capacity=2,
                free_slots=slots[tid],
                queue_ahead=queued[tid],
                warm=True,
                matched_tokens=7000 if tid == 1 else 0,
                prefill_s_per_token=0.001,
                service_s=4.5,
            )
            for tid in (1, 2)
        ]
        d = pick(RouteReq(prompt_tokens=8000, seed=seed), cands, DEFAULT_CONFIG)
        assert d.target_id is not None
        chosen.append(d.target_id)
        if slots[d.target_id] > 0:
            slots[d.target_id] -= 1
        else:
            queued[d.target_id] += 1
        if d.target_id == 2:
            break
    # Two free slots, then queue positions waiting 1.5 s, 3 s, ... 30 s ((q + 1) / 3 x 4.5 s;
    # est 1 s + wait); the next would wait 31.5 s: est 32.5 s against target 2's 8 s + 24.5 s,
    # a tie that goes to the less utilized target 2.
    assert chosen == [1] * 22 + [2]
