"""401s on the model lists and Ollama's info routes are logged and counted in
pharos_decisions_total{stage="admission"} like an inference route's (issue 16: Open WebUI's
Ollama connection, keyless, silently showed no models)."""

from __future__ import annotations

import logging

import pytest

from pharos.config import Config
from pharos.config.schema import Key
from pharos.fakeengine import FakeOllama, no_sleep
from pharos.proxy.auth import hash_key
from tests.proxy.rig import Backend, RigFactory

KEY = "sk-info-test"


def _unauthorized_count(exposition: bytes) -> float:
    for line in exposition.decode().splitlines():
        counted = line.startswith("pharos_decisions_total{") and 'stage="admission"' in line
        if counted and 'outcome="unauthorized"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# path, the route name it is recorded under, whether the error is Ollama-shaped
PATHS = [
    ("/v1/models", "models", False),
    ("/v1/models/qwen2.5:0.5b", "models", False),
    ("/api/tags", "ollama-tags", True),
    ("/api/ps", "ollama-ps", True),
]


@pytest.mark.parametrize(("path", "route", "ollama"), PATHS)
async def test_a_401_on_an_info_route_is_logged_and_counted(
    rig: RigFactory, caplog: pytest.LogCaptureFixture, path: str, route: str, ollama: bool
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.proxy")
    r = await rig(
        Backend(FakeOllama(sleep=no_sleep)),
        config=Config(keys=(Key(name="user", sha256=hash_key(KEY)),)),
    )
    obs = r.pharos.obs
    assert obs is not None
    before = _unauthorized_count(obs.metrics.exposition())
    async with r.client.get(r.base + path) as reply:
        assert reply.status == 401
        body = await reply.json()
    assert isinstance(body["error"], str) is ollama
    (done,) = [d for d in r.done if d.route == route]
    assert done.status == 401 and ("admission", "unauthorized") in done.decisions
    assert _unauthorized_count(obs.metrics.exposition()) == before + 1
    assert f"401 on GET {path}" in caplog.text
    async with r.client.get(r.base + path, headers={"Authorization": f"Bearer {KEY}"}) as ok:
        assert ok.status == 200
    assert [d.status for d in r.done if d.route == route] == [401, 200]
