"""``llmcore demo cuda-analyst``: the 8 coalition masks on a frozen CPU run with the mock LLM.

Two C tasks (matmul, reduce_sum), a reference trajectory from the seeded strong mock, frozen
(5 parents per task), re-planned under the 8 masks ``p7-d{0|3}-a{0|3}-p{0|3}`` (2 rollouts x
3 trials) and attributed with exact Shapley values. Evaluations come from (or build) the
candidate evaluation cache. Backend: C on CPU; nothing here is a GPU measurement.
"""

from __future__ import annotations

import time
from typing import Any


def run(print_table: bool = True) -> dict[str, Any]:
    """Run the demo; returns a flat ``{metric: value}`` dict."""
    import tempfile

    from cuda_analyst.attribution import attribute
    from cuda_analyst.experiment import frozen_samples, make_evaluators
    from cuda_analyst.fixtures import load_eval_cache
    from cuda_analyst.intervene import intervene
    from cuda_analyst.llm import MockLLM
    from cuda_analyst.masks import coalition_masks

    t0 = time.perf_counter()
    cache, _ = load_eval_cache()
    evs = make_evaluators(("matmul", "reduce_sum"), cache)
    masks = [str(m) for m in coalition_masks()]
    with tempfile.TemporaryDirectory(prefix="cuda-analyst-demo-") as root:
        samples = frozen_samples(evs, parents_per_task=5, seed=0, workdir=root)
        res = intervene(
            samples,
            masks,
            MockLLM("strong", 0),
            evs,
            num_run=2,
            num_trials=3,
            out_dir=f"{root}/gen",
        )
    att = attribute(res).per_gen["all"]
    out: dict[str, Any] = {"backend": "c (CPU)", "samples": len(samples)}
    out.update({f"v[{m}]": round(x, 3) for m, x in att["values"].items()})
    out.update({f"shapley_{k}": round(x, 3) for k, x in att["shapley"].items()})
    out["synergy_a+p"] = round(att["synergy"]["pairwise"]["a+p"], 3)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if print_table:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return out
