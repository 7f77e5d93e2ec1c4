"""``via-sd`` command line: generate, bench, search-mask, theory, make-tiny.

``via-sd --help`` imports neither torch nor transformers (heavy imports live in commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto (default: cpu)")
    p.add_argument("--dtype", default=None, help="fp32 | bf16 | fp16 (default: auto)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--json-out", type=Path, default=None, help="also write the result as JSON")


def _models(p: argparse.ArgumentParser, drafter: bool = True) -> None:
    p.add_argument("--target", required=True, help="target model: hub id or local path")
    if drafter:
        p.add_argument(
            "--drafter",
            required=True,
            help="drafter: hub id or path, 'prompt-lookup[:N]' or 'early-exit:E'",
        )


def _mask_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--skip-layers", default=None, help="comma-separated skipped layers, e.g. 3,4,6")
    g.add_argument("--mask", type=Path, default=None, help="mask JSON from `via-sd search-mask`")
    p.add_argument("--skip-ratio", type=float, default=0.45, help="even mask ratio (default 0.45)")


def _config_flags(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` plus one flag per :class:`~via_sd.config.ViaSDConfig` field (file
    first, typed flags over it), and the paper's ``--alphas`` and HF's gamma alias."""
    from llmcore.config import add_config_arguments
    from via_sd.config import ViaSDConfig

    add_config_arguments(p, ViaSDConfig)
    p.add_argument("--alphas", default=None, help="paper's lenience levels a1,a2 (e.g. 0.5,0.3)")
    p.add_argument(
        "--num-assistant-tokens",
        dest="gamma",
        type=int,
        default=argparse.SUPPRESS,
        help="alias of --gamma (HF name)",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="via-sd",
        description="VIA-SD: three-tier speculative decoding with a layer-skipping slim verifier",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate with VIA-SD (or --method sd|ar|hf)")
    _models(g)
    _mask_flags(g)
    _config_flags(g)
    g.add_argument("--method", default="via", choices=["via", "sd", "ar", "hf"])
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one prompt")
    src.add_argument("--prompts", type=Path, help="prompts JSONL ({id, prompt, reference})")
    _common(g)
    g.set_defaults(func=_cmd_generate)

    b = sub.add_parser("bench", help="AR vs SD vs HF assisted vs VIA-SD side by side")
    _models(b)
    _mask_flags(b)
    _config_flags(b)
    b.add_argument("--prompts", type=Path, required=True, help="prompts JSONL")
    b.add_argument("--methods", default="ar,sd,hf,via", help="comma list of ar,sd,hf,via")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--limit", type=int, default=None, help="first N prompts only")
    b.add_argument("--out", type=Path, required=True, help="results JSONL (resumable)")
    b.add_argument("--plot", type=Path, default=None, help="PNG plot (needs the plot extra)")
    _common(b)
    b.set_defaults(func=_cmd_bench)

    s = sub.add_parser("search-mask", help="DIMR-style skip-mask search (KL-margin cost)")
    _models(s, drafter=False)
    s.add_argument("--calib", type=Path, required=True, help="JSONL with 'text' or 'prompt'")
    s.add_argument("--skip-ratio", type=float, default=0.45)
    s.add_argument("--steps", type=int, default=50)
    s.add_argument("--bo-period", type=int, default=10)
    s.add_argument("--patience", type=int, default=5)
    s.add_argument("--num-calib", type=int, default=16)
    s.add_argument("--phi", default="relu", choices=["relu", "softplus"])
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True, help="mask JSON")
    _common(s)
    s.set_defaults(func=_cmd_search_mask)

    t = sub.add_parser("theory", help="expected speedups of SD and VIA-SD (block model)")
    t.add_argument("--alpha", type=float, required=True, help="SD acceptance rate")
    t.add_argument("--gamma", type=int, default=5)
    t.add_argument("--c", type=float, required=True, help="drafter/target cost ratio")
    t.add_argument("--tiers", default=None, help="a,b,e tier probabilities for VIA-SD")
    t.add_argument("--kappa-b", type=float, default=0.0)
    t.add_argument("--kappa-c", type=float, default=None, help="default: --alpha")
    t.add_argument("--c-s", type=float, default=0.55, help="slim/target cost ratio")
    t.add_argument("--seed", type=int, default=0, help="unused (no randomness); for symmetry")
    t.add_argument("--device", default="cpu", help="unused; for symmetry")
    t.add_argument("--json-out", type=Path, default=None)
    t.set_defaults(func=_cmd_theory)

    m = sub.add_parser("make-tiny", help="build the CPU fixtures (target, drafter, prompts)")
    m.add_argument("--out", type=Path, required=True, help="directory to write")
    m.add_argument("--seed", type=int, default=0, help="unused; fixtures are fixed recipes")
    m.add_argument(
        "--drafter-steps",
        type=int,
        default=300,
        help="drafter training steps (default 300, agreement 0.75 with q; the 0.6-0.9 gate "
        "is enforced only for the default)",
    )
    m.add_argument("--device", default="cpu")
    m.add_argument("--json-out", type=Path, default=None)
    m.set_defaults(func=_cmd_make_tiny)
    return ap


