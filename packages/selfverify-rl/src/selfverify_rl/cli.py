"""``selfverify-rl`` command line: make-data, warmup, train, eval, asymmetry, export-verl,
lm-eval-tasks, bench.

``selfverify-rl --help`` imports neither torch nor trl (heavy imports live in the commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODES = ("gen", "verify", "alternate", "stagewise", "mixed")


def _read_split(data: str, split: str) -> list[dict[str, Any]]:
    from llmcore.data import read_jsonl
    from selfverify_rl.errors import SelfVerifyDataError
    from selfverify_rl.tasks import check_rows

    p = Path(data)
    if p.is_dir():
        p = p / f"{split}.jsonl"
    if not p.exists():
        raise SelfVerifyDataError(f"{p} does not exist (run `selfverify-rl make-data --out DIR`)")
    return check_rows(read_jsonl(p), where=str(p))


def _cmd_make_data(args: argparse.Namespace) -> int:
    from llmcore.data import write_jsonl
    from selfverify_rl.tasks import ArithmeticTask

    task = ArithmeticTask(digits=args.digits, seed=args.seed)
    test = task.problems(args.n_test)
    train = ArithmeticTask(digits=args.digits, seed=args.seed + 1).problems(
        args.n_train, exclude={r["question"] for r in test}
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "test.jsonl", test)
    print(f"wrote {len(train)} train / {len(test)} test problems to {out}")
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    import shutil
    from dataclasses import replace

    from selfverify_rl.experiments import WARMUP, build_warmup

    mix = WARMUP.recompute_share if args.verify_style_mix is None else args.verify_style_mix
    spec = replace(
        WARMUP, steps=args.gen_steps or WARMUP.steps, digits=args.digits, recompute_share=mix
    )
    if args.model != "tiny":
        return _sft_warmup(args, spec)
    if args.use_peft:
        from selfverify_rl.errors import SelfVerifyConfigError

        raise SelfVerifyConfigError(
            "--use-peft with --model tiny: the tiny warm-up trains all weights in the llmcore "
            "zoo; LoRA applies to hub models and checkpoints (give --model <id or folder>)"
        )
    entry = build_warmup(spec, progress=True, gate=not args.no_gate)
    shutil.copytree(entry.path, args.out, dirs_exist_ok=True)
    print(json.dumps({k: v for k, v in entry.metrics.items() if isinstance(v, int | float)}))
    print(f"warm-up checkpoint in {args.out}")
    return 0


def _sft_warmup(args: argparse.Namespace, spec: Any) -> int:
    """Warm-up of a hub model or checkpoint with trl's SFTTrainer on the same corpus."""
    from dataclasses import replace

    from selfverify_rl.sft import sft_warmup, warmup_pairs

    model, tok = _load(args.model)
    held: set[str] = set()
    if args.data:
        held = {r["question"] for r in _read_split(args.data, "test")}
    pairs = warmup_pairs(replace(spec, n_docs=args.n_docs), style=args.style, tokenizer=tok,
                         exclude=held)  # fmt: skip
    trainer = sft_warmup(model, tok, pairs, output_dir=args.out, max_steps=spec.steps,
                         learning_rate=args.lr, batch_size=args.batch_size,
                         peft_config=_peft_config(args))  # fmt: skip
    trainer.save_model(args.out)
    tok.save_pretrained(args.out)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    print(json.dumps({"steps": spec.steps, "first_loss": losses[0], "last_loss": losses[-1]}))
    print(f"warm-up checkpoint in {args.out}")
    return 0


def _load(model: str, device: str | None = None) -> tuple[Any, Any]:
    """A checkpoint, hub id, or LoRA adapter folder (loaded on its base model and merged)."""
    from selfverify_rl.lora import load_policy

    return load_policy(model, device=device)


def _peft_config(args: argparse.Namespace) -> Any:
    if not args.use_peft:
        return None
    from selfverify_rl.lora import lora_config

    return lora_config(args.lora_r, args.lora_alpha, args.lora_dropout, args.lora_target_modules)


def _add_lora_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LoRA (extra peft; the output folder then holds the adapter only)")
    g.add_argument("--use-peft", action="store_true", help="train a LoRA adapter, not all weights")
    g.add_argument("--lora-r", type=int, default=16, help="LoRA rank")
    g.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (scale alpha / r)")
    g.add_argument("--lora-dropout", type=float, default=0.05)
    g.add_argument("--lora-target-modules", nargs="+", default=None,
                   help="module names, or all-linear (default: peft's choice per architecture)")  # fmt: skip


