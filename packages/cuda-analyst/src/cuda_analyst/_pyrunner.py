"""Standalone runner for Python kernels (NumPy / numba / Triton) inside the sandbox.

Usage: ``python _pyrunner.py job.json``. Imports only the standard library and NumPy (numba
when the candidate does; torch when the job asks for tensors, as Triton kernels take torch
tensors); never imports cuda_analyst. Writes output ``.npz`` files (and timings on stdout).
"""

import json
import sys
import time

import numpy as np


def _load(path):
    with open(path) as f:
        src = f.read()
    ns = {"np": np, "numpy": np, "__name__": "cand", "__file__": path}
    exec(compile(src, path, "exec"), ns)
    return ns


def main():
    with open(sys.argv[1]) as f:
        job = json.load(f)
    cand = _load(job["candidate"])["kernel"]
    if job["mode"] == "run":
        torch = None
        if job.get("tensors") == "torch":
            import torch

            torch.set_num_threads(1)
        for case in job["cases"]:
            data = np.load(case["inputs"])
            ins = [data[f"in{k}"] for k in range(case["n_in"])]
            outs = [np.zeros(s, dtype=np.float32) for s in case["out_shapes"]]
            if torch is not None:
                ins = [torch.from_numpy(np.ascontiguousarray(x)) for x in ins]
                outs = [torch.from_numpy(o) for o in outs]  # shares memory with the arrays
            cand(*_order(job["kinds"], ins, outs, case["ints"]))
            outs = [o.numpy() if torch is not None else o for o in outs]
            np.savez(case["outputs"], **{f"out{k}": o for k, o in enumerate(outs)})
        return
    ref = _load(job["reference"])[job["reference_name"]]
    case = job["cases"][0]
    data = np.load(case["inputs"])
    ins = [data[f"in{k}"] for k in range(case["n_in"])]
    ins64 = [x.astype(np.float64) for x in ins]
    outs = [np.zeros(s, dtype=np.float32) for s in case["out_shapes"]]
    args = _order(job["kinds"], ins, outs, case["ints"])
    tc, tb, tm = [], [], []
    buf = np.concatenate([x.ravel() for x in ins])
    dst = np.empty_like(buf)
    for k in range(job["warmup"] + job["repeat"]):
        t0 = time.perf_counter_ns()
        cand(*args)
        t1 = time.perf_counter_ns()
        ref(*ins64)
        t2 = time.perf_counter_ns()
        np.copyto(dst, buf)
        t3 = time.perf_counter_ns()
        if k >= job["warmup"]:
            tc.append(t1 - t0)
            tb.append(t2 - t1)
            tm.append(t3 - t2)
    print(json.dumps({"cand_min": float(min(tc)), "cand_median": float(np.median(tc)), "base_min": float(min(tb)),
                      "base_median": float(np.median(tb)), "copy_bytes_per_s": 2.0 * buf.nbytes / (min(tm) * 1e-9),
                      "repeat": job["repeat"]}))  # fmt: skip


def _order(kinds, ins, outs, ints):
    it = {"in": iter(ins), "out": iter(outs), "int": iter(ints)}
    return [next(it[k]) for k in kinds]


if __name__ == "__main__":
    main()
