"""``sink-probe`` command line: measure, intervene, train-variant, compare, bench.

``sink-probe --help`` imports neither torch nor transformers (heavy imports live in the commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

VARIANT_NAMES = (
    "baseline", "kv_bias", "k_bias_only", "gate", "attn_out_norm", "qk_norm", "zero_sink_value", "suppress_massive",
    "suppress_massive+zero_sink_value",
)  # fmt: skip


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _tau_abs(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def load_model(name: str, dtype: str = "float32"):
    """``(model, tokenizer)`` with eager attention: a hub id or path, or ``zoo:RECIPE``."""
    from llmcore.models import load_model_and_tokenizer
    from sink_probe.kv_bias import register

    register()
    if name.startswith("zoo:"):
        from llmcore import zoo

        return zoo.build(name[4:], progress=False).load(dtype=dtype, attn_implementation="eager")
    return load_model_and_tokenizer(name, dtype=dtype, attn_implementation="eager")


def _texts(args: argparse.Namespace) -> list[str]:
    from sink_probe.data import dataset_texts, read_texts, stream_texts
    from sink_probe.errors import SinkProbeConfigError

    given = [x for x in (args.data, args.dataset, args.synthetic) if x]
    if len(given) != 1:
        raise SinkProbeConfigError(
            "pass exactly one text source: --data texts.jsonl, --dataset NAME or --synthetic N"
        )
    if args.data:
        return read_texts(args.data, limit=args.limit)
    if args.dataset:
        return dataset_texts(
            args.dataset, config=args.dataset_config, split=args.split, limit=args.limit or 256
        )
    return stream_texts(args.synthetic, seed=args.seed)


def _add_data(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("texts and measurement")
    g.add_argument("--model", required=True, help="hub id, local path, or zoo:RECIPE")
    g.add_argument("--data", help='JSONL file of {"text": ...} rows')
    g.add_argument("--dataset", help="a datasets hub name (needs the datasets extra)")
    g.add_argument("--dataset-config", default=None)
    g.add_argument("--split", default="validation")
    g.add_argument("--synthetic", type=int, default=0, help="N synthetic stream sequences")
    g.add_argument("--limit", type=int, default=None, help="at most this many texts")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--T", type=int, default=64, help="tokens per sample (default 64)")
    g.add_argument("--eps", type=float, default=0.3, help="sink-rate threshold (default 0.3)")
    g.add_argument("--tau-abs", type=_tau_abs, default=100.0, help="absolute massive threshold "
                   "or 'none' (default 100)")  # fmt: skip
    g.add_argument("--tau-ratio", type=float, default=1000.0, help="massive ratio to the median "
                   "(default 1000; 50 with --tau-abs none for tiny models)")  # fmt: skip
    g.add_argument("--layers", type=_ints, default=None, help="e.g. 2,3 (default all)")
    g.add_argument("--sink-set", type=_ints, default=[0], help="sink positions (default 0)")
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    g.add_argument("--naive", action="store_true", help="output_attentions=True path")
    g.add_argument("--require-bos", action="store_true",
                   help="error when the tokenizer adds no BOS (a moving sink set)")  # fmt: skip


def _probe(model, tok, texts, args, layers=None):
    from sink_probe.probe import probe

    return probe(
        model, tok, texts, T=args.T, layers=layers or "all", sink_set=tuple(args.sink_set),
        batch_size=args.batch_size, stream=not args.naive, eps=args.eps, tau_abs=args.tau_abs,
        tau_ratio=args.tau_ratio, name=args.model,
    )  # fmt: skip


def _ppl(model, tok, texts, args) -> float:
    from llmcore.metrics import perplexity
    from sink_probe.probe import encode_texts

    ids, _ = encode_texts(tok, texts, args.T)
    return float(perplexity(model, ids, batch_size=args.batch_size).ppl)


def _cmd_measure(args: argparse.Namespace) -> int:
    from sink_probe.probe import check_bos

    model, tok = load_model(args.model, args.dtype)
    check_bos(tok, require_bos=args.require_bos)
    texts = _texts(args)
    rep = _probe(model, tok, texts, args, args.layers)
    if args.ppl:
        rep.ppl = _ppl(model, tok, texts, args)
    print(rep.table())
    if args.output:
        rep.save(args.output)
    return 0


def _cmd_intervene(args: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json
    from sink_probe.errors import SinkProbeConfigError
    from sink_probe.intervene import intervene, massive_means
    from sink_probe.probe import check_bos

    model, tok = load_model(args.model, args.dtype)
    if args.zero_sink_value or args.suppress_massive is not None:
        check_bos(tok, require_bos=args.require_bos)
    texts = _texts(args)
    means = None
    if args.massive == "set_mean":
        means = massive_means(model, tok, texts, layers=args.layers, T=args.T,
                              tau_abs=args.tau_abs, tau_ratio=args.tau_ratio)  # fmt: skip
    kw: dict[str, Any] = dict(
        zero_sink_value=args.zero_sink_value, massive=args.massive, massive_means=means,
        suppress_massive=args.suppress_massive, drop_sink_attention=args.drop_sink_attention,
        scale_sink_logits=args.scale_sink_logits, layers=args.layers,
        sink_set=tuple(args.sink_set), tau_abs=args.tau_abs, tau_ratio=args.tau_ratio,
    )  # fmt: skip
    out: dict[str, Any] = {
        "model": args.model,
        "intervention": {k: v for k, v in kw.items() if k != "massive_means"},
    }
    evals = [e for e in (args.eval or "").split(",") if e]
    for phase in ("before", "after"):
        ctx = intervene(model, **kw) if phase == "after" else intervene(model)
        with ctx as stats:
            rep = _probe(model, tok, texts, args)
            res: dict[str, Any] = {"report": rep.to_dict()}
            for ev in evals:
                if ev == "ppl":
                    res["ppl"] = _ppl(model, tok, texts, args)
                elif ev.startswith("lm-eval:"):
                    from llmcore.lmeval import evaluate_model, scores

                    r = evaluate_model(model, tok, ev[8:], limit=args.eval_limit,
                                       include_path=args.eval_include or None,
                                       bootstrap_iters=0)  # fmt: skip
                    res[ev] = scores(r)
                else:
                    raise SinkProbeConfigError(f"--eval takes ppl or lm-eval:TASK, got {ev!r}")
            if stats["seen"]:
                res["clip_fraction"] = stats["clipped"] / stats["seen"]
        out[phase] = res
        print(f"## {phase}\n" + rep.table())
        for k, v in res.items():
            if k != "report":
                print(f"{k}: {v}")
    if args.output:
        atomic_write_json(Path(args.output), out)
    return 0


def _cmd_train_variant(args: argparse.Namespace) -> int:
    import shutil

    from llmcore.data import atomic_write_json
    from sink_probe.probe import probe
    from sink_probe.variants import VariantSpec, train_variant, variant_recipe

    spec = VariantSpec(
        steps=args.steps, d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
        lr=args.lr, clamp=args.clamp, seed=args.seed, batch_size=args.batch_size,
        weight_decay=args.weight_decay, n_train=args.n_train,
    )  # fmt: skip
    entry = train_variant(args.variant, spec, progress=True)
    model, tok = entry.load()
    texts = list(variant_recipe(args.variant, spec).corpus.eval)
    rep = probe(model, tok, texts, T=spec.stream.seq_len, tau_abs=None, tau_ratio=50.0,
                name=f"{args.variant}")  # fmt: skip
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for f in entry.path.iterdir():
        if f.is_file():
            shutil.copy2(f, out / f.name)
    atomic_write_json(out / "report.json", {
        "variant": args.variant, "metrics": entry.metrics, "report": rep.to_dict(),
    })  # fmt: skip
    print(rep.table())
    print(json.dumps({k: entry.metrics[k] for k in ("eval_loss", "train_clip_fraction")}))
    return 0


def compare_rows(runs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """One row per run folder (its ``report.json``): the variant table of the protocol."""
    from sink_probe.errors import SinkProbeInputError
    from sink_probe.probe import ProbeReport

    rows = []
    for r in runs:
        f = Path(r) / "report.json"
        if not f.is_file():
            raise SinkProbeInputError(f"{f} not found; pass folders written by train-variant")
        d = json.loads(f.read_text())
        rep = ProbeReport.from_dict(d["report"])
        last = rep.layers[-1]
        ge1 = rep.sink_rate_per_layer[1:] or rep.sink_rate_per_layer
        rows.append({
            "variant": d.get("variant", str(r)),
            "sink/median (max over layers)": max(m["sink_ratio"] for m in rep.massive_layers.values()),
            "SinkRate(0) L0": rep.sink_rate_per_layer[0],
            "SinkRate(0) L>=1": sum(ge1) / len(ge1),
            "M_nn": sum(rep.mixing[i]["M_nn"] for i in rep.layers) / len(rep.layers),
            "C_sn": sum(rep.mixing[i]["C_sn"] for i in rep.layers) / len(rep.layers),
            "U_ns": sum(rep.mixing[i]["U_ns"] for i in rep.layers) / len(rep.layers),
            "r^L": rep.mixing[last]["r"],
            "val loss": d.get("metrics", {}).get("eval_loss"),
            "clip (train)": d.get("metrics", {}).get("train_clip_fraction"),
        })  # fmt: skip
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts as a Markdown table."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{v:.3g}" if isinstance(v, float) else ("" if v is None else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cmd_compare(args: argparse.Namespace) -> int:
    table = markdown_table(compare_rows(args.runs))
    print(table)
    if args.output:
        from llmcore.data import atomic_write_text

        atomic_write_text(Path(args.output), table + "\n")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from sink_probe.bench import run_bench

    run_bench(
        model=args.model, lengths=tuple(args.lengths), batch_size=args.batch_size,
        out_json=args.output, plot=args.plot, train_steps=args.train_steps, reps=args.reps,
    )  # fmt: skip
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sink-probe",
        description="Attention sinks, massive activations and token mixing: measure and intervene.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("measure", help="sink rate, massive activations, mixing per layer")
    _add_data(m)
    m.add_argument("--ppl", action="store_true", help="also report perplexity on the texts")
    m.add_argument("-o", "--output", help="report JSON path")
    m.set_defaults(func=_cmd_measure)

    i = sub.add_parser("intervene", help="measure before/after inference-time interventions")
    _add_data(i)
    i.add_argument("--zero-sink-value", action="store_true")
    i.add_argument("--massive", choices=("set_zero", "set_mean"), default=None)
    i.add_argument("--suppress-massive", type=float, default=None, metavar="C",
                   help="clamp sink residual entries to C x median |x|")  # fmt: skip
    i.add_argument("--drop-sink-attention", action="store_true")
    i.add_argument("--scale-sink-logits", type=float, default=None, metavar="GAMMA")
    i.add_argument("--eval", default="ppl", help="comma list of ppl and lm-eval:TASK")
    i.add_argument("--eval-limit", type=int, default=None, help="lm-eval examples per task")
    i.add_argument("--eval-include", action="append", default=[], metavar="DIR",
                   help="folder of local lm-eval YAML tasks (repeatable)")  # fmt: skip
    i.add_argument("-o", "--output", help="result JSON path")
    i.set_defaults(func=_cmd_intervene)

    t = sub.add_parser("train-variant", help="train (zoo-cached) a tiny variant and probe it")
    t.add_argument("--variant", choices=VARIANT_NAMES, required=True)
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--d-model", type=int, default=64)
    t.add_argument("--n-layers", type=int, default=3)
    t.add_argument("--n-heads", type=int, default=4)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay")
    t.add_argument("--n-train", type=int, default=3200, help="training sequences")
    t.add_argument("--clamp", type=float, default=10.0, help="suppress_massive level c")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("-o", "--output", required=True, help="run folder")
    t.set_defaults(func=_cmd_train_variant)

    c = sub.add_parser("compare", help="variant table from train-variant folders")
    c.add_argument("runs", nargs="+")
    c.add_argument("-o", "--output", help="Markdown path")
    c.set_defaults(func=_cmd_compare)

    b = sub.add_parser("bench", help="probe overhead and memory vs a plain forward")
    b.add_argument("--model", default="zoo:tiny-llama")
    b.add_argument("--lengths", type=int, nargs="+", default=[64, 512, 2048])
    b.add_argument("--batch-size", type=int, default=1)
    b.add_argument("--train-steps", type=int, default=50,
                   help="timed steps per variant for the tokens/s column, after 5 warm-up "
                   "steps, best of 2 rounds (0: skip)")  # fmt: skip
    b.add_argument("--reps", type=int, default=3,
                   help="timed forwards per path and length; the fastest is reported")  # fmt: skip
    b.add_argument("--plot", default=None, help="PNG path (needs the plot extra)")
    b.add_argument("-o", "--output", default=None, help="JSON path")
    b.set_defaults(func=_cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("sink-probe", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
