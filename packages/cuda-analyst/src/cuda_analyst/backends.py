"""Kernel backends behind one protocol: compile, check, time, profile.

``CBackend`` compiles a C kernel (the CPU stand-in for a CUDA kernel) with gcc/cc together with
a generated C harness and the task's naive baseline into one executable, which then runs in the
sandbox (no Python in the child). ``NumpyBackend``, ``NumbaBackend`` and
``TritonInterpreterBackend`` run Python kernels through a standalone runner in the sandbox (the
Triton one in Triton's CPU interpreter: correctness only, its timing means nothing).
``CudaCompileOnlyBackend`` gives real compile feedback for CUDA sources with ``nvcc --ptx`` (no
device needed) but nothing else. Every result carries its ``backend`` tag.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cuda_analyst.errors import ToolUnavailableError
from cuda_analyst.sandbox import Sandbox, SandboxLimits, SandboxResult, default_sandbox
from cuda_analyst.tasks import Task, output_shapes

OOM_MARK = "cuda-analyst: out of memory"


@dataclass
class CompileResult:
    ok: bool
    log: str
    artifact: Path | None = None
    seconds: float = 0.0
    reason: str = ""
    isolation: dict[str, Any] = field(default_factory=dict)
    workdir: Path | None = None
    """The sandbox directory holding the artifact (removed by the evaluator when done)."""


def compile_outcome(res: SandboxResult, artifact: Path, wd: Path) -> CompileResult:
    """The official lattice's compile verdict of one sandboxed compiler run: a timeout, a
    nonzero exit (``Compilation Error``) or the artifact, with the compiler's log."""
    log = (res.stderr + res.stdout).strip()
    if res.timed_out:
        reason = "Compilation Timeout"
        log = log or "compilation timed out"
    elif res.returncode != 0:
        reason = "Compilation Error"
    else:
        return CompileResult(True, log, artifact, res.seconds, "", res.isolation, wd)
    return CompileResult(False, log, None, res.seconds, reason, res.isolation, wd)


@dataclass
class CheckResult:
    ok: bool
    max_abs: float = float("nan")
    mean_abs: float = float("nan")
    failing_seed: int | None = None
    reason: str = ""
    log: str = ""
    isolation: dict[str, Any] = field(default_factory=dict)


@dataclass
class Timing:
    """Nanoseconds per call: candidate and baseline (min and median), and a STREAM-style copy."""

    cand_min: float
    cand_median: float
    base_min: float
    base_median: float
    copy_bytes_per_s: float = float("nan")
    repeat: int = 0
    ok: bool = True
    reason: str = ""
    log: str = ""

    @property
    def speedup(self) -> float:
        return self.base_min / self.cand_min if self.cand_min > 0 else float("inf")


@runtime_checkable
class KernelBackend(Protocol):
    """What the evaluator needs from a backend."""

    name: str

    def compile(self, src: str, task: Task) -> CompileResult: ...

    def check(self, artifact: Path, task: Task, seeds: tuple[int, ...]) -> CheckResult: ...

    def time(self, artifact: Path, task: Task, warmup: int = 2, repeat: int = 15) -> Timing: ...

    def profile(self, artifact: Path, task: Task) -> dict[str, Any]: ...


def can_time(backend: Any, task: Task) -> bool:
    """Whether ``backend`` gives a meaningful speedup for ``task`` (the evaluator stops at PASS
    otherwise): a backend may declare ``can_time(task)``; without it, timing is meaningful."""
    fn = getattr(backend, "can_time", None)
    return bool(fn(task)) if callable(fn) else task.timed


def classify_run(res: SandboxResult) -> str:
    """Official failure reasons for a finished run ('' when it succeeded)."""
    if res.timed_out:
        return "Execution Timeout"
    if OOM_MARK in res.stderr or "MemoryError" in res.stderr or "bad_alloc" in res.stderr:
        return "Out of Memory"
    if res.returncode is None:
        return "Failed to start execution"
    if res.returncode != 0:
        return "Execution Failure: Nonzero Exit"
    return ""


_TIME_INPUTS: dict[tuple[str, int], bytes] = {}


