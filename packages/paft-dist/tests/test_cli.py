"""CLI: --help without torch, theory table, --config below typed flags, bad input exits 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paft_dist.cli import build_parser, experiment_from_options, main, options_from_args


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\nfrom paft_dist.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "inject-check" in proc.stdout


def test_theory_matches_monitor(capsys: pytest.CaptureFixture[str]) -> None:
    from paft_dist import predicted_divergence

    rc = main(
        [
            "theory",
            "--d",
            "2762",
            "--sigma",
            "0.1",
            "--world-size",
            "2",
            "--lr",
            "0.05",
            "--steps",
            "600",
            "--points",
            "2",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert f"| 600 | {predicted_divergence(2762, 0.1, 2, [0.05] * 600):.4g} |" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["train", "--fault", "gaussian", "--sigma", "-1"], "sigma"),
        (["train", "--fault", "gaussian", "--variance", "-0.1"], "variance"),
        (["train", "--fault", "gaussian", "--sigma", "0.1", "--variance", "0.1"], "not both"),
        (["train", "--fault", "scale", "--fault-ranks", "5", "--nproc", "2"], "outside"),
        (["train", "--mode", "sync", "--nproc", "1"], "world_size >= 2"),
        (["train", "--fault", "bitflip", "--prob", "2"], "prob"),
        (["train", "--sync-every", "0"], "sync_every"),
        (["train", "--h-min", "9", "--h-max", "3"], "h_min"),
        (["theory", "--d", "10"], "needs field(s)"),
        (
            [
                "theory",
                "--d",
                "10",
                "--sigma",
                "-1",
                "--world-size",
                "2",
                "--lr",
                "1",
                "--steps",
                "3",
            ],
            "sigma >= 0",
        ),
        (["compare", "--sync-hs", "1,x"], "sync_hs"),
    ],
)
def test_bad_input_exits_2(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def _options(argv: list[str]):
    return options_from_args(build_parser().parse_args(argv))


def test_typed_flag_beats_config_file(tmp_path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("steps: 500\nmode: sync\nsync_every: 7\nfault: gaussian\nsigma: 0.2\n")
    o = _options(["train", "--config", str(cfg), "--steps", "50", "--sigma", "0.05"])
    e = experiment_from_options(o)
    assert e.steps == 50  # typed: beats the file
    assert e.faults[0].sigma == 0.05
    assert e.paft.mode == "sync" and e.paft.sync_every == 7  # from the file
    assert e.lr == 0.05  # the default, untouched by either
    # a flag typed with its default value still beats the file
    assert _options(["train", "--config", str(cfg), "--mode", "dyn"]).mode == "dyn"
    # without the flag the file wins over the default
    assert _options(["train", "--config", str(cfg)]).steps == 500


def test_subcommand_defaults_and_boolean_flags() -> None:
    b = _options(["bench"])
    assert (b.nproc, b.steps, b.repeats) == (4, 300, 3)
    i = experiment_from_options(_options(["inject-check"]))
    assert i.steps == 20 and i.faults[0].kind == "scale" and i.faults[0].ranks == [1]
    assert _options(["train", "--no-overlap"]).overlap is False
    assert _options(["train", "--verify-sync"]).verify_sync is True
    assert _options(["train"]).overlap is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("stepz: 5\n", "unknown field"),
        ("steps: many\n", "steps"),
        ("mode: local\n", "mode"),
    ],
)
def test_bad_config_file_exits_2(
    tmp_path, text: str, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    assert main(["train", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paft-dist: error: ") and match in err
