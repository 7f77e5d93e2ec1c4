"""``circuitprint`` command line: discover, triggers, verify, robustness, baselines,
demo-tiny, bench.

``circuitprint --help`` imports neither torch nor transformers (heavy imports live in the
commands). ``verify`` exits 0 (derived), 1 (independent), 2 (inconclusive), 3 on bad input;
the other commands exit 2 on bad input with a one-line message (``llmcore.cli.run_main``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TRANSFORMS = ("ft", "lora", "merge-linear", "ties", "int8", "prune", "permute")
BASELINES = ("pcs", "huref", "reef", "agreement")


def _write(path: str | Path, obj: Any) -> None:
    from llmcore.data import atomic_write_json

    atomic_write_json(path, obj)


def _load(path: str) -> tuple[Any, Any]:
    from llmcore.models import load_model_and_tokenizer

    return load_model_and_tokenizer(path, device="cpu", dtype="float32")


def _cmd_discover(args: argparse.Namespace) -> int:
    from circuitprint.config import DiscoverConfig
    from circuitprint.pipeline import discover
    from circuitprint.probes import ProbeSet
    from llmcore.config import config_from_args

    cfg = config_from_args(DiscoverConfig, args)
    model, tok = _load(args.model)
    d = discover(model, tok, ProbeSet.from_jsonl(args.probes), cfg)
    _write(args.out, d.to_dict() | {"config": cfg.__dict__})
    print(f"{len(d.essential)} essential supernode(s) of {len(d.supernodes)}; "
          f"faithfulness {d.faithfulness}; wrote {args.out}")  # fmt: skip
    return 0


def _cmd_triggers(args: argparse.Namespace) -> int:
    from circuitprint.config import DiscoverConfig, TriggerConfig
    from circuitprint.pipeline import Discovery
    from circuitprint.triggers import synthesize_triggers
    from llmcore.config import config_from_args

    cfg = config_from_args(TriggerConfig, args)
    raw = json.loads(Path(args.supernodes).read_text())
    d = Discovery.from_dict(raw)
    dcfg = DiscoverConfig(**raw.get("config", {}))
    model, tok = _load(args.model)
    refs = [_load(r)[0] for r in args.reference_model]
    sig = synthesize_triggers(model, tok, d.probes, d.essential, cfg, node_spec=dcfg.node_spec(),
                              reference_models=refs, model_name=args.model)  # fmt: skip
    sig.save(args.out)
    print(f"{len(sig.triggers)} trigger(s); statistics {sig.stats}; wrote {args.out}")
    return 0


def _suspect(cfg: Any) -> Any:
    from circuitprint.errors import VerificationError
    from circuitprint.verify import HFSuspect, OpenAICompatSuspect, VLLMSuspect

    if not cfg.suspect:
        raise VerificationError("--suspect is required (a path, hub id or base URL)")
    if cfg.backend == "openai":
        return OpenAICompatSuspect(cfg.suspect, cfg.served_model or "default")
    if cfg.backend == "vllm":
        return VLLMSuspect(cfg.suspect)
    return HFSuspect(cfg.suspect)


def _cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 derived, 1 independent, 2 inconclusive, 3 on bad input (one-line message)."""
    import sys

    from llmcore.errors import LLMCoreError

    try:
        return _verify(args)
    except LLMCoreError as e:
        print(f"circuitprint: error: {e}", file=sys.stderr)
        return 3


def _verify(args: argparse.Namespace) -> int:
    from circuitprint.config import VerifyConfig
    from circuitprint.triggers import Signature
    from circuitprint.verify import check_decision, verify
    from llmcore.config import config_from_args

    cfg = config_from_args(VerifyConfig, args)
    check_decision(max(0.05, cfg.reference_tmr or 0.0), cfg.p_max, cfg.tmr_min)
    sig = Signature.load(cfg.signature)
    v = verify(sig, _suspect(cfg), cfg.mode, cfg.reference_tmr, cfg.p_max, cfg.tmr_min)
    if cfg.out:
        _write(cfg.out, v.to_dict())
    print(f"{v.verdict}: TMR {v.tmr:.2f} on {v.n_usable} usable trigger(s), p = {v.p_value:.2e}, "
          f"r0 = {v.r0:.2f}, clean consistency {v.clean_consistency:.2f} {v.message}")  # fmt: skip
    return v.exit_code


