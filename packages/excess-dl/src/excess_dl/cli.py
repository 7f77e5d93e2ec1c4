"""``excess-dl`` command line: compute, sweep, toy, report, capacity, bench.

``--help`` imports neither torch nor transformers; commands import what they need.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from llmcore.cli import run_main
from llmcore.config import add_config_arguments, config_from_args

_LIST_FLAGS = ("--checkpoints", "--block-sizes", "--block-fractions", "--blocks")
_ALIASES = {"--blocks": "--block-fractions", "--random-k": "--random-params-k"}
_VALUE_ALIASES = {"single-pass": "single_pass", "random-params": "random_params"}
_METHOD_SPLIT = re.compile(r",(?=\s*(?:full|lora|random[-_]params|prompt)\b)")


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Spec-style spellings -> EDLConfig flags: comma lists, ``single-pass``, ``--blocks``."""
    out: list[str] = []
    flag = ""

    def value(v: str) -> None:
        if flag in _LIST_FLAGS or flag == "--block-fractions":
            out.extend(x for x in v.split(",") if x)
        elif flag in ("--mode", "--method"):
            out.append(_VALUE_ALIASES.get(v, v))
        else:
            out.append(v)

    for a in argv:
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            flag = _ALIASES.get(name, name)
            out.append(flag)
            if eq:
                value(val)
        else:
            value(a)
    return out


def _config(args: argparse.Namespace):
    from excess_dl.config import EDLConfig

    cfg = config_from_args(EDLConfig, args)
    lora = dict(cfg.lora)
    if getattr(args, "lora_r", None) is not None:
        lora["r"] = args.lora_r
    if getattr(args, "lora_targets", None) is not None:
        t = args.lora_targets
        lora["target_modules"] = t if t == "all-linear" else t.split(",")
    if lora != cfg.lora:
        d = cfg.to_dict()
        d["lora"] = lora
        cfg = EDLConfig(**d)
    return cfg


def cmd_compute(args: argparse.Namespace) -> int:
    from excess_dl.edl import compute_edl
    from llmcore.data import atomic_write_text

    cfg = _config(args)
    curve = compute_edl(args.model, str(args.train), str(args.test), cfg, args.tokenizer)
    atomic_write_text(args.out, curve.to_json() + "\n")
    last = curve.points[-1]
    print(
        f"{curve.method} ({curve.mode}, {curve.trainable_params} trainable): n={last.n} "
        f"EDL={last.edl_bits:.1f} bits, MDL={last.mdl_bits:.1f}, test "
        f"{last.test_bits_per_example:.3f} bits/example (base "
        f"{last.base_test_bits_per_example:.3f}) -> {args.out}"
    )
    return 0


def parse_methods(text: str) -> list[str]:
    """``full,lora:r=1:targets=q_proj,v_proj,random-params:k=100`` -> three method specs."""
    return [m.strip() for m in _METHOD_SPLIT.split(text) if m.strip()]


def cmd_sweep(args: argparse.Namespace) -> int:
    from excess_dl.config import parse_method_spec
    from excess_dl.data import normalize_examples
    from excess_dl.edl import _load, compute_edl
    from llmcore.data import ResultsWriter

    base = _config(args)
    model, tok = _load(args.model, args.tokenizer, base)
    ns = sorted({int(x) for x in args.ns.split(",")}) if args.ns else None
    pool = normalize_examples(str(args.train_pool), tok, name="train_pool")
    if ns:
        pool = pool[: ns[-1]]
    n = len(pool)
    writer = ResultsWriter(args.out, id_key="id")
    for spec in parse_methods(args.methods):
        cfg = parse_method_spec(spec, base)
        if ns:
            cfg.checkpoints = ns
        rid = f"{args.task}|{cfg.label()}|{n}"
        if writer.is_done(rid):
            print(f"skip {rid} (done)")
            continue
        curve = compute_edl(model, pool, str(args.test), cfg, tok, task=args.task)
        writer.write({"id": rid, **curve.to_dict()})
        last = curve.points[-1]
        print(f"{rid}: EDL={last.edl_bits:.1f} bits, G={last.loss_gap_closed:.3f}")
    return 0


def _read_curves(path: Path):
    from excess_dl.curve import EDLCurve
    from llmcore.data import read_jsonl

    return [EDLCurve.from_dict(r) for r in read_jsonl(path)]


def cmd_report(args: argparse.Namespace) -> int:
    from excess_dl.analysis import format_table, info_performance_table, teach_elicit_ratios

    curves = _read_curves(args.sweep)
    targets = [float(t) for t in args.targets.split(",")]
    print(format_table(info_performance_table(curves, targets, args.metric)))
    ratios = teach_elicit_ratios(curves, targets, args.metric)
    if ratios:
        print()
        print(format_table(ratios))
    return 0


