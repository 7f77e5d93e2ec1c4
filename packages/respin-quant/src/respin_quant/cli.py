"""``respin-quant`` command line: quantize, eval, compare, bench, make-tiny, check.

``--help`` does not import torch; every command imports its heavy modules itself.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from respin_quant.errors import RespinError

METHOD_MAP = {
    "rtn": "none",
    "none": "none",
    "quarot": "quarot",
    "spinquant": "spinquant",
    "respin": "respin",
}


def _load(model: str, dtype: str | None, device: str | None) -> tuple[Any, Any]:
    from llmcore.models import load_causal_lm, load_tokenizer

    m = load_causal_lm(model, dtype=dtype, device=device)
    try:
        tok = load_tokenizer(model)
    except Exception:
        tok = None
    return m, tok


def _calib(args: argparse.Namespace, tok: Any, n: int, seqlen: int, seed: int) -> Any:
    if args.calib == "markov":
        from respin_quant.tiny import calib_ids

        return calib_ids(n=max(n, 1))[:, :seqlen]
    if tok is None:
        raise RespinError(f"{args.model} has no tokenizer: pass --calib markov for the tiny model")
    from respin_quant.evaluate import calibration_windows

    return calibration_windows(tok, args.calib, n, seqlen, seed)


def cmd_quantize(args: argparse.Namespace) -> int:
    from respin_quant.config import QuantConfig, RotationConfig, parse_rank
    from respin_quant.pipeline import quantize_pipeline, save_quantized

    q = QuantConfig(
        w_bits=args.w_bits,
        a_bits=args.a_bits,
        k_bits=args.kv_bits,
        v_bits=args.kv_bits,
        weight_quantizer=args.weight_quantizer,
        gptq_nsamples=min(128, args.nsamples),
    )
    rot = RotationConfig(
        method=METHOD_MAP[args.method],
        residual_rank=parse_rank(args.residual_rank),
        rebase=args.rebase,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        calib_nsamples=args.nsamples,
        calib_seqlen=args.seqlen,
        rotation_seed=args.seed,
        online_dense=args.online_dense,
        online_block=args.online_block,
    )
    model, tok = _load(args.model, args.dtype, args.device)
    needs = rot.method in ("spinquant", "respin") or q.weight_quantizer == "gptq"
    n = max(args.nsamples, q.gptq_nsamples)
    calib = _calib(args, tok, n, args.seqlen, args.seed) if needs else None
    model, report = quantize_pipeline(
        model, tok, q, rot, calib if calib is not None else args.calib, args.seed, progress=True
    )
    out = save_quantized(model, args.out, report=report, base_model=args.model, tokenizer=tok)
    print(json.dumps(report, indent=2, default=str))
    print(f"saved to {out}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from respin_quant.evaluate import perplexity, token_stream
    from respin_quant.pipeline import load_quantized

    p = Path(args.model)
    if (p / "respin_config.json").exists():
        model = load_quantized(p, device=args.device)
        from llmcore.models import load_tokenizer

        try:
            tok = load_tokenizer(str(p))
        except Exception:
            tok = None
    else:
        model, tok = _load(args.model, args.dtype, args.device)
    res: dict[str, Any] = {"model": args.model}
    if args.ppl:
        if args.ppl == "markov":
            from respin_quant.tiny import eval_ids

            ids = eval_ids()
            res["ppl"] = perplexity(model, ids, seqlen=ids.shape[1], batch_size=64)
        else:
            if tok is None:
                raise RespinError(
                    f"{args.model} has no tokenizer: use --ppl markov for the tiny model"
                )
            ids = token_stream(tok, args.ppl)
            res["ppl"] = perplexity(
                model, ids, seqlen=args.seqlen, batch_size=args.batch_size, progress=True
            )
    if args.tasks:
        from respin_quant.lm_eval_adapter import run_lm_eval

        res["lm_eval"] = run_lm_eval(
            model,
            tok,
            args.tasks.split(","),
            limit=args.limit,
            batch_size=args.batch_size,
            include_path=args.include_path,
        )
    print(json.dumps(res, indent=2, default=str))
    if args.json:
        from llmcore.data import atomic_write_json

        atomic_write_json(args.json, res)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from llmcore.data import atomic_write_json
    from respin_quant.compare import compare, format_compare
    from respin_quant.config import CompareConfig
    from respin_quant.evaluate import perplexity

    cfg = config_from_args(CompareConfig, args)
    if args.model == "tiny":
        from respin_quant.tiny import calib_ids, eval_ids, outlier_model

        model = outlier_model(args.outlier_scale)
        calib, ev = calib_ids(), eval_ids()

        def ppl(m: Any) -> float:
            return perplexity(m, ev, seqlen=ev.shape[1], batch_size=64)

    else:
        from respin_quant.evaluate import token_stream

        model, tok = _load(args.model, args.dtype, args.device)
        if tok is None:
            raise RespinError(f"{args.model} has no tokenizer: compare needs one for --ppl")
        calib = _calib(args, tok, args.nsamples, args.seqlen, args.seed)
        stream = token_stream(tok, args.ppl)

        def ppl(m: Any) -> float:
            return perplexity(m, stream, seqlen=args.seqlen, batch_size=1, progress=True)

    out = Path(args.json)
    results = Path(args.results) if args.results else out.with_suffix(".jsonl")
    rows = compare(model, calib, ppl, cfg, results)
    atomic_write_json(out, {"model": args.model, "config": cfg.__dict__, "rows": rows})
    print(format_compare(rows))
    print(f"wrote {out} (rows also in {results}; rerun the same command to resume)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from respin_quant.bench import format_table, run_bench
    from respin_quant.config import BenchConfig

    cfg = config_from_args(BenchConfig, args)
    res = run_bench(cfg, json_out=args.json, plot_out=args.plot)
    print(format_table(res))
    return 0


def cmd_make_tiny(args: argparse.Namespace) -> int:
    import time

    from respin_quant.tiny import TinySpec, build_tiny, outlier_model, tiny_meta

    t0 = time.perf_counter()
    path = build_tiny(TinySpec(), force=args.force)
    meta = tiny_meta()
    print(
        json.dumps(
            {"path": str(path), "seconds_this_call": time.perf_counter() - t0, **meta}, indent=2
        )
    )
    if args.out:
        m = outlier_model(args.scale)
        m.config.respin = {}
        m.save_pretrained(args.out)
        print(f"outlier-injected copy (S={args.scale}) saved to {args.out}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    import copy

    import torch

    from respin_quant.config import parse_rank
    from respin_quant.evaluate import max_abs_logit_diff
    from respin_quant.rotation import apply_rotations, init_rotations

    rank = parse_rank(args.residual_rank)
    if args.model == "tiny":
        from respin_quant.tiny import outlier_model

        model = outlier_model(50.0)
    else:
        model, _ = _load(args.model, "fp32", "cpu")
    rs = init_rotations(
        model, METHOD_MAP[args.method] if args.method != "rtn" else "quarot", args.seed
    )
    if args.perturb > 0:
        from respin_quant.rotation import polar

        g = torch.Generator().manual_seed(args.seed + 1)
        rs.R_ffn = [
            polar(r + args.perturb * torch.randn(r.shape, generator=g, dtype=torch.float64))
            for r in rs.R_ffn
        ]
    m2 = apply_rotations(
        copy.deepcopy(model),
        rs,
        rank,
        args.rebase,
        online_dense=args.online_dense,
        online_block=args.online_block,
    )
    ids = torch.randint(
        0, model.config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        mx = float(model(ids).logits.abs().max())
        diff = max_abs_logit_diff(model, m2, ids)
    print(
        json.dumps(
            {
                "max_abs_dlogit": diff,
                "max_abs_logit": mx,
                "relative": diff / mx,
                "orthogonality_error": rs.orthogonality_error(),
            },
            indent=2,
        )
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from llmcore.config import add_config_arguments
    from respin_quant.config import BenchConfig, CompareConfig

    p = argparse.ArgumentParser(
        prog="respin-quant", description="ReSpinQuant rotation PTQ (simulated quantisation)"
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    q = sub.add_parser("quantize", help="rotate + quantise a model and save it")
    q.add_argument("--model", required=True, help="hub id or local path")
    q.add_argument("--method", choices=sorted(METHOD_MAP), default="respin")
    q.add_argument("--w-bits", type=int, default=4)
    q.add_argument("--a-bits", type=int, default=4)
    q.add_argument("--kv-bits", type=int, default=16)
    q.add_argument("--weight-quantizer", choices=["rtn", "gptq"], default="rtn")
    q.add_argument("--residual-rank", default="32", help="integer or 'full'")
    q.add_argument(
        "--rebase", action="store_true", help="exact FP function for any rank (not in paper)"
    )
    q.add_argument(
        "--calib", default="wikitext2", help="wikitext2, a text/JSONL file, or markov (tiny)"
    )
    q.add_argument("--nsamples", type=int, default=800)
    q.add_argument("--seqlen", type=int, default=2048)
    q.add_argument("--steps", type=int, default=100)
    q.add_argument("--lr", type=float, default=1.5)
    q.add_argument("--batch-size", type=int, default=8)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--dtype", default=None, help="bf16, fp32, ... (default: auto)")
    q.add_argument("--device", default=None)
    q.add_argument("--out", required=True)
    _online_flags(q)
    q.set_defaults(func=cmd_quantize)

    e = sub.add_parser("eval", help="perplexity and lm-eval tasks of a saved or hub model")
    e.add_argument("--model", required=True, help="save_quantized dir, hub id or path")
    e.add_argument("--ppl", default=None, help="wikitext2, a text/JSONL file, or markov (tiny)")
    e.add_argument("--seqlen", type=int, default=2048)
    e.add_argument(
        "--tasks", default=None, help="comma-separated lm-eval tasks (needs the lm-eval extra)"
    )
    e.add_argument("--limit", type=int, default=None)
    e.add_argument("--include-path", default=None, help="folder of extra lm-eval task YAMLs")
    e.add_argument("--batch-size", type=int, default=1)
    e.add_argument("--dtype", default=None)
    e.add_argument("--device", default=None)
    e.add_argument("--json", default=None, help="write results here")
    e.set_defaults(func=cmd_eval)

    cp = sub.add_parser(
        "compare", help="perplexity table of methods x residual ranks on any model, resumable"
    )
    cp.add_argument("--model", required=True, help="hub id, local path, or 'tiny'")
    cp.add_argument("--json", required=True, help="final results JSON")
    cp.add_argument(
        "--results", default=None, help="per-row JSONL for resuming (default: JSON path .jsonl)"
    )
    cp.add_argument("--calib", default="wikitext2", help="wikitext2 or a text/JSONL file")
    cp.add_argument("--ppl", default="wikitext2", help="wikitext2 or a text/JSONL file")
    cp.add_argument("--nsamples", type=int, default=128, help="calibration sequences")
    cp.add_argument("--seqlen", type=int, default=2048)
    cp.add_argument("--seed", type=int, default=0, help="seed of the calibration windows")
    cp.add_argument(
        "--outlier-scale", type=float, default=50.0, help="S of the tiny model (--model tiny)"
    )
    cp.add_argument("--dtype", default=None)
    cp.add_argument("--device", default=None)
    add_config_arguments(cp, CompareConfig)
    cp.set_defaults(func=cmd_compare)

    b = sub.add_parser(
        "bench", help="FP/RTN/QuaRot/SpinQuant/ReSpin table on the tiny outlier model"
    )
    b.add_argument("--json", default="respin_bench.json")
    b.add_argument("--plot", default=None, help="PNG path (needs the plot extra)")
    add_config_arguments(b, BenchConfig)
    b.set_defaults(func=cmd_bench)

    t = sub.add_parser("make-tiny", help="build (or load) the cached tiny Markov Llama")
    t.add_argument("--out", default=None, help="also save the outlier-injected copy here")
    t.add_argument("--scale", type=float, default=50.0, help="outlier scale S")
    t.add_argument("--force", action="store_true")
    t.set_defaults(func=cmd_make_tiny)

    c = sub.add_parser("check", help="max |dlogit| of the FP fused model vs the original")
    c.add_argument("--model", default="tiny", help="'tiny' or a hub id / path")
    c.add_argument("--method", choices=sorted(METHOD_MAP), default="respin")
    c.add_argument("--residual-rank", default="full")
    c.add_argument("--rebase", action="store_true")
    c.add_argument(
        "--perturb", type=float, default=0.05, help="random layer-wise perturbation of R_ffn"
    )
    c.add_argument("--seed", type=int, default=0)
    _online_flags(c)
    c.set_defaults(func=cmd_check)
    return p


def _online_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--online-dense",
        action="store_true",
        help="FFN size not a power of two: dense random orthogonal H_down",
    )
    p.add_argument(
        "--online-block",
        action="store_true",
        help="FFN size not a power of two: Hadamard on its largest power-of-two block",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``respin-quant`` command line; returns the exit status (2 on a user error)."""
    from llmcore.cli import run_main

    return run_main("respin-quant", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
