"""`pharos doctor` against replayed engine captures on 127.0.0.1 (see replay.py for sources)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pharos.cmd.main import main
from pharos.doctor.report import route_served
from tests.cmd.replay import (
    Reply,
    Routes,
    capture,
    ollama_loaded_routes,
    ollama_log_path,
    vllm_busy_routes,
)

Serve = Callable[[Routes], str]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(["doctor", *argv, "--timeout", "5"])
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def doctor_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any]]:
    status, out, _ = run(capsys, *argv, "--json")
    return status, json.loads(out)["backends"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_vllm_busy_json(serve_routes: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    url = serve_routes(vllm_busy_routes())
    status, (backend,) = doctor_json(capsys, "--url", url)
    assert status == 0
    assert backend["url"] == url
    assert backend["kind"] == "vllm"
    assert backend["version"] == "0.30.0"
    assert backend["error"] is None
    model = backend["models"]["qwen2.5-0.5b"]
    assert model["running"] == 2 and model["waiting"] == 2  # busy: 4 requests on 2 slots
    assert model["kv_usage"] == pytest.approx(0.0014662756598240456)
    assert model["capacity"] is None  # vLLM reports none: unknown, never 0
    assert model["residency"] is None
    assert backend["signals"]["running"] == {"probe": "vllm-running", "source": "/metrics"}
    assert backend["signals"]["models"] == {"probe": "openai-models", "source": "/v1/models"}
    assert backend["signals"]["capacity"] is None
    assert "vllm-running" in backend["active"]
    assert backend["routes"]["/v1/messages"] == {"status": 404, "served": False}
    assert backend["capacity"] == {"config": None, "engine": None, "config_used": False}


def test_vllm_busy_text(serve_routes: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    url = serve_routes(vllm_busy_routes())
    status, out, err = run(capsys, "--url", url)
    assert status == 0, err
    assert out.startswith(url + "\n")
    assert "  kind      vllm (detected)\n" in out
    assert "  version   0.30.0\n" in out
    assert "    qwen2.5-0.5b: running 2, waiting 2, kv_usage 0.1%\n" in out
    assert "vllm-running                 running    qwen2.5-0.5b=2  [/metrics]" in out
    assert "  unknown   residency, vram_bytes, size_bytes, capacity\n" in out
    assert "/v1/messages (Claude Code): not served (404)" in out
    assert "capacity: the engine does not report" in out


def test_ollama_log_feed_reads_capacity(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve_routes(ollama_loaded_routes())
    feed = "file://" + str(ollama_log_path())
    status, (backend,) = doctor_json(capsys, "--url", url, "--log-feed", feed)
    assert status == 0
    assert backend["kind"] == "ollama" and backend["version"] == "0.34.4"
    model = backend["models"]["qwen2.5:0.5b"]
    assert model["residency"] == "loaded"
    assert model["vram_bytes"] == 0  # size_vram 0 on CPU: a real 0
    assert model["size_bytes"] == 397821319
    assert model["capacity"] == 2  # OLLAMA_NUM_PARALLEL:2 in the server config line
    assert model["running"] is None
    assert backend["signals"]["capacity"] == {"probe": "ollama-log-num-parallel", "source": "log"}
    assert backend["log_feed"]["lines"] > 0
    assert backend["routes"]["/v1/responses"] == {"status": 400, "served": True}


def test_ollama_without_a_log_feed_drops_the_log_probe(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve_routes(ollama_loaded_routes())
    status, out, _ = run(capsys, "--url", url)
    assert status == 0
    assert "ollama-log-num-parallel      no log feed" in out
    assert "memory_gb: not set; Ollama does not report its total memory" in out
    assert "/v1/messages (Claude Code): answers (400)" in out


def test_ollama_cloud_model_is_called_out(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    routes = dict(ollama_loaded_routes())
    tags = json.loads(capture("engines/ollama/v0.34.4/idle/api_tags"))
    # SYNTHETIC entry: the shape of a :cloud stub (remote_host set), per ENGINE-FACTS.
    tags["models"].append(
        {
            "name": "gpt-oss:120b-cloud",
            "model": "gpt-oss:120b-cloud",
            "size": 384,
            "remote_host": "https://ollama.com:443",
            "remote_model": "gpt-oss:120b",
        }
    )
    routes["GET", "/api/tags"] = Reply(200, json.dumps(tags).encode())
    url = serve_routes(routes)
    status, out, _ = run(capsys, "--url", url)
    assert status == 0
    assert 'model "gpt-oss:120b-cloud" is an Ollama cloud model' in out
    assert "its prompts leave your network" in out


def test_config_backends_capacity_aliases_and_own_probes(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    vllm_url = serve_routes(vllm_busy_routes())
    ollama_url = serve_routes(ollama_loaded_routes())
    config = tmp_path / "pharos.yaml"
    config.write_text(
        f"""
