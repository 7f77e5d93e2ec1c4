"""``pfa-learnability bench``: the conditioned sampler against rejection sampling (bins from
common to rare), tilting through the pushed PFA vs the bin mixture, ``count_distribution`` at
n = 200, B = 32, and KL evaluation time split into the LM and PFA sides."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .pfa import PFA
from .sampling import rejection_sample, sample_corpus
from .semiring import count_distribution


def _rate(fn: Any, n: int) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return n / (time.perf_counter() - t0), out


def run_bench(
    quick: bool = False, json_out: Path | None = None, plot: Path | None = None
) -> dict[str, Any]:
    """Run every benchmark once; print a table, optionally write JSON and a log-log plot."""
    n = 2000 if quick else 20000
    pfa = PFA.random(seed=3)  # n = 8, |Σ| = 6, mean length 20
    prop, B = "sym:b", 8
    Z = count_distribution(pfa, prop, B)
    rows: list[dict[str, Any]] = []
    sample_corpus(pfa, prop, mode="exact:1", n=10, B=B, seed=0)  # warm-up
    for k in range(B + 1):
        cond_rate, c = _rate(
            lambda k=k: sample_corpus(pfa, prop, mode=f"exact:{k}", n=n, B=B, seed=k), n
        )
        n_rej = max(20, min(n, int(2e5 * Z[k])))
        t0 = time.perf_counter()
        kept, _ = rejection_sample(pfa, prop, k, B, n_rej, seed=k, max_draws=4_000_000)
        rej_rate = len(kept) / (time.perf_counter() - t0)
        rows.append(
            {
                "bin": k,
                "p_bin": float(Z[k]),
                "mean_len": float(c.batch.lengths.mean()),
                "conditioned_per_s": cond_rate,
                "rejection_per_s": rej_rate,
                "speedup": cond_rate / rej_rate,
            }
        )
    nat_rate, _ = _rate(lambda: pfa.sample_batch(n, 0), n)
    push_rate, _ = _rate(lambda: sample_corpus(pfa, prop, f=2.0, n=n, seed=0), n)
    bins_rate, _ = _rate(
        lambda: sample_corpus(pfa, prop, f=2.0, n=n, B=16, seed=0, tilt_method="bins"), n
    )
    big = PFA.random(n_states=200, alphabet_size=10, out_degree=5, seed=0)
    t0 = time.perf_counter()
    count_distribution(big, "sym:a", 32)
    cd_s = time.perf_counter() - t0
    kl = _kl_timing(pfa, 500 if quick else 2000)
    res = {
        "automaton": "PFA.random(seed=3): 8 states, |Σ|=6, mean length 20",
        "property": prop,
        "B": B,
        "n_strings": n,
        "bins": rows,
        "natural_per_s": nat_rate,
        "tilt_pushed_per_s": push_rate,
        "tilt_bins_per_s": bins_rate,
        "count_distribution_n200_B32_s": cd_s,
        "kl": kl,
    }
    print(f"{'bin':>4} {'P(bin)':>10} {'len':>6} {'cond/s':>10} {'reject/s':>10} {'speedup':>8}")
    for r in rows:
        print(
            f"{r['bin']:>4} {r['p_bin']:>10.3g} {r['mean_len']:>6.1f} {r['conditioned_per_s']:>10.0f} "
            f"{r['rejection_per_s']:>10.0f} {r['speedup']:>8.2f}"
        )
    print(f"natural sampling: {nat_rate:.0f} strings/s")
    print(f"tilt f=2: pushed PFA {push_rate:.0f}/s, bin mixture {bins_rate:.0f}/s")
    print(f"count_distribution n=200 B=32: {cd_s:.3f} s")
    print(
        f"KL eval ({kl['n_eval']} strings): LM {kl['model_seconds']:.2f} s, PFA "
        f"{kl['pfa_seconds']:.2f} s ({100 * kl['pfa_share']:.1f} % PFA side)"
    )
    if json_out is not None:
        Path(json_out).write_text(json.dumps(res, indent=1) + "\n")
    if plot is not None:
        _plot(rows, plot)
    return res


def _kl_timing(pfa: PFA, n_eval: int) -> dict[str, Any]:
    import torch

    from llmcore.zoo import ModelSpec
    from llmcore.zoo.train import build_model

    from .kl import decomposed_kl
    from .neural import LMNextSymbolModel, make_tokenizer

    tok = make_tokenizer(pfa.alphabet)
    spec = ModelSpec(
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=128,
        max_position_embeddings=1024,
    )
    with torch.random.fork_rng(devices=[]):
        model = build_model(spec, tok, seed=0).eval()
    lm = LMNextSymbolModel(model, tok, pfa.alphabet, batch_size=64)
    rep = decomposed_kl(pfa, lm, "sym:b", n_eval=n_eval, seed=0, n_boot=200)
    t = rep.timings
    n_tok = int(pfa.sample_batch(n_eval, 0).lengths.sum() + n_eval)
    return {
        "n_eval": n_eval,
        "tokens": n_tok,
        "model_seconds": t["model_seconds"],
        "pfa_seconds": t["pfa_seconds"],
        "lm_tokens_per_s": n_tok / t["model_seconds"],
        "pfa_tokens_per_s": n_tok / t["pfa_seconds"],
        "pfa_share": t["pfa_seconds"] / (t["pfa_seconds"] + t["model_seconds"]),
    }


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError(
            "the plot needs matplotlib: pip install 'pfa-learnability[plot]'"
        ) from e
    p = np.array([r["p_bin"] for r in rows])
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(p, [r["conditioned_per_s"] for r in rows], "o-", label="binning-semiring sampler")
    ax.loglog(p, [r["rejection_per_s"] for r in rows], "s--", label="rejection sampling")
    ax.set_xlabel("P(bin)")
    ax.set_ylabel("strings / s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
