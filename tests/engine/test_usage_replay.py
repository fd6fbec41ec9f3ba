"""TestReplayUsage: the usage parser on every recorded reply (spec §9 Tap, §14 layer 2).

Expected values were read by hand from each stream's final usage-bearing line.
A stream found on disk without a row here (a newly recorded version) still gets
the invariants every recorded reply shares.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tools.captures import shared_captures as captures_root
from tools.captures import stream_files

from pharos.engine.usage import Usage, parse_usage

# (prompt, cached, completion, load_s, prefill_s) of the file's last usage; None = no usage.
Row = tuple[int | None, int | None, int | None, float | None, float | None] | None

EXPECTED: dict[str, Row] = {
    "llama-swap/v185/openai-chat.1.sse": (3209, 0, 10, None, 22.819894),
    "llama-swap/v185/openai-chat.2.sse": (3209, 3208, 10, None, 0.020404),
    "llama-swap/v185/unknown-model.txt": None,
    "llama-swap/v219/openai-chat.1.sse": (3209, 0, 10, None, 29.240699),
    "llama-swap/v219/openai-chat.2.sse": (3209, 3208, 10, None, 0.04542),
    "llama-swap/v219/unknown-model.txt": None,
    "llama-swap/v260/openai-chat.1.sse": (3209, 0, 10, None, 10.437184),
    "llama-swap/v260/openai-chat.2.sse": (3209, 3208, 10, None, 0.080472),
    # b6602/b7139 have no prompt_tokens_details: cached comes from timings.cache_n.
    "llamacpp/b6602/openai-chat.1.sse": (3209, 0, 10, None, 20.798836),
    "llamacpp/b6602/openai-chat.2.sse": (3209, 3208, 10, None, 0.021442),
    "llamacpp/b6602/unknown-model.txt": (9, 3, 1, None, 0.05716),
    "llamacpp/b7139/openai-chat.1.sse": (3209, 0, 10, None, 49.345093),
    "llamacpp/b7139/openai-chat.2.sse": (3209, 3208, 10, None, 0.042311),
    "llamacpp/b7139/unknown-model.txt": (9, 3, 1, None, 0.068111),
    "llamacpp/b8772/openai-chat.1.sse": (3209, 0, 10, None, 18.654176),
    "llamacpp/b8772/openai-chat.2.sse": (3209, 3208, 10, None, 0.03533),
    "llamacpp/b8772/unknown-model.txt": (30, 24, 1, None, 0.049187),
    "llamacpp/v0.5.0/openai-chat.1.sse": (3209, 0, 10, None, 9.899651),
    "llamacpp/v0.5.0/openai-chat.2.sse": (3209, 3208, 10, None, 0.099257),
    "llamacpp/v0.5.0/openai-chat.json": (32, 31, 8, None, 0.008601),
    "llamacpp/v0.5.0/openai-completion.json": (3, 0, 8, None, 0.008735),
    "llamacpp/v0.5.0/openai-embeddings.json": None,  # the 501 refusal
    "mlx-lm/v0.31.3/openai-chat.1.sse": (3209, 3, 10, None, None),
    "mlx-lm/v0.31.3/openai-chat.2.sse": (3209, 3208, 10, None, None),
    # Before v0.33.3 Ollama reports no cached tokens: unknown, never 0.
    "ollama/v0.12.4/ollama-chat.1.ndjson": (3211, None, 10, 0.101573631, 36.783640883),
    "ollama/v0.12.4/ollama-chat.2.ndjson": (3211, None, 10, 0.098579616, 0.033468306),
    "ollama/v0.12.4/openai-chat.1.sse": (3209, None, 10, None, None),
    "ollama/v0.12.4/openai-chat.2.sse": (3209, None, 10, None, None),
    "ollama/v0.12.4/unknown-model.txt": None,
    # v0.30.0 counts only the uncached tokens: the warm repeat reports 1 prompt token.
    "ollama/v0.30.0/ollama-chat.1.ndjson": (3208, None, 10, 0.106650672, 12.79868),
    "ollama/v0.30.0/ollama-chat.2.ndjson": (1, None, 10, 0.105566251, 0.019586),
    "ollama/v0.30.0/openai-chat.1.sse": (3209, None, 10, None, None),
    "ollama/v0.30.0/openai-chat.2.sse": (1, None, 10, None, None),
    "ollama/v0.33.3/ollama-chat.1.ndjson": (3211, 3, 10, 0.001902829, 28.750512),
    "ollama/v0.33.3/ollama-chat.2.ndjson": (3211, 3210, 10, 0.000857283, 0.042977),
    "ollama/v0.33.3/openai-chat.1.sse": (3209, 0, 10, None, None),
    "ollama/v0.33.3/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "ollama/v0.33.3/unknown-model.txt": None,
    "ollama/v0.34.4/ollama-chat.1.ndjson": (3209, 3208, 10, 0.000598208, 0.005546),
    "ollama/v0.34.4/ollama-chat.2.ndjson": (3209, 3208, 10, 0.0006285, 0.006981),
    "ollama/v0.34.4/ollama-chat.json": (32, 31, 8, 0.000933, 0.010883),
    "ollama/v0.34.4/ollama-embed.json": (5, None, 0, 0.000539917, None),
    "ollama/v0.34.4/ollama-generate.ndjson": (32, 31, 8, 0.001363167, 0.012393),
    "ollama/v0.34.4/openai-chat.1.sse": (3209, 0, 10, None, None),
    "ollama/v0.34.4/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "ollama/v0.34.4/openai-chat.json": (32, 24, 8, None, None),
    "ollama/v0.34.4/openai-completion.json": (32, 31, 8, None, None),
    "ollama/v0.34.4/openai-embeddings.json": (5, None, 0, None, None),
    "sglang/v0.5.11/openai-chat.1.sse": (3209, 3, 10, None, None),
    "sglang/v0.5.11/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "sglang/v0.5.11/unknown-model.txt": (30, 24, 1, None, None),
    "sglang/v0.5.20/openai-chat.1.sse": (3209, 3, 10, None, None),
    "sglang/v0.5.20/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "sglang/v0.5.5.post3/openai-chat.1.sse": (3209, 3, 10, None, None),
    "sglang/v0.5.5.post3/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "sglang/v0.5.5.post3/unknown-model.txt": (30, 24, 1, None, None),
    "sglang/v0.5.8/openai-chat.1.sse": (3209, 3, 10, None, None),
    "sglang/v0.5.8/openai-chat.2.sse": (3209, 3208, 10, None, None),
    "sglang/v0.5.8/unknown-model.txt": (30, 24, 1, None, None),
    # v0.10.2 leaves prompt_tokens_details out when nothing was cached.
    "vllm/v0.10.2/openai-chat.1.sse": (3209, None, 10, None, None),
    "vllm/v0.10.2/openai-chat.2.sse": (3209, 3200, 10, None, None),
    "vllm/v0.30.0/openai-chat.1.sse": (3209, 0, 10, None, None),
    "vllm/v0.30.0/openai-chat.2.sse": (3209, 3200, 10, None, None),
    "vllm/v0.30.0/openai-chat.json": (32, 0, 8, None, None),
    "vllm/v0.30.0/openai-completion.json": (3, 0, 8, None, None),
}

STREAMS = stream_files()


def _key(path: Path) -> str:
    return f"{path.parent.parent.parent.name}/{path.parent.parent.name}/{path.name}"


def _last_usage(path: Path) -> Usage | None:
    last = None
    for line in path.read_bytes().split(b"\n"):
        usage = parse_usage(line)
        if usage is not None:
            last = usage
    return last


def _status_of(path: Path) -> int | None:
    replies = path.parent / "replies.tsv"
    if not replies.exists():
        return None
    for row in replies.read_text().splitlines():
        name, _, status = row.partition("\t")
        if name == path.name:
            return int(status)
    return None


def test_captures_are_present() -> None:
    assert (captures_root() / "engines").is_dir(), f"no captures at {captures_root()}"
    assert len(STREAMS) >= len(EXPECTED)


def test_every_expected_row_has_its_stream() -> None:
    keys = {_key(p) for p in STREAMS}
    assert set(EXPECTED) <= keys, sorted(set(EXPECTED) - keys)


@pytest.mark.parametrize("path", STREAMS, ids=_key)
def test_replay_usage(path: Path) -> None:
    usage = _last_usage(path)
    key = _key(path)
    if key in EXPECTED:
        row = EXPECTED[key]
        if row is None:
            assert usage is None
            return
        assert usage is not None
        prompt, cached, completion, load_s, prefill_s = row
        assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (
            prompt,
            cached,
            completion,
        )
        for got, want in ((usage.engine_load_s, load_s), (usage.engine_prefill_s, prefill_s)):
            if want is None:
                assert got is None
            else:
                assert got == pytest.approx(want, rel=1e-9)
        return
    # A stream with no row yet: the invariants every recorded reply shares.
    if path.suffix in (".sse", ".ndjson") or _status_of(path) == 200:
        assert usage is not None, f"{key}: a served reply carries usage"
        assert usage.prompt_tokens is not None
        assert usage.completion_tokens is not None


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"data: [DONE]",
        b": keepalive 2048/3206",
        b'data: {"choices":[{"delta":{"content":"Hi"}}],"usage":null}',
        b'{"model":"m","message":{"content":"x"},"done":false}',
        b"data: {not json usage",
        b'data: ["usage"]',
        b'{"usage":{"prompt_tokens":true,"completion_tokens":-3}}',
    ],
)
def test_lines_without_usage(line: bytes) -> None:
    assert parse_usage(line) is None


def test_a_line_without_any_marker_is_never_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    import pharos.engine.usage as usage_module

    def explode(_line: bytes) -> None:
        raise AssertionError("decoded a line that cannot carry usage")

    monkeypatch.setattr(usage_module, "decode_line", explode)
    assert parse_usage(b'data: {"choices":[{"delta":{"content":"Hello"}}]}') is None


def test_newer_field_wins_over_older() -> None:
    line = (
        b'data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,'
        b'"prompt_tokens_details":{"cached_tokens":16}},'
        b'"timings":{"cache_n":30,"prompt_n":10,"predicted_n":9,"prompt_ms":250.0}}'
    )
    assert parse_usage(line) == Usage(40, 16, 2, None, 0.25)


def test_llamacpp_timings_alone_sum_to_the_whole_prompt() -> None:
    line = b'{"timings":{"cache_n":30,"prompt_n":10,"predicted_n":9}}'
    assert parse_usage(line) == Usage(40, 30, 9, None, None)


def test_embeddings_count_zero_completion_tokens() -> None:
    body = b'{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],'
    body += b'"usage":{"prompt_tokens":5,"total_tokens":5}}'
    usage = parse_usage(body)
    assert usage is not None
    assert usage.completion_tokens == 0
    chat = parse_usage(b'{"object":"chat.completion","usage":{"prompt_tokens":5}}')
    assert chat is not None
    assert chat.completion_tokens is None


def test_a_count_no_engine_could_report_is_unknown() -> None:
    # 10**20 tokens would be counted into the usage book, and from then on every state-file
    # and peer snapshot fails to encode (MessagePack holds 64-bit integers at most).
    line = b'{"usage":{"prompt_tokens":100000000000000000000,"completion_tokens":7}}'
    assert parse_usage(line) == Usage(None, None, 7, None, None)
    swapped = b'{"timings":{"cache_n":30,"prompt_n":10,"predicted_n":100000000000000000000}}'
    assert parse_usage(swapped) == Usage(40, 30, None, None, None)
