"""NumPy and numba backends: the kernel runs in the sandbox (as the sandbox uid, through a
bind-mounted interpreter when it lives under a root-only home)."""

from __future__ import annotations

import pytest
from cuda_analyst.evaluator import Evaluator
from cuda_analyst.tasks import get_task

NUMPY_OK = "def kernel(x, y, out, n):\n    np.add(x, y, out=out)\n"
NUMPY_WRONG = "def kernel(x, y, out, n):\n    out[: n - 1] = x[: n - 1] + y[: n - 1]\n"
NUMBA_OK = """import numba


@numba.njit(cache=False)
def _k(x, y, out, n):
    for i in range(n):
        out[i] = x[i] + y[i]


def kernel(x, y, out, n):
    _k(x, y, out, n)
"""


def test_numpy_backend_statuses(sandbox):
    from cuda_analyst.backends import NumpyBackend

    ev = Evaluator(get_task("vector_add"), NumpyBackend(sandbox=sandbox))
    ok = ev.evaluate(NUMPY_OK)
    assert ok.status in ("PASS", "FAST") and ok.backend == "numpy", ok.error
    assert ev.evaluate(NUMPY_WRONG).status == "COMPILE"
    bad = ev.evaluate("def kernel(x, y, out, n)\n    pass\n")
    assert bad.status == "FAIL" and "line 1" in bad.compile_log
    assert ev.evaluate("def kernel(x, y, out, n):\n    import ctypes; ctypes.string_at(0)\n").error[
        "reason"
    ] == ("Execution Failure: Nonzero Exit")


@pytest.mark.extended
def test_numba_backend(sandbox):
    """Extended: numba's import and JIT, twice (check and timing runs), took 25 s under load."""
    pytest.importorskip("numba")
    from cuda_analyst.backends import NumbaBackend

    r = Evaluator(get_task("vector_add"), NumbaBackend(sandbox=sandbox)).evaluate(NUMBA_OK)
    assert r.status in ("PASS", "FAST") and r.backend == "numba", r.error
