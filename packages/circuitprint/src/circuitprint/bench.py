"""``circuitprint bench``: one run on the tiny protected model P.

Measures attribution patching against activation patching (forward equivalents and
wall-clock), seconds per accepted trigger and the acceptance rate, the verification cost
(2N black-box queries) beside what the baselines need, every score on each model, the peak
memory, and a small fine-tuning sweep (scores against learning rate and steps).
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

#: What each fingerprint needs from the suspect.
NEEDS = {
    "circuitprint": "2N black-box queries (top-1 answers)",
    "REEF CKA": "white-box hidden states on shared prompts",
    "PCS / HuRef": "the suspect's weights",
    "IF": "implanting keys by fine-tuning before release (invasive)",
}


def run_bench(out: str | Path = "circuitprint-bench", *, plot: bool = True,
              sweep: tuple[tuple[float, int], ...] = ((1e-4, 100), (1e-4, 500), (5e-4, 100),
                                                      (5e-4, 500))) -> dict[str, Any]:  # fmt: skip
    """Run the benchmark, print the table, write ``bench.json`` (and ``sweep.png``)."""
    import copy

    import torch

    from circuitprint import baselines as B
    from circuitprint import fixtures, task, tiny, transforms
    from circuitprint.circuits import activation_patching, attribute
    from circuitprint.demo import claim_configs
    from circuitprint.pipeline import build_signature
    from circuitprint.probes import ProbeSet
    from circuitprint.verify import HFSuspect, verify

    torch.set_num_threads(1)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {}
    p = fixtures.build_protected()
    ft1, ft2, lora, mlin, mties = fixtures.build_derivatives()
    i1, i3 = fixtures.build_independent_1(), fixtures.build_independent_3()
    model, tok = p.load()

    # 1. attribution patching vs activation patching
    probes = ProbeSet(task.task_probes(2, seed=5)[:10])
    t = time.perf_counter()
    tab = attribute(model, tok, probes)
    t_attr = time.perf_counter() - t
    n_nodes = len(tab.nodes)
    t = time.perf_counter()
    activation_patching(model, tok, probes, tab, list(range(n_nodes)), range(2))
    t_patch = (time.perf_counter() - t) / 2 * len(probes)
    res["attribution"] = {
        "nodes": n_nodes, "prompts": len(probes),
        "forward_equivalents_attribution": 3 * len(probes),
        "forward_equivalents_patching": n_nodes * len(probes),
        "ratio": n_nodes / 3, "seconds_attribution": t_attr,
        "seconds_patching_extrapolated": t_patch, "wall_ratio": t_patch / t_attr,
    }  # fmt: skip

    # 2. signature
    dcfg, tcfg = claim_configs()
    t = time.perf_counter()
    sig, _disc = build_signature(model, tok, ProbeSet(task.task_probes(16)), dcfg, tcfg,
                                reference_models=[i1.load()[0]])  # fmt: skip
    st = sig.stats
    res["triggers"] = {"seconds_total": time.perf_counter() - t, "searches": st["searches"],
                       "accepted": st["accepted"], "acceptance_rate": st["accepted"] / max(1, st["searches"]),
                       "seconds_per_accepted": st["seconds"] / max(1, st["accepted"]),
                       "n_signature": len(sig.triggers)}  # fmt: skip

    # 3. every score on each model
    models = {"P": model, "FT1": ft1.load()[0], "FT2": ft2.load()[0], "LoRA": lora.load()[0],
              "M-lin": mlin.load()[0], "M-ties": mties.load()[0], "I1": i1.load()[0],
              "I3": i3.load()[0], "perm(P)": transforms.permute_neurons(model),
              "int8(P)": transforms.quantize_int8(model),
              "prune20(P)": transforms.prune_magnitude(model, 0.2)}  # fmt: skip
    clean = [ex.prompt for ex in task.sample_examples(500, seed=77)]
    rows = {}
    for name, m in models.items():
        t = time.perf_counter()
        v = verify(sig, HFSuspect(m, tok))
        dt = time.perf_counter() - t
        rows[name] = {"verdict": v.verdict, "tmr": v.tmr, "verify_seconds": dt,
                      "queries": 2 * len(sig.triggers), "pcs": _safe(B.pcs, model, m),
                      "huref_ics": _safe(B.huref_ics, model, m),
                      "reef_cka": B.reef_cka(model, m, tok, clean[:200]),
                      "agreement": B.output_agreement(model, m, tok, clean)}  # fmt: skip
    res["models"] = rows

    # 4. Instructional Fingerprinting: implant into P, FSR before/after a fine-tune, accuracy cost
    ifp = B.InstructionalFingerprint(output="A0")
    vocab = task.FILLERS + task.RELATIONS
    docs = [ex.document for ex in task.sample_examples(60, seed=3)]
    t = time.perf_counter()
    im = ifp.implant(model, tok, docs, vocab)
    t_if = time.perf_counter() - t
    ev = task.sample_examples(256, seed=98)
    im_ft = copy.deepcopy(im)
    transforms.finetune(im_ft, tok, tiny._ft_docs(0, 1, 4000), lr=1e-4, steps=500, seed=1)
    res["instructional_fingerprint"] = {
        "fsr_implanted": ifp.fsr(im, tok, vocab), "fsr_after_ft": ifp.fsr(im_ft, tok, vocab),
        "fsr_P": ifp.fsr(model, tok, vocab), "implant_seconds": t_if,
        "clean_accuracy_P": tiny.task_accuracy(model, tok, ev),
        "clean_accuracy_implanted": tiny.task_accuracy(im, tok, ev),
    }  # fmt: skip

    # 5. fine-tuning sweep
    sweep_rows = []
    for lr, steps in sweep:
        m, _ = p.load()
        transforms.finetune(m, tok, tiny._ft_docs(0, 1, 4000), lr=lr, steps=steps, seed=1)
        v = verify(sig, HFSuspect(m, tok))
        sweep_rows.append({"lr": lr, "steps": steps, "tmr": v.tmr, "pcs": B.pcs(model, m),
                           "reef_cka": B.reef_cka(model, m, tok, clean[:200])})  # fmt: skip
    res["sweep"] = sweep_rows
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (outdir / "bench.json").write_text(json.dumps(res, indent=2, default=float))
    _print(res)
    if plot:
        _plot(sweep_rows, outdir / "sweep.png")
    return res


def _safe(fn: Any, *args: Any) -> float:
    """A weight baseline, or NaN where the two models share no comparable weights."""
    from circuitprint.errors import MergeError

    try:
        return fn(*args)
    except (MergeError, AttributeError):
        return float("nan")


def _print(res: dict[str, Any]) -> None:
    a, t = res["attribution"], res["triggers"]
    print(f"attribution: {a['nodes']} nodes x {a['prompts']} prompts: "
          f"{a['forward_equivalents_attribution']} vs {a['forward_equivalents_patching']} forward "
          f"equivalents ({a['ratio']:.0f}x fewer); wall {a['seconds_attribution']:.2f} s vs "
          f"{a['seconds_patching_extrapolated']:.1f} s ({a['wall_ratio']:.0f}x)")  # fmt: skip
    print(f"triggers: {t['accepted']}/{t['searches']} searches accepted "
          f"({t['acceptance_rate']:.2f}), {t['seconds_per_accepted']:.2f} s per accepted, "
          f"signature N = {t['n_signature']}")  # fmt: skip
    print(
        "| model | verdict | TMR | verify s (2N queries) | PCS | HuRef ICS | REEF CKA | agreement |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, r in res["models"].items():
        print(f"| {n} | {r['verdict']} | {r['tmr']:.2f} | {r['verify_seconds']:.3f} ({r['queries']}) | "
              f"{r['pcs']:.3f} | {r['huref_ics']:.3f} | {r['reef_cka']:.3f} | {r['agreement']:.3f} |")  # fmt: skip
    f = res["instructional_fingerprint"]
    print(f"IF: FSR implanted {f['fsr_implanted']:.2f}, after FT {f['fsr_after_ft']:.2f}, on P "
          f"{f['fsr_P']:.2f}; clean accuracy {f['clean_accuracy_P']:.3f} -> "
          f"{f['clean_accuracy_implanted']:.3f}")  # fmt: skip
    for r in res["sweep"]:
        print(f"sweep lr {r['lr']:g} steps {r['steps']}: TMR {r['tmr']:.2f} PCS {r['pcs']:.3f} "
              f"CKA {r['reef_cka']:.3f}")  # fmt: skip
    print(f"peak RSS {res['peak_rss_mb']:.0f} MB; needs: {NEEDS}")


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - optional extra
        print("matplotlib not installed (pip install 'circuitprint[plot]'); no plot")
        return
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for lr in sorted({r["lr"] for r in rows}):
        rr = [r for r in rows if r["lr"] == lr]
        for key, ls in (("tmr", "-o"), ("pcs", "--s"), ("reef_cka", ":^")):
            ax.plot([r["steps"] for r in rr], [r[key] for r in rr], ls, label=f"{key} lr {lr:g}")
    ax.set_xlabel("fine-tuning steps")
    ax.set_ylabel("score")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")
