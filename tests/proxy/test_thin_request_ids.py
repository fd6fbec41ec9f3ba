"""Request ids cut from one os.urandom read per 256: still 32 hex of kernel randomness each,
never repeated, one read of random bytes per 256 ids."""

from __future__ import annotations

import os
import re

from aiohttp.test_utils import make_mocked_request

from pharos.proxy.request_id import IDS_PER_READ, RequestIds, request_id_of


def test_ids_are_32_hex_unique_and_cost_one_random_read_per_256() -> None:
    reads: list[int] = []

    def counted(size: int) -> bytes:
        reads.append(size)
        return os.urandom(size)

    ids = RequestIds(counted)
    made = [ids.new() for _ in range(3 * IDS_PER_READ + 1)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", made_id) for made_id in made)
    assert len(set(made)) == len(made)
    assert reads == [16 * IDS_PER_READ] * 4


def test_each_id_is_its_own_16_random_bytes_in_order() -> None:
    pool = bytes(range(256)) * 16  # 4 KiB: exactly one read
    ids = RequestIds(lambda size: pool[:size])
    assert ids.new() == pool[:16].hex()
    assert ids.new() == pool[16:32].hex()


def test_a_client_id_is_kept_and_a_made_one_is_stored_once() -> None:
    # (X-Request-Id sent,   kept?)
    cases = [("trace-1", True), (None, False), ("x" * 129, False), ("a b", False)]
    ids = RequestIds()
    for sent, kept in cases:
        headers = {} if sent is None else {"X-Request-Id": sent}
        request = make_mocked_request("POST", "/v1/chat/completions", headers=headers)
        first = request_id_of(request, ids)
        assert request_id_of(request, ids) == first  # made once per request
        assert (first == sent) is kept
