"""Triton kernels in Triton's CPU interpreter, run in the sandbox: correctness feedback only
(the evaluator stops at PASS and marks the timing as meaningless)."""

from __future__ import annotations

import importlib.util

import pytest
from cuda_analyst.evaluator import Evaluator
from cuda_analyst.tasks import get_task

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="triton is not installed (pip install 'cuda-analyst[triton]'; Linux wheels only)",
)

RELU_OK = """import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(o_ptr + offs, tl.where(x > 0, x, 0.0), mask=m)


def kernel(x, out, n):
    _relu[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
"""
# launch-grid bug: half the programs, so the second half of the output is never written
RELU_WRONG = RELU_OK.replace("triton.cdiv(n, 256)", "triton.cdiv(n, 512)")
RELU_SYNTAX = RELU_OK.replace("def kernel(x, out, n):", "def kernel(x, out, n)")


@pytest.fixture(scope="module")
def relu_eval(sandbox):
    from cuda_analyst.backends import TritonInterpreterBackend

    task = get_task("relu")
    return Evaluator(task, TritonInterpreterBackend(sandbox=sandbox))


def test_triton_interpreter_correct_kernel_passes_without_timing(relu_eval):
    r = relu_eval.evaluate(RELU_OK)
    assert r.status == "PASS" and r.backend == "triton-interpret", r.error
    assert r.check["ok"] and r.check["max_abs"] < 1e-6
    assert r.timing["meaningful"] is False and r.combined_score == 0.0
    assert r.isolation.get("uid_drop") is not None


def test_triton_interpreter_wrong_kernel_fails_with_mismatch(relu_eval):
    r = relu_eval.evaluate(RELU_WRONG)
    assert r.status == "COMPILE", r.error
    assert r.error["reason"] == "Mismatch output, implementation error"
    assert r.error["max_abs"] > 0 and r.error["failing_seed"] is not None


def test_triton_interpreter_syntax_error_is_compile_fail(relu_eval):
    r = relu_eval.evaluate(RELU_SYNTAX)
    assert r.status == "FAIL" and r.error["stage"] == "build"
    assert "SyntaxError" in r.compile_log and "line 13" in r.compile_log


def test_triton_backend_refuses_timing(sandbox):
    from cuda_analyst.backends import TritonInterpreterBackend, get_backend
    from cuda_analyst.errors import ToolUnavailableError

    be = get_backend("triton-interpret", sandbox=sandbox)
    assert isinstance(be, TritonInterpreterBackend) and not be.can_time(get_task("relu"))
    with pytest.raises(ToolUnavailableError, match="meaningless"):
        be.time(None, get_task("relu"))
