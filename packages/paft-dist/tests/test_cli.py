"""CLI: --help without torch, theory table, bad input exits 2 with a clear message."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paft_dist.cli import main


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
        (["train", "--fault", "gaussian", "--variance", "-0.1"], "sigma"),
        (["train", "--fault", "scale", "--fault-ranks", "5", "--nproc", "2"], "outside"),
        (["train", "--mode", "sync", "--nproc", "1"], "world_size >= 2"),
        (["train", "--fault", "bitflip", "--prob", "2"], "prob"),
        (["train", "--sync-every", "0"], "sync_every"),
        (["train", "--h-min", "9", "--h-max", "3"], "h_min"),
    ],
)
def test_bad_input_exits_2(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert match in capsys.readouterr().err
