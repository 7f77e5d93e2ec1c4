"""Screen baseline training recipes for attention-sink emergence, with a learning curve.

Trains the ``baseline`` variant through :func:`sink_probe.variants.train_variant` (zoo-cached
under its ordinary key: the weights are those the extended protocol loads) and probes the model
every ``--every`` steps on the first ``--n-probe`` held-out sequences, then probes the trained
model on all held-out sequences. The probe only observes (no gradients, no random numbers), so
the trajectory is the one an unobserved build follows.

    OMP_NUM_THREADS=1 python scripts/screen_baseline.py --weight-decay 0.5 -o wd05.json
"""

from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def summary(rep) -> dict:
    """Sink rate (layer 0, layers >= 1, all layers), per-layer sink rates and sink ratios."""
    L = len(rep.layers)
    rates = [float(r) for r in rep.sink_rate_per_layer]
    ratios = [float(rep.massive_layers[i]["sink_ratio"]) for i in rep.layers]
    return {
        "rate_per_layer": [round(r, 2) for r in rates],
        "rate_ge1": round(sum(rates[1:]) / (L - 1), 2),
        "rate_all": round(sum(rates) / L, 2),
        "sink_ratio_per_layer": [round(r, 2) for r in ratios],
        "sink_ratio": round(max(ratios), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--n-train", type=int, default=3200)
    ap.add_argument("--seq-len", type=int, default=64, help="training context (probe T = 64)")
    ap.add_argument("--n-pairs", type=int, default=3, help="key-value pairs per sequence")
    ap.add_argument("--n-queries", type=int, default=2, help="recall queries per sequence")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--n-layers", type=int, default=4)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=500, help="probe every N steps (0: never)")
    ap.add_argument("--n-probe", type=int, default=64)
    ap.add_argument("--max-eval-loss", type=float, default=4.5, help="the build's loss gate")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    import torch
    from sink_probe.data import StreamSpec
    from sink_probe.probe import probe
    from sink_probe.variants import VariantSpec, train_variant, variant_recipe

    import llmcore.zoo.train as zt
    from llmcore.errors import QualityGateError

    torch.set_num_threads(1)
    spec = VariantSpec(
        steps=args.steps, d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
        batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay,
        seed=args.seed, n_train=args.n_train, max_eval_loss=args.max_eval_loss,
        stream=StreamSpec(seq_len=args.seq_len, n_pairs=args.n_pairs, n_queries=args.n_queries),
    )  # fmt: skip
    texts = list(variant_recipe("baseline", spec).corpus.eval)
    curve: list[dict] = []
    probe_cpu = [0.0]
    t0 = cpu_seconds()
    plain = zt.objective_loss

    def observed(objective, tokenizer):
        inner = plain(objective, tokenizer)
        step = [0]

        def loss_fn(model, ids, att, gen):
            if args.every and step[0] and step[0] % args.every == 0:
                c = cpu_seconds()
                trained = c - t0 - probe_cpu[0]
                rep = probe(model, tokenizer, texts[: args.n_probe], T=64, tau_abs=None,
                            tau_ratio=50.0)  # fmt: skip
                model.train()
                probe_cpu[0] += cpu_seconds() - c
                row = {"step": step[0], "train_cpu_s": round(trained, 1), **summary(rep)}
                curve.append(row)
                print(json.dumps(row), flush=True)
            step[0] += 1
            return inner(model, ids, att, gen)

        return loss_fn

    zt.objective_loss = observed
    try:
        entry = train_variant("baseline", spec)
    except QualityGateError as exc:  # keep the curve of a model that missed the loss gate
        Path(args.output).write_text(json.dumps({"recipe": vars(args), "error": str(exc),
                                                 "curve": curve}, indent=1))  # fmt: skip
        raise
    finally:
        zt.objective_loss = plain
    train_cpu = cpu_seconds() - t0 - probe_cpu[0]
    model, tok = entry.load()
    final = summary(probe(model, tok, texts, T=64, tau_abs=None, tau_ratio=50.0))
    out = {
        "recipe": vars(args),
        "train_cpu_s": round(train_cpu, 1),
        "eval_loss": entry.metrics["eval_loss"],
        "final_train_loss": entry.metrics["final_train_loss"],
        "final": final,
        "curve": curve,
        "gate_pass": final["rate_all"] >= 30.0 and final["sink_ratio"] >= 20.0,
    }
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "curve"}), flush=True)


if __name__ == "__main__":
    main()
