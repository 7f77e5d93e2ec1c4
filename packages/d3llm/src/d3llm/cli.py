"""``d3llm`` command line: make-tiny, train-teacher, extract-trajectories, distill, generate,
eval, aup, bench.

``d3llm --help`` imports neither torch nor transformers (heavy imports live in the commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _floats(text: str) -> list[float]:
    from d3llm.errors import D3LLMConfigError

    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise D3LLMConfigError(f"expected comma-separated numbers, got {text!r}") from e


def _ints(text: str) -> list[int]:
    from d3llm.errors import D3LLMConfigError

    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise D3LLMConfigError(f"expected comma-separated integers, got {text!r}") from e


def _read_jsonl(path: Path) -> list[dict]:
    from d3llm.errors import D3LLMConfigError
    from llmcore.data import read_jsonl

    if not path.is_file():
        raise D3LLMConfigError(f"{str(path)!r} does not exist (run `d3llm make-tiny` first)")
    return read_jsonl(path)


def _load(model: str, trust_remote_code: bool = False):
    from d3llm.model import load_mdlm

    return load_mdlm(model, trust_remote_code=trust_remote_code)


def _prompt_ids(tok: Any, text: str) -> list[int]:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if tok.bos_token_id is not None and (not ids or ids[0] != tok.bos_token_id):
        ids = [tok.bos_token_id, *ids]
    return ids


def cmd_make_tiny(args: argparse.Namespace) -> int:
    from d3llm.model import build_tiny_mdlm
    from d3llm.task import make_task
    from llmcore import zoo
    from llmcore.data import write_jsonl

    task = make_task(args.task, args.n_digits, args.gen_length)
    out = Path(args.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    xs = task.inputs(args.n_train, seed=args.seed)
    held = task.eval_inputs(args.n_eval, exclude=set(xs))
    write_jsonl(out / "data" / "train.jsonl", [{"text": task.document(x)} | r for x, r in
                                               zip(xs, task.records(xs), strict=True)])  # fmt: skip
    write_jsonl(out / "data" / "eval.jsonl", task.records(held))
    tok = zoo.train_bpe_tokenizer([task.document(x) for x in xs[:2000]], 264)
    m = build_tiny_mdlm(tok, hidden=args.hidden, layers=args.layers, seed=args.seed)
    m.model.config.llmcore_objective = "masked_diffusion"
    m.model.config.mask_token_id = tok.mask_token_id
    m.model.save_pretrained(out / "model", safe_serialization=True)
    tok.save_pretrained(out / "model")
    print(json.dumps({"task": args.task, "model": str(out / "model"), "data": str(out / "data"),
                      "n_train": len(xs), "n_eval": len(held)}))  # fmt: skip
    return 0


def _save(m: Any, tok: Any, out: str) -> None:
    m.model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def cmd_train_teacher(args: argparse.Namespace) -> int:
    from d3llm.teacher import train_vanilla_mdlm

    m, tok = _load(args.model)
    docs = [r["text"] for r in _read_jsonl(Path(args.data) / "train.jsonl")]
    stats = train_vanilla_mdlm(m, tok, docs, args.steps, args.lr, args.batch_size, args.seed)
    _save(m, tok, args.out)
    print(json.dumps(stats))
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from d3llm.distill import boxed_answer_checker, exact_answer_checker, extract_trajectories

    m, tok = _load(args.teacher)
    rows = _read_jsonl(Path(args.data) / "train.jsonl")[: args.limit]
    records = [{"idx": i, "prompt_ids": _prompt_ids(tok, r["question"]), **r} for i, r in
               enumerate(rows)]  # fmt: skip
    checker = exact_answer_checker if args.checker == "exact" else boxed_answer_checker
    ds = extract_trajectories(
        m, tok, records, gen_length=args.gen_length, block_length=args.block_length,
        max_attempts=args.max_attempts, checker=checker,
    )  # fmt: skip
    ds.save_to_disk(args.out)
    print(json.dumps({"n": len(ds), "correct": sum(ds["is_correct"]) / max(1, len(ds))}))
    return 0


def _distill_examples(tok: Any, traj: Any, data: str | None) -> list[dict]:
    """Training examples: each trajectory's prompt and ground-truth answer, or with ``data`` the
    question and answer (``response`` or ``gt_answer``) of the ``train.jsonl`` row whose ``idx``
    (default: its line number) matches the trajectory's ``idx``."""
    from d3llm.errors import D3LLMConfigError

    if data is None:
        return [
            {"idx": r["idx"], "prompt_ids": r["prompt_ids"],
             "response_ids": tok(r["gt_answer"], add_special_tokens=False)["input_ids"]}
            for r in traj
        ]  # fmt: skip
    rows = {int(r.get("idx", i)): r for i, r in enumerate(_read_jsonl(Path(data) / "train.jsonl"))}
    out = []
    for r in traj:
        row = rows.get(int(r["idx"]))
        if row is None:
            raise D3LLMConfigError(
                f"trajectory idx={r['idx']} has no row in {data}/train.jsonl; pass the --data "
                "folder the trajectories were extracted from"
            )
        answer = str(row.get("response", row.get("gt_answer", "")))
        out.append({"idx": r["idx"], "prompt_ids": _prompt_ids(tok, row["question"]),
                    "response_ids": tok(answer, add_special_tokens=False)["input_ids"]})  # fmt: skip
    return out


