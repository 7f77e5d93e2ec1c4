"""KernelBench problem files as tasks: the PyTorch ``Model`` runs with CPU torch in the sandbox
only (never imported here) and C / NumPy candidates are checked against it."""

from __future__ import annotations

import os
import sys

import pytest
from cuda_analyst.errors import AnalystValueError
from cuda_analyst.evaluator import Evaluator
from cuda_analyst.kernelbench import from_kernelbench

# Top-level code sets a marker in the environment of whatever process executes the file.
RELU_PROBLEM = """import os

import torch
import torch.nn as nn

os.environ["CUDA_ANALYST_KB_PROBLEM_RAN"] = "1"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(6, 40)]


def get_init_inputs():
    return []
"""

MATMUL_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, A, B):
        return self.alpha * torch.matmul(A, B)


M, K, N = 24, 40, 32


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [2.0]
"""

RELU_C = """void kernel(const float* x, float* out, int x_d0, int x_d1) {
    for (int i = 0; i < x_d0 * x_d1; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
RELU_C_WRONG = RELU_C.replace("x[i] : 0.0f", "x[i] : -x[i]")  # |x|, not relu
MATMUL_SIG = "void kernel(const float* A, const float* B, float* out, int A_d0, int A_d1, int B_d0, int B_d1)"
MATMUL_NAIVE = (
    MATMUL_SIG
    + """ {
    for (int i = 0; i < A_d0; i++)
        for (int j = 0; j < B_d1; j++) {
            float s = 0.0f;
            for (int k = 0; k < A_d1; k++) s += A[i * A_d1 + k] * B[k * B_d1 + j];
            out[i * B_d1 + j] = 2.0f * s;
        }
}
"""
)
MATMUL_IKJ = (
    MATMUL_SIG
    + """ {
    for (int i = 0; i < A_d0 * B_d1; i++) out[i] = 0.0f;
    for (int i = 0; i < A_d0; i++)
        for (int k = 0; k < A_d1; k++) {
            float a = 2.0f * A[i * A_d1 + k];
            for (int j = 0; j < B_d1; j++) out[i * B_d1 + j] += a * B[k * B_d1 + j];
        }
}
"""
)


@pytest.fixture(scope="module")
def relu_task(tmp_path_factory, sandbox):
    path = tmp_path_factory.mktemp("kb") / "19_ReLU.py"
    path.write_text(RELU_PROBLEM)
    return from_kernelbench(path, sandbox=sandbox)


def test_kernelbench_relu_against_c_and_numpy(relu_task, cbackend, sandbox):
    from cuda_analyst.backends import NumpyBackend

    task = relu_task
    assert task.signature == "void kernel(const float* x, float* out, int x_d0, int x_d1)"
    assert not task.timed and "torch.relu" in task.reference_src
    # the untrusted problem file ran in the sandbox only
    assert "CUDA_ANALYST_KB_PROBLEM_RAN" not in os.environ
    assert "kernelbench_problem" not in sys.modules
    ok = Evaluator(task, cbackend).evaluate(RELU_C)
    assert ok.status == "PASS" and ok.check["max_abs"] < 1e-6, ok.error
    assert ok.timing["meaningful"] is False
    bad = Evaluator(task, cbackend).evaluate(RELU_C_WRONG)
    assert bad.status == "COMPILE" and bad.error["reason"].startswith("Mismatch")
    assert bad.error["max_abs"] > 0.1
    npy = Evaluator(task, NumpyBackend(sandbox=sandbox)).evaluate(
        "def kernel(x, out, r, c):\n    np.maximum(x, 0.0, out=out)\n"
    )
    assert npy.status == "PASS" and npy.backend == "numpy", npy.error
    # one sandboxed torch run drew every seed's inputs and outputs
    assert task.reference.sandbox_runs == 1


def test_kernelbench_matmul_with_init_inputs_and_c_baseline(tmp_path, cbackend, sandbox):
    """Seeded model construction from get_init_inputs() (alpha = 2) and timing against a naive
    C baseline: the i-k-j candidate is correct and gets a real CPU speedup."""
    path = tmp_path / "1_Square_matmul.py"
    path.write_text(MATMUL_PROBLEM)
    task = from_kernelbench(path, baseline_src=MATMUL_NAIVE, sandbox=sandbox)
    assert task.signature == MATMUL_SIG and task.timed
    r = Evaluator(task, cbackend).evaluate(MATMUL_IKJ)
    assert r.status in ("PASS", "FAST") and r.check["max_abs"] < 1e-3, r.error
    assert r.timing["speedup"] > 0 and r.combined_score == r.timing["speedup"]
    wrong = Evaluator(task, cbackend).evaluate(MATMUL_IKJ.replace("2.0f * A", "A"))
    assert wrong.status == "COMPILE" and wrong.error["failing_seed"] == 0
    assert task.reference.sandbox_runs == 1  # seeds 0-2 and the timing seed in one run


def test_kernelbench_bad_files(tmp_path):
    with pytest.raises(AnalystValueError, match="does not exist"):
        from_kernelbench(tmp_path / "missing.py")
    notkb = tmp_path / "not_kb.py"
    notkb.write_text("x = 1\n")
    with pytest.raises(AnalystValueError, match="get_inputs"):
        from_kernelbench(notkb)


def test_kernelbench_problem_errors_come_back_from_the_sandbox(tmp_path, sandbox):
    """An integer input (e.g. class indices) is refused by the runner with a clear message."""
    path = tmp_path / "argmax.py"
    path.write_text(
        RELU_PROBLEM.replace("torch.relu(x)", "x.float()").replace(
            "torch.randn(6, 40)", "torch.randint(0, 5, (6, 40))"
        )
    )
    with pytest.raises(AnalystValueError, match=r"get_inputs\(\)\[0\] is Tensor torch.int64"):
        from_kernelbench(path, sandbox=sandbox)
