"""What a request decoding in one slot does to a prefill in the other, on llama-server
(-np 2 -t 1, SmolLM2), and what a prefill sent while another prefills waits: the numbers behind
tests/captures/engines/llamacpp/b11312/beside_decode.json.

Prints, three times each: a ~1,000-token prefill alone (prompt_ms, TTFT); the same sent 1.5 s
after a short prompt began decoding 400 tokens (the prefill's prompt_ms and TTFT, and the
decoder's predicted_ms / predicted_n against the decoder alone); and a second prefill sent
3 s after a first (each one's prompt_ms and TTFT); and two short prompts decoding 400 tokens
at once (predicted_ms against the decoder alone). cache_prompt false, distinct prompts,
/completion. Run from the repository root with the engines installed; binds 127.0.0.1 only,
about 5 minutes.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tools.measure_contention import llama_server, prompt

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def complete(base_url: str, text: str, n_predict: int) -> dict[str, Any]:
    """timings of one /completion, with the wall time from send to the whole reply."""
    body = {"prompt": text, "n_predict": n_predict, "cache_prompt": False, "ignore_eos": True}
    request = urllib.request.Request(
        base_url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    sent = time.monotonic()
    with urllib.request.urlopen(request, timeout=300) as reply:
        timings = json.load(reply)["timings"]
    wall_ms = 1000 * (time.monotonic() - sent)
    keep = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
    return {"wall_ms": round(wall_ms, 1), **{k: timings[k] for k in keep}}


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(fn(*args)))
    thread.start()
    return thread, out


def main() -> None:
    rows: dict[str, list[Any]] = {
        "alone": [], "decoder_alone": [], "beside_decode": [], "after": [], "two_decoders": []
    }  # fmt: skip
    with llama_server(Path("/tmp/pharos-beside-decode-llama.log")) as base_url:
        complete(base_url, prompt(999, 20), 1)
        for i in range(3):
            rows["alone"].append(complete(base_url, prompt(100 + i), 1))
            rows["decoder_alone"].append(complete(base_url, prompt(300 + i, 10), 400))
        for i in range(3):
            thread, decoder = in_thread(complete, base_url, prompt(400 + i, 10), 400)
            time.sleep(1.5)
            prefill = complete(base_url, prompt(500 + i), 1)
            thread.join()
            rows["beside_decode"].append({"prefill": prefill, "decoder": decoder})
        for i in range(3):
            thread, first = in_thread(complete, base_url, prompt(600 + i), 1)
            time.sleep(3.0)
            second = complete(base_url, prompt(700 + i), 1)
            thread.join()
            rows["after"].append({"first": first, "second_sent_3s_later": second})
        for i in range(2):
            thread, one = in_thread(complete, base_url, prompt(800 + i, 10), 400)
            other = complete(base_url, prompt(900 + i, 10), 400)
            thread.join()
            rows["two_decoders"].append([one, other])
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
