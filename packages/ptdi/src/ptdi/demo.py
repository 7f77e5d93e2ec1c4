"""``llmcore demo ptdi``: a tiny model trained on known members, selected at alpha = 0.1.

The demo loads (or builds, about 20-40 s cold on one thread) the demo-size members-only model of
:mod:`ptdi.tiny` (300 documents, 150 of them members), scores its documents with the loss score,
and over 200 random splits (75 calibration non-members, test = the other 75 non-members +
members at share 0.5 or 0.9) selects with plain BH, Storey-scaled BH and PTDI (JKBB, z = 1),
printing FIR and power.
"""

from __future__ import annotations

import time
from typing import Any


def run(print_table: bool = True, n_splits: int = 200) -> dict[str, Any]:
    """FIR and power of BH / storey / PTDI on the tiny model; a flat dict."""
    import numpy as np
    import torch

    from ptdi.stats import bh_select, conformal_pvalues, jkbb_pi0, selection_metrics, storey_pi0
    from ptdi.tiny import (
        DEMO_DOCS,
        DEMO_STEPS,
        auc,
        build_members_model,
        model_splits,
        score_language,
    )

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tok = build_members_model(DEMO_STEPS, n_docs=DEMO_DOCS).load()
        sc, labels = score_language(model, tok, scores=("loss",), n_docs=DEMO_DOCS)
    finally:
        torch.set_num_threads(prev)
    s = sc["loss"]
    out: dict[str, Any] = {"alpha": 0.1, "loss_auc": round(auc(s[labels == 1], s[labels == 0]), 3)}
    rows = []
    for pi in (0.5, 0.9):
        cal, test, lab = model_splits(
            s, labels, pi, n_splits=n_splits, seed=0, n_cal=DEMO_DOCS // 4
        )
        p = conformal_pvalues(cal, test)
        for est, pi0 in (("bh", 1.0), ("storey", storey_pi0(p)), ("ptdi", jkbb_pi0(p))):
            met = selection_metrics(bh_select(p, 0.1, scale=np.asarray(pi0)), lab)
            fir, power = float(met["FDP"].mean()), float(met["Power"].mean())
            rows.append({"pi": pi, "method": est, "FIR": round(fir, 3), "power": round(power, 3)})
            out[f"pi{pi}_{est}_fir"] = round(fir, 4)
            out[f"pi{pi}_{est}_power"] = round(power, 4)
    if print_table:
        from llmcore.cli import print_table as pt

        pt(rows)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out