def _cmd_train(args: argparse.Namespace) -> int:
    from selfverify_rl.evaluate import model_prefix
    from selfverify_rl.trainer import SelfVerifyConfig, SelfVerifyGRPOTrainer, make_train_dataset

    rows = _read_split(args.data, "train")
    peft_config = _peft_config(args)
    model, tok = _load(args.model)
    extra: dict[str, Any] = {}
    if args.use_vllm:
        extra.update(use_vllm=True, vllm_mode="colocate")
    import torch

    on_gpu = torch.cuda.is_available() and not args.cpu
    cfg = SelfVerifyConfig(
        output_dir=args.out, mode=args.mode, max_steps=args.steps,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.prompts_per_step * args.num_generations,
        verification_interval=args.verification_interval,
        verification_looplen=args.verification_looplen,
        verification_mode=args.verification_mode, prompt_style=args.style,
        learning_rate=args.lr, beta=args.beta, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        temperature=1.0, max_completion_length=args.max_completion_length,
        use_cpu=not on_gpu, bf16=on_gpu, report_to=[], logging_steps=1,
        save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500,
        seed=args.seed, use_math_verify=args.math_verify, **extra,
    )  # fmt: skip
    prefix = model_prefix(tok) if args.style == "plain" else ""
    ds = make_train_dataset(rows, style=args.style, tokenizer=tok, prefix=prefix)
    trainer = SelfVerifyGRPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok,
                                    peft_config=peft_config)  # fmt: skip
    trainer.train()
    trainer.save_model(args.out)
    tok.save_pretrained(args.out)
    hist = [h for h in trainer.state.log_history if "loss" in h]
    Path(args.out, "log_history.json").write_text(json.dumps(hist))
    print(f"trained {args.steps} {args.mode} steps; model in {args.out}")
    return 0


def _eval_metrics(model: Any, tok: Any, args: argparse.Namespace) -> dict[str, Any]:
    from selfverify_rl.evaluate import (
        fixed_verification_set,
        generation_accuracy,
        self_verification_set,
        verification_metrics,
    )

    test = _read_split(args.data, "test")[: args.limit]
    temp = 0.0 if args.gen_k == 1 else 0.6
    g = generation_accuracy(model, tok, test, k=args.gen_k, temperature=temp, style=args.style)
    out: dict[str, Any] = {f"gen_{k}": v for k, v in g.items()}
    if args.verify_set == "self":
        samples = self_verification_set(model, tok, test, n=8, style=args.style)
    else:
        from llmcore.data import read_jsonl

        src = Path(args.data) / "candidates.jsonl"
        if not src.exists():
            samples = self_verification_set(model, tok, test, n=8, style=args.style)
            from llmcore.data import write_jsonl

            write_jsonl(src, [{"question": s.question, "candidate": s.candidate,
                               "label": s.label, "problem_id": s.problem_id} for s in samples])  # fmt: skip
        samples = fixed_verification_set(read_jsonl(src), style=args.style, tokenizer=tok)
    out.update({f"ver_{k}": v for k, v in verification_metrics(model, tok, samples).items()})
    return out


