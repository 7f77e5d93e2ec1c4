"""``llmcore demo d3llm``: a demo-size masked-diffusion teacher decoded three ways.

The demo builds (under a minute cold on one thread, then cached) a 2-layer, hidden-64 teacher on
a short copy + running-parity task (3 digits, 8 generated positions) and decodes 32 held-out
prompts with vanilla (one token per forward), Fast-dLLM confidence-0.9 threshold and entropy
multi-block (0.5 / 0.1 / 0.95) decoding, printing accuracy, TPF, NFE and AUP side by side.
"""

from __future__ import annotations

import time
from typing import Any


def run(print_table: bool = True, n: int = 32) -> dict[str, Any]:
    """Accuracy / TPF / NFE / AUP of the three decoders on the demo teacher; a flat dict."""
    import torch

    from d3llm.metrics import aup
    from d3llm.tiny import DEMO_STEPS, DEMO_TASK, build_teacher, evaluate, load_mdlm_entry

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        entry = build_teacher(
            DEMO_STEPS, 3e-3, 32, task=DEMO_TASK, hidden=64, layers=2, gate=0.0,
            name="d3llm-demo-teacher",
        )  # fmt: skip
        m, tok = load_mdlm_entry(entry)
        xs = DEMO_TASK.eval_inputs(n)
        kw = {"task": DEMO_TASK, "inputs": xs}
        runs = {
            "vanilla": evaluate(m, tok, "vanilla", **kw),
            "confidence-0.9": evaluate(m, tok, "threshold", mode="confidence", threshold=0.9, **kw),
            "multiblock-0.5": evaluate(m, tok, "multiblock", threshold=0.5, **kw),
        }
    finally:
        torch.set_num_threads(prev)
    y_max = 100 * max(r["accuracy"] for r in runs.values())
    y_max = max(y_max, 1e-9)
    rows, out = [], {}
    for name, r in runs.items():
        rho = 1.0 if name == "vanilla" else max(r["tpf"], 1e-9)
        pts = [(1.0, 100 * runs["vanilla"]["accuracy"])]
        if name != "vanilla":
            pts.append((rho, 100 * r["accuracy"]))
        a = aup([p[0] for p in pts], [p[1] for p in pts], y_max) if y_max > 1e-9 else 0.0
        rows.append({"decoder": name, "accuracy": round(r["accuracy"], 3),
                     "TPF": round(r["tpf"], 2), "NFE": round(r["nfe_mean"], 2),
                     "AUP": round(a, 1)})  # fmt: skip
        out[f"{name}_accuracy"] = round(r["accuracy"], 4)
        out[f"{name}_tpf"] = round(r["tpf"], 4)
        out[f"{name}_aup"] = round(a, 2)
    if print_table:
        from llmcore.cli import print_table as pt

        pt(rows)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out
