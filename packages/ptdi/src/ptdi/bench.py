"""``ptdi bench``: CPU timings of the statistics and the scorer, FIR/power per estimator and
alpha, and power against calibration size (the 1/(n+1) resolution floor)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def _best(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_select(n: int = 100_000, m: int = 1_000_000, seed: int = 0) -> dict[str, Any]:
    """``ptdi_select`` (n calibration, m test) next to statsmodels' BH on the same p-values."""
    from ptdi.stats import bh_select, conformal_pvalues, ptdi_select

    rng = np.random.default_rng(seed)
    cal = rng.standard_normal(n)
    test = rng.standard_normal(m) + 2.0 * (rng.random(m) < 0.5)
    p = conformal_pvalues(cal, test)
    out: dict[str, Any] = {"n": n, "m": m}
    out["ptdi_select_s"] = _best(lambda: ptdi_select(cal, test, 0.1))
    out["bh_select_s"] = _best(lambda: bh_select(p, 0.1))
    out["sort_m_s"] = _best(lambda: np.sort(p))
    try:
        from statsmodels.stats.multitest import multipletests
    except ImportError:
        out["statsmodels_s"] = None
    else:
        out["statsmodels_s"] = _best(lambda: multipletests(p, 0.1, method="fdr_bh"))
        assert np.array_equal(multipletests(p, 0.1, method="fdr_bh")[0], bh_select(p, 0.1))
    return out