def _cmd_robustness(args: argparse.Namespace) -> int:
    from circuitprint import transforms as T
    from circuitprint.errors import CircuitPrintError
    from circuitprint.triggers import Signature
    from circuitprint.verify import HFSuspect, verify
    from llmcore.data import read_jsonl

    sig = Signature.load(args.signature)
    model, tok = _load(args.model)
    names = [t.strip() for t in args.transforms.split(",") if t.strip()]
    bad = [n for n in names if n not in TRANSFORMS]
    if bad:
        raise CircuitPrintError(f"unknown transform(s) {bad}; choose from {', '.join(TRANSFORMS)}")
    docs = [r["text"] for r in read_jsonl(args.data)] if args.data else []
    needs = {"ft", "lora", "merge-linear", "ties"} & set(names)
    if needs and not docs:
        raise CircuitPrintError(f"transform(s) {sorted(needs)} fine-tune: pass --data FILE.jsonl "
                                "with a 'text' field")  # fmt: skip
    kw = {"lr": args.lr, "steps": args.steps}
    report = {}
    ft = {}
    for n in names:
        if n == "ft":
            m = _load(args.model)[0]
            T.finetune(m, tok, docs, seed=1, **kw)
        elif n == "lora":
            m, _ = T.lora_finetune(_load(args.model)[0], tok, docs, seed=2, **kw)
        elif n in ("merge-linear", "ties"):
            for s in (1, 2):
                if s not in ft:
                    ft[s] = _load(args.model)[0]
                    T.finetune(ft[s], tok, docs[s - 1 :: 2], seed=s, **kw)
            m = T.merge_linear([ft[1], ft[2]], [0.5, 0.5]) if n == "merge-linear" \
                else T.merge_ties(model, [ft[1], ft[2]], density=0.5)  # fmt: skip
        elif n == "int8":
            m = T.quantize_int8(model)
        elif n == "prune":
            m = T.prune_magnitude(model, 0.2)
        else:
            m = T.permute_neurons(model, seed=0)
        v = verify(sig, HFSuspect(m, tok))
        report[n] = {"verdict": v.verdict, "tmr": v.tmr, "p_value": v.p_value}
        print(f"{n:>13}: {v.verdict} TMR {v.tmr:.2f}")
    _write(args.out, report)
    return 0


def _cmd_baselines(args: argparse.Namespace) -> int:
    from circuitprint import baselines as B
    from circuitprint.errors import CircuitPrintError

    names = [t.strip() for t in args.methods.split(",") if t.strip()]
    bad = [n for n in names if n not in BASELINES]
    if bad:
        raise CircuitPrintError(f"unknown baseline(s) {bad}; choose from {', '.join(BASELINES)}")
    a, tok = _load(args.protected)
    b, _ = _load(args.suspect)
    prompts = Path(args.prompts).read_text().splitlines() if args.prompts else []
    if {"reef", "agreement"} & set(names) and not prompts:
        raise CircuitPrintError("reef and agreement need --prompts FILE (one prompt a line)")
    fns = {"pcs": lambda: B.pcs(a, b), "huref": lambda: B.huref_ics(a, b),
           "reef": lambda: B.reef_cka(a, b, tok, prompts),
           "agreement": lambda: B.output_agreement(a, b, tok, prompts)}  # fmt: skip
    out = {n: fns[n]() for n in names}
    for n, v in out.items():
        print(f"{n:>10}: {v:.4f}")
    if args.out:
        _write(args.out, out)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from circuitprint.demo import run

    res = run()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        _write(Path(args.out) / "demo.json", res)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from circuitprint.bench import run_bench

    run_bench(args.out, plot=not args.no_plot)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from circuitprint.config import DiscoverConfig, TriggerConfig, VerifyConfig
    from llmcore.config import add_config_arguments

    p = argparse.ArgumentParser(prog="circuitprint", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("discover", help="attribution, circuits, supernodes, essentiality")
    d.add_argument("--model", required=True)
    d.add_argument("--probes", required=True, help="JSONL of {prompt, answer, family, roles}")
    d.add_argument("--out", default="supernodes.json")
    add_config_arguments(d, DiscoverConfig)
    d.set_defaults(func=_cmd_discover)
    t = sub.add_parser("triggers", help="synthesise trigger prompts into a signature")
    t.add_argument("--model", required=True)
    t.add_argument("--supernodes", required=True, help="JSON written by `discover`")
    t.add_argument("--reference-model", action="append", default=[],
                   help="independent reference model (repeatable)")  # fmt: skip
    t.add_argument("--out", default="signature.json")
    add_config_arguments(t, TriggerConfig)
    t.add_argument("--n", dest="n_triggers", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="signature size N (same as --n-triggers)")  # fmt: skip
    t.set_defaults(func=_cmd_triggers)
    v = sub.add_parser("verify", help="black-box verification of a suspect (exit 0/1/2)")
    add_config_arguments(v, VerifyConfig)
    v.set_defaults(func=_cmd_verify)
    r = sub.add_parser("robustness", help="verify transformed copies of a model")
    r.add_argument("--signature", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--transforms", default=",".join(TRANSFORMS))
    r.add_argument("--data", default=None, help="JSONL with 'text' for ft/lora/merges")
    r.add_argument("--lr", type=float, default=1e-4)
    r.add_argument("--steps", type=int, default=500)
    r.add_argument("--out", default="robustness.json")
    r.set_defaults(func=_cmd_robustness)
    b = sub.add_parser("baselines", help="PCS, HuRef ICS, REEF CKA, output agreement")
    b.add_argument("--protected", required=True)
    b.add_argument("--suspect", required=True)
    b.add_argument("--methods", default=",".join(BASELINES))
    b.add_argument("--prompts", default=None, help="text file, one prompt a line")
    b.add_argument("--out", default=None)
    b.set_defaults(func=_cmd_baselines)
    dm = sub.add_parser("demo-tiny", help="the two-hop experiment end to end on tiny models")
    dm.add_argument("--out", default=None)
    dm.set_defaults(func=_cmd_demo)
    be = sub.add_parser("bench", help="attribution vs patching cost, trigger and query cost")
    be.add_argument("--out", default="circuitprint-bench")
    be.add_argument("--no-plot", action="store_true")
    be.set_defaults(func=_cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("circuitprint", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