def _cmd_eval(args: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json

    model, tok = _load(args.model)
    out = _eval_metrics(model, tok, args)
    atomic_write_json(args.out, out)
    print(json.dumps(out, indent=1))
    return 0


def _cmd_asymmetry(args: argparse.Namespace) -> int:
    from selfverify_rl.study import asymmetry, write_csv

    rows = asymmetry(args.run, data=args.data, every=args.every, limit=args.limit, style=args.style)
    out = write_csv(rows, Path(args.run) / "asymmetry.csv")
    for r in rows:
        print(r)
    print(f"wrote {out}")
    return 0


def _cmd_export_verl(args: argparse.Namespace) -> int:
    from llmcore.rl import write_verl_parquet
    from selfverify_rl.prompts import GEN_INSTRUCTION

    rows = _read_split(args.data, args.split)
    recs = [{"prompt": f"{r['question']}\n{GEN_INSTRUCTION}", "answer": r["answer"],
             "extra_info": {"problem_id": r["problem_id"]}} for r in rows]  # fmt: skip
    path = write_verl_parquet(recs, args.out, data_source=args.data_source, split=args.split)
    print(f"wrote {len(recs)} rows to {path}")
    return 0


def _cmd_lmeval_tasks(args: argparse.Namespace) -> int:
    from llmcore.data import read_jsonl
    from selfverify_rl.errors import SelfVerifyDataError
    from selfverify_rl.lmeval_tasks import write_tasks

    tok = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    src = Path(args.data) / "candidates.jsonl"
    if not src.exists():
        raise SelfVerifyDataError(
            f"{src} does not exist: write it with `selfverify-rl eval --verify-set fixed`"
        )
    problems = _read_split(args.data, "test")[: args.limit]
    paths = write_tasks(problems, read_jsonl(src), args.out, style=args.style, tokenizer=tok)
    for path in paths:
        print(f"wrote {path}")
    print(f"run: lm_eval --include_path {args.out} --tasks selfverify_gen,selfverify_verify ...")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from selfverify_rl.bench import run_bench

    run_bench(args.out, steps=args.steps, plot=not args.no_plot)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="selfverify-rl",
        description="GRPO on generation, self-verification, or both (learning to self-verify)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-data", help="synthetic addition problems (train/test jsonl)")
    p.add_argument("--task", choices=["arithmetic"], default="arithmetic")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--n-train", type=int, default=4000)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_make_data)

    p = sub.add_parser(
        "warmup", help="warm-up SFT: tiny model (llmcore zoo) or a hub model (trl SFTTrainer)"
    )
    p.add_argument(
        "--model", default="tiny", help="'tiny' (zoo-cached, gated) or a hub id / checkpoint"
    )
    p.add_argument(
        "--data",
        default=None,
        help="hub models: a make-data folder whose test questions are kept out",
    )
    p.add_argument("--style", choices=["plain", "chat"], default="plain", help="hub models")
    p.add_argument("--lr", type=float, default=1e-5, help="hub models: SFT learning rate")
    p.add_argument("--batch-size", type=int, default=8, help="hub models: SFT batch size")
    p.add_argument("--n-docs", type=int, default=6000, help="hub models: corpus size")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--gen-steps", type=int, default=None, help="SFT steps (default: calibrated)")
    p.add_argument(
        "--verify-style-mix", type=float, default=None, help="recompute share (default 0.4)"
    )
    p.add_argument("--no-gate", action="store_true", help="skip the accuracy-window gate")
    p.add_argument("--out", required=True)
    _add_lora_args(p)
    p.set_defaults(func=_cmd_warmup)

    p = sub.add_parser("train", help="GRPO in one mode")
    p.add_argument("--mode", choices=MODES, default="alternate")
    p.add_argument("--model", required=True, help="checkpoint folder or hub id")
    p.add_argument("--data", required=True, help="folder with train.jsonl")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--verification-interval", type=int, default=5)
    p.add_argument("--verification-looplen", type=int, default=1)
    p.add_argument("--verification-mode", choices=["judge_answer", "judge_response"],
                   default="judge_answer")  # fmt: skip
    p.add_argument("--style", choices=["plain", "chat"], default="plain")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--max-completion-length", type=int, default=64)
    p.add_argument("--save-steps", type=int, default=0, help="checkpoint every N steps (0: off)")
    p.add_argument("--math-verify", action="store_true", help="grade with math_equivalent")
    p.add_argument("--use-vllm", action="store_true", help="vLLM rollouts (GPU, extra vllm)")
    p.add_argument("--cpu", action="store_true", help="train on CPU even with a GPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    _add_lora_args(p)
    p.set_defaults(func=_cmd_train)

    for name, fn, hlp in (
        ("eval", _cmd_eval, "generation accuracy + verification metrics of one checkpoint"),
        ("asymmetry", _cmd_asymmetry, "gen vs self-verification accuracy per checkpoint"),
    ):
        p = sub.add_parser(name, help=hlp)
        if name == "eval":
            p.add_argument("--model", required=True)
            p.add_argument("--gen-k", type=int, default=1)
            p.add_argument(
                "--verify-set",
                choices=["fixed", "self"],
                default="fixed",
                help="fixed: DATA/candidates.jsonl (sampled from this model and written there "
                "on first use); self: sampled from this model every time",
            )
            p.add_argument("--out", default="metrics.json")
        else:
            p.add_argument("--run", required=True, help="a train --out folder with checkpoints")
            p.add_argument("--every", type=int, default=25)
        p.add_argument("--data", required=True, help="folder with test.jsonl")
        p.add_argument("--style", choices=["plain", "chat"], default="plain")
        p.add_argument("--limit", type=int, default=500)
        p.set_defaults(func=fn)

    p = sub.add_parser("export-verl", help="problems as a verl RL parquet (official row format)")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--data-source", default="selfverify/arithmetic")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_export_verl)

    p = sub.add_parser(
        "lm-eval-tasks", help="write lm-eval tasks selfverify_gen / selfverify_verify"
    )
    p.add_argument("--data", required=True, help="folder with test.jsonl and candidates.jsonl")
    p.add_argument("--tokenizer", default=None, help="renders chat prompts / a tiny model's BOS")
    p.add_argument("--style", choices=["plain", "chat"], default="plain")
    p.add_argument("--limit", type=int, default=500)
    p.add_argument("--out", required=True, help="task folder (lm-eval's --include_path)")
    p.set_defaults(func=_cmd_lmeval_tasks)

    p = sub.add_parser("bench", help="per-mode timing and metrics from one warm-up (CPU)")
    p.add_argument("--out", default="selfverify-bench")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--no-plot", action="store_true")
    p.set_defaults(func=_cmd_bench)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("selfverify-rl", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
