"""Who may read /metrics (issue 11): it names every key and its usage, so with keys configured
only an admin key or one marked `metrics: true` reads it, unless `metrics_public: true`."""

from __future__ import annotations

import aiohttp
import pytest

from pharos.cmd.runtime import Pharos, running
from pharos.config import parse_config
from pharos.fakeengine import FakeOllama, no_sleep
from pharos.proxy.auth import hash_key
from tests.obs.rig import BackendSpecYaml, KeySpec, StartRouter

ADMIN = KeySpec("root", "sk-root-0001", admin=True)
USER = KeySpec("user", "sk-user-0002")
SCRAPER = KeySpec("prometheus", "sk-prom-0003", metrics=True)


# secret,         status: who asks for /metrics with keys configured
CASES = [
    (None, 401),
    ("sk-wrong", 401),
    (USER.secret, 403),
    (SCRAPER.secret, 200),
    (ADMIN.secret, 200),
]


@pytest.mark.parametrize(("secret", "status"), CASES)
async def test_metrics_needs_an_admin_or_metrics_key_when_keys_are_configured(
    start_router: StartRouter, secret: str | None, status: int
) -> None:
    router = await start_router(
        [BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")], keys=[ADMIN, USER, SCRAPER]
    )
    got, _, body = await router.get("/metrics", secret)
    assert got == status
    if status == 200:
        assert b"pharos_" in body
    else:
        assert b"user" not in body and b'"error"' in body


async def test_metrics_public_opens_metrics_and_nothing_else() -> None:
    text = f"metrics_public: true\nkeys:\n  - name: user\n    sha256: {hash_key(USER.secret)}\n"
    pharos = Pharos(parse_config(text, "test"))
    async with running(pharos) as base, aiohttp.ClientSession() as session:
        async with session.get(f"{base}/metrics") as response:
            assert response.status == 200
        async with session.get(f"{base}/status") as response:
            assert response.status == 401
        async with session.get(f"{base}/v1/models") as response:
            assert response.status == 401
