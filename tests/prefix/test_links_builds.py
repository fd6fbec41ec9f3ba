"""The index's per-link loops in C (prefix/_indexc.c) and links.py's Python ones are one (issue 13).

The index uses the C build when setup.py compiled it, the Python loops under PHAROS_PURE_PYTHON=1
or without a build. Both run here on the same random shards and must leave the same entries in
the same order and give the same answers.
"""

from __future__ import annotations

import os
import random
import types
from collections import OrderedDict
from collections.abc import Callable

import pytest

from pharos.prefix import links
from pharos.prefix.links import Moves, Scan, Shards, Touch
from tests.prefix.native import native_module
from tests.prefix.native import needs_c_build as needs_c_build_of

_indexc = native_module("_indexc")


def needs_c_build() -> types.ModuleType:
    return needs_c_build_of(_indexc, "_indexc")


def _shards(rng: random.Random, count: int, keys: list[int]) -> Shards:
    shards: Shards = tuple(OrderedDict() for _ in range(count))
    values = [bytes([rng.randrange(3)]) * 17 for _ in range(4)]  # few values: equal runs
    for key in keys:
        if rng.random() < 0.6:
            shards[key & (count - 1)][key] = rng.choice(values)
    return shards


def _copy(shards: Shards) -> Shards:
    return tuple(OrderedDict(shard) for shard in shards)


def _moves(shards: Shards) -> Moves:
    return tuple(shard.move_to_end for shard in shards)


def _update(calls: list[bytes]) -> Callable[[bytes], bytes]:
    def update(packed: bytes) -> bytes:
        calls.append(packed)
        return packed if packed[0] == 2 else bytes([packed[0] + 1]) + packed[1:]

    return update


def _scan_all(scan: Scan, shards: Shards, mask: int, hashes: tuple[int, ...]) -> list[int]:
    seen: list[int] = []
    i, packed = len(hashes) - 1, b""
    while (held := scan(shards, mask, hashes, i - 1 if packed else i, packed)) is not None:
        i, packed = held
        seen.append(i)
    return seen


# seed: the shards and chain; shard_count: 1 is the small index, 32 the sharded one; cap: evicts
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("shard_count", [1, 32])
@pytest.mark.parametrize("cap", [3, 1_000])
def test_the_c_loops_leave_what_the_python_loops_leave(seed: int, shard_count: int, cap: int):
    native = needs_c_build()
    rng = random.Random(seed)
    # a peer's op may carry any int msgspec decodes: the int64 / uint64 bounds, negatives
    keys = [rng.getrandbits(64) for _ in range(56)] + [-(2**63), -1, 0, 2**64 - 1]
    shards = _shards(rng, shard_count, keys)
    hashes = tuple(rng.choice(keys) for _ in range(rng.randint(0, 40)))
    mask = shard_count - 1
    fresh = b"\x09" * 17

    assert _scan_all(native.scan, shards, mask, hashes) == _scan_all(
        links.python_scan, shards, mask, hashes
    )
    results = []
    for touch in (native.touch, links.python_touch):
        touched = _copy(shards)
        calls: list[bytes] = []
        typed: Touch = touch
        typed(touched, _moves(touched), mask, cap, list(hashes), fresh, _update(calls))
        results.append(([list(shard.items()) for shard in touched], calls))
    assert results[0] == results[1]


def test_the_index_uses_the_c_loops_when_built_and_not_told_otherwise() -> None:
    native = needs_c_build()
    if os.environ.get(links.PURE_ENV) == "1":
        assert links.scan is links.python_scan
        assert links.IMPLEMENTATION == "python"
    else:
        assert links.scan is native.scan
        assert links.touch is native.touch
        assert links.IMPLEMENTATION == "c"


def test_an_exception_in_update_propagates_from_the_c_touch_and_leaves_the_entry() -> None:
    native = needs_c_build()
    shards: Shards = (OrderedDict({5: b"\x00" * 17}),)

    def update(_packed: bytes) -> bytes:
        raise RuntimeError("update failed")

    with pytest.raises(RuntimeError, match="update failed"):
        native.touch(shards, _moves(shards), 0, 10, [5], b"\x01" * 17, update)
    assert shards[0] == {5: b"\x00" * 17}
