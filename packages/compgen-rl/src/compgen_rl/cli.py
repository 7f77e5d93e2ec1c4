"""``compgen-rl`` command line: make-data, sft, rl, rft, eval, protocol, bench.

``compgen-rl --help`` imports neither torch nor transformers (heavy imports live in commands).
Errors of this package print ``compgen-rl: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROG = "compgen-rl"


def _load(model: str, data_rows: list[dict[str, Any]] | None = None) -> tuple[Any, Any]:
    """An HF id / path through llmcore, or a fresh tiny Llama (``tiny``) with a
    one-token-per-character byte-level tokenizer."""
    if model == "tiny":
        from llmcore import zoo
        from llmcore.zoo.train import build_model

        texts = [r["prompt"] + r["completion"] for r in (data_rows or [])[:2000]] or [
            "x=abcd p=r0.k0\n"
        ]
        tok = zoo.train_bpe_tokenizer(texts, 264)
        spec = zoo.ModelSpec(
            hidden_size=128,
            num_layers=2,
            num_heads=4,
            intermediate_size=512,
            max_position_embeddings=64,
            tie_word_embeddings=True,
        )
        return build_model(spec, tok, seed=0), tok
    from llmcore import load_model_and_tokenizer

    return load_model_and_tokenizer(model)


def _save(model: Any, tok: Any, out: str) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(f"saved to {out}")


def _cmd_make_data(args: argparse.Namespace) -> int:
    from compgen_rl.data import SplitConfig, write_splits
    from llmcore.config import config_from_args

    cfg = config_from_args(SplitConfig, args)
    meta = write_splits(cfg, args.out)
    print(
        json.dumps(
            {
                "out": args.out,
                "counts": meta["counts"],
                "heldout_events": meta["heldout_events"],
                "signatures": {k: len(v) for k, v in meta["signatures"].items()},
            }
        )
    )
    if args.export_verl:
        from compgen_rl.export import export_verl

        for p in export_verl(args.out, args.export_verl):
            print(f"wrote {p}")
    return 0


def _cmd_sft(args: argparse.Namespace) -> int:
    from compgen_rl.data import load_splits
    from compgen_rl.train import SFTArgs, run_sft
    from llmcore.config import config_from_args

    cfg = config_from_args(SFTArgs, args)
    rows = load_splits(args.data, ["sft"])["sft"]
    model, tok = _load(args.model, rows)
    model = run_sft(model, tok, rows, cfg)
    _save(model, tok, args.out)
    return 0


def _cmd_rl(args: argparse.Namespace) -> int:
    from compgen_rl.data import load_splits
    from compgen_rl.train import GRPOArgs, prefilter_rows, run_grpo
    from llmcore.config import config_from_args

    cfg = config_from_args(GRPOArgs, args)
    rows = load_splits(args.data, ["rl"])["rl"]
    model, tok = _load(args.model)
    if cfg.prefilter:
        rows, pf = prefilter_rows(
            model,
            tok,
            rows,
            k=cfg.prefilter_k,
            temperature=cfg.temperature,
            seed=cfg.seed,
            max_new_tokens=cfg.max_completion_length,
        )
        print(json.dumps({"prefilter": pf}))
    model, stats = run_grpo(model, tok, rows, cfg)
    print(json.dumps({"grpo": stats}))
    _save(model, tok, args.out)
    return 0


def _cmd_rft(args: argparse.Namespace) -> int:
    from compgen_rl.data import load_splits
    from compgen_rl.train import RFTArgs, run_rft
    from llmcore.config import config_from_args

    cfg = config_from_args(RFTArgs, args)
    rows = load_splits(args.data, ["rl"])["rl"]
    model, tok = _load(args.model)
    model, stats = run_rft(model, tok, rows, cfg)
    print(json.dumps({"rft": stats}))
    _save(model, tok, args.out)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from compgen_rl.data import SPLITS, load_splits
    from compgen_rl.errors import CompgenError
    from compgen_rl.evaluate import evaluate
    from llmcore.data import atomic_write_json

    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise CompgenError(f"unknown split(s) {bad}; known: {', '.join(SPLITS)}")
    data = load_splits(args.data, splits)
    if args.backend == "vllm":
        from llmcore import load_tokenizer

        model, tok = args.model, load_tokenizer(args.model)
    else:
        model, tok = _load(args.model)
    res = {
        s: evaluate(model, tok, data[s], batch_size=args.batch_size, backend=args.backend)
        for s in splits
    }
    atomic_write_json(args.out, res)
    from llmcore.cli import print_table

    print_table(
        [
            {
                "split": s,
                "acc": round(r["acc"], 4),
                "step_acc": round(r["step_acc"], 4),
                "n": r["n"],
            }
            for s, r in res.items()
        ]
    )
    return 0


def _cmd_protocol(args: argparse.Namespace) -> int:
    from compgen_rl.train import ProtocolConfig, run_protocol
    from llmcore.config import config_from_args

    cfg = config_from_args(ProtocolConfig, args)
    if args.out_dir:
        cfg.out = str(Path(args.out_dir) / "protocol.json")
    rep = run_protocol(cfg)
    from llmcore.cli import print_table

    print_table(
        [
            {"arm": a, **{s: round(m[s]["acc"], 4) for s in cfg.eval_splits}}
            for a, m in rep["arms"].items()
        ]
    )
    print(f"wrote {cfg.out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from compgen_rl.bench import run_bench

    run_bench(args.out, arms=tuple(a for a in args.arms.split(",") if a), plot=not args.no_plot)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from compgen_rl.data import SplitConfig
    from compgen_rl.train import GRPOArgs, ProtocolConfig, RFTArgs, SFTArgs
    from llmcore.config import add_config_arguments

    p = argparse.ArgumentParser(
        prog=PROG, description="RL after SFT for compositional generalisation"
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser(
        "make-data", help="write {split}.jsonl + meta.json for a split configuration"
    )
    add_config_arguments(s, SplitConfig)
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument(
        "--export-verl", default=None, help="also write verl parquet files into this directory"
    )
    s.set_defaults(func=_cmd_make_data)

    s = sub.add_parser("sft", help="supervised fine-tuning on canonical traces (trl SFTTrainer)")
    add_config_arguments(s, SFTArgs)
    s.add_argument("--model", default="tiny", help="'tiny', an HF id or a local path")
    s.add_argument("--data", required=True, help="directory written by make-data")
    s.add_argument("--out", required=True, help="checkpoint directory")
    s.set_defaults(func=_cmd_sft)

    s = sub.add_parser("rl", help="GRPO on the exact-match reward (optional pass-rate prefilter)")
    add_config_arguments(s, GRPOArgs)
    s.add_argument("--model", required=True, help="SFT checkpoint (path or HF id)")
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_rl)

    s = sub.add_parser("rft", help="rejection-sampling fine-tuning with the RL sample budget")
    add_config_arguments(s, RFTArgs)
    s.add_argument("--model", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_rft)

    s = sub.add_parser("eval", help="greedy accuracy / step accuracy per split")
    s.add_argument("--model", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--splits", default="test_seen,test_unseen,test_ood")
    s.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--out", default="metrics.json")
    s.set_defaults(func=_cmd_eval)

    s = sub.add_parser("protocol", help="all arms from a YAML config, one JSON report")
    add_config_arguments(s, ProtocolConfig)
    s.add_argument("--out-dir", default=None, help="write protocol.json into this directory")
    s.set_defaults(func=_cmd_protocol)

    s = sub.add_parser("bench", help="arms x splits x depth table, GRPO step timing, JSON + plot")
    s.add_argument("--out", default="compgen-bench", help="output directory")
    s.add_argument("--arms", default="sft,sft_rl,sft_rft,rl_atomic,rl_overlap")
    s.add_argument("--no-plot", action="store_true")
    s.set_defaults(func=_cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main(PROG, build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
