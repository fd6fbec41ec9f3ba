"""The C touch skips the moves a shard's run makes needless (prefix/_indexc.c, issue 13).

A shard whose links in a chain begin with the links the last touch left at its end needs none of
those moves again. Checked here against links.py's plain loop over sequences of touches built to
hit the shortcut's edges: the same chain again, its next turn, a sibling that shares all but the
last link, chains sharing a shard's run only in part, repeated links and evictions.
"""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from pharos.prefix import links
from pharos.prefix.links import Moves, Runs, Shards
from tests.prefix.native import native_module, needs_c_build

_indexc = native_module("_indexc")


def _update(packed: bytes) -> bytes:
    return bytes([(packed[0] + 1) % 7]) + packed[1:]


def _chains(rng: random.Random, keys: list[int]) -> list[list[int]]:
    base = [rng.choice(keys) for _ in range(rng.randint(1, 12))]
    return [
        base,
        [*base, rng.choice(keys)],  # the next turn
        [*base[:-1], rng.choice(keys)],  # a sibling: all but the last link
        base[: len(base) // 2],  # a prefix: a shard's run matched only in part
        [rng.choice(keys) for _ in range(rng.randint(0, 8))],  # another chat
        [*base, *base[:2]],  # links repeated
    ]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("shard_count", [1, 4, 32])
@pytest.mark.parametrize("cap", [2, 5, 1_000])
def test_touching_with_runs_leaves_every_shard_as_the_plain_loop_leaves_it(
    seed: int, shard_count: int, cap: int
) -> None:
    native = needs_c_build(_indexc, "_indexc")
    rng = random.Random(seed)
    keys = [rng.getrandbits(64) for _ in range(24)] + [-1, 2**64 - 1, 0]
    chains = _chains(rng, keys)
    mask = shard_count - 1
    plain: Shards = tuple(OrderedDict() for _ in range(shard_count))
    skipping: Shards = tuple(OrderedDict() for _ in range(shard_count))
    plain_moves: Moves = tuple(shard.move_to_end for shard in plain)
    skipping_moves: Moves = tuple(shard.move_to_end for shard in skipping)
    runs: Runs = [None] * shard_count
    for step in range(40):
        chain = rng.choice(chains) if rng.random() < 0.8 else chains[0]
        fresh = bytes([step % 7]) * 17
        links.python_touch(plain, plain_moves, mask, cap, chain, fresh, _update)
        native.touch(skipping, skipping_moves, mask, cap, chain, fresh, _update, runs)
        assert [list(shard.items()) for shard in skipping] == [
            list(shard.items()) for shard in plain
        ], f"step {step}"


def test_a_run_whose_moves_were_skipped_is_the_order_the_moves_leave() -> None:
    """The shortcut's claim itself: the chain again after a touch of another shard's link."""
    native = needs_c_build(_indexc, "_indexc")
    shard: OrderedDict[int, bytes] = OrderedDict()
    runs: Runs = [None]
    chain = [3, 1, 2]
    native.touch((shard,), (shard.move_to_end,), 0, 10, chain, b"\x00" * 17, _update, runs)
    assert runs == [(3, 1, 2)]
    shard[9] = b"\x05" * 17  # a write the index would have forgotten the run for
    runs[0] = None
    native.touch((shard,), (shard.move_to_end,), 0, 10, chain, b"\x00" * 17, _update, runs)
    assert list(shard) == [9, 3, 1, 2]


def test_an_error_in_update_makes_the_deferred_moves_and_forgets_every_run() -> None:
    native = needs_c_build(_indexc, "_indexc")
    shard: OrderedDict[int, bytes] = OrderedDict({7: b"\x06" * 17})  # the update fails on 7
    runs: Runs = [None]
    native.touch((shard,), (shard.move_to_end,), 0, 10, [1, 2, 3], b"\x00" * 17, _update, runs)
    assert list(shard) == [7, 1, 2, 3] and runs == [(1, 2, 3)]

    def update(packed: bytes) -> bytes:
        if packed[0] == 6:
            raise RuntimeError("update failed")
        return _update(packed)

    with pytest.raises(RuntimeError, match="update failed"):  # 1 matched the run: deferred
        native.touch((shard,), (shard.move_to_end,), 0, 10, [1, 7], b"\x00" * 17, update, runs)
    assert list(shard) == [7, 2, 3, 1]  # what the plain loop leaves: 1 moved before 7 failed
    assert runs == [None]
