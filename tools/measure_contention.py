"""How much a second concurrent prefill slows one on llama-server (-np 2 -t 1, SmolLM2).

Prints prompt_n and prompt_ms of a ~1,000-token prompt three times alone and three times as one
of two sent at once (distinct prompts, cache_prompt false), the numbers behind
tests/captures/engines/llamacpp/b11312/contention.json. Run from the repository root with the
engines installed (scripts/engines/install-all.sh); binds 127.0.0.1 only, about 3 minutes.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.live.engines import free_port, llama_server_binary, smollm2_gguf

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")
Timing = tuple[int, float]


def prompt(seed: int, words: int = 330) -> str:
    """Distinct text of about 3 tokens a word (330 words: a ~1,000-token prompt)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(words))


def prefill(base_url: str, seed: int) -> Timing:
    body = json.dumps({"prompt": prompt(seed), "n_predict": 1, "cache_prompt": False}).encode()
    request = urllib.request.Request(
        base_url + "/completion", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=180) as reply:
        timings = json.load(reply)["timings"]
    return int(timings["prompt_n"]), float(timings["prompt_ms"])


def wait_healthy(base_url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"llama-server not healthy in {timeout_s} s")


@contextlib.contextmanager
def llama_server(log_path: Path) -> Iterator[str]:
    """One llama-server (-np 2 -t 1, SmolLM2) on 127.0.0.1, healthy; yields its base URL."""
    port = free_port()
    argv = [
        str(llama_server_binary()), "-m", str(smollm2_gguf()), "--alias", "smollm2",
        "-np", "2", "-c", "4096", "-t", "1", "--no-webui",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    with log_path.open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_healthy(base_url, 120)
        yield base_url
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    with llama_server(Path("/tmp/pharos-contention-llama.log")) as base_url:
        prefill(base_url, 999)
        for seed in range(100, 103):
            print("alone", *prefill(base_url, seed))
        for pair in range(3):
            out: dict[int, Timing] = {}

            def one(index: int, seed: int, out: dict[int, Timing] = out) -> None:
                out[index] = prefill(base_url, seed)

            threads = [threading.Thread(target=one, args=(j, 200 + 2 * pair + j)) for j in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            print("pair", *out[0], *out[1])


if __name__ == "__main__":
    main()
