"""The own-probe rules of spec §4: one test per rule."""

from __future__ import annotations

import pytest

from pharos.config import ConfigError, parse_config
from pharos.engine.types import Signal

LIBRARY = frozenset({"vllm-running", "openai-models"})


def backend_with(*probes: str) -> str:
    listed = "\n".join(f"      - {probe}" for probe in probes)
    return f"backends:\n  - url: http://gpu:8000\n    probes:\n{listed}\n"


def problems_of(*probes: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as caught:
        parse_config(backend_with(*probes), "pharos.yaml", library_names=LIBRARY)
    return caught.value.problems


PROM = "prom: {path: /metrics, metric: my_running}"


def test_valid_prom_and_log_probes_parse() -> None:
    config = parse_config(
        backend_with(
            f"{{name: a, signal: running, {PROM}}}",
            "{name: b, signal: kv_usage, prom: {path: /metrics, metric: kv, percent: true}}",
            "{name: c, signal: capacity, log: {match: 'NUM_PARALLEL:(?P<value>\\d+)'}}",
            "{name: d, signal: residency, log: {match: 'unloading (?P<model>\\S+)', value: cold}}",
            "{name: e, signal: waiting, log: {match: 'queue empty', value: 0}}",
        ),
        "pharos.yaml",
        library_names=LIBRARY,
    )
    assert [probe.signal for probe in config.backends[0].probes] == [
        Signal.RUNNING,
        Signal.KV_USAGE,
        Signal.CAPACITY,
        Signal.RESIDENCY,
        Signal.WAITING,
    ]


def test_rule_no_name() -> None:
    assert problems_of(f"{{signal: running, {PROM}}}") == (
        "backends[0].probes[0].name: required (doctor and /status show probes by name)",
    )


def test_rule_name_of_a_library_probe() -> None:
    assert problems_of(f"{{name: vllm-running, signal: running, {PROM}}}") == (
        'backends[0].probes[0].name: "vllm-running" is a built-in probe; give your probe another'
        " name",
    )


def test_rule_library_names_come_from_the_engine_by_default() -> None:
    from pharos.config import library_probe_names

    names = library_probe_names()
    assert "vllm-running" in names
    with pytest.raises(ConfigError, match="is a built-in probe"):
        parse_config(backend_with(f"{{name: vllm-running, signal: running, {PROM}}}"))


def test_rule_name_used_by_another_own_probe_of_the_backend() -> None:
    assert problems_of(
        f"{{name: mine, signal: running, {PROM}}}",
        "{name: mine, signal: waiting, prom: {path: /metrics, metric: w}}",
    ) == ('backends[0].probes[1].name: "mine" is already used by backends[0].probes[0]',)


def test_same_own_name_on_two_backends_is_fine() -> None:
    text = (
        "backends:\n"
        f"  - {{url: 'http://a:1', probes: [{{name: mine, signal: running, {PROM}}}]}}\n"
        f"  - {{url: 'http://b:1', probes: [{{name: mine, signal: running, {PROM}}}]}}\n"
    )
    assert len(parse_config(text, library_names=LIBRARY).backends) == 2


def test_rule_unknown_signal() -> None:
    (problem,) = problems_of(f"{{name: a, signal: queue_depth, {PROM}}}")
    assert problem.startswith('backends[0].probes[0].signal: unknown signal "queue_depth" (one of:')
    assert "kv_usage" in problem


def test_rule_missing_signal() -> None:
    (problem,) = problems_of(f"{{name: a, {PROM}}}")
    assert problem.startswith("backends[0].probes[0].signal: required")


def test_rule_both_prom_and_log() -> None:
    assert problems_of(
        f"{{name: a, signal: running, {PROM}, log: {{match: 'run=(?P<value>\\d+)'}}}}"
    ) == ("backends[0].probes[0]: has both prom and log; a probe reads exactly one feed",)


def test_rule_neither_prom_nor_log() -> None:
    assert problems_of("{name: a, signal: running}") == (
        "backends[0].probes[0]: needs prom (a Prometheus metric) or log (a log line pattern)",
    )


@pytest.mark.parametrize("signal", ["version", "models", "residency", "vram_bytes", "size_bytes"])
def test_rule_prom_probe_for_a_non_load_signal(signal: str) -> None:
    assert problems_of(f"{{name: a, signal: {signal}, {PROM}}}") == (
        "backends[0].probes[0].signal: a prom probe reads only running, waiting, capacity or"
        f' kv_usage, not "{signal}"',
    )


def test_rule_pattern_that_does_not_compile() -> None:
    (problem,) = problems_of("{name: a, signal: running, log: {match: 'run=(?P<value>\\d+'}}")
    assert problem.startswith("backends[0].probes[0].log.match: pattern does not compile:")


def test_log_probe_for_a_signal_no_line_reports() -> None:
    (problem,) = problems_of("{name: a, signal: models, log: {match: 'm (?P<value>\\S+)'}}")
    assert problem == (
        "backends[0].probes[0].signal: a log probe reads only version, residency, running,"
        ' waiting, capacity or kv_usage, not "models"'
    )


def test_log_probe_needs_a_value_group_or_a_fixed_value() -> None:
    assert problems_of("{name: a, signal: running, log: {match: 'running'}}") == (
        "backends[0].probes[0].log: needs a (?P<value>...) group in match, or a fixed value",
    )
    assert problems_of(
        "{name: a, signal: running, log: {match: 'r=(?P<value>\\d+)', value: 1}}"
    ) == (
        "backends[0].probes[0].log: the pattern has a (?P<value>...) group and a fixed value;"
        " keep one",
    )


@pytest.mark.parametrize(
    ("signal", "value", "expected"),
    [
        ("residency", "warm", 'residency is one of loaded, loading, cold, not "warm"'),
        ("running", "-1", 'running is a whole number >= 0, not "-1"'),
        ("capacity", "2.5", 'capacity is a whole number >= 0, not "2.5"'),
        ("kv_usage", "1.5", "kv_usage is a number from 0 to 1, not 1.5"),
        ("kv_usage", "half", 'kv_usage is a number from 0 to 1, not "half"'),
    ],
)
def test_fixed_value_that_cannot_be_the_signal(signal: str, value: str, expected: str) -> None:
    problems = problems_of(
        f"{{name: a, signal: {signal}, log: {{match: '(?P<model>\\S+) x', value: '{value}'}}}}"
    )
    assert problems == (f"backends[0].probes[0].log.value: {expected}",)


def test_residency_log_probe_needs_a_model_group() -> None:
    assert problems_of("{name: a, signal: residency, log: {match: 'loaded', value: loaded}}") == (
        "backends[0].probes[0].log.match: a residency pattern needs a (?P<model>...) group naming"
        " the model",
    )


def test_prom_path_and_percent() -> None:
    assert problems_of("{name: a, signal: running, prom: {path: metrics, metric: r}}") == (
        'backends[0].probes[0].prom.path: must start with "/", like /metrics',
    )
    assert problems_of(
        "{name: a, signal: running, prom: {path: /m, metric: r, percent: true}}"
    ) == ("backends[0].probes[0].prom.percent: only kv_usage is a percentage",)


def test_problems_of_several_probes_are_all_reported() -> None:
    problems = problems_of("{signal: running}", "{name: b, signal: version, " + PROM + "}")
    assert len(problems) == 3
    assert problems[0].startswith("backends[0].probes[0].name")
    assert problems[1].startswith("backends[0].probes[0]: needs prom")
    assert problems[2].startswith("backends[0].probes[1].signal: a prom probe")


def test_prom_metric_and_label_names() -> None:
    assert problems_of("{name: a, signal: running, prom: {path: /m, metric: 'vllm running'}}") == (
        'backends[0].probes[0].prom.metric: "vllm running" is not a Prometheus metric name',
    )
    assert problems_of(
        "{name: a, signal: running, prom: {path: /m, metric: r, per_model: model-name}}"
    ) == ('backends[0].probes[0].prom.per_model: "model-name" is not a Prometheus label name',)


def test_version_log_probe_has_no_model_group() -> None:
    assert problems_of(
        "{name: a, signal: version, log: {match: '(?P<model>\\S+) v(?P<value>\\S+)'}}"
    ) == (
        "backends[0].probes[0].log.match: the version is per backend; drop the (?P<model>...)"
        " group",
    )
