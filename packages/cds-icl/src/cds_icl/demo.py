"""``llmcore demo cds-icl``: CDS, random and high-curvature orders of the synthetic CoT pool,
their mean turning angles (hash embeddings), and the tiny model's few-shot accuracy with each.

Uses the test fixture when it is cached, else a demo-size model (24 steps, ~40 s cold on one
thread) that has learnt the prompt layout but not the arithmetic.
"""

from __future__ import annotations

import time
from typing import Any

K = 8
N_ITEMS = 12


def run(print_table: bool = True) -> dict[str, Any]:
    """Mean turning angle and accuracy per order; a flat dict."""
    import numpy as np
    import torch

    from cds_icl.embed import Embedder
    from cds_icl.runner import evaluate, load_task
    from cds_icl.selectors import CDSSelector, RandomSelector
    from cds_icl.tiny import DEMO_STEPS, build_tiny, recipe
    from cds_icl.tsp import path_curvature
    from llmcore import zoo

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = recipe()
        entry = zoo.lookup(r.name, r.key_material()) or build_tiny(DEMO_STEPS, progress=False)
        model, tok = entry.load()
        data = load_task("synthetic")
        emb = Embedder("hash")
        E = emb(data.pool.texts())[:K]
        orders = {
            "cds": CDSSelector(emb, "cds"),
            "high_curvature": CDSSelector(emb, "high_curvature"),
            "random": RandomSelector(),
        }
        out: dict[str, Any] = {"model": entry.name, "k": K, "items": N_ITEMS}
        for name, sel in orders.items():
            seeds = (71, 72, 73, 74, 75) if name == "random" else (71,)
            angles = [path_curvature(E, sel.select(data.pool, None, K, s)) for s in seeds]
            res = evaluate((model, tok), data, sel, k=K, seeds=seeds[:2], limit=N_ITEMS,
                           max_new_tokens=40)  # fmt: skip
            out[f"{name}_angle"] = round(float(np.mean(angles)), 3)
            out[f"{name}_acc"] = round(res.acc, 3)
    finally:
        torch.set_num_threads(prev)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if print_table:
        for key, v in out.items():
            print(f"{key:>22}: {v}")
    return out