def _emit(obj: Any, path: Path | None) -> None:
    text = json.dumps(obj, indent=2, default=str)
    print(text)
    if path is not None:
        from llmcore.data import atomic_write_text

        atomic_write_text(path, text + "\n")


def _config(ns: argparse.Namespace):
    from dataclasses import replace

    from llmcore.config import config_from_args
    from via_sd.config import ViaSDConfig

    cfg = config_from_args(ViaSDConfig, ns)
    if ns.alphas:
        try:
            a1, a2 = (float(x) for x in ns.alphas.split(","))
        except ValueError:
            from via_sd.errors import ViaSDConfigError

            raise ViaSDConfigError(
                f"--alphas must be two numbers 'a1,a2', got {ns.alphas!r}"
            ) from None
        ref = ViaSDConfig.from_alphas(a1, a2)
        cfg = replace(cfg, tau_accept=ref.tau_accept, tau_escalate=ref.tau_escalate)
    return cfg


def _load(ns: argparse.Namespace):
    import torch

    from llmcore.models import load_causal_lm, load_tokenizer
    from llmcore.runtime import select_device, set_seed
    from via_sd.drafters import EarlyExitDrafter, PromptLookupDrafter

    if ns.threads:
        torch.set_num_threads(ns.threads)
    set_seed(getattr(ns, "seed", 0) or 0)
    device = str(select_device(None if ns.device == "auto" else ns.device))
    target = load_causal_lm(ns.target, dtype=ns.dtype, device=device)
    tok = load_tokenizer(ns.target)
    spec = getattr(ns, "drafter", None)
    if spec is None:
        drafter = None
    elif spec.startswith("prompt-lookup"):
        n = int(spec.split(":", 1)[1]) if ":" in spec else 2
        drafter = PromptLookupDrafter(n=n)
    elif spec.startswith("early-exit:"):
        drafter = EarlyExitDrafter(target, int(spec.split(":", 1)[1]))
    else:
        drafter = load_causal_lm(spec, dtype=ns.dtype, device=device)
    return target, drafter, tok


def _slim(ns: argparse.Namespace, target):
    from via_sd.slim import SlimVerifier, load_mask

    if ns.mask is not None:
        return load_mask(ns.mask, target)
    if ns.skip_layers is not None:
        layers = [int(x) for x in ns.skip_layers.split(",") if x.strip()]
        return SlimVerifier(target, skip_layers=layers)
    return SlimVerifier(target, skip_ratio=ns.skip_ratio)


def _prompts(ns: argparse.Namespace) -> list[dict[str, Any]]:
    from llmcore.data import read_jsonl
    from via_sd.errors import ViaSDInputError

    if getattr(ns, "prompt", None) is not None:
        return [{"id": "prompt-0", "prompt": ns.prompt, "reference": None}]
    rows = read_jsonl(ns.prompts)
    for i, r in enumerate(rows):
        if "prompt" not in r:
            raise ViaSDInputError(f"{ns.prompts}:{i + 1}: a prompts JSONL row needs a 'prompt' key")
        r.setdefault("id", f"prompt-{i}")
        r.setdefault("reference", None)
    if not rows:
        raise ViaSDInputError(f"{ns.prompts} holds no prompts")
    return rows


def _cmd_generate(ns: argparse.Namespace) -> int:
    import torch

    from via_sd.bench import encode_prompt, run_method

    cfg = _config(ns)
    target, drafter, tok = _load(ns)
    if cfg.eos_token_id is None and tok.eos_token_id is not None:
        from dataclasses import replace

        cfg = replace(cfg, eos_token_id=tok.eos_token_id)
    slim = _slim(ns, target) if ns.method == "via" else None
    out = []
    with torch.no_grad():
        for row in _prompts(ns):
            res = run_method(
                ns.method, target, drafter, slim, encode_prompt(tok, row["prompt"]), cfg
            )
            out.append(
                {
                    "id": row["id"],
                    "output": tok.decode(res.new_tokens, skip_special_tokens=True),
                    **res.stats.to_dict(),
                }
            )
    _emit(out if len(out) > 1 else out[0], ns.json_out)
    return 0


