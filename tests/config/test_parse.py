"""Config parsing (spec §10): typed values, defaults, and errors that name their field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pharos.config import (
    BYTES_PER_GB,
    Config,
    ConfigError,
    HostPort,
    Policy,
    load_config,
    parse_config,
    parse_duration_s,
    restart_needed,
    usage_zone,
)
from pharos.engine.types import Kind, Signal

LIBRARY = frozenset({"vllm-running", "openai-models"})

SPEC_EXAMPLE = r"""
listen: :8090
policy: cost              # or least-load
backends:
  - url: http://gpu-box:11434/
    kind: auto
    memory_gb: 24
    capacity: 4
    aliases:
      qwen2.5:3b-instruct-q4_K_M: qwen2.5:3b
  - url: http://gpu-box:8000
    kind: vllm
    logs: docker://vllm-1
    probes:
      - name: my-vllm-running
        signal: running
        prom: {path: /metrics, metric: vllm:num_requests_running, per_model: model_name}
      - name: my-model-loaded
        signal: residency
        log: {match: 'model (?P<model>\S+) loaded', value: loaded}
keys:
  - name: alice
    sha256: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08
    rpm: 60
    tokens_per_day: 2000000
    weight: 1
    models: []
  - name: ops
    sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
    admin: true
state_file: /data/pharos.state
usage:
  timezone: Asia/Bangkok
  retention_days: 400
drain:
  grace: 5s
  timeout: 1h30m
peers:
  listen: :8081
  secret_file: /run/secrets/pharos-peer
  members: [pharos-a:8081, pharos-b:8081, pharos-c:8081]
