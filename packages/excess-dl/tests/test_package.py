"""Package surface: lazy imports, registration, CLI help without torch, analysis helpers."""

from __future__ import annotations

import math
import subprocess
import sys
from importlib.metadata import version

import pytest


def test_import_and_help_do_not_import_torch():
    code = (
        "import sys, excess_dl, excess_dl.cli as c\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "compute" in r.stdout and "sweep" in r.stdout


def test_method_registered():
    import excess_dl

    from llmcore.registry import get_method

    m = get_method("excess-dl")
    assert m.demo == "excess_dl.demo:run"
    assert excess_dl.__version__ == version("excess-dl")


def test_bits_to_target_step_function_and_capacity_fit():
    from excess_dl import EDLCurve, EDLPoint, bits_to_target, fit_capacity, sdl

    pts = []
    for n, edl, g in [(1, -3.0, 0.2), (2, 10.0, 0.85), (4, 20.0, 0.9), (8, 25.0, 0.95)]:
        pts.append(EDLPoint(n, edl, 1.0, edl, 5.0, 5.0 * n, 1.0, g))
    c = EDLCurve(pts, "full", "online", 10, {})
    assert bits_to_target(c, 0.8) == 10.0
    assert bits_to_target(c, 0.99) == math.inf
    ns = [1, 2, 4, 8, 16, 32, 64, 128]
    pts = [EDLPoint(n, 0, 0, 300 * n / (n + 5), 0, 0, 1, 1) for n in ns]
    fit = fit_capacity(EDLCurve(pts, "lora", "online", 100, {}))
    assert fit.C_bits == pytest.approx(300, rel=0.02) and fit.n0 == pytest.approx(5, rel=0.05)
    assert fit.bits_per_param == pytest.approx(3.0, rel=0.02)
    assert sdl([3.0, 2.0, 1.0], 1.0) == pytest.approx(3.0)
