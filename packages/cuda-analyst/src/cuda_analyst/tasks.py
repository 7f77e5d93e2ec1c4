"""Kernel tasks: a C signature, seeded inputs, a NumPy reference and a naive C baseline.

The built-in CPU suite stands in for CUDA workloads: a candidate is a C function ``kernel``
with the task's signature (``const float*`` arguments are inputs, ``float*`` outputs, ``int``
sizes), compiled and run on the CPU. The reference is a trusted NumPy function evaluated in
float64; the baseline is a naive C kernel, the denominator of the speedup (paper Sec. 3,
``combined_score = t_base / t_custom``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cuda_analyst.errors import AnalystValueError

_ARG_RE = re.compile(r"^(const\s+)?(float|int)\s*(\*?)\s*([A-Za-z_]\w*)$")


@dataclass(frozen=True)
class Arg:
    kind: str  # "in" | "out" | "int"
    name: str


def parse_signature(signature: str) -> tuple[Arg, ...]:
    """``"void kernel(const float* x, float* out, int n)"`` -> the argument roles."""
    m = re.match(r"^\s*void\s+kernel\s*\((.*)\)\s*;?\s*$", signature, re.S)
    if m is None:
        raise AnalystValueError(
            f"signature {signature!r} must read 'void kernel(const float* in..., float* out..., int n...)'"
        )
    args = []
    for part in [p.strip() for p in m.group(1).split(",") if p.strip()]:
        a = _ARG_RE.match(
            re.sub(r"\s+", " ", part.replace("*", " * ")).replace(" * ", "* ").replace(" *", "*")
        )
        a = a or _ARG_RE.match(part)
        if a is None:
            raise AnalystValueError(f"cannot parse argument {part!r} of signature {signature!r}")
        const, typ, ptr, name = a.groups()
        if typ == "float" and ptr:
            args.append(Arg("in" if const else "out", name))
        elif typ == "int" and not ptr:
            args.append(Arg("int", name))
        else:
            raise AnalystValueError(f"argument {part!r}: use const float*, float* or int")
    return tuple(args)


@dataclass(frozen=True)
class Task:
    """One kernel workload."""

    name: str
    signature: str
    make_inputs: Callable[[int, int], list[np.ndarray]]
    """``(seed, size) -> inputs`` in the order of the signature's ``const float*`` args."""
    sizes_of: Callable[[list[np.ndarray]], list[int]]
    """The ``int`` arguments for given inputs."""
    reference: Callable[..., list[np.ndarray]]
    """Trusted float64 NumPy reference: ``reference(*inputs) -> outputs``."""
    baseline_src: str
    """A naive C implementation of ``kernel`` (the speedup's denominator)."""
    tol: tuple[float, float] = (1e-2, 1e-2)
    """``(rtol, atol)``: an output passes when ``|out - ref| <= atol + rtol * |ref|``."""
    check_size: int = 64
    time_size: int = 256
    language: str = "c"
    forbidden: tuple[str, ...] = ("cblas_", "dlopen", "system(", "fork(", "exec", "socket")
    """Substrings a candidate may not contain (library calls / escapes; robust-kbench guard)."""
    bytes_moved: Callable[[list[np.ndarray]], int] | None = None
    """Minimum bytes a memory-bound kernel must touch (for the STREAM physical bound)."""
    description: str = ""
    timed: bool = True
    """Whether ``baseline_src`` is a real baseline to time against (``False``: correctness only,
    the evaluator stops at PASS)."""
    args: tuple[Arg, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", parse_signature(self.signature))
        rtol, atol = self.tol
        if not (rtol > 0 and atol > 0):
            raise AnalystValueError(
                f"tolerance must be > 0, got tol={self.tol!r} for {self.name!r}"
            )

    @property
    def reference_src(self) -> str:
        """Source text of the reference (shown by the reference-code player)."""
        src = getattr(self.reference, "source", None)
        if isinstance(src, str):
            return src
        try:
            return inspect.getsource(self.reference)
        except (OSError, TypeError):
            return repr(self.reference)

    def inputs(self, seed: int, size: int | None = None) -> tuple[list[np.ndarray], list[int]]:
        xs = [
            np.ascontiguousarray(x, dtype=np.float32)
            for x in self.make_inputs(seed, size or self.check_size)
        ]
        return xs, [int(s) for s in self.sizes_of(xs)]

    def expected(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [
            np.asarray(o, dtype=np.float64)
            for o in self.reference(*[x.astype(np.float64) for x in inputs])
        ]

    def check_signature(self, other: str) -> None:
        """Raise when a candidate declares a different signature."""
        if parse_signature(other) != self.args:
            raise AnalystValueError(
                f"candidate signature {other!r} differs from task {self.name!r}: {self.signature!r}"
            )


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------ reference functions


def _ref_vector_add(x, y):
    return [x + y]


def _ref_relu(x):
    return [np.maximum(x, 0.0)]


def _ref_softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


def _ref_layernorm_rows(x):
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return [(x - mu) / np.sqrt(var + 1e-5)]


def _ref_reduce_sum(x):
    return [np.array([x.sum()])]


def _ref_prefix_sum(x):
    return [np.cumsum(x)]


def _ref_transpose(x):
    return [x.T.copy()]


def _ref_matmul(a, b):
    return [a @ b]


def _ref_conv2d_3x3(x, k):
    h, w = x.shape
    out = np.zeros((h - 2, w - 2))
    for i in range(3):
        for j in range(3):
            out += k[i, j] * x[i : i + h - 2, j : j + w - 2]
    return [out]


def _ref_nbody_2d(pos, w):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d**2).sum(-1) + 1e-2
    return [(w[None, :, None] * d / (r2 * np.sqrt(r2))[:, :, None]).sum(1)]


# ---------------------------------------------------------------------------- naive baselines

_B = {
    "vector_add": """void kernel(const float* x, const float* y, float* out, int n) {
    for (int i = 0; i < n; i++) out[i] = x[i] + y[i];
}
""",
    "relu": """void kernel(const float* x, float* out, int n) {
    for (int i = 0; i < n; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""",
    "softmax_rows": """#include <math.h>
void kernel(const float* x, float* out, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float m = x[r * cols];
        for (int c = 1; c < cols; c++) if (x[r * cols + c] > m) m = x[r * cols + c];
        float s = 0.0f;
        for (int c = 0; c < cols; c++) s += expf(x[r * cols + c] - m);
        for (int c = 0; c < cols; c++) out[r * cols + c] = expf(x[r * cols + c] - m) / s;
    }
}
""",
    "layernorm_rows": """#include <math.h>
void kernel(const float* x, float* out, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float mu = 0.0f, var = 0.0f;
        for (int c = 0; c < cols; c++) mu += x[r * cols + c];
        mu /= cols;
        for (int c = 0; c < cols; c++) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
        var /= cols;
        for (int c = 0; c < cols; c++) out[r * cols + c] = (x[r * cols + c] - mu) / sqrtf(var + 1e-5f);
    }
}
""",
    "reduce_sum": """void kernel(const float* x, float* out, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i];
    out[0] = s;
}
""",
    "prefix_sum": """void kernel(const float* x, float* out, int n) {
    for (int i = 0; i < n; i++) {
        float s = 0.0f;
        for (int j = (i / 64) * 64; j <= i; j++) s += x[j];
        out[i] = (i >= 64 ? out[(i / 64) * 64 - 1] : 0.0f) + s;
    }
}
""",
    "transpose": """void kernel(const float* x, float* out, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c];
}
""",
    "matmul": """void kernel(const float* a, const float* b, float* c, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}
""",
    "conv2d_3x3": """void kernel(const float* x, const float* k, float* out, int h, int w) {
    for (int i = 0; i < h - 2; i++)
        for (int j = 0; j < w - 2; j++) out[i * (w - 2) + j] = 0.0f;
    for (int di = 0; di < 3; di++)
        for (int dj = 0; dj < 3; dj++)
            for (int i = 0; i < h - 2; i++)
                for (int j = 0; j < w - 2; j++)
                    out[i * (w - 2) + j] += k[di * 3 + dj] * x[(i + di) * w + j + dj];
}
""",
    "nbody_2d": """#include <math.h>
void kernel(const float* pos, const float* w, float* acc, int n) {
    for (int i = 0; i < n; i++) {
        float ax = 0.0f, ay = 0.0f;
        for (int j = 0; j < n; j++) {
            float dx = pos[2 * j] - pos[2 * i], dy = pos[2 * j + 1] - pos[2 * i + 1];
            float r2 = dx * dx + dy * dy + 1e-2f;
            ax += w[j] * dx / (r2 * sqrtf(r2));
            ay += w[j] * dy / (r2 * sqrtf(r2));
        }
        acc[2 * i] = ax;
        acc[2 * i + 1] = ay;
    }
}
""",
}


def _vec(k: int):
    return lambda seed, n: [_rng(seed + i).standard_normal(n) for i in range(k)]


def _mat(seed: int, n: int) -> list[np.ndarray]:
    return [_rng(seed).standard_normal((n, n))]


def _build() -> dict[str, Task]:
    n1 = lambda xs: [xs[0].size]  # noqa: E731
    rc = lambda xs: list(xs[0].shape)  # noqa: E731
    f4 = lambda xs: sum(x.nbytes for x in xs) * 2  # noqa: E731 - read inputs, write as much
    tasks = [
        Task("vector_add", "void kernel(const float* x, const float* y, float* out, int n)",
             _vec(2), n1, _ref_vector_add, _B["vector_add"], check_size=1000, time_size=1 << 18,
             bytes_moved=lambda xs: 3 * xs[0].nbytes),
        Task("relu", "void kernel(const float* x, float* out, int n)", _vec(1), n1, _ref_relu,
             _B["relu"], check_size=1000, time_size=1 << 18, bytes_moved=f4),
        Task("softmax_rows", "void kernel(const float* x, float* out, int rows, int cols)",
             _mat, rc, _ref_softmax_rows, _B["softmax_rows"], check_size=33, time_size=512),
        Task("layernorm_rows", "void kernel(const float* x, float* out, int rows, int cols)",
             _mat, rc, _ref_layernorm_rows, _B["layernorm_rows"], check_size=33, time_size=512),
        Task("reduce_sum", "void kernel(const float* x, float* out, int n)",
             lambda s, n: [_rng(s).random(n)], n1, _ref_reduce_sum, _B["reduce_sum"],
             check_size=1001, time_size=1 << 20, bytes_moved=lambda xs: xs[0].nbytes),
        Task("prefix_sum", "void kernel(const float* x, float* out, int n)",
             lambda s, n: [_rng(s).random(n)], n1, _ref_prefix_sum, _B["prefix_sum"],
             check_size=1000, time_size=1 << 18, bytes_moved=f4),
        Task("transpose", "void kernel(const float* x, float* out, int rows, int cols)",
             _mat, rc, _ref_transpose, _B["transpose"], check_size=37, time_size=2048,
             bytes_moved=f4),
        Task("matmul", "void kernel(const float* a, const float* b, float* c, int n)",
             lambda s, n: [_rng(s).standard_normal((n, n)), _rng(s + 1).standard_normal((n, n))],
             lambda xs: [xs[0].shape[0]], _ref_matmul, _B["matmul"], check_size=48, time_size=256),
        Task("conv2d_3x3", "void kernel(const float* x, const float* k, float* out, int h, int w)",
             lambda s, n: [_rng(s).standard_normal((n, n)), _rng(s + 1).standard_normal((3, 3))],
             lambda xs: list(xs[0].shape), _ref_conv2d_3x3, _B["conv2d_3x3"], check_size=35,
             time_size=1024),
        Task("nbody_2d", "void kernel(const float* pos, const float* w, float* acc, int n)",
             lambda s, n: [_rng(s).random((n, 2)), _rng(s + 1).random(n)],
             lambda xs: [xs[1].size], _ref_nbody_2d, _B["nbody_2d"], tol=(2e-2, 2e-2),
             check_size=100, time_size=1024),
    ]  # fmt: skip
    return {t.name: t for t in tasks}


BUILTIN_TASKS: dict[str, Task] = _build()


def get_task(name: str) -> Task:
    """A built-in CPU task by name."""
    try:
        return BUILTIN_TASKS[name]
    except KeyError:
        raise AnalystValueError(
            f"unknown task {name!r}: choose one of {sorted(BUILTIN_TASKS)}"
        ) from None


def load_task(path: str | Path) -> Task:
    """A task from a Python file of your own that defines ``TASK = Task(...)``.

    The file is trusted code (it is imported in this process); candidates never are."""
    import importlib.util

    p = Path(path)
    if not p.is_file():
        raise AnalystValueError(f"task file {str(p)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"cuda_analyst_user_task_{p.stem}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    task = getattr(mod, "TASK", None)
    if not isinstance(task, Task):
        raise AnalystValueError(
            f"{str(p)!r} must define TASK = cuda_analyst.Task(...), found {type(task).__name__}"
        )
    return task


def output_shapes(task: Task, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    """Shapes of the outputs (from the trusted reference on the same inputs)."""
    return [tuple(o.shape) for o in task.expected(inputs)]