def bench_evaluate(n_exp: int = 1000, m: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``evaluate`` on ``n_exp`` splits of a test set of about ``m`` points."""
    from ptdi.stats import evaluate

    rng = np.random.default_rng(seed)
    # the authors' ratios: test = 88 % of members + 6 % of non-members, 94 % calibrate
    n_mem, n_non = int(m * 0.88 / 0.88), int(m * 0.12 / 0.06)
    mem, non = rng.normal(1.5, 1, n_mem), rng.standard_normal(n_non)
    t = _best(lambda: evaluate(mem, non, n_exp=n_exp, seed=0), repeats=1)
    return {"n_exp": n_exp, "n_members": n_mem, "n_nonmembers": n_non, "evaluate_s": t}


def bench_jkbb_auto(m: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Time ratio of the stability-selected JKBB to one JKBB."""
    from ptdi.stats import jkbb_auto_pi0, jkbb_pi0

    p = np.random.default_rng(seed).random(m) ** 2
    t1 = _best(lambda: jkbb_pi0(p), repeats=20)
    t2 = _best(lambda: jkbb_auto_pi0(p, rng=0), repeats=1)
    return {"m": m, "jkbb_s": t1, "jkbb_auto_s": t2, "ratio": t2 / t1}


_SCORER_BATCH = 8


def _scorer_setup(n_texts: int, seed: int = 0) -> tuple[Any, Any, list[str], Any]:
    """A random Llama (vocab 32k, hidden 256, 2 layers), a tokenizer mapping integer words to
    their ids, ``n_texts`` texts of 128 tokens and their id matrix (BOS first)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=512,
                      num_hidden_layers=2, num_attention_heads=4, bos_token_id=1,
                      eos_token_id=2, pad_token_id=0)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg).eval()

    class _Tok:  # integer "words" map to their ids; enough for timing
        bos_token_id = 1

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [int(w) for w in text.split()]}

    rng = np.random.default_rng(seed)
    texts = [" ".join(map(str, rng.integers(3, 32000, size=128))) for _ in range(n_texts)]
    ids = torch.tensor([[1, *map(int, t.split())] for t in texts])
    return model, _Tok(), texts, ids


def _scorer_fns(model: Any, tok: Any, texts: list[str], ids: Any) -> dict[str, Any]:
    import torch

    from ptdi.scoring import MembershipScorer

    def bare():
        with torch.no_grad():
            for i in range(0, len(texts), _SCORER_BATCH):
                model(input_ids=ids[i : i + _SCORER_BATCH])

    fns = {"bare": bare}
    for name, scores in (("loss_zlib_mink", ("loss", "zlib", "mink")), ("minkpp", ("minkpp",))):
        sc = MembershipScorer(model, tok, scores=scores, batch_size=_SCORER_BATCH)
        fns[name] = lambda sc=sc: sc.score(texts)
    return fns


def scorer_peak_rss_child(what: str) -> None:
    """Print the peak resident-memory growth (MiB) of one call of ``what`` (``bare``,
    ``loss_zlib_mink`` or ``minkpp``) on one batch, in this fresh process (Linux: the kernel's
    high-water mark ``VmHWM``, reset through ``/proc/self/clear_refs``)."""
    import torch

    torch.set_num_threads(1)
    model, tok, texts, ids = _scorer_setup(_SCORER_BATCH)
    fn = _scorer_fns(model, tok, texts, ids)[what]

    def kib(field: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = kib("VmRSS:")
    fn()
    print(json.dumps({"what": what, "peak_mib": (kib("VmHWM:") - base) / 1024}))


def scorer_peak_rss() -> dict[str, float | None]:
    """Measured peak memory growth of each scorer variant and of the bare forward on one batch
    of 8 x 129 tokens, each in a fresh subprocess; ``None`` where ``/proc`` is unavailable."""
    import subprocess
    import sys

    out: dict[str, float | None] = {}
    for what in ("bare", "loss_zlib_mink", "minkpp"):
        code = f"from ptdi.bench import scorer_peak_rss_child as f; f({what!r})"
        try:
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 timeout=300, check=True)  # fmt: skip
            line = [x for x in res.stdout.splitlines() if x.startswith("{")][-1]
            out[what] = round(json.loads(line)["peak_mib"], 1)
        except (OSError, subprocess.SubprocessError, IndexError, ValueError):
            out[what] = None
    return out


def bench_scorer(n_texts: int = 64, seed: int = 0, repeats: int = 5) -> dict[str, Any]:
    """Tokens/s of :class:`MembershipScorer` against a bare forward pass (which returns the
    full logits) on a random Llama (vocab 32k, hidden 256), timed interleaved (best of
    ``repeats`` rounds, wall and process CPU time), and the measured peak memory growth."""
    model, tok, texts, ids = _scorer_setup(n_texts, seed)
    fns = _scorer_fns(model, tok, texts, ids)
    wall = dict.fromkeys(fns, float("inf"))
    cpu = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for k, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k] = min(wall[k], time.perf_counter() - t0)
            cpu[k] = min(cpu[k], time.process_time() - c0)
    n_tok = n_texts * 128
    out: dict[str, Any] = {"n_texts": n_texts, "tokens": n_tok, "bare_tok_s": n_tok / wall["bare"]}
    for name in ("loss_zlib_mink", "minkpp"):
        out[f"{name}_tok_s"] = n_tok / wall[name]
        out[f"{name}_overhead"] = wall[name] / wall["bare"] - 1
        out[f"{name}_overhead_cpu"] = cpu[name] / cpu["bare"] - 1
    out["bare_logits_mib"] = round(_SCORER_BATCH * 129 * 32000 * 4 / 2**20, 1)
    out["peak_rss_mib"] = scorer_peak_rss()
    return out


def bench_fir_power(reps: int = 500) -> list[dict[str, Any]]:
    """FIR and power per estimator and alpha at two reference cells."""
    from ptdi.stats import simulate

    rows = []
    for cell in ((200, 400, 0.5, 2.0), (300, 600, 0.94, 1.0)):
        res = simulate(*cell, alpha=(0.05, 0.1, 0.2), reps=reps, seed=0,
                       estimators=("bh", "storey", "jkbb", "jkbb_z0"))  # fmt: skip
        for est, r in res["results"].items():
            for j, a in enumerate(res["alphas"]):
                rows.append({"n,m,pi,mu": ",".join(map(str, cell)), "estimator": est, "alpha": a,
                             "FIR": round(r["fir"][j], 3), "power": round(r["power"][j], 3)})  # fmt: skip
    return rows


def bench_power_vs_n(m: int = 400, reps: int = 300) -> list[dict[str, Any]]:
    """Power against calibration size n at fixed m (pi = 0.5, shift 2, alpha = 0.1)."""
    from ptdi.stats import simulate

    rows = []
    for n in (10, 20, 50, 100, 200, 500, 1000):
        res = simulate(n, m, 0.5, 2.0, 0.1, reps=reps, seed=0, estimators=("bh", "storey", "jkbb"))
        rows.append({"n": n, **{e: round(r["power"][0], 3) for e, r in res["results"].items()}})
    return rows


def run_bench(out_dir: str | Path = "ptdi-bench", quick: bool = False, plot: bool = True) -> dict:
    """Run every part, print tables, write ``bench.json`` (and ``power_vs_n.png``)."""
    from llmcore.cli import print_table

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {}
    scale = 10 if quick else 1
    res["select"] = bench_select(100_000 // scale, 1_000_000 // scale)
    res["evaluate"] = bench_evaluate(1000 // scale, 2000)
    res["jkbb_auto"] = bench_jkbb_auto()
    res["scorer"] = bench_scorer(16 if quick else 64)
    res["fir_power"] = bench_fir_power(100 if quick else 500)
    res["power_vs_n"] = bench_power_vs_n(reps=60 if quick else 300)
    sc = res["scorer"]
    timing = [
        {"what": f"ptdi_select n={res['select']['n']} m={res['select']['m']}",
         "value": round(res["select"]["ptdi_select_s"], 3)},
        {"what": "statsmodels multipletests fdr_bh (same p)",
         "value": None if res["select"]["statsmodels_s"] is None
         else round(res["select"]["statsmodels_s"], 3)},
        {"what": "bh_select alone", "value": round(res["select"]["bh_select_s"], 3)},
        {"what": "one sort of m", "value": round(res["select"]["sort_m_s"], 3)},
        {"what": f"evaluate n_exp={res['evaluate']['n_exp']}",
         "value": round(res["evaluate"]["evaluate_s"], 3)},
        {"what": "jkbb_auto / jkbb time ratio", "value": round(res["jkbb_auto"]["ratio"], 1)},
        {"what": "scorer overhead loss/zlib/mink (wall; CPU)",
         "value": f"{sc['loss_zlib_mink_overhead']:+.3f}; {sc['loss_zlib_mink_overhead_cpu']:+.3f}"},
        {"what": "scorer overhead minkpp (wall; CPU)",
         "value": f"{sc['minkpp_overhead']:+.3f}; {sc['minkpp_overhead_cpu']:+.3f}"},
        *({"what": f"peak memory growth MiB, {k} (one batch 8 x 129)", "value": v}
          for k, v in sc["peak_rss_mib"].items()),
    ]  # fmt: skip
    print_table(timing)
    print_table(res["fir_power"])
    print_table(res["power_vs_n"])
    (out_dir / "bench.json").write_text(json.dumps(res, indent=2))
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib missing (pip install 'ptdi[bench]'): no plot")
        else:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            ns = [r["n"] for r in res["power_vs_n"]]
            for e in ("bh", "storey", "jkbb"):
                ax.plot(ns, [r[e] for r in res["power_vs_n"]], marker="o", label=e)
            ax.set_xscale("log")
            ax.set_xlabel("calibration size n")
            ax.set_ylabel("power (m=400, pi=0.5, alpha=0.1)")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out_dir / "power_vs_n.png", dpi=120)
    return res