def _cmd_bench(ns: argparse.Namespace) -> int:
    from llmcore.cli import print_table
    from via_sd.bench import plot, run_bench, versus_sd_line

    cfg = _config(ns)
    target, drafter, tok = _load(ns)
    slim = _slim(ns, target)
    prompts = _prompts(ns)[: ns.limit] if ns.limit else _prompts(ns)
    res = run_bench(
        target,
        drafter,
        tok,
        prompts,
        cfg,
        slim=slim,
        methods=[m.strip() for m in ns.methods.split(",") if m.strip()],
        repeats=ns.repeats,
        warmup=ns.warmup,
        out=ns.out,
    )
    print_table(res["rows"])
    line = versus_sd_line(res["summary"])
    if line:
        print(line)
    if ns.plot is not None and not plot(res["summary"], ns.plot):
        print("matplotlib missing: pip install 'via-sd[plot]' for --plot", file=sys.stderr)
    if ns.json_out is not None:
        _emit({"rows": res["rows"], "summary": res["summary"]}, ns.json_out)
    return 0


def _cmd_search_mask(ns: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json, read_jsonl
    from via_sd.errors import ViaSDInputError
    from via_sd.mask_search import dimr_search

    target, _, tok = _load(ns)
    rows = read_jsonl(ns.calib)[: ns.num_calib]
    texts = [r.get("text") or (r.get("prompt", "") + (r.get("reference") or "")) for r in rows]
    texts = [t for t in texts if t]
    if not texts:
        raise ViaSDInputError(f"{ns.calib} holds no 'text' or 'prompt' fields")
    from via_sd.bench import encode_prompt

    dev = next(target.parameters()).device
    import torch

    calib = [torch.tensor(encode_prompt(tok, t), device=dev) for t in texts]
    res = dimr_search(
        target,
        calib,
        skip_ratio=ns.skip_ratio,
        max_steps=ns.steps,
        bo_period=ns.bo_period,
        patience=ns.patience,
        phi=ns.phi,
        seed=ns.seed,
    )
    atomic_write_json(ns.out, res.to_json())
    _emit(res.to_json(), ns.json_out)
    return 0


def _cmd_theory(ns: argparse.Namespace) -> int:
    from via_sd import theory

    out: dict[str, Any] = {
        "alpha": ns.alpha,
        "gamma": ns.gamma,
        "c": ns.c,
        "c_s": ns.c_s,
        "sd_expected_tokens": theory.sd_expected_tokens(ns.alpha, ns.gamma),
        "sd_speedup": theory.sd_speedup(ns.alpha, ns.gamma, ns.c),
        "optimal_gamma": theory.optimal_gamma(ns.alpha, ns.c),
        "via_upper_bound": theory.via_upper_bound(ns.gamma, ns.c, ns.c_s),
    }
    if ns.tiers:
        from via_sd.errors import ViaSDConfigError

        try:
            a, b, e = (float(x) for x in ns.tiers.split(","))
        except ValueError:
            raise ViaSDConfigError(f"--tiers must be 'a,b,e', got {ns.tiers!r}") from None
        kc = ns.alpha if ns.kappa_c is None else ns.kappa_c
        model = theory.via_block_model(a, b, e, ns.kappa_b, kc, ns.gamma, ns.c, ns.c_s)
        out["via"] = model.to_dict()
        # VIA vs SD at the same drafter and γ: faster per block only if c_s < P(no q call)
        out["via"]["vs_sd_block_cost"] = theory.via_vs_sd_block_cost(
            model.p_no_target, ns.gamma, ns.c, ns.c_s
        )
        out["via"]["break_even_c_s"] = model.p_no_target
    _emit(out, ns.json_out)
    return 0


def _cmd_make_tiny(ns: argparse.Namespace) -> int:
    import shutil

    from llmcore.data import write_jsonl
    from via_sd.tiny import build_fixtures, calib_texts, eval_prompts

    fx = build_fixtures(drafter_steps=ns.drafter_steps)
    ns.out.mkdir(parents=True, exist_ok=True)
    for name in ("target", "drafter"):
        dst = ns.out / name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(fx.info[f"{name}_path"], dst)
    write_jsonl(ns.out / "prompts.jsonl", eval_prompts(64))
    write_jsonl(
        ns.out / "calib.jsonl",
        [{"id": f"calib-{i}", "text": t} for i, t in enumerate(calib_texts(16))],
    )
    info = {**fx.info, "out": str(ns.out)}
    _emit(info, ns.json_out or ns.out / "info.json")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``via-sd``: a via-sd or llmcore error prints ``via-sd: error: ...`` and returns 2
    (``llmcore.cli.run_main``); anything else is a bug and raises."""
    from llmcore.cli import run_main

    return run_main("via-sd", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