backends:
  - url: {vllm_url}
    capacity: 4
    aliases: {{qwen2.5-0.5b: qwen, not-served: other}}
    probes:
      - name: my-running
        signal: running
        prom: {{path: /metrics, metric: "vllm:num_requests_running", per_model: model_name}}
  - url: {ollama_url}
    kind: ollama
    capacity: 4
    memory_gb: 16
    logs: file://{ollama_log_path()}
"""
    )
    status, out, err = run(capsys, "--config", str(config))
    assert status == 0, err
    vllm_text, ollama_text = out.split("\n" + ollama_url + "\n")
    assert "my-running                   running    qwen=2  [own]" in vllm_text
    assert "vllm-running                 redundant" in vllm_text
    assert "capacity: 4 from config is used (the engine reports none)" in vllm_text
    assert 'alias "qwen2.5-0.5b" -> "qwen": listed by the engine' in vllm_text
    assert 'alias "not-served" -> "other": the engine does not list "not-served"' in vllm_text
    assert "    qwen: running 2, waiting 2, kv_usage 0.1%\n" in vllm_text
    assert "  kind      ollama (as configured)\n" in ollama_text
    assert "capacity: 4 in config is ignored; the engine reports its own (2)" in ollama_text
    assert "memory_gb" not in ollama_text

    status, backends = doctor_json(capsys, "--config", str(config))
    assert status == 0
    vllm, ollama = backends
    assert vllm["signals"]["running"] == {"probe": "my-running", "source": "own"}
    assert vllm["aliases"] == {
        "qwen2.5-0.5b": {"as": "qwen", "listed": True},
        "not-served": {"as": "other", "listed": False},
    }
    assert list(vllm["models"]) == ["qwen"]
    assert vllm["capacity"]["config_used"] is True
    assert ollama["capacity"] == {"config": 4, "engine": 2, "config_used": False}


def test_unreachable_backend_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    status, out, _ = run(capsys, "--url", url)
    assert status == 1
    assert "error     the backend answered nothing" in out
    status, (backend,) = doctor_json(capsys, "--url", url)
    assert status == 1
    assert backend["error"].startswith("the backend answered nothing")
    assert backend["models"] == {} and backend["version"] is None


def test_backend_answering_503_everywhere_fails_detection(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    # llama.cpp while loading its model answers 503 on every path (v0.5.0 loading capture).
    loading = {
        ("GET", path): Reply(503, b'{"error":{"code":503,"message":"Loading model"}}')
        for path in (
            "/running",
            "/api/version",
            "/props",
            "/version",
            "/get_server_info",
            "/metrics",
            "/v1/models",
            "/health",
        )
    }
    url = serve_routes(loading)
    status, out, _ = run(capsys, "--url", url)
    assert status == 1
    assert "could not detect the engine kind" in out


def test_one_bad_backend_of_several_fails_the_run(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "pharos.yaml"
    config.write_text(
        f"backends: [{{url: '{serve_routes(vllm_busy_routes())}'}},"
        f" {{url: 'http://127.0.0.1:{free_port()}'}}]\n"
    )
    status, backends = doctor_json(capsys, "--config", str(config))
    assert status == 1
    assert [backend["error"] is None for backend in backends] == [True, False]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--url", "gpu-box:8000"), "--url: "),
        (("--url", "http://a:1", "--log-feed", "/var/log/x"), "--log-feed: "),
        (("--url", "http://a:1", "--logs"), "--logs copies the --log-feed file"),
        (("--url", "http://a:1", "--meta", "state=idle"), "--meta adds lines"),
        (("--config", "/nonexistent/pharos.yaml"), "/nonexistent/pharos.yaml: cannot read"),
        (("--config", "x.yaml", "--record", "/tmp/x"), "--record takes one backend"),
        (("--url", "http://a:1", "--kind", "tgi"), "invalid choice"),
        ((), "one of the arguments --url --config/-c is required"),
    ],
)
def test_bad_arguments_exit_2_without_a_traceback(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    status, _, err = run(capsys, *argv)
    assert status == 2
    assert says in err
    assert "Traceback" not in err


def test_bad_config_names_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "pharos.yaml"
    config.write_text("backends:\n  - url: http://a:1\n    capacty: 4\n")
    status, _, err = run(capsys, "--config", str(config))
    assert status == 2
    assert err == (f'{config}: backends[0]: unknown field "capacty" (did you mean "capacity"?)\n')


def test_record_writes_a_capture(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = serve_routes(vllm_busy_routes())
    out_dir = tmp_path / "vllm" / "busy"
    status, _, err = run(capsys, "--url", url, "--record", str(out_dir), "--meta", "state=busy")
    assert status == 0, err
    assert (out_dir / "metrics").read_bytes() == capture("engines/vllm/v0.30.0/busy/metrics")
    paths = (out_dir / "paths.tsv").read_text()
    assert "/metrics\t200" in paths and "/api/ps\t404" in paths
    meta = (out_dir / "meta.yaml").read_text()
    assert "engine: vllm" in meta and "version: 0.30.0" in meta and "state: busy" in meta
    assert not (out_dir / "engine.log").exists()
    assert "prompts" not in err


def test_record_with_logs_copies_the_log_and_warns(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = serve_routes(ollama_loaded_routes())
    log = ollama_log_path()
    status, _, err = run(
        capsys, "--url", url, "--log-feed", f"file://{log}", "--record", str(tmp_path), "--logs"
    )
    assert status == 0, err
    assert (tmp_path / "engine.log").read_bytes() == log.read_bytes()
    assert "engine logs can contain prompts" in err


def test_log_line_with_an_unusable_value_is_skipped_not_a_crash(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = serve_routes(vllm_busy_routes())
    log = tmp_path / "engine.log"
    log.write_text("slots=0 prompt=secret words\nslots=5\n")
    config = tmp_path / "pharos.yaml"
    config.write_text(
        f"""
