"""Standalone runner for KernelBench problem files (PyTorch ``Model``, ``get_inputs``,
``get_init_inputs``) inside the sandbox, on the CPU.

Usage: ``python _kbrunner.py job.json``. The problem file is untrusted code: it is executed
here only, never in the caller's process. Imports the standard library, NumPy and torch; never
imports cuda_analyst. Mode ``inputs``: for each seed, seed torch, draw ``get_inputs()``, run the
model and save ``kb-<seed>.npz`` (``in<i>``, ``out<j>``), printing a JSON description of the
arguments. Mode ``reference``: run the model on saved inputs.
"""

import inspect
import json
import sys

import numpy as np
import torch

C_WORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
           "else", "enum", "extern", "float", "for", "goto", "if", "int", "long", "register",
           "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
           "union", "unsigned", "void", "volatile", "while", "kernel", "inline", "restrict"}  # fmt: skip


def fail(msg):
    print("kernelbench problem: " + msg, file=sys.stderr)
    sys.exit(3)


def load(path):
    with open(path) as f:
        src = f.read()
    ns = {"__name__": "kernelbench_problem", "__file__": path}
    exec(compile(src, path, "exec"), ns)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in ns:
            fail(f"{path} does not define {name!r} (a KernelBench problem defines Model, "
                 "get_inputs() and get_init_inputs())")  # fmt: skip
    return ns


def build(ns, init_seed):
    torch.manual_seed(init_seed)
    model = ns["Model"](*ns["get_init_inputs"]())
    return model.eval()


def as_outputs(out):
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for k, o in enumerate(outs):
        if not isinstance(o, torch.Tensor) or not o.dtype.is_floating_point:
            fail(f"forward output {k} is {type(o).__name__} {getattr(o, 'dtype', '')}: only "
                 "floating-point tensors can be compared")  # fmt: skip
    return [o.detach().to(torch.float32).contiguous().numpy() for o in outs]


def main():
    with open(sys.argv[1]) as f:
        job = json.load(f)
    torch.set_num_threads(1)
    ns = load(job["problem"])
    model = build(ns, job["init_seed"])
    if job["mode"] == "inputs":
        meta = None
        for seed in job["seeds"]:
            torch.manual_seed(seed)
            xs = ns["get_inputs"]()
            for k, x in enumerate(xs):
                if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
                    fail(f"get_inputs()[{k}] is {type(x).__name__} {getattr(x, 'dtype', '')}: "
                         "only floating-point tensor inputs are supported")  # fmt: skip
            n = sum(int(x.numel()) for x in xs)
            if n > job["max_numel"]:
                fail(f"get_inputs() draws {n} elements, above max_numel={job['max_numel']}: "
                     "shrink the problem's shapes for a CPU run")  # fmt: skip
            xs = [x.detach().to(torch.float32).contiguous() for x in xs]
            with torch.no_grad():
                outs = as_outputs(model(*xs))
            arrays = {f"in{i}": x.numpy() for i, x in enumerate(xs)}
            arrays.update({f"out{j}": o for j, o in enumerate(outs)})
            np.savez(f"kb-{seed}.npz", **arrays)
            if meta is None:
                try:
                    params = list(inspect.signature(model.forward).parameters)
                except (TypeError, ValueError):
                    params = []
                names = [p if p.isidentifier() and p not in C_WORDS else f"in{i}"
                         for i, p in enumerate(params[: len(xs)])]  # fmt: skip
                if len(names) != len(xs) or len(set(names)) != len(names):
                    names = [f"in{i}" for i in range(len(xs))]
                meta = {"names": names, "inputs": [list(x.shape) for x in xs],
                        "outputs": [list(o.shape) for o in outs]}  # fmt: skip
        print(json.dumps(meta))
        return
    for case in job["cases"]:
        data = np.load(case["inputs"])
        xs = [torch.from_numpy(data[f"in{i}"].astype(np.float32)) for i in range(case["n_in"])]
        with torch.no_grad():
            outs = as_outputs(model(*xs))
        np.savez(case["outputs"], **{f"out{j}": o for j, o in enumerate(outs)})


if __name__ == "__main__":
    main()