def cmd_distill(args: argparse.Namespace) -> int:
    import datasets

    from d3llm.distill import D3LLMDistillConfig, run_distillation

    m, tok = _load(args.student_init)
    traj = datasets.load_from_disk(args.traj)
    examples = _distill_examples(tok, traj, args.data)
    gen_len = len(traj[0]["unmask_step"])
    cfg = D3LLMDistillConfig(
        max_length=len(examples[0]["prompt_ids"]) + gen_len,
        progressive_block_sizes=_ints(args.block_sizes),
        entropy_weight=args.entropy_weight,
        use_complementary_loss=not args.no_complementary,
        use_naive_random_mask=args.random_mask,
    )
    stats = run_distillation(
        m, tok, examples, list(traj), cfg, epochs=args.epochs, max_steps=args.max_steps,
        batch_size=args.batch_size, lr=args.lr, use_lora=args.lora, lora_r=args.lora_r,
        lora_alpha=args.lora_r,
    )  # fmt: skip
    _save(m, tok, args.out)
    print(json.dumps({k: v for k, v in stats.items()}))
    return 0


def _decode(m: Any, ids: list[int], args: argparse.Namespace):
    from d3llm.decoding import decode_multiblock, decode_threshold, decode_vanilla

    if args.method == "vanilla":
        return decode_vanilla(m, ids, args.gen_length, args.steps or args.gen_length,
                              args.block_size)  # fmt: skip
    if args.method == "threshold":
        return decode_threshold(m, ids, args.gen_length, args.block_size, args.mode,
                                args.threshold)  # fmt: skip
    return decode_multiblock(
        m, ids, args.gen_length, args.block_size, args.threshold,
        block_add_threshold=args.block_add, decoded_token_threshold=args.decoded,
        use_kv_cache=args.kv_cache, cache_delay_iter=args.cache_delay,
        refresh_interval=args.refresh,
    )  # fmt: skip