backends:
  - url: {url}
    logs: file://{log}
    probes:
      - name: my-slots
        signal: capacity
        log: {{match: "slots=(?P<value>[0-9]+)"}}
"""
    )
    status, (backend,) = doctor_json(capsys, "--config", str(config))
    assert status == 0
    assert backend["log_feed"]["lines"] == 2
    assert backend["signals"]["capacity"] == {"probe": "my-slots", "source": "own"}
    assert backend["models"]["qwen2.5-0.5b"]["capacity"] == 5
    assert backend["log_feed"]["note"] == "1 matching lines had unusable values"
    assert "secret" not in json.dumps(backend)


@pytest.mark.parametrize(
    ("status", "body", "served"),
    [
        (400, b"", True),
        (422, b"{}", True),
        (404, b'{"error":"not found"}', False),
        (405, b"", False),
        # llama-server b11312 serves /v1/messages and answers POST {} like this (live):
        (500, b'{"error":{"code":500,"message":"\'messages\' is required"}}', True),
        (500, b"<html>Internal Server Error</html>", None),
        (502, b"", None),
        (None, b"", None),
    ],
)
def test_route_served_reads_status_and_error_body(
    status: int | None, body: bytes, served: bool | None
) -> None:
    assert route_served(status, body) is served


def test_a_model_larger_than_memory_gb_is_called_out(
    serve_routes: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """qwen2.5:0.5b is 397,821,319 bytes in the v0.34.4 capture's /api/tags."""
    ollama_url = serve_routes(ollama_loaded_routes())
    config = tmp_path / "pharos.yaml"
    config.write_text(f"backends:\n  - url: {ollama_url}\n    kind: ollama\n    memory_gb: 0.25\n")
    status, out, err = run(capsys, "--config", str(config))
    assert status == 0, err
    assert (
        'model "qwen2.5:0.5b" (379.4 MiB) can never fit memory_gb (256.0 MiB): '
        "Pharos will not load it here, so its requests wait"
    ) in out