"""


def parse(text: str) -> Config:
    return parse_config(text, "pharos.yaml", library_names=LIBRARY, unbuilt=())


def problems_of(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value.problems


def test_spec_example_parses_into_typed_values() -> None:
    config = parse(SPEC_EXAMPLE)
    assert config.listen == HostPort("", 8090)
    assert config.policy is Policy.COST
    ollama, vllm = config.backends
    assert ollama.url == "http://gpu-box:11434"  # trailing slash dropped
    assert ollama.kind is Kind.AUTO
    assert ollama.memory_bytes == 24 * BYTES_PER_GB
    assert ollama.capacity == 4
    assert dict(ollama.aliases) == {"qwen2.5:3b-instruct-q4_K_M": "qwen2.5:3b"}
    assert vllm.kind is Kind.VLLM
    assert vllm.logs == "docker://vllm-1"
    running, loaded = vllm.probes
    assert running.signal is Signal.RUNNING
    assert running.prom is not None and running.prom.per_model == "model_name"
    assert loaded.log is not None and loaded.log.value == "loaded"
    alice, ops = config.keys
    assert alice.sha256 == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    assert (alice.rpm, alice.tokens_per_day, alice.weight, alice.models) == (60, 2_000_000, 1, ())
    assert ops.admin is True and ops.rpm is None
    assert config.state_file == "/data/pharos.state"
    assert config.usage.timezone == "Asia/Bangkok"
    assert config.drain.grace.seconds == 5.0
    assert config.drain.timeout.seconds == 5400.0
    assert config.peers is not None
    assert config.peers.listen == HostPort("", 8081)
    assert config.peers.members == ("pharos-a:8081", "pharos-b:8081", "pharos-c:8081")


def test_values_are_immutable() -> None:
    config = parse(SPEC_EXAMPLE)
    with pytest.raises(AttributeError):
        config.policy = Policy.LEAST_LOAD  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.backends[0].aliases["x"] = "y"  # type: ignore[index]


def test_empty_file_gives_the_defaults() -> None:
    config = parse("")
    assert config.listen == HostPort("", 8090)
    assert config.policy is Policy.COST
    assert config.backends == () and config.keys == () and config.peers is None
    assert config.usage.timezone is None and config.usage.retention_days == 400
    assert (config.drain.grace.seconds, config.drain.timeout.seconds) == (5.0, 600.0)
    assert config.state_file is None


def test_least_load_policy_and_listen_forms() -> None:
    assert parse("policy: least-load").policy is Policy.LEAST_LOAD
    assert parse("listen: 127.0.0.1:9000").listen == HostPort("127.0.0.1", 9000)
    assert parse("listen: '[::1]:9000'").listen == HostPort("::1", 9000)
    assert parse("listen: 9000").listen == HostPort("", 9000)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("10m", 600.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1.5s", 1.5), ("0", 0.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["5", "5x", "s", "1h 30m", "-5s", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_s(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "backends: [{url: 'http://a:1', probes: [{name: x, signal: running,"
            " prom: {path: /m, metric: m, per-model: y}}]}]",
            'backends[0].probes[0].prom: unknown field "per-model" (did you mean "per_model"?)',
        ),
        ("bakends: []", 'top level: unknown field "bakends" (did you mean "backends"?)'),
        ("backends: [{kind: vllm}]", "backends[0].url: required"),
        (
            "backends: [{url: 'http://a:1', kind: vlm}]",
            'backends[0].kind: unknown kind "vlm" (one of: auto, ollama, llamacpp, llama-swap,'
            " vllm, sglang, openai)",
        ),
        ("policy: fastest", 'policy: unknown policy "fastest" (one of: cost, least-load)'),
        ("backends: [{url: 'http://a:1', capacity: 0}]", "backends[0].capacity: expected int >= 1"),
        ("backends: [{url: 'http://a:1', capacity: '4'}]", "backends[0].capacity: expected"),
        (
            "backends: [{url: 'http://a:1', memory_gb: 0}]",
            "backends[0].memory_gb: expected float > 0",
        ),
        (
            "backends: [{url: 'http://a:1', memory_gb: .inf}]",
            "backends[0].memory_gb: must be a finite number of GiB",
        ),
        (
            "backends: [{url: 'http://a:1', aliases: {1: x}}]",
            "backends[0].aliases: a key: expected str, got int",
        ),
        ("keys: [{name: a, sha256: abc}]", "keys[0].sha256: must be 64 hex characters"),
        (
            "keys: [{name: a, sha256: " + "a" * 64 + ", weight: 0}]",
            "keys[0].weight: expected int >= 1",
        ),
        ("drain: {grace: 5}", "drain.grace: a duration needs a unit"),
        ("drain: {timeout: soon}", 'drain.timeout: "soon" is not a duration'),
        ("listen: localhost", 'listen: "localhost" is not host:port'),
        ("listen: ':99999'", 'listen: ":99999": the port must be a number from 0 to 65535'),
        (
            "usage: {timezone: Mars/Olympus}",
            'usage.timezone: "Mars/Olympus" is not an IANA time zone',
        ),
        ("usage: {retention_days: 0}", "usage.retention_days: expected int >= 1"),
        (
            "backends: [{url: 'ftp://a'}]",
            'backends[0].url: "ftp://a" is not an http:// or https://',
        ),
        ("backends: [{url: 'gpu-box:8000'}]", "backends[0].url:"),
        (
            "backends: [{url: 'http://a:1', logs: /var/log/ollama.log}]",
            'backends[0].logs: "/var/log/ollama.log" is not docker://<container> or file:///<path>',
        ),
        (
            "backends: [{url: 'http://a:1', logs: 'file://var/log/x'}]",
            'backends[0].logs: "file://var/log/x": a file feed needs an absolute path',
        ),
        (
            "backends: [{url: 'http://a:1'}, {url: 'http://a:1/'}]",
            "backends[1].url: same backend as backends[0]",
        ),
        (
            "backends: [{url: 'http://a:1', aliases: {m1: x, m2: x}}]",
            'backends[0].aliases.m2: "x" is already the alias of "m1"',
        ),
        ("peers: {secret_file: /s}", "peers: needs members"),
        (
            "peers: {secret_file: /s, members: ['a:1'], dns: p.svc}",
            "peers: has both members and dns",
        ),
        (
            "peers: {secret_file: /s, members: [nohost]}",
            'peers.members[0]: "nohost" is not host:port',
        ),
        ("peers: {members: ['a:1']}", "peers.secret_file: required"),
        ("state_file: ''", "state_file: empty"),
        ("- 1", "top level: expected a mapping"),
        ("backends: {url: 'http://a:1'}", "backends: expected array, got object"),
        ("a: [", "line 2, column 1: invalid YAML"),
        ("keys: []\nkeys: []", 'line 2, column 1: invalid YAML: "keys" is written twice'),
    ],
)
def test_errors_name_the_field(text: str, expected: str) -> None:
    problems = problems_of(text)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_duplicate_key_names_and_hashes() -> None:
    digest = "ab" * 32
    problems = problems_of(
        f"keys: [{{name: a, sha256: {digest}}}, {{name: a, sha256: '{digest.upper()}'}}]"
    )
    assert problems == (
        'keys[1].name: "a" is already used by keys[0]',
        "keys[1].sha256: the same key as keys[0]",
    )


def test_every_problem_is_reported_each_on_its_own_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("keys: [{name: '', sha256: x}]\nusage: {timezone: Nowhere/Land}")
    lines = str(caught.value).splitlines()
    assert lines == [
        "pharos.yaml: keys[0].name: required (usage is recorded by name)",
        "pharos.yaml: keys[0].sha256: must be 64 hex characters (from `pharos keys new`)",
        'pharos.yaml: usage.timezone: "Nowhere/Land" is not an IANA time zone, like Europe/Berlin'
        " or Asia/Bangkok",
    ]


def test_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text("backends: [{url: 'http://127.0.0.1:8000', kind: vllm}]\n")
    config = load_config(path, library_names=LIBRARY)
    assert config.backends[0].kind is Kind.VLLM


def test_load_config_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "nope.yaml")
    assert str(caught.value).startswith(f"{tmp_path / 'nope.yaml'}: cannot read the file")


def test_load_config_binary_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_yaml_anchors_share_a_probe_between_backends() -> None:
    config = parse(
        """
backends:
  - url: http://a:8000
    probes:
      - &running {name: shared-running, signal: running, prom: {path: /metrics, metric: r}}
  - url: http://b:8000
    probes: [*running]
"""
    )
    assert config.backends[0].probes == config.backends[1].probes


def test_usage_zone_is_the_configured_one() -> None:
    assert str(usage_zone(parse("usage: {timezone: Asia/Bangkok}").usage)) == "Asia/Bangkok"
    assert usage_zone(parse("").usage) is not None  # the host's zone, whatever it is


def test_restart_needed_names_the_sections_read_once() -> None:
    running = parse("listen: ':8090'\nkeys: []")
    reloaded = parse(
        "listen: ':9000'\ndrain: {grace: 1s}\nkeys: [{name: a, sha256: " + "a" * 64 + "}]"
    )
    assert restart_needed(running, reloaded) == ("listen", "drain")
    assert restart_needed(running, parse("listen: ':8090'")) == ()


def test_limits_default_to_bounds_and_refuse_zero() -> None:
    limits = parse("").limits
    assert limits.queue_wait.seconds == 600 and limits.client_idle.seconds == 30
    assert limits.max_connections == 768 and limits.bodies_in_flight_mb == 256
    assert problems_of("limits:\n  queue_wait: 0s\n") == (
        "limits.queue_wait: must be longer than 0 (nothing may wait forever)",
    )
    assert parse("metrics_public: true\nkeys: []\n").metrics_public is True
