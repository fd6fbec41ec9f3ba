"""Containers on the machine's real Docker engine, for the live tests (tests/live/test_docker*).

scripts/docker/install.sh starts dockerd (idempotent) and scripts/docker/images.sh makes
the local images. Every container gets `--init` (busybox as PID 1 ignores SIGTERM), a unique
name and the run's label pharos.test=<uuid>; `Containers.remove_all` removes every container
of the run, so a failed test leaves nothing behind on the shared daemon.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUSYBOX_IMAGE = "pharos-busybox:local"
ENGINE_CACHE = Path(os.environ.get("PHAROS_ENGINE_CACHE", Path.home() / ".cache/pharos/engines"))
LLAMA_SERVER_DIR = ENGINE_CACHE / "llamacpp-b11312"
SMOLLM2_GGUF = ENGINE_CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def prepare_docker() -> None:
    """Install/start dockerd and make the local images (cached; seconds once done)."""
    for script in ("install.sh", "images.sh"):
        subprocess.run(
            ["bash", str(REPO_ROOT / "scripts/docker" / script)],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def docker(*args: str, check: bool = True, timeout_s: float = 60.0) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def compose(files: list[Path], args: tuple[str, ...], env: dict[str, str], timeout_s: float) -> str:
    """docker-compose with these files; its stderr's tail in the error when it fails."""
    file_args = [arg for path in files for arg in ("-f", str(path))]
    done = subprocess.run(
        ["docker-compose", *file_args, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker-compose {' '.join(args)}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def python_root() -> str:
    """Where the running python lives (pyenv, /opt, /usr/local, else Debian's /usr)."""
    real = Path(sys.executable).resolve()
    for root in (Path.home() / ".pyenv", Path("/opt"), Path("/usr/local")):
        if root in real.parents:
            return str(root)
    return "/usr"


def python_mounts() -> list[str]:
    """The host's python (pyenv or Debian's, with its libs under /usr) and this worktree's
    venv, mounted read-only at the same paths so the venv's python runs unchanged."""
    real = Path(sys.executable).resolve()
    mounts = {"/usr", str(REPO_ROOT)}
    for root in (Path.home() / ".pyenv", Path("/opt"), Path("/usr/local")):
        if root in real.parents:
            mounts.add(str(root))
    return [arg for path in sorted(mounts) for arg in ("-v", f"{path}:{path}:ro")]


@dataclass
class Container:
    name: str
    id: str

    def ip(self) -> str:
        found = docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", self.id
        )
        return found.split()[0]


class Containers:
    """The containers of one test run, all labelled pharos.test=<run>."""

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:12]
        self.labels = {"pharos.enable": "true", "pharos.test": self.run}

    def start(
        self,
        role: str,
        command: Sequence[str],
        *,
        labels: Mapping[str, str] | None = None,
        mounts: Sequence[str] = (),
        options: Sequence[str] = (),
        image: str = BUSYBOX_IMAGE,
    ) -> Container:
        name = f"pharos-test-{self.run}-{role}"
        args = ["run", "-d", "--init", "--name", name]
        for key, value in {**self.labels, **(labels or {})}.items():
            args += ["--label", f"{key}={value}"]
        args += [*mounts, *options, image, *command]
        return Container(name, docker(*args))

    def fake_engine(
        self, role: str, kind: str, port: int, *, log: Path | None = None, **extra: object
    ) -> Container:
        command = [sys.executable, "-m", "tests.discovery.fake_container"]
        command += ["--kind", kind, "--port", str(port)]
        mounts = python_mounts()
        if log is not None:
            mounts += ["-v", f"{log}:/engine.log:ro"]
            command += ["--log", "/engine.log"]
        options = ["-w", str(REPO_ROOT), "--expose", str(port)]
        labels = extra.get("labels")
        return self.start(
            role,
            command,
            labels=labels if isinstance(labels, dict) else None,
            mounts=mounts,
            options=options,
        )

    def llama_server(self, role: str) -> Container:
        """The real llama-server b11312 (the lead's engine cache) with SmolLM2; busybox
        exposes no port, so the label pharos.port says which one it is."""
        for path in (LLAMA_SERVER_DIR / "llama-server", SMOLLM2_GGUF):
            if not path.exists():
                raise RuntimeError(f"{path} missing: run bash scripts/engines/install-all.sh")
        mounts = ["-v", "/usr:/usr:ro", "-v", f"{LLAMA_SERVER_DIR}:/engine:ro"]
        mounts += ["-v", f"{SMOLLM2_GGUF.parent}:/models:ro"]
        command = ["/engine/llama-server", "-m", f"/models/{SMOLLM2_GGUF.name}"]
        command += ["--alias", "smollm2", "--metrics", "--slots", "-np", "2", "-c", "2048"]
        command += ["-t", "1", "--no-webui", "--host", "0.0.0.0", "--port", "8080"]
        return self.start(role, command, labels={"pharos.port": "8080"}, mounts=mounts)

    def ids(self) -> list[str]:
        listed = docker("ps", "-aq", "--filter", f"label=pharos.test={self.run}")
        return listed.split()

    def remove_all(self) -> None:
        ids = self.ids()
        if ids:
            docker("rm", "-f", "-v", *ids, check=False)


def wait_http(url: str, timeout_s: float = 60.0) -> None:
    """Until the URL answers 200 (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer 200 within {timeout_s:.0f} s")


def state_of(container: Container) -> dict[str, object]:
    state: dict[str, object] = json.loads(docker("inspect", "-f", "{{json .State}}", container.id))
    return state
