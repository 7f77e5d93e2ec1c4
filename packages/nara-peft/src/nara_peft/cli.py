"""``nara-peft`` CLI: train, generate, eval, inspect, bench, synth-bench.

``--help`` imports neither torch nor peft; each command imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from llmcore.cli import run_main
from llmcore.config import add_config_arguments
from nara_peft.options import BenchConfig, TrainConfig


def _load(model_id: str, adapter: str | None, device: str | None) -> tuple[Any, Any, bool]:
    import nara_peft  # noqa: F401  (registers NARA)
    from llmcore.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_id, device=device)
    takes = False
    if adapter:
        from peft import PeftConfig, PeftModel

        cfg = PeftConfig.from_pretrained(adapter)
        model = PeftModel.from_pretrained(model, adapter).eval()
        takes = (
            str(cfg.peft_type) in ("NARA", "NaraPeftType.NARA")
            and getattr(cfg, "input_mode", "nl") != "constant"
        )
    return model, tok, takes


def _sampler_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=32, help="denoising steps in total")
    p.add_argument("--gen-length", type=int, default=32, help="tokens to generate")
    p.add_argument("--block-length", type=int, default=32, help="semi-autoregressive block size")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--cfg-scale", type=float, default=0.0, help="classifier-free guidance")
    p.add_argument("--remasking", default="low_confidence", choices=["low_confidence", "random"])
    p.add_argument("--mask-token-id", type=int, default=None, help="default: tokenizer's mask")
    p.add_argument("--device", default=None, help="cpu / cuda / auto")


def _gen_texts(
    model: Any,
    tok: Any,
    takes: bool,
    prompts: list[Any],
    a: argparse.Namespace,
    eos_stop: bool = True,
) -> list[str]:
    import torch

    from nara_peft.diffusion import generate
    from nara_peft.errors import NaraConfigError
    from nara_peft.finetune import encode_prompt

    mask_id = a.mask_token_id if a.mask_token_id is not None else tok.mask_token_id
    if mask_id is None:
        raise NaraConfigError("the tokenizer has no mask token; pass --mask-token-id")
    dev = next(model.parameters()).device
    outs = []
    for prompt in prompts:
        ids = torch.tensor([encode_prompt(tok, prompt)], device=dev)
        x = generate(
            model,
            ids,
            mask_token_id=mask_id,
            steps=a.steps,
            gen_length=a.gen_length,
            block_length=a.block_length,
            temperature=a.temperature,
            cfg_scale=a.cfg_scale,
            remasking=a.remasking,
            eos_token_id=tok.eos_token_id if eos_stop else None,
            pass_noise=takes,
            generator=torch.Generator().manual_seed(0),
        )
        gen_ids = x[0, ids.shape[1] :].tolist()
        if tok.eos_token_id in gen_ids:
            gen_ids = gen_ids[: gen_ids.index(tok.eos_token_id)]
        outs.append(tok.decode(gen_ids, skip_special_tokens=True))
    return outs


def cmd_train(a: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from nara_peft.finetune import train

    cfg = config_from_args(TrainConfig, a)
    print(json.dumps(train(cfg, progress=not a.quiet), indent=2))
    return 0


def cmd_generate(a: argparse.Namespace) -> int:
    from llmcore.data import read_jsonl

    model, tok, takes = _load(a.model, a.adapter, a.device)
    if a.prompts:
        prompts = [r.get("prompt", r.get("instruction", "")) for r in read_jsonl(a.prompts)]
    else:
        prompts = [a.prompt]
    for p, t in zip(prompts, _gen_texts(model, tok, takes, prompts, a), strict=True):
        print(json.dumps({"prompt": p, "completion": t}))
    return 0


def cmd_eval(a: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from llmcore.data import ResultsWriter, read_jsonl
    from llmcore.metrics import exact_match, numeric_match
    from nara_peft.finetune import split_row

    model, tok, takes = _load(a.model, a.adapter, a.device)
    rows = read_jsonl(a.data)[: a.limit] if a.limit else read_jsonl(a.data)
    items = [{"id": i, **r} for i, r in enumerate(rows)]
    with ResultsWriter(a.out) as w:
        for item in tqdm(w.pending(items), desc="eval", disable=a.quiet):
            prompt, answer = split_row(item, f"{a.data}:{item['id'] + 1}")
            gold = str(item.get("answer", answer))
            pred = _gen_texts(model, tok, takes, [prompt], a)[0]
            w.write(
                {
                    "id": item["id"],
                    "prediction": pred,
                    "gold": gold,
                    "exact": bool(exact_match(pred, gold)),
                    "numeric": bool(numeric_match(pred, gold)),
                }
            )
        done = w.rows()
    n = len(done)
    summary = {
        "n": n,
        "exact_match": sum(r["exact"] for r in done) / max(1, n),
        "numeric_match": sum(r["numeric"] for r in done) / max(1, n),
    }
    print(json.dumps(summary, indent=2))
    return 0


def cmd_inspect(a: argparse.Namespace) -> int:
    import torch
    from safetensors.torch import load_file

    import nara_peft  # noqa: F401
    from llmcore.data import iter_jsonl  # noqa: F401
    from nara_peft.config import NaraConfig
    from nara_peft.noise import make_embedding, make_mapper

    cfg = NaraConfig.from_pretrained(a.adapter)
    sd = load_file(f"{a.adapter}/adapter_model.safetensors")
    parts: dict[str, int] = {}
    for k, v in sd.items():
        kind = next(
            (t for t in ("nara_A", "nara_B", "nara_mapper", "nara_phi", "nara_const_c") if t in k),
            "other",
        )
        parts[kind] = parts.get(kind, 0) + v.numel()
    print(json.dumps({"r": cfg.r, "input_mode": cfg.input_mode, "tensors": parts}, indent=2))
    if cfg.input_mode == "constant":
        c = torch.eye(cfg.r) + cfg.c_scale * sd["base_model.nara_const_c"]
        print(f"constant C: ||C - I||_F = {float((c - torch.eye(cfg.r)).norm()):.5f}")
        return 0
    if cfg.input_mode != "nl":
        print("lambda grid shown for input_mode='nl' only")
        return 0
    phi = make_embedding(cfg.embedding_type, cfg.embedding_dim, cfg.fourier_scale, cfg.fourier_seed)
    phi.load_state_dict(
        {
            k.removeprefix("base_model.nara_phi."): v
            for k, v in sd.items()
            if k.startswith("base_model.nara_phi.")
        }
    )
    groups = sorted({k.split(".")[2] for k in sd if k.startswith("base_model.nara_mapper.")})
    for g in groups:
        net = make_mapper(
            cfg.mapper_input_dim(), cfg.fnn_hidden_size_1, cfg.fnn_hidden_size_2, cfg.r, cfg.init_c
        )
        pre = f"base_model.nara_mapper.{g}."
        net.load_state_dict({k.removeprefix(pre): v for k, v in sd.items() if k.startswith(pre)})
        lam = torch.linspace(0, 1, a.grid)
        with torch.no_grad():
            d = cfg.c_scale * net(phi(lam)).view(-1, cfg.r, cfg.r)
        for li, di in zip(lam.tolist(), d, strict=True):
            print(f"group {g} lambda={li:.2f} ||C - I||_F = {float(di.norm()):.5f}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from llmcore.data import atomic_write_json
    from nara_peft.bench import format_table, plot_buckets, run_bench

    cfg = config_from_args(BenchConfig, a)
    report = run_bench(cfg, progress=not a.quiet)
    print(format_table(report))
    if a.json:
        atomic_write_json(a.json, report)
    if a.plot and not plot_buckets(report, a.plot):
        print("matplotlib missing: pip install 'nara-peft[plot]' for the plot", file=sys.stderr)
    return 0


def cmd_synth_bench(a: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json
    from nara_peft.synth import run_experiment

    rep = run_experiment(tuple(range(a.seeds)), progress=not a.quiet, results_path=a.resume)
    print("| seed | " + " | ".join(rep["mean_ce"][next(iter(rep["mean_ce"]))]) + " |")
    for seed, d in rep["mean_ce"].items():
        print(f"| {seed} | " + " | ".join(f"{v:.3f}" for v in d.values()) + " |")
    if a.json:
        atomic_write_json(a.json, rep)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nara-peft", description="NaRA: noise-aware LoRA for masked diffusion LMs (ICML 2026)."
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="fine-tune with NaRA / LoRA / NaRA-constant")
    add_config_arguments(t, TrainConfig)
    t.set_defaults(func=cmd_train)

    g = sub.add_parser("generate", help="sample with the LLaDA sampler (lambda per step)")
    g.add_argument("--model", required=True)
    g.add_argument("--adapter", default=None)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt")
    src.add_argument("--prompts", help="JSONL with 'prompt' (or 'instruction')")
    _sampler_args(g)
    g.set_defaults(func=cmd_generate)

    e = sub.add_parser("eval", help="generate for a JSONL eval set and score exact/numeric match")
    e.add_argument("--model", required=True)
    e.add_argument("--adapter", default=None)
    e.add_argument("--data", required=True, help="JSONL with prompt/response (or 'answer')")
    e.add_argument("--limit", type=int, default=None)
    e.add_argument("--out", default="nara-eval.jsonl", help="per-example results (resumable)")
    _sampler_args(e)
    e.set_defaults(func=cmd_eval)

    i = sub.add_parser("inspect", help="parameter breakdown and ||C(lambda) - I|| over a grid")
    i.add_argument("--adapter", required=True)
    i.add_argument("--grid", type=int, default=11)
    i.set_defaults(func=cmd_inspect)

    b = sub.add_parser("bench", help="NaRA vs LoRA r4/r6 vs NaRA-constant: quality and cost")
    add_config_arguments(b, BenchConfig)
    b.add_argument(
        "--reps", dest="timing_reps", type=int, default=argparse.SUPPRESS, help="= --timing-reps"
    )
    b.add_argument("--json", default=None)
    b.add_argument("--plot", default=None, help="PNG of CE per noise-level bucket")
    b.set_defaults(func=cmd_bench)

    s = sub.add_parser(
        "synth-bench", help="the synthetic noise-regime experiment (2 seeds x 4 arms)"
    )
    s.add_argument("--seeds", type=int, default=2)
    s.add_argument("--json", default=None)
    s.add_argument("--resume", default=None, help="JSONL of finished rows (resumable)")
    s.set_defaults(func=cmd_synth_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nara-peft``: a package or llmcore error prints ``nara-peft: error: ...``
    and returns 2; anything else is a bug and raises."""
    return run_main("nara-peft", build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
