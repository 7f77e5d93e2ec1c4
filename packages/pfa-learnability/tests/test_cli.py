"""The command line end to end on a small automaton (no neural training here)."""

from __future__ import annotations

import json
import subprocess
import sys

from pfa_learnability.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys; from pfa_learnability.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_gen_count_sample_experiment_report(tmp_path, capsys):
    pfa = tmp_path / "pfa.json"
    assert main(["gen-pfa", "--states", "8", "--alphabet", "6", "--seed", "3", "-o", str(pfa)]) == 0
    assert main(["count-dist", str(pfa), "--prop", "sym:b", "--bins", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()[-5:]
    assert abs(sum(float(ln.split()[1]) for ln in lines) - 1) < 1e-5
    corpus = tmp_path / "corpus.txt"
    assert (
        main(
            [
                "sample",
                str(pfa),
                "--prop",
                "sym:b",
                "--factor",
                "2",
                "--n",
                "300",
                "-o",
                str(corpus),
            ]
        )
        == 0
    )
    meta = json.loads((tmp_path / "corpus.meta.json").read_text())
    assert meta["factor"] == 2.0 and meta["realised_freq"]["n_strings"] == 300
    res = tmp_path / "r.jsonl"
    args = ["--n-automata", "4", "--n-strings", "500", "-o", str(res)]
    assert main(["experiment", "interventional", *args]) == 0
    n_rows = len(res.read_text().splitlines())
    assert main(["experiment", "interventional", *args]) == 0  # resumes: nothing new
    assert len(res.read_text().splitlines()) == n_rows == 20
    capsys.readouterr()
    assert main(["report", str(res)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["n_cells_int"] == 20 and rep["slope_int"] < 0


def test_user_errors_exit_2(tmp_path, capsys):
    assert main(["count-dist", str(tmp_path / "missing.json"), "--prop", "sym:a"]) == 2
    assert "does not exist" in capsys.readouterr().err
