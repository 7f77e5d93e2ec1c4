"""Pre-written candidate kernels per task: non-compiling, wrong, correct-slow, correct-fast.

They are what the seeded mock LLM "writes" in the planted-effects experiment. Correct-slow runs
the naive baseline loop twice (score about 0.5, PASS), correct-fast is a restructured kernel
(score > 1.5, FAST), so fast and slow differ by >= 3x and timing noise cannot flip FAST.
"""

from __future__ import annotations

from cuda_analyst.errors import AnalystValueError
from cuda_analyst.tasks import BUILTIN_TASKS

KINDS = ("fail", "wrong", "slow", "fast")
#: Kind -> the status the evaluator must give it.
EXPECTED_STATUS = {"fail": "FAIL", "wrong": "COMPILE", "slow": "PASS", "fast": "FAST"}
CLAIM_TASKS = ("matmul", "reduce_sum", "softmax_rows", "conv2d_3x3")

_FAST = {
    "matmul": """void kernel(const float* restrict a, const float* restrict b, float* restrict c, int n) {
    for (int i = 0; i < n * n; i++) c[i] = 0.0f;
    for (int ii = 0; ii < n; ii += 64)
        for (int kk = 0; kk < n; kk += 64)
            for (int i = ii; i < ii + 64 && i < n; i++)
                for (int k = kk; k < kk + 64 && k < n; k++) {
                    float aik = a[i * n + k];
                    float* restrict ci = c + i * n;
                    const float* restrict bk = b + k * n;
                    for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
                }
}
""",
    "reduce_sum": """void kernel(const float* restrict x, float* restrict out, int n) {
    float s[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) s[k] += x[i + k];
    float t = 0.0f;
    for (; i < n; i++) t += x[i];
    for (int k = 0; k < 16; k++) t += s[k];
    out[0] = t;
}
""",
    "softmax_rows": """#include <math.h>
void kernel(const float* restrict x, float* restrict out, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float* xr = x + r * cols;
        float* o = out + r * cols;
        float m = xr[0];
        for (int c = 1; c < cols; c++) m = xr[c] > m ? xr[c] : m;
        float s = 0.0f;
        for (int c = 0; c < cols; c++) { o[c] = expf(xr[c] - m); s += o[c]; }
        float inv = 1.0f / s;
        for (int c = 0; c < cols; c++) o[c] *= inv;
    }
}
""",
    "conv2d_3x3": """void kernel(const float* restrict x, const float* restrict k, float* restrict out, int h, int w) {
    float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
    for (int i = 0; i < h - 2; i++) {
        const float* r0 = x + i * w;
        const float* r1 = r0 + w;
        const float* r2 = r1 + w;
        float* o = out + i * (w - 2);
        for (int j = 0; j < w - 2; j++)
            o[j] = k0 * r0[j] + k1 * r0[j + 1] + k2 * r0[j + 2] + k3 * r1[j] + k4 * r1[j + 1]
                 + k5 * r1[j + 2] + k6 * r2[j] + k7 * r2[j + 1] + k8 * r2[j + 2];
    }
}
""",
}

_WRONG = {  # off-by-one (the last row is never written) or a skipped-element reduction
    "matmul": (
        "for (int i = 0; i < n; i++)\n        for (int j = 0; j < n; j++) {",
        "for (int i = 0; i < n - 1; i++)\n        for (int j = 0; j < n; j++) {",
    ),
    "reduce_sum": ("for (int i = 0; i < n; i++)", "for (int i = 1; i < n; i += 2)"),
    "softmax_rows": ("for (int r = 0; r < rows; r++)", "for (int r = 0; r < rows - 1; r++)"),
    "conv2d_3x3": (
        "for (int i = 0; i < h - 2; i++)\n                for",
        "for (int i = 0; i < h - 3; i++)\n                for",
    ),
}


def _slow(base: str) -> str:
    """The naive baseline, computed twice (correct, about half the baseline's speed)."""
    body = base.replace("void kernel(", "static void naive(", 1)
    head = base[base.index("void kernel(") : base.index("{", base.index("void kernel("))].strip()
    args = [
        p.strip().split()[-1].lstrip("*")
        for p in head[head.index("(") + 1 : head.rindex(")")].split(",")
    ]
    call = f"naive({', '.join(args)});"
    return f"{body}\n{head} {{\n    {call}\n    {call}\n}}\n"


def candidate(task: str, kind: str) -> str:
    """Source of a pre-written candidate (``kind`` in fail, wrong, slow, fast)."""
    if task not in _FAST:
        raise AnalystValueError(
            f"no pre-written candidates for task {task!r}: use one of {sorted(_FAST)}"
        )
    if kind not in KINDS:
        raise AnalystValueError(f"unknown candidate kind {kind!r}: use one of {list(KINDS)}")
    base = BUILTIN_TASKS[task].baseline_src
    if kind == "fast":
        return _FAST[task]
    if kind == "slow":
        return _slow(base)
    if kind == "wrong":
        old, new = _WRONG[task]
        if old not in base:
            raise AssertionError(f"off-by-one anchor missing in {task}")
        return base.replace(old, new, 1)
    return base.replace("{", "{\n    int broken = ;", 1)  # a syntax error on line 2 or 3


def all_candidates(tasks: tuple[str, ...] = CLAIM_TASKS) -> dict[tuple[str, str], str]:
    """Every ``(task, kind) -> source`` (4 tasks x 4 kinds = 16 distinct sources)."""
    return {(t, k): candidate(t, k) for t in tasks for k in KINDS}
