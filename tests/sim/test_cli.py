"""`pharos sim` from the command line."""

from pathlib import Path

import pytest

from pharos.cmd.main import main


def test_sim_prints_one_row_per_policy(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "sim",
            "--scenario",
            "chat",
            "--policies",
            "cost,sticky",
            "--seeds",
            "1,2",
            "--duration",
            "60",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("cost", "sticky"))]
    assert rows == ["cost", "sticky", "cost", "sticky"]  # the figures table, then per class
    assert " / " in out  # two seeds side by side


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--scenario", "nope"], "--scenario: unknown nope"),
        (["--policies", "magic"], "--policies: unknown magic"),
        (["--seeds", "one"], "--seeds"),
        (["--duration", "0"], "--duration"),
        (["--tie-stream", "-1"], "--tie-stream"),
        (["--tie-stream", "0,x"], "--tie-stream"),
        (["--tie-stream", "1,1"], "--tie-stream"),
        (["--tie-stream", ","], "--tie-stream"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_flag(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sim", *argv]) == 2
    err = capsys.readouterr().err
    assert names in err
    assert "Traceback" not in err


def test_plot_writes_an_svg(tmp_path: Path) -> None:
    assert (
        main(
            [
                "sim",
                "--policies",
                "cost",
                "--seeds",
                "1",
                "--duration",
                "60",
                "--plot",
                str(tmp_path),
            ]
        )
        == 0
    )
    svg = (tmp_path / "sim-chat.svg").read_text()
    assert svg.startswith("<svg") and "polyline" in svg


def test_a_sharegpt_scenario_without_the_data_says_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PHAROS_DATASETS", str(tmp_path))
    argv = ["sim", "--scenario", "sharegpt", "--policies", "cost", "--seeds", "1"]
    assert main([*argv, "--duration", "30"]) == 2
    err = capsys.readouterr().err
    assert "fetch-sharegpt.sh" in err
    assert "Traceback" not in err


def test_all_scenarios_skip_the_sharegpt_ones_without_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PHAROS_DATASETS", str(tmp_path))
    argv = ["sim", "--scenario", "all", "--policies", "sticky", "--seeds", "1"]
    assert main([*argv, "--duration", "30"]) == 0
    out = capsys.readouterr().out
    assert "== sharegpt: skipped, no ShareGPT data" in out
    assert "== chat:" in out


def test_a_tie_stream_is_named_in_each_scenario_heading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "--policies", "cost", "--seeds", "1", "--duration", "60"]
    assert main([*argv, "--tie-stream", "2"]) == 0
    assert "seeds 1, tie stream 2" in capsys.readouterr().out
    assert main(argv) == 0
    assert "tie stream" not in capsys.readouterr().out