def _time_inputs(path: Path, task: Task) -> None:
    """Write the timing inputs (generated once per task and size, then reused)."""
    key = (task.name, task.time_size)
    if key not in _TIME_INPUTS:
        xs, ints = task.inputs(10_000, task.time_size)
        tmp = path.with_suffix(".gen")
        _write_inputs(tmp, xs, output_shapes(task, xs), ints)
        _TIME_INPUTS[key] = tmp.read_bytes()
        tmp.unlink()
    path.write_bytes(_TIME_INPUTS[key])


def _write_inputs(
    path: Path, inputs: list[np.ndarray], outs: list[tuple[int, ...]], ints: list[int]
) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<iii", len(inputs), len(outs), len(ints)))
        for x in inputs:
            f.write(struct.pack("<q", x.size))
            f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())
        for s in outs:
            f.write(struct.pack("<q", int(np.prod(s))))
        for v in ints:
            f.write(struct.pack("<i", v))


def _read_outputs(path: Path, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    data = path.read_bytes()
    out, off = [], 0
    for s in shapes:
        (n,) = struct.unpack_from("<q", data, off)
        off += 8
        out.append(
            np.frombuffer(data, dtype="<f4", count=n, offset=off).reshape(s).astype(np.float64)
        )
        off += 4 * n
    return out


def harness_source(task: Task) -> str:
    """The trusted C driver: reads inputs, calls ``cand_kernel`` (and ``base_kernel`` when
    timing), writes outputs; malloc failures print an out-of-memory mark (``--wrap=malloc``)."""
    params = ", ".join(
        {"in": "const float*", "out": "float*", "int": "int"}[a.kind] for a in task.args
    )
    ci = {"in": 0, "out": 0, "int": 0}
    call = []
    for a in task.args:
        call.append({"in": "in", "out": "out", "int": "iv"}[a.kind] + f"[{ci[a.kind]}]")
        ci[a.kind] += 1
    call_s = ", ".join(call)
    return f"""#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
void cand_kernel({params});
void base_kernel({params});
void* __real_malloc(size_t n);
void* __real_calloc(size_t a, size_t b);
void* __real_realloc(void* p, size_t n);
static void oom(size_t n) {{ fprintf(stderr, "{OOM_MARK} (%zu bytes)\\n", n); fflush(stderr); _exit(137); }}
void* __wrap_malloc(size_t n) {{ void* p = __real_malloc(n); if (!p && n) oom(n); return p; }}
void* __wrap_calloc(size_t a, size_t b) {{ void* p = __real_calloc(a, b); if (!p && a && b) oom(a * b); return p; }}
void* __wrap_realloc(void* q, size_t n) {{ void* p = __real_realloc(q, n); if (!p && n) oom(n); return p; }}
static int64_t now(void) {{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec; }}
static int nin, nout, nint; static float* in[16]; static float* out[16]; static int64_t in_n[16], out_n[16]; static int iv[16];
static void load(const char* p) {{
  FILE* f = fopen(p, "rb"); if (!f) {{ perror(p); exit(2); }}
  if (fread(&nin, 4, 1, f) != 1 || fread(&nout, 4, 1, f) != 1 || fread(&nint, 4, 1, f) != 1) exit(2);
  for (int i = 0; i < nin; i++) {{ if (fread(&in_n[i], 8, 1, f) != 1) exit(2); in[i] = malloc(4 * in_n[i] + 64);
    if (fread(in[i], 4, in_n[i], f) != (size_t)in_n[i]) exit(2); }}
  for (int i = 0; i < nout; i++) {{ if (fread(&out_n[i], 8, 1, f) != 1) exit(2); out[i] = calloc(out_n[i] + 16, 4); }}
  for (int i = 0; i < nint; i++) if (fread(&iv[i], 4, 1, f) != 1) exit(2);
  fclose(f);
}}
static void save(const char* p) {{
  FILE* f = fopen(p, "wb"); if (!f) {{ perror(p); exit(2); }}
  for (int i = 0; i < nout; i++) {{ fwrite(&out_n[i], 8, 1, f); fwrite(out[i], 4, out_n[i], f); }}
  fclose(f);
}}
static int cmp(const void* a, const void* b) {{ int64_t x = *(const int64_t*)a, y = *(const int64_t*)b; return (x > y) - (x < y); }}
int main(int argc, char** argv) {{
  if (argc >= 4 && strcmp(argv[1], "run") == 0) {{
    for (int k = 2; k + 1 < argc; k += 2) {{ load(argv[k]); cand_kernel({call_s}); save(argv[k + 1]); }}
    return 0;
  }}
  if (argc == 5 && strcmp(argv[1], "time") == 0) {{
    load(argv[2]); int w = atoi(argv[3]), r = atoi(argv[4]); if (r < 1 || r > 100000) return 2;
    int64_t* tc = malloc(8 * r); int64_t* tb = malloc(8 * r); int64_t* tm = malloc(8 * r);
    int64_t bytes = 0; for (int i = 0; i < nin; i++) bytes += 4 * in_n[i];
    char* src = malloc(bytes + 1); char* dst = malloc(bytes + 1); memset(src, 1, bytes + 1);
    for (int k = 0; k < w + r; k++) {{
      int64_t t0 = now(); cand_kernel({call_s}); int64_t t1 = now(); base_kernel({call_s});
      int64_t t2 = now(); memcpy(dst, src, bytes); int64_t t3 = now(); src[k % (bytes + 1)] ^= dst[(k * 7) % (bytes + 1)];
      if (k >= w) {{ tc[k - w] = t1 - t0; tb[k - w] = t2 - t1; tm[k - w] = t3 - t2; }}
    }}
    double cmin = 1e300, bmin = 1e300, mmin = 1e300;
    for (int k = 0; k < r; k++) {{ if (tc[k] < cmin) cmin = tc[k]; if (tb[k] < bmin) bmin = tb[k]; if (tm[k] < mmin) mmin = tm[k]; }}
    qsort(tc, r, 8, cmp); qsort(tb, r, 8, cmp);
    printf("{{\\"cand_min\\": %.1f, \\"cand_median\\": %.1f, \\"base_min\\": %.1f, \\"base_median\\": %.1f, \\"copy_bytes_per_s\\": %.6g, \\"repeat\\": %d}}\\n",
           cmin, (double)tc[r / 2], bmin, (double)tb[r / 2], mmin > 0 ? 2.0 * bytes / (mmin * 1e-9) : 0.0, r);
    return 0;
  }}
  fprintf(stderr, "usage: run IN OUT [IN OUT...] | time IN WARMUP REPEAT\\n");
  return 2;
}}
"""


class CBackend:
    """gcc/cc ``-O2`` C kernels (optional ``-fopenmp``), run through a generated C harness.

    The harness and the task's baseline are trusted code compiled once per task; a candidate is
    compiled and linked in the sandbox (time and process limits), and runs there with
    ``RLIMIT_AS``. Artifacts are cached by SHA-256 of (source, flags, task)."""

    name = "c"

    def __init__(
        self,
        *,
        cc: str | None = None,
        flags: tuple[str, ...] = ("-O2", "-std=c11"),
        openmp: bool = False,
        sandbox: Sandbox | None = None,
        compile_timeout: float = 60.0,
        run_timeout: float = 30.0,
        limits: SandboxLimits | None = None,
    ) -> None:
        found = cc or shutil.which("gcc") or shutil.which("cc")
        if found is None:
            raise ToolUnavailableError("CBackend needs a C compiler: install gcc (or set cc=...)")
        self.cc = found
        self.flags = tuple(flags) + (("-fopenmp",) if openmp else ())
        self.sandbox = sandbox or default_sandbox()
        self.compile_timeout, self.run_timeout = compile_timeout, run_timeout
        self.limits = limits or SandboxLimits()
        self._root = Path(tempfile.mkdtemp(prefix="cuda-analyst-c-"))
        self._root.chmod(0o755)
        import atexit

        atexit.register(shutil.rmtree, self._root, True)
        self._support: dict[str, Path] = {}
        import threading

        self._lock = threading.Lock()
        self._artifacts: dict[str, CompileResult] = {}

    @property
    def compile_limits(self) -> SandboxLimits:
        return SandboxLimits(
            address_space=None, nproc=self.limits.nproc, cpu_seconds=int(self.compile_timeout) + 5
        )

    def _support_obj(self, task: Task) -> Path:
        """Harness + baseline objects (trusted), compiled once per task."""
        with self._lock:
            return self._support_obj_locked(task)

    def _support_obj_locked(self, task: Task) -> Path:
        key = hashlib.sha256(
            (harness_source(task) + task.baseline_src + self.cc + repr(self.flags)).encode()
        ).hexdigest()[:16]
        if key in self._support:
            return self._support[key]
        d = self._root / f"support-{task.name}-{key}"
        d.mkdir(exist_ok=True)
        (d / "harness.c").write_text(harness_source(task))
        (d / "base.c").write_text(task.baseline_src)
        import subprocess

        for src, obj, extra in (
            ("harness.c", "harness.o", []),
            ("base.c", "base.o", ["-Dkernel=base_kernel"]),
        ):
            r = subprocess.run(
                [self.cc, *self.flags, "-c", src, "-o", obj, *extra],
                cwd=d,
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                raise ToolUnavailableError(
                    f"cannot build the trusted harness for {task.name!r}: {r.stderr[-2000:]}"
                )
        for p in (d, d / "harness.o", d / "base.o"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        self._support[key] = d
        return d

    def can_time(self, task: Task) -> bool:
        return task.timed

    def digest(self, src: str, task: Task) -> str:
        return hashlib.sha256(
            json.dumps([src, self.cc, self.flags, task.name, task.signature]).encode()
        ).hexdigest()

    def compile(self, src: str, task: Task) -> CompileResult:
        """Compile ``src`` and link it with the harness; FAIL logs keep gcc's line numbers."""
        key = self.digest(src, task)
        if (
            key in self._artifacts
            and self._artifacts[key].artifact
            and self._artifacts[key].artifact.exists()
        ):
            return self._artifacts[key]
        sup = self._support_obj(task)
        wd = self.sandbox.workdir()
        (wd / "cand.c").write_text(src)
        self.sandbox.give(wd / "cand.c")
        argv = [
            self.cc, *self.flags, "-Dkernel=cand_kernel", "cand.c",
            str(sup / "harness.o"), str(sup / "base.o"),
            "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc", "-lm", "-o", "run",
        ]  # fmt: skip
        res = self.sandbox.run(
            argv, cwd=wd, timeout=self.compile_timeout, limits=self.compile_limits
        )
        out = compile_outcome(res, wd / "run", wd)
        self._artifacts[key] = out
        return out

    def _run(self, artifact: Path, args: list[str]) -> SandboxResult:
        return self.sandbox.run(
            ["./" + artifact.name, *args],
            cwd=artifact.parent,
            timeout=self.run_timeout,
            limits=self.limits,
        )

    def check(self, artifact: Path, task: Task, seeds: tuple[int, ...] = (0, 1, 2)) -> CheckResult:
        """Run the candidate on seeded inputs (varied shapes: check size and check size + 3) and
        compare to the float64 reference within ``task.tol``."""
        wd = artifact.parent
        cases, args = [], ["run"]
        for k, seed in enumerate(seeds):
            size = task.check_size + (3 if k % 2 else 0)
            xs, ints = task.inputs(seed, size)
            shapes = output_shapes(task, xs)
            _write_inputs(wd / f"in{k}.bin", xs, shapes, ints)
            self.sandbox.give(wd / f"in{k}.bin")
            cases.append((seed, xs, shapes))
            args += [f"in{k}.bin", f"out{k}.bin"]
        res = self._run(artifact, args)
        reason = classify_run(res)
        log = (res.stderr + res.stdout)[-4000:]
        if reason:
            return CheckResult(
                False, reason=reason, log=log, isolation=res.isolation, failing_seed=None
            )
        rtol, atol = task.tol
        worst, means = 0.0, []
        for k, (seed, xs, shapes) in enumerate(cases):
            outs = _read_outputs(wd / f"out{k}.bin", shapes)
            for got, ref in zip(outs, task.expected(xs), strict=True):
                diff = np.abs(got - ref)
                bad = ~(diff <= atol + rtol * np.abs(ref))  # NaN counts as bad
                m = (
                    float(np.nanmax(diff))
                    if diff.size and not np.isnan(diff).all()
                    else float("inf")
                )
                if np.isnan(diff).any():
                    m = float("inf")
                means.append(float(np.mean(diff)) if diff.size else 0.0)
                worst = max(worst, m)
                if bad.any():
                    return CheckResult(
                        False,
                        m,
                        float(np.mean(diff)),
                        seed,
                        "Mismatch output, implementation error",
                        log,
                        res.isolation,
                    )
        return CheckResult(
            True, worst, float(np.mean(means)) if means else 0.0, None, "", log, res.isolation
        )

    def time(self, artifact: Path, task: Task, warmup: int = 2, repeat: int = 15) -> Timing:
        """Candidate vs baseline, interleaved in one process: ``perf``-style min and median ns."""
        wd = artifact.parent
        _time_inputs(wd / "time.bin", task)
        self.sandbox.give(wd / "time.bin")
        res = self._run(artifact, ["time", "time.bin", str(warmup), str(repeat)])
        reason = classify_run(res)
        if reason:
            return Timing(
                float("nan"),
                float("nan"),
                float("nan"),
                float("nan"),
                ok=False,
                reason=reason,
                log=res.stderr[-2000:],
            )
        try:
            d = json.loads(res.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return Timing(
                float("nan"),
                float("nan"),
                float("nan"),
                float("nan"),
                ok=False,
                reason="Failed to start execution",
                log=res.stdout[-2000:],
            )
        return Timing(**d)

    def profile(self, artifact: Path, task: Task) -> dict[str, Any]:
        """Per-call timings of candidate and baseline (the CPU profiler feedback)."""
        t = self.time(artifact, task, warmup=1, repeat=5)
        return {
            "backend": self.name,
            "cand_ns": t.cand_min,
            "base_ns": t.base_min,
            "speedup": t.speedup,
            "ok": t.ok,
        }


class PythonKernelBackend:
    """Python kernels ``def kernel(*inputs, *outputs, *ints)`` writing float32 outputs in place,
    run by a standalone runner in the sandbox; the speedup's baseline is the task's float64
    NumPy reference. Subclasses: :class:`NumpyBackend`, :class:`NumbaBackend`."""

    name = "python"
    address_space: int | None = 4 << 30
    tensors = "numpy"
    """What the kernel's arrays are: ``numpy`` arrays, or ``torch`` CPU tensors."""
    extra_env: tuple[tuple[str, str], ...] = ()
    """Environment added to the runner's (e.g. ``TRITON_INTERPRET=1``)."""

    def __init__(
        self,
        *,
        sandbox: Sandbox | None = None,
        compile_timeout: float = 60.0,
        run_timeout: float = 30.0,
    ) -> None:
        self.sandbox = sandbox or default_sandbox()
        self.compile_timeout, self.run_timeout = compile_timeout, run_timeout
        self.flags: tuple[str, ...] = ()

    def _py(
        self, wd: Path, args: list[str], timeout: float, address_space: int | None
    ) -> SandboxResult:
        from cuda_analyst.sandbox import python_launch

        head, env, bind = python_launch(self.sandbox, wd)
        env.update(dict(self.extra_env))
        return self.sandbox.run([*head, *args], cwd=wd, timeout=timeout, env=env, bind=bind,
                                limits=SandboxLimits(address_space=address_space))  # fmt: skip

    def compile(self, src: str, task: Task) -> CompileResult:
        """Syntax check in the sandbox (``SyntaxError`` with its line number is FAIL)."""
        import importlib.resources

        wd = self.sandbox.workdir()
        (wd / "cand.py").write_text(src)
        runner = importlib.resources.files("cuda_analyst").joinpath("_pyrunner.py").read_text()
        (wd / "_pyrunner.py").write_text(runner)
        (wd / "reference.py").write_text(_shippable_source(task.reference) or "")
        for f in ("cand.py", "_pyrunner.py", "reference.py"):
            self.sandbox.give(wd / f)
        code = "import sys; compile(open('cand.py').read(), 'cand.py', 'exec')"
        res = self._py(wd, ["-c", code], self.compile_timeout, None)
        return compile_outcome(res, wd / "cand.py", wd)

    def _job(
        self,
        wd: Path,
        task: Task,
        mode: str,
        cases: list[dict[str, Any]],
        warmup: int = 0,
        repeat: int = 0,
    ) -> Path:
        job = {"mode": mode, "candidate": "cand.py", "reference": "reference.py",
               "reference_name": task.reference.__name__, "kinds": [a.kind for a in task.args],
               "cases": cases, "warmup": warmup, "repeat": repeat, "tensors": self.tensors}  # fmt: skip
        (wd / f"job-{mode}.json").write_text(json.dumps(job))
        self.sandbox.give(wd / f"job-{mode}.json")
        return wd / f"job-{mode}.json"

    def _case(
        self, wd: Path, k: int, xs: list[np.ndarray], ints: list[int], shapes
    ) -> dict[str, Any]:
        np.savez(wd / f"in{k}.npz", **{f"in{i}": x for i, x in enumerate(xs)})
        self.sandbox.give(wd / f"in{k}.npz")
        return {"inputs": f"in{k}.npz", "outputs": f"out{k}.npz", "n_in": len(xs), "ints": ints,
                "out_shapes": [list(s) for s in shapes]}  # fmt: skip

    def can_time(self, task: Task) -> bool:
        """The speedup's baseline is the task's reference run in the runner, so it must be a
        plain Python function (a sandboxed PyTorch reference is not)."""
        return task.timed and _shippable_source(task.reference) is not None

    def check(self, artifact: Path, task: Task, seeds: tuple[int, ...] = (0, 1, 2)) -> CheckResult:
        wd = artifact.parent
        cases, raw = [], []
        for k, seed in enumerate(seeds):
            xs, ints = task.inputs(seed, task.check_size + (3 if k % 2 else 0))
            shapes = output_shapes(task, xs)
            cases.append(self._case(wd, k, xs, ints, shapes))
            raw.append((seed, xs))
        res = self._py(
            wd,
            ["_pyrunner.py", self._job(wd, task, "run", cases).name],
            self.run_timeout,
            self.address_space,
        )
        reason = classify_run(res)
        log = (res.stderr + res.stdout)[-4000:]
        if reason:
            return CheckResult(False, reason=reason, log=log, isolation=res.isolation)
        rtol, atol = task.tol
        worst = 0.0
        for k, (seed, xs) in enumerate(raw):
            data = np.load(wd / f"out{k}.npz")
            for i, ref in enumerate(task.expected(xs)):
                diff = np.abs(data[f"out{i}"].astype(np.float64) - ref)
                m = float("inf") if np.isnan(diff).any() else float(diff.max(initial=0.0))
                worst = max(worst, m)
                if (~(diff <= atol + rtol * np.abs(ref))).any():
                    return CheckResult(
                        False,
                        m,
                        float(np.mean(diff)),
                        seed,
                        "Mismatch output, implementation error",
                        log,
                        res.isolation,
                    )
        return CheckResult(True, worst, 0.0, None, "", log, res.isolation)

    def time(self, artifact: Path, task: Task, warmup: int = 2, repeat: int = 15) -> Timing:
        wd = artifact.parent
        xs, ints = task.inputs(10_000, task.time_size)
        case = self._case(wd, 99, xs, ints, output_shapes(task, xs))
        job = self._job(wd, task, "time", [case], warmup, repeat)
        res = self._py(wd, ["_pyrunner.py", job.name], self.run_timeout, self.address_space)
        reason = classify_run(res)
        if reason:
            nan = float("nan")
            return Timing(nan, nan, nan, nan, ok=False, reason=reason, log=res.stderr[-2000:])
        return Timing(**json.loads(res.stdout.strip().splitlines()[-1]))

    def profile(self, artifact: Path, task: Task) -> dict[str, Any]:
        t = self.time(artifact, task, warmup=1, repeat=5)
        return {
            "backend": self.name,
            "cand_ns": t.cand_min,
            "base_ns": t.base_min,
            "speedup": t.speedup,
            "ok": t.ok,
        }


def _shippable_source(fn: Any) -> str | None:
    """Source of a plain function the runner can define, or ``None``."""
    import inspect

    if not inspect.isfunction(fn):
        return None
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


class NumpyBackend(PythonKernelBackend):
    """NumPy kernels (``RLIMIT_AS`` 4 GiB on the run)."""

    name = "numpy"


class NumbaBackend(PythonKernelBackend):
    """numba ``@njit`` kernels (the official n-body precedent). numba's LLVM reserves large
    virtual ranges, so the run gets time and process limits only (no ``RLIMIT_AS``); the two
    warm-ups absorb the JIT compilation."""

    name = "numba"
    address_space = None


class TritonInterpreterBackend(PythonKernelBackend):
    """Triton kernels in Triton's CPU interpreter (``TRITON_INTERPRET=1``): correctness feedback
    only. The candidate defines ``@triton.jit`` kernels and a launcher ``kernel(*inputs,
    *outputs, *ints)`` that receives float32 CPU torch tensors (outputs written in place).

    The interpreter runs each program instance in NumPy, so its wall time says nothing about a
    GPU: the evaluator stops at PASS (``timing == {"meaningful": False, ...}``) and ``time``
    refuses. Runs get ``RLIMIT_AS`` 4 GiB, like NumPy kernels."""

    name = "triton-interpret"
    tensors = "torch"
    extra_env = (("TRITON_INTERPRET", "1"),)

    def __init__(self, **kw: Any) -> None:
        import importlib.util

        if importlib.util.find_spec("triton") is None:
            raise ToolUnavailableError(
                "TritonInterpreterBackend needs triton (Linux): pip install 'cuda-analyst[triton]'"
            )
        super().__init__(**kw)

    def can_time(self, task: Task) -> bool:
        return False

    def time(self, artifact: Path, task: Task, warmup: int = 2, repeat: int = 15) -> Timing:
        raise ToolUnavailableError(
            "the Triton interpreter's timing is meaningless (it emulates each program in NumPy); "
            "time Triton kernels on a GPU"
        )

    def profile(self, artifact: Path, task: Task) -> dict[str, Any]:
        return {"backend": self.name, "meaningful": False}


class CudaCompileOnlyBackend:
    """``nvcc --ptx`` compile feedback for CUDA sources (no device needed); nothing runs."""

    name = "cuda-compile-only"

    def __init__(
        self,
        *,
        nvcc: str | None = None,
        arch: str = "sm_80",
        sandbox: Sandbox | None = None,
        timeout: float = 60.0,
    ) -> None:
        found = nvcc or shutil.which("nvcc")
        if found is None:
            raise ToolUnavailableError("CudaCompileOnlyBackend needs `nvcc` on PATH (CUDA toolkit)")
        self.nvcc, self.arch, self.timeout = found, arch, timeout
        self.sandbox = sandbox or default_sandbox()

    def compile(self, src: str, task: Task | None = None) -> CompileResult:
        wd = self.sandbox.workdir()
        (wd / "kernel.cu").write_text(src)
        self.sandbox.give(wd / "kernel.cu")
        path = f"{Path(self.nvcc).parent}:/usr/local/bin:/usr/bin:/bin"
        res = self.sandbox.run(
            [self.nvcc, "--ptx", f"-arch={self.arch}", "kernel.cu", "-o", "kernel.ptx"],
            cwd=wd, timeout=self.timeout, limits=SandboxLimits(address_space=None), env={"PATH": path},
        )  # fmt: skip
        return compile_outcome(res, wd / "kernel.ptx", wd)

    def check(self, artifact: Path, task: Task, seeds: tuple[int, ...] = (0,)) -> CheckResult:
        raise ToolUnavailableError(
            "compile-only CUDA backend cannot run kernels: it needs a CUDA device (use CudaBackend on a GPU)"
        )

    def time(self, artifact: Path, task: Task, warmup: int = 2, repeat: int = 15) -> Timing:
        raise ToolUnavailableError(
            "compile-only CUDA backend cannot time kernels: it needs a CUDA device"
        )

    def profile(self, artifact: Path, task: Task) -> dict[str, Any]:
        raise ToolUnavailableError("profiling CUDA needs a device and Nsight Compute (`ncu`)")


def find_nvrtc() -> str | None:
    """``libnvrtc.so`` from the ``nvidia-cuda-nvrtc`` wheels that come with torch, or the system."""
    import sys

    for base in [Path(p) for p in sys.path if p.endswith("site-packages")]:
        hits = (
            sorted((base / "nvidia").glob("*/lib/libnvrtc.so*"))
            if (base / "nvidia").is_dir()
            else []
        )
        hits = [h for h in hits if ".alt." not in h.name and "builtins" not in h.name]
        if hits:
            return str(hits[0])
    import ctypes.util

    return ctypes.util.find_library("nvrtc")


class NvrtcCompileOnlyBackend(CudaCompileOnlyBackend):
    """NVRTC (runtime compiler library) compile feedback, no device and no ``nvcc`` needed."""

    name = "nvrtc-compile-only"

    def __init__(
        self,
        *,
        lib: str | None = None,
        arch: str = "compute_80",
        sandbox: Sandbox | None = None,
        timeout: float = 60.0,
    ) -> None:
        found = lib or find_nvrtc()
        if found is None:
            raise ToolUnavailableError(
                "NvrtcCompileOnlyBackend needs libnvrtc (pip install nvidia-cuda-nvrtc)"
            )
        self.lib, self.arch, self.timeout = found, arch, timeout
        self.sandbox = sandbox or default_sandbox()

    def compile(self, src: str, task: Task | None = None) -> CompileResult:
        import importlib.resources

        from cuda_analyst.sandbox import python_launch

        wd = self.sandbox.workdir()
        (wd / "kernel.cu").write_text(src)
        (wd / "_nvrtc.py").write_text(
            importlib.resources.files("cuda_analyst").joinpath("_nvrtc.py").read_text()
        )
        for f in ("kernel.cu", "_nvrtc.py"):
            self.sandbox.give(wd / f)
        head, env, bind = python_launch(self.sandbox, wd)
        env["LD_LIBRARY_PATH"] = str(Path(self.lib).parent)  # libnvrtc-builtins sits beside it
        res = self.sandbox.run([*head, "_nvrtc.py", self.lib, "kernel.cu", self.arch], cwd=wd, timeout=self.timeout,
                               env=env, bind=bind, limits=SandboxLimits(address_space=None))  # fmt: skip
        if res.timed_out:
            return CompileResult(
                False, res.stderr, None, res.seconds, "Compilation Timeout", res.isolation, wd
            )
        try:
            d = json.loads(res.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return CompileResult(
                False,
                res.stderr[-4000:],
                None,
                res.seconds,
                "Failed to start execution",
                res.isolation,
                wd,
            )
        if not d["ok"]:
            return CompileResult(
                False, d["log"], None, res.seconds, "Compilation Error", res.isolation, wd
            )
        return CompileResult(True, d["log"], wd / "kernel.ptx", res.seconds, "", res.isolation, wd)


_C_LINE = re.compile(r"cand\.c:(\d+):(\d+): (error|warning): (.*)")


def compiler_messages(log: str) -> list[dict[str, Any]]:
    """gcc diagnostics as ``{line, col, kind, message}`` records."""
    return [
        {"line": int(m.group(1)), "col": int(m.group(2)), "kind": m.group(3), "message": m.group(4)}
        for m in _C_LINE.finditer(log)
    ]


def get_backend(name: str, **kw: Any) -> KernelBackend:
    """A backend by name: ``c``, ``numpy``, ``numba``, ``triton-interpret``,
    ``cuda-compile-only`` (alias ``nvcc``) or ``nvrtc-compile-only``."""
    from cuda_analyst.errors import AnalystValueError

    if name == "c":
        return CBackend(**kw)
    if name in ("cuda-compile-only", "nvcc"):
        return CudaCompileOnlyBackend(**kw)
    if name == "nvrtc-compile-only":
        return NvrtcCompileOnlyBackend(**kw)
    if name == "numpy":
        return NumpyBackend(**kw)
    if name == "numba":
        return NumbaBackend(**kw)
    if name in ("triton-interpret", "triton"):
        return TritonInterpreterBackend(**kw)
    if name in ("cuda", "kernelbench"):
        raise ToolUnavailableError(
            f"backend {name!r} needs a CUDA device and is not part of this release; on the CPU use "
            "'c', 'numpy' or 'triton-interpret' (correctness), or 'cuda-compile-only' (nvcc --ptx)"
        )
    raise AnalystValueError(
        f"unknown backend {name!r}: use c, numpy, numba, triton-interpret, cuda-compile-only or "
        "nvrtc-compile-only"
    )
