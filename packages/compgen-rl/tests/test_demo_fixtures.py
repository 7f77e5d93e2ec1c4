"""Registration (method entry point, fixtures) and the demo run."""

from __future__ import annotations

from importlib.metadata import entry_points, version

import pytest


def test_method_and_fixtures_registered():
    import compgen_rl

    (ep,) = [e for e in entry_points(group="llmcore.methods") if e.name == "compgen-rl"]
    assert ep.load() is compgen_rl.METHOD
    assert compgen_rl.METHOD.demo == "compgen_rl.demo:run"
    (fx,) = [e for e in entry_points(group="llmcore.fixtures") if e.name == "compgen-rl"]
    names = [f.name for f in fx.load()]
    assert names == ["compgen-rl-sft", "compgen-rl-sft-rl", "compgen-rl-demo"]
    assert compgen_rl.__version__ == version("compgen-rl")


def test_lazy_exports_do_not_import_torch():
    import subprocess
    import sys

    code = "import sys, compgen_rl; compgen_rl.SplitConfig; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_demo_runs():
    from compgen_rl.demo import run

    out = run(print_table=False)
    for s in ("test_seen", "test_unseen", "test_ood"):
        assert 0.0 <= out[f"sft_{s}_acc"] <= 1.0
        assert 0.0 <= out[f"sft_rl_{s}_acc"] <= 1.0
    assert out["grpo_steps"] == 3
