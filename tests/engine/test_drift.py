"""tools/drift.py: what `make live-latest` prints about a newer release's recordings."""

from __future__ import annotations

from pathlib import Path

from tools.drift import main, report

from pharos.engine.captures import VersionDir

PROPS = b'{"build_info":"b%d-abc","total_slots":2}'


def _capture(root: Path, version: str, props: bytes, metrics: bytes) -> VersionDir:
    path = root / "engines" / "llamacpp" / version
    (path / "busy").mkdir(parents=True)
    (path / "meta.yaml").write_text("engine: llamacpp\n")
    (path / "busy" / "props").write_bytes(props)
    (path / "busy" / "metrics").write_bytes(metrics)
    (path / "busy" / "v1_models").write_bytes(b'{"data":[{"id":"smollm2"}]}')
    return VersionDir("llamacpp", version, path)


def test_drift_names_dropped_resolved_and_changed_probes(tmp_path: Path) -> None:
    pinned = _capture(
        tmp_path / "pinned",
        "b11312",
        PROPS % 11312,
        b"llamacpp:requests_processing 2\nllamacpp:requests_deferred 2\n",
    )
    latest = _capture(
        tmp_path / "latest",
        "b12000",
        b'{"build_info":"b12000-def"}',  # total_slots gone
        b"llamacpp:requests_processing 2\nllamacpp:requests_deferred 0\n",  # 0 under load
    )
    lines = report([latest], [pinned])
    assert lines[0] == "llamacpp/b11312 -> llamacpp/b12000"
    assert "  DROPPED  llamacpp-props-capacity [busy]: was {'': 2}" in lines
    assert "  CHANGED  llamacpp-waiting [busy]: {'': 2} -> {'': 0}" in lines
    assert "  CHANGED  llamacpp-props-version [busy]: 'b11312-abc' -> 'b12000-def'" in lines
    assert not any("llamacpp-running" in line for line in lines)  # same value: no line


def test_drift_says_so_when_nothing_changed(tmp_path: Path, capsys: object) -> None:
    metrics = b"llamacpp:requests_processing 2\nllamacpp:requests_deferred 2\n"
    _capture(tmp_path / "pinned", "b11312", PROPS % 11312, metrics)
    _capture(tmp_path / "latest", "b11312", PROPS % 11312, metrics)
    assert main([str(tmp_path / "latest"), str(tmp_path / "pinned")]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert out.splitlines() == [
        "llamacpp/b11312 -> llamacpp/b11312",
        "  every probe reads what it read on the pinned release",
    ]
