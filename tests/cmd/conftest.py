"""Fixtures for the cmd tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.cmd.replay import ReplayServer, Routes


@pytest.fixture
def serve_routes() -> Iterator[Callable[[Routes], str]]:
    started: list[ReplayServer] = []

    def start(routes: Routes) -> str:
        server = ReplayServer(routes)
        server.start()
        started.append(server)
        return server.url

    yield start
    for server in started:
        server.stop()
