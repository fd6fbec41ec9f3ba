"""The recorder against an aiohttp test server: bodies, paths.tsv, meta.yaml, a dead backend."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from pharos.engine.record import (
    CANDIDATE_PATHS,
    RECORD_PATHS,
    body_file_name,
    record,
)


def test_body_file_names_follow_the_capture_layout() -> None:
    assert body_file_name("/api/ps") == "api_ps"
    assert body_file_name("/v1/models") == "v1_models"
    assert body_file_name("/props?model=smollm2") == "props_model=smollm2"
    with pytest.raises(ValueError):
        body_file_name("/")
    with pytest.raises(ValueError):
        body_file_name("/paths.tsv")


def test_record_paths_hold_every_candidate_once_in_order() -> None:
    assert RECORD_PATHS[: len(CANDIDATE_PATHS)] == CANDIDATE_PATHS
    assert len(set(RECORD_PATHS)) == len(RECORD_PATHS)
    assert all(p.startswith("/") for p in RECORD_PATHS)


def _app() -> web.Application:
    async def props(_: web.Request) -> web.Response:
        return web.json_response({"total_slots": 2, "build_info": "b1-abc"})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=b"llamacpp:requests_processing 1\n",
            headers={"Content-Type": "text/plain; version=0.0.4"},
        )

    async def loading(_: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "Loading model", "code": 503}}, status=503)

    app = web.Application()
    app.router.add_get("/props", props)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", loading)
    return app


async def test_record_writes_bodies_statuses_and_meta(tmp_path: Path) -> None:
    server = TestServer(_app(), host="127.0.0.1", port=0)
    await server.start_server()
    log = tmp_path / "server.log"
    log.write_text("srv  load_model: loading model\n")
    out = tmp_path / "idle"
    (out / "api_ps").parent.mkdir(parents=True)
    (out / "api_ps").write_text("stale body from an earlier recording")
    try:
        async with aiohttp.ClientSession() as session:
            await record(
                session,
                str(server.make_url("/")),
                out,
                meta={"engine": "llamacpp", "version": "b1", "state": "idle"},
                log_file=log,
            )
    finally:
        await server.close()

    rows = [line.split("\t") for line in (out / "paths.tsv").read_text().splitlines()]
    assert [r[0] for r in rows] == list(RECORD_PATHS)
    by_path = {r[0]: (r[1], r[2]) for r in rows}
    assert by_path["/props"] == ("200", "application/json; charset=utf-8")
    assert by_path["/metrics"] == ("200", "text/plain; version=0.0.4")
    assert by_path["/health"][0] == "503"
    assert by_path["/api/ps"][0] == "404"
    assert (out / "props").read_bytes() == b'{"total_slots": 2, "build_info": "b1-abc"}'
    assert (out / "metrics").read_bytes() == b"llamacpp:requests_processing 1\n"
    assert b"Loading model" in (out / "health").read_bytes()
    assert not (out / "api_ps").exists(), "a 404 leaves no body, and a stale one is removed"
    assert yaml.safe_load((out / "meta.yaml").read_text()) == {
        "engine": "llamacpp",
        "version": "b1",
        "state": "idle",
    }
    assert (out / "engine.log").read_text() == log.read_text()


async def test_record_of_a_dead_backend_marks_every_path_unanswered(tmp_path: Path) -> None:
    server = TestServer(web.Application(), host="127.0.0.1", port=0)
    await server.start_server()
    url = str(server.make_url("/"))
    await server.close()  # nothing listens there now
    async with aiohttp.ClientSession() as session:
        await record(session, url, tmp_path, meta={"engine": "x"}, paths=("/health", "/v1/models"))
    assert (tmp_path / "paths.tsv").read_text() == "/health\t000\t-\n/v1/models\t000\t-\n"
    assert not (tmp_path / "health").exists()


async def test_record_refuses_a_path_that_cannot_name_a_file(tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ValueError):
            await record(session, "http://127.0.0.1:9", tmp_path, meta={}, paths=("/",))
    assert not (tmp_path / "paths.tsv").exists()
