"""``llmcore demo circuitprint``: a signature from the tiny protected model of the two-hop
task, then verdicts for a fine-tuned derivative, a merge and an independent model.

It uses the registered test fixtures when they are all cached, else builds demo-size models
(shorter training, a lower accuracy gate), discovers essential supernodes (inhibition of the
top-64 attributed neurons per role), runs a short trigger search and verifies the suspects
black-box (2N greedy queries each).
"""

from __future__ import annotations

import time
from typing import Any


def claim_configs(*, steps: int = 40, restarts: int = 3, max_prompts: int | None = None):
    """The discovery and trigger settings that work on the tiny two-hop models (insert of 4
    filler/relation tokens before the subject, inhibit the top-64 neurons per role, rho off)."""
    from circuitprint import task
    from circuitprint.config import DiscoverConfig, TriggerConfig

    d = DiscoverConfig(supernodes="topk", top_k=64, k_max=32, suppress_mode="inhibit")
    t = TriggerConfig(edit="insert", n_edit=4, rho=None, steps=steps, restarts=restarts,
                      vocab=tuple(task.trigger_vocabulary()), suppress_mode="inhibit",
                      answer_set=tuple(task.ANSWERS), max_prompts=max_prompts,
                      min_triggers=4, min_supernodes=1, max_share=1.0)  # fmt: skip
    return d, t


#: Probes per family and search settings of the demo signature (a short search).
DEMO_PROBES = 16
DEMO_SEARCH = {"steps": 5, "restarts": 2, "max_prompts": None}


def run(print_table: bool = True, *, use_fixtures: bool = True) -> dict[str, Any]:
    """Signature size and verdicts on a derivative, a merge and an independent model.

    Uses the registered test fixtures when they are all cached (``use_fixtures``), else
    builds demo-size models (:func:`circuitprint.tiny.build_demo_models`: fewer training steps
    and a lower accuracy gate, so a cold run fits about a minute on one CPU thread)."""
    import torch

    from circuitprint import task, tiny
    from circuitprint.pipeline import build_signature
    from circuitprint.probes import ProbeSet
    from circuitprint.verify import HFSuspect, verify

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        models = tiny.lookup_fixture_models() if use_fixtures else None
        source = "fixtures"
        if models is None:
            source = "demo"
            models = tiny.build_demo_models()
        model, tok = models["P"].load()
        dcfg, tcfg = claim_configs(**DEMO_SEARCH)
        probes = ProbeSet(task.task_probes(DEMO_PROBES))
        sig, disc = build_signature(model, tok, probes, dcfg, tcfg)
        out: dict[str, Any] = {"models": source, "n_triggers": len(sig.triggers),
                               "n_essential": len(disc.essential)}  # fmt: skip
        for name, e in models.items():
            m = model if name == "P" else e.load()[0]
            v = verify(sig, HFSuspect(m, tok))
            out[f"{name}_verdict"] = v.verdict
            out[f"{name}_tmr"] = round(v.tmr, 3)
    finally:
        torch.set_num_threads(prev)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if print_table:
        if source == "demo":
            print(f"demo-size models (P trained {tiny.DEMO_STEPS[0]} steps, accuracy gate "
                  f">= {tiny.DEMO_GATE:.2f}; the test fixtures use 300 steps and >= 0.99); "
                  f"fine-tunes: {tiny.DEMO_FT_STEPS} steps at lr {tiny.FT_LR:g}")  # fmt: skip
        else:
            print("registered test fixtures (cached): P, FT1, M-lin, I3")
        print(f"signature: {out['n_triggers']} triggers from {out['n_essential']} essential "
              f"supernode(s) (short search: {DEMO_SEARCH})")  # fmt: skip
        labels = {"P": "protected", "FT": "fine-tune", "M-lin": "merge", "I": "independent"}
        for name in models:
            print(f"  {name:>6} ({labels[name]:>11}): {out[name + '_verdict']:<12} "
                  f"TMR {out[name + '_tmr']:.2f}")  # fmt: skip
        print(f"{out['seconds']:.1f} s")
    return out