def cmd_capacity(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from excess_dl.analysis import fit_capacity, format_table

    rows = []
    for c in _read_curves(args.sweep):
        fit = fit_capacity(c)
        rows.append(
            {
                "task": c.task,
                "method": c.method,
                "trainable_params": c.trainable_params,
                **asdict(fit),
            }
        )
    print(format_table(rows))
    return 0


def cmd_toy(args: argparse.Namespace) -> int:
    import os

    if args.cache_dir:
        os.environ["LLMCORE_CACHE_DIR"] = str(args.cache_dir)
    from excess_dl.analysis import format_table
    from excess_dl.toy import BaseSpec, run_toy
    from llmcore.data import atomic_write_text, write_jsonl

    cfg = _config(args)
    res = run_toy(
        args.tasks.split(","),
        parse_methods(args.methods),
        args.n,
        spec=BaseSpec(steps=args.pretrain_steps),
        config=cfg,
        seed=cfg.seed,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "curves.jsonl", [c.to_dict() for c in res["curves"]])
    summary = "\n\n".join(
        [
            "## loss-gap closed\n\n" + format_table(res["table"]),
            "## accuracy\n\n" + format_table(res["accuracy_table"]),
            "## teach / elicit\n\n" + format_table(res["ratios"] + res["ratios_accuracy"]),
        ]
    )
    atomic_write_text(out / "summary.md", summary + "\n")
    from excess_dl.bench import plot_curves

    plot_curves(res["curves"], out / "curves.png")
    print(summary)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from excess_dl.bench import run_bench

    run_bench(n=args.n, json_out=args.json_out, plot=args.plot, trl=not args.no_trl)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from excess_dl.config import EDLConfig

    p = argparse.ArgumentParser(
        prog="excess-dl",
        description="Excess description length: the bits fine-tuning writes into a model.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    def with_config(sp: argparse.ArgumentParser) -> None:
        add_config_arguments(sp, EDLConfig)
        sp.add_argument("--lora-r", type=int, default=None, help="LoRA rank (overrides --lora)")
        sp.add_argument(
            "--lora-targets", default=None, help="LoRA target modules, comma list or all-linear"
        )

    c = sub.add_parser("compute", help="EDL curve of one method on train/test JSONL")
    c.add_argument("--model", required=True, help="hub id or local path")
    c.add_argument("--train", type=Path, required=True, help="training JSONL")
    c.add_argument("--test", type=Path, required=True, help="held-out JSONL")
    c.add_argument("--tokenizer", default=None, help="tokenizer id/path (default: the model's)")
    c.add_argument("--out", type=Path, default=Path("curve.json"))
    with_config(c)
    c.set_defaults(func=cmd_compute)

    s = sub.add_parser("sweep", help="one curve per method, resumable JSONL")
    s.add_argument("--model", required=True)
    s.add_argument("--train-pool", type=Path, required=True)
    s.add_argument("--test", type=Path, required=True)
    s.add_argument("--tokenizer", default=None)
    s.add_argument("--ns", default=None, help="checkpoints, e.g. 1,2,4,...,256")
    s.add_argument("--methods", default="full", help="e.g. full,lora:r=1:targets=v_proj")
    s.add_argument("--task", default="task", help="task name written in every row")
    s.add_argument("--out", type=Path, default=Path("sweep.jsonl"))
    with_config(s)
    s.set_defaults(func=cmd_sweep)

    t = sub.add_parser("toy", help="the toy elicit-versus-teach experiment")
    t.add_argument("--tasks", default="elicit,teach")
    t.add_argument("--methods", default="full,lora:r=1:targets=v_proj")
    t.add_argument("--pretrain-steps", type=int, default=400)
    t.add_argument("--n", type=int, default=256)
    t.add_argument("--cache-dir", type=Path, default=None, help="zoo cache (LLMCORE_CACHE_DIR)")
    t.add_argument("--out", type=Path, default=Path("edl-toy"))
    with_config(t)
    t.set_defaults(func=cmd_toy)

    r = sub.add_parser("report", help="bits-to-target table and teach/elicit ratios")
    r.add_argument("sweep", type=Path)
    r.add_argument("--targets", default="0.5,0.8,0.9")
    r.add_argument(
        "--metric",
        default="loss_gap_closed",
        choices=["loss_gap_closed", "accuracy", "fraction_of_max"],
    )
    r.set_defaults(func=cmd_report)

    k = sub.add_parser("capacity", help="capacity fits EDL(n) ~ C n / (n + n0)")
    k.add_argument("sweep", type=Path)
    k.set_defaults(func=cmd_capacity)

    b = sub.add_parser("bench", help="cost of the learners against plain fine-tuning (toy base)")
    b.add_argument("--n", type=int, default=128, help="training examples")
    b.add_argument("--json-out", type=Path, default=None)
    b.add_argument("--plot", type=Path, default=None, help="PNG of EDL vs loss-gap closed")
    b.add_argument("--no-trl", action="store_true", help="skip the TRL SFTTrainer baseline")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = normalize_argv(sys.argv[1:] if argv is None else argv)
    return run_main("excess-dl", build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