def cmd_generate(args: argparse.Namespace) -> int:
    m, tok = _load(args.model, args.trust_remote_code)
    res = _decode(m, _prompt_ids(tok, args.prompt), args)
    text = tok.decode(res.generated[0].tolist()[: res.tokens[0]], skip_special_tokens=True)
    print(json.dumps({"text": text, "nfe": res.nfe[0], "tokens": res.tokens[0], "tpf": res.tpf}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from d3llm.metrics import write_points

    m, tok = _load(args.model, args.trust_remote_code)
    rows = _read_jsonl(Path(args.data) / "eval.jsonl")[: args.limit]
    thresholds = _floats(args.thresholds) if args.method != "vanilla" else [1.0]
    results = []
    for thr in thresholds:
        args.threshold = thr
        ok = toks = nfes = 0
        for r in rows:
            res = _decode(m, _prompt_ids(tok, r["question"]), args)
            text = tok.decode(res.generated[0].tolist()[: res.tokens[0]], skip_special_tokens=True)
            ok += text.strip() == str(r["gt_answer"]).strip()
            toks += res.tokens[0]
            nfes += res.nfe[0]
        results.append({"threshold": thr, "accuracy": ok / len(rows), "tpf": toks / max(1, nfes),
                        "nfe_mean": nfes / len(rows)})  # fmt: skip
    name = args.name or f"{Path(args.model).name}-{args.method}"
    pts = [[1.0 if args.method == "vanilla" else r["tpf"], 100 * r["accuracy"]] for r in results]
    if args.out:
        write_points(args.out, {args.task: {name: pts}})
    print(json.dumps(results, indent=1))
    return 0


def cmd_aup(args: argparse.Namespace) -> int:
    from d3llm.metrics import aup_table, read_points

    table = aup_table(read_points(args.points), args.alpha, args.offset)
    for task, meth in table.items():
        for name, val in sorted(meth.items(), key=lambda kv: -kv[1]):
            print(f"{task}\t{name}\t{val:.4f}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from d3llm.bench import run_bench

    run_bench(args.out, n=args.n, plot=not args.no_plot, ar=not args.no_ar, size=args.size)
    return 0


def _decode_args(p: argparse.ArgumentParser, method_default: str = "multiblock") -> None:
    p.add_argument("--method", choices=["vanilla", "threshold", "multiblock"],
                   default=method_default)  # fmt: skip
    p.add_argument("--gen-length", type=int, default=256, help="generated positions")
    p.add_argument("--steps", type=int, default=None, help="vanilla steps (default gen-length)")
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--threshold", type=float, default=0.5, help="entropy (nats) or confidence")
    p.add_argument("--mode", choices=["entropy", "confidence"], default="entropy")
    p.add_argument("--block-add", type=float, default=0.1, help="block_add_threshold")
    p.add_argument("--decoded", type=float, default=0.95, help="decoded_token_threshold")
    p.add_argument("--kv-cache", action="store_true", help="delayed KV cache with refresh")
    p.add_argument("--cache-delay", type=int, default=2)
    p.add_argument("--refresh", type=int, default=3)
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run the checkpoint's own code (needed by d3LLM/d3LLM_LLaDA)")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    from d3llm.task import TASKS

    ap = argparse.ArgumentParser(prog="d3llm", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("make-tiny", help="char tokenizer, parity task data, untrained tiny MDLM")
    p.add_argument("--out", required=True)
    p.add_argument("--task", choices=sorted(TASKS), default="parity",
                   help="copy + running parity (calibrated) or sorted digits")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-digits", type=int, default=4)
    p.add_argument("--gen-length", type=int, default=12)
    p.add_argument("--n-train", type=int, default=20000)
    p.add_argument("--n-eval", type=int, default=128)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.set_defaults(func=cmd_make_tiny)

    p = sub.add_parser("train-teacher", help="LLaDA SFT of a masked diffusion LM")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_train_teacher)

    p = sub.add_parser("extract-trajectories", help="teacher unmasking orders -> dataset")
    p.add_argument("--teacher", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--gen-length", type=int, default=12)
    p.add_argument("--block-length", type=int, default=12)
    p.add_argument("--max-attempts", type=int, default=5)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--checker", choices=["exact", "boxed"], default="exact")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("distill", help="pseudo-trajectory distillation")
    p.add_argument("--student-init", required=True)
    p.add_argument("--traj", required=True)
    p.add_argument("--data", default=None,
                   help="folder with train.jsonl: targets (response or gt_answer) by idx; "
                   "default: the trajectories' gt_answer")  # fmt: skip
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--block-sizes", default="4,6,8")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--entropy-weight", type=float, default=2.0)
    p.add_argument("--no-complementary", action="store_true")
    p.add_argument("--random-mask", action="store_true")
    p.add_argument("--lora", action="store_true", help="LoRA adapters (merged after training)")
    p.add_argument("--lora-r", type=int, default=256)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_distill)

    p = sub.add_parser("generate", help="decode one prompt")
    p.add_argument("--model", required=True, help="hub id or directory")
    p.add_argument("--prompt", required=True)
    _decode_args(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("eval", help="accuracy/TPF per threshold -> AUP points YAML")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help="folder with eval.jsonl (question, gt_answer)")
    p.add_argument("--thresholds", default="0.1,0.3,0.5,0.8")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--task", default="parity")
    p.add_argument("--name", default=None, help="method name in the points file")
    p.add_argument("--out", default=None, help="points YAML")
    _decode_args(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("aup", help="AUP per task and method from a points YAML")
    p.add_argument("--points", required=True)
    p.add_argument("--alpha", type=float, default=3.0)
    p.add_argument("--offset", type=float, default=5.0)
    p.set_defaults(func=cmd_aup)

    p = sub.add_parser("bench", help="all decoders on the fixture: table, JSON, points, plot")
    p.add_argument("--out", default="d3llm-bench")
    p.add_argument("--n", type=int, default=128, help="held-out prompts")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--no-ar", action="store_true", help="skip the causal baseline")
    p.add_argument("--size", choices=["fixture", "demo"], default="fixture",
                   help="calibrated fixture models or the demo-size ones")  # fmt: skip
    p.set_defaults(func=cmd_bench)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("d3llm", build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
