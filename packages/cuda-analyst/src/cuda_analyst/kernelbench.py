"""KernelBench problems as CPU tasks: the PyTorch ``Model`` is the reference, run with CPU torch.

A KernelBench problem file defines ``Model`` (an ``nn.Module``), ``get_inputs()`` and
``get_init_inputs()``. It is untrusted code, so it is executed only in the sandbox
(``_kbrunner.py``): the model is built under a fixed seed (KernelBench seeds 42), inputs are
drawn under each evaluation seed, and the outputs come back as arrays. The resulting
:class:`~cuda_analyst.tasks.Task` takes a C or NumPy candidate ``kernel`` with one ``const
float*`` per input, one ``float*`` per output and every input dimension as an ``int`` (in order);
candidates are compared with the float32 torch outputs at KernelBench's fp32 tolerance 1e-2.
Without a C ``baseline_src`` there is nothing to time against, and the evaluator stops at PASS.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from cuda_analyst.errors import AnalystValueError
from cuda_analyst.sandbox import Sandbox, SandboxLimits, default_sandbox, python_launch
from cuda_analyst.tasks import Task

INIT_SEED = 42
"""Seed under which the problem's ``Model`` is built (KernelBench's ``seed_num``)."""


class KernelBenchReference:
    """The problem's ``Model`` evaluated in the sandbox: ``ref(*inputs) -> outputs`` (float64).

    Inputs and outputs are cached per seed and per input bytes, so each seed costs one sandbox
    run (torch import included) for the whole evaluation."""

    __name__ = "kernelbench_reference"

    def __init__(
        self,
        source: str,
        *,
        sandbox: Sandbox | None = None,
        timeout: float = 120.0,
        max_numel: int = 1 << 24,
        address_space: int | None = 4 << 30,
    ) -> None:
        self.source = source
        self.sandbox = sandbox or default_sandbox()
        self.timeout, self.max_numel, self.address_space = timeout, max_numel, address_space
        self.meta: dict[str, Any] = {}
        self._seeds: dict[int, list[np.ndarray]] = {}
        self._outputs: dict[str, list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self.sandbox_runs = 0

    @staticmethod
    def _key(xs: list[np.ndarray]) -> str:
        h = hashlib.sha256()
        for x in xs:
            a = np.ascontiguousarray(x, dtype=np.float32)
            h.update(repr(a.shape).encode() + a.tobytes())
        return h.hexdigest()

    def _run(self, job: dict[str, Any], files: dict[str, Any]) -> tuple[Path, str]:
        wd = self.sandbox.workdir()
        (wd / "problem.py").write_text(self.source)
        runner = importlib.resources.files("cuda_analyst").joinpath("_kbrunner.py").read_text()
        (wd / "_kbrunner.py").write_text(runner)
        job = {"problem": "problem.py", "init_seed": INIT_SEED, "max_numel": self.max_numel, **job}
        (wd / "job.json").write_text(json.dumps(job))
        for name, arrays in files.items():
            np.savez(wd / name, **arrays)
        for f in ("problem.py", "_kbrunner.py", "job.json", *files):
            self.sandbox.give(wd / f)
        head, env, bind = python_launch(self.sandbox, wd)
        res = self.sandbox.run([*head, "_kbrunner.py", "job.json"], cwd=wd, timeout=self.timeout,
                               env=env, bind=bind,
                               limits=SandboxLimits(address_space=self.address_space))  # fmt: skip
        self.sandbox_runs += 1
        if res.timed_out or res.returncode != 0:
            import shutil

            shutil.rmtree(wd, ignore_errors=True)
            what = "timed out" if res.timed_out else f"exited with {res.returncode}"
            raise AnalystValueError(
                f"the KernelBench reference {what} in the sandbox: {res.stderr[-1500:].strip()}"
            )
        return wd, res.stdout

    def prefetch(self, seeds: tuple[int, ...] | list[int]) -> dict[str, Any]:
        """Draw inputs and reference outputs for ``seeds`` in one sandbox run."""
        with self._lock:
            todo = sorted({int(s) for s in seeds} - set(self._seeds))
            if not todo:
                return self.meta
            wd, out = self._run({"mode": "inputs", "seeds": todo}, {})
            try:
                meta = json.loads(out.strip().splitlines()[-1])
                for s in todo:
                    data = np.load(wd / f"kb-{s}.npz")
                    xs = [data[f"in{i}"] for i in range(len(meta["inputs"]))]
                    self._seeds[s] = xs
                    self._outputs[self._key(xs)] = [
                        data[f"out{j}"].astype(np.float64) for j in range(len(meta["outputs"]))
                    ]
            finally:
                import shutil

                shutil.rmtree(wd, ignore_errors=True)
            if self.meta and meta["inputs"] != self.meta["inputs"]:
                raise AnalystValueError(
                    f"get_inputs() shapes change with the seed ({self.meta['inputs']} vs "
                    f"{meta['inputs']}): a task needs fixed shapes"
                )
            self.meta = self.meta or meta
            return self.meta

    def inputs_for(self, seed: int) -> list[np.ndarray]:
        if seed not in self._seeds:
            self.prefetch([seed])
        return [x.copy() for x in self._seeds[seed]]

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        xs = [np.asarray(x) for x in inputs]
        key = self._key(xs)
        with self._lock:
            hit = self._outputs.get(key)
        if hit is not None:
            return [o.copy() for o in hit]
        arrays = {f"in{i}": np.ascontiguousarray(x, dtype=np.float32) for i, x in enumerate(xs)}
        case = {"inputs": "ref-in.npz", "outputs": "ref-out.npz", "n_in": len(xs)}
        wd, _ = self._run({"mode": "reference", "cases": [case]}, {"ref-in.npz": arrays})
        try:
            data = np.load(wd / "ref-out.npz")
            outs = [data[f"out{j}"].astype(np.float64) for j in range(len(data.files))]
        finally:
            import shutil

            shutil.rmtree(wd, ignore_errors=True)
        with self._lock:
            self._outputs[key] = outs
        return [o.copy() for o in outs]


def kernelbench_signature(meta: dict[str, Any]) -> str:
    """``void kernel(const float* <input>..., float* out..., int <input>_d<k>...)``."""
    names = list(meta["names"])
    outs = (
        ["out"] if len(meta["outputs"]) == 1 else [f"out{j}" for j in range(len(meta["outputs"]))]
    )
    dims = [
        f"{n}_d{k}"
        for n, shape in zip(names, meta["inputs"], strict=True)
        for k in range(len(shape))
    ]
    if len(set(names + outs + dims)) != len(names) + len(outs) + len(dims):
        names = [f"in{i}" for i in range(len(names))]
        dims = [f"in{i}_d{k}" for i, s in enumerate(meta["inputs"]) for k in range(len(s))]
    params = ([f"const float* {n}" for n in names] + [f"float* {o}" for o in outs]
              + [f"int {d}" for d in dims])  # fmt: skip
    return f"void kernel({', '.join(params)})"


def from_kernelbench(
    problem_py: str | Path,
    *,
    name: str | None = None,
    baseline_src: str | None = None,
    tol: tuple[float, float] = (1e-2, 1e-2),
    seeds: tuple[int, ...] = (0, 1, 2),
    sandbox: Sandbox | None = None,
    timeout: float = 120.0,
    max_numel: int = 1 << 24,
) -> Task:
    """A :class:`Task` from a KernelBench problem file, its reference run with CPU torch.

    The file is executed only in the sandbox: once here (drawing the inputs and outputs of
    ``seeds``, and of the timing seed when ``baseline_src`` is given), then again only for
    inputs not seen before. ``baseline_src`` is a C ``kernel`` with the derived signature to
    time candidates against; without it the task is correctness-only (``timed=False``).
    Shapes are the problem's own (the evaluator's size variation does not apply), capped at
    ``max_numel`` input elements."""
    p = Path(problem_py)
    if not p.is_file():
        raise AnalystValueError(f"KernelBench problem file {str(p)!r} does not exist")
    source = p.read_text()
    if "class Model" not in source or "def get_inputs" not in source:
        raise AnalystValueError(
            f"{str(p)!r} is not a KernelBench problem: it must define class Model, get_inputs() "
            "and get_init_inputs()"
        )
    ref = KernelBenchReference(source, sandbox=sandbox, timeout=timeout, max_numel=max_numel)
    timed = baseline_src is not None
    meta = ref.prefetch(tuple(seeds) + ((10_000,) if timed else ()))
    signature = kernelbench_signature(meta)
    if baseline_src is None:
        # links the trusted harness; never timed (timed=False)
        baseline_src = signature + " { }\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    return Task(
        name=name or f"kb_{p.stem}_{digest}",
        signature=signature,
        make_inputs=lambda seed, size: ref.inputs_for(seed),
        sizes_of=lambda xs: [int(d) for x in xs for d in x.shape],
        reference=ref,
        baseline_src=baseline_src,
        tol=tol,
        language="c",
        description=f"KernelBench problem {p.name} (reference: the PyTorch Model on CPU)",
        timed=timed,
    )
