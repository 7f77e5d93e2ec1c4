"""``llmcore demo sink-probe``: sinks, massive activations and mixing per layer of ``tiny-llama``,
with and without zeroing the sink's value at inference.

Reuses llmcore's built-in ``tiny-llama`` (eager attention), probes 32 texts of its
corpus at T = 24 and prints one row per layer and condition.
"""

from __future__ import annotations

import time
from typing import Any

DEMO_T = 24
DEMO_TEXTS = 32


def run(print_table: bool = True) -> dict[str, Any]:
    """Per-layer sink rate, top1/median and M_nn of tiny-llama, plain and with the sink's value
    zeroed; a flat dict."""
    import torch

    from llmcore import zoo
    from sink_probe.cli import markdown_table
    from sink_probe.intervene import intervene
    from sink_probe.probe import probe

    t0 = time.perf_counter()
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        entry = zoo.build("tiny-llama", progress=False)
        model, tok = entry.load(attn_implementation="eager")
        corpus = zoo.get_recipe("tiny-llama").corpus
        texts = [
            t
            for t in (*corpus.eval, *corpus.train)
            if len(tok(t)["input_ids"]) >= DEMO_T  # the probe prepends the BOS token
        ][:DEMO_TEXTS]
        kw = dict(T=DEMO_T, tau_abs=None, tau_ratio=50.0)
        plain = probe(model, tok, texts, name="tiny-llama", **kw)
        with intervene(model, zero_sink_value=True):
            zeroed = probe(model, tok, texts, name="tiny-llama zero-sink-value", **kw)
    finally:
        torch.set_num_threads(prev)
    rows, out = [], {}
    for cond, rep in (("plain", plain), ("zero_sink_value", zeroed)):
        for i, li in enumerate(rep.layers):
            row = {
                "condition": cond,
                "layer": li,
                "sink_rate_%": rep.sink_rate_per_layer[i],
                "top1/median": rep.massive_layers[li]["top1_median"],
                "sink/median": rep.massive_layers[li]["sink_ratio"],
                "M_nn": rep.mixing[li]["M_nn"],
            }
            rows.append(row)
            out[f"{cond}_L{li}_sink_rate"] = round(row["sink_rate_%"], 2)
            out[f"{cond}_L{li}_top1_median"] = round(row["top1/median"], 2)
            out[f"{cond}_L{li}_M_nn"] = round(row["M_nn"], 4)
    out["n_texts"] = plain.n_sequences
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if print_table:
        print(markdown_table(rows))
    return out
