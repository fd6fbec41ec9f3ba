"""The index's per-chain shortcuts (issue 13) keep the per-link rules of spec §6 exactly.

record reuses one link's update for the next links holding the same slots, and lookup skips a
link whose slots equal the last link it read. Both are checked here against a plain model that
applies the rules link by link, over random workloads built to hit the shortcuts' edges: chains
sharing prefixes, slot ties, full entries, stale generations, evictions and corrections.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

import pytest

from pharos.prefix import Chain, Match, PrefixIndex, Source

MAX_SLOTS = 4
SOURCES = (Source.LOCAL, Source.PEER, Source.RESTORED)


@dataclass
class Model:
    """Spec §6 link by link: entries of (last_used_s, target_id, generation, source) lists."""

    cap: int
    entries: OrderedDict[int, list[tuple[float, int, int, Source]]] = field(
        default_factory=OrderedDict
    )

    def record(self, chain: Chain, target_id: int, generation: int, used_s: float, source: Source):
        for hash_ in chain.hashes:
            slots = self.entries.get(hash_)
            if slots is None:
                if len(self.entries) >= self.cap:
                    self.entries.popitem(last=False)
                self.entries[hash_] = [(used_s, target_id, generation, source)]
                continue
            self.entries[hash_] = _with(slots, target_id, generation, used_s, source)
            self.entries.move_to_end(hash_)

    def correct(self, chain: Chain, target_id: int) -> None:
        for hash_ in chain.hashes:
            slots = self.entries.get(hash_)
            if slots is None:
                continue
            kept = [slot for slot in slots if slot[1] != target_id]
            if not kept:
                del self.entries[hash_]
            else:
                self.entries[hash_] = kept

    def lookup(
        self, chain: Chain, live: dict[int, int], stop_after: int | None
    ) -> dict[int, Match]:
        found: dict[int, Match] = {}
        for i in range(len(chain.hashes) - 1, -1, -1):
            for _used_s, target_id, generation, source in self.entries.get(chain.hashes[i], []):
                if target_id in found or live.get(target_id) != generation:
                    continue
                found[target_id] = Match(chain.cum_bytes[i], source)
                if stop_after is not None and len(found) >= stop_after:
                    return found
        return found


def _with(
    slots: list[tuple[float, int, int, Source]],
    target_id: int,
    generation: int,
    used_s: float,
    source: Source,
) -> list[tuple[float, int, int, Source]]:
    for n, (old_used_s, old_target, _old_generation, old_source) in enumerate(slots):
        if old_target == target_id:
            if used_s <= old_used_s:
                used_s, source = old_used_s, old_source
            return [*slots[:n], (used_s, target_id, generation, source), *slots[n + 1 :]]
    if len(slots) < MAX_SLOTS:
        return [*slots, (used_s, target_id, generation, source)]
    victim = 0
    for n in range(1, len(slots)):
        if slots[n][0] <= slots[victim][0]:
            victim = n
    if used_s <= slots[victim][0]:
        return slots
    return [*slots[:victim], *slots[victim + 1 :], (used_s, target_id, generation, source)]


def _random_chain(rng: random.Random, roots: list[list[int]]) -> Chain:
    """A chain sharing a random prefix of an earlier one, so runs of equal entries are common."""
    root = rng.choice(roots)
    hashes = root[: rng.randint(0, len(root))] + [
        rng.getrandbits(64) for _ in range(rng.randint(0, 6))
    ]
    if rng.random() < 0.3:
        roots.append(hashes)
    return Chain(tuple(hashes), tuple(100 * (n + 1) for n in range(len(hashes))))


# seed: the workload; cap: small caps evict mid-chain
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("cap", [12, 40, 10_000])
def test_record_lookup_and_correct_match_the_link_by_link_rules(seed: int, cap: int) -> None:
    rng = random.Random(seed)
    index = PrefixIndex(cap, shards=1)
    model = Model(cap)
    live = {target_id: 1 for target_id in range(7)}
    roots = [[rng.getrandbits(64) for _ in range(30)] for _ in range(3)]
    now_s = 0.0
    for _ in range(400):
        chain = _random_chain(rng, roots)
        action = rng.random()
        target_id = rng.randrange(7)
        if action < 0.55:
            now_s += rng.choice((0.0, 0.0, 0.5, 1.0))  # ties on purpose
            used_s = now_s - rng.choice((0.0, 0.0, 2.0))  # and records older than the slot
            generation = live[target_id] if rng.random() < 0.9 else live[target_id] + 1
            source = rng.choice(SOURCES)
            index.record(chain, target_id, generation, used_s, source)
            model.record(chain, target_id, generation & 0xFFFF_FFFF, used_s, source)
        elif action < 0.65:
            index.correct(chain, target_id)
            model.correct(chain, target_id)
        elif action < 0.7:
            live[target_id] += 1
        stop_after = rng.choice((None, 1, 2, 7))
        assert index.lookup(chain, live.get, stop_after) == model.lookup(chain, live, stop_after)
    assert list(index) == list(model.entries)
    for hash_, slots in model.entries.items():
        held = [(s.last_used_s, s.target_id, s.generation, s.source) for s in index.slots(hash_)]
        assert held == slots
