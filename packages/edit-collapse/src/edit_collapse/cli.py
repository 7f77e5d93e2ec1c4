"""``edit-collapse`` command line: edit, capability, geometry, sweep, make-synthetic,
pretrain-tiny, bench. ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

METHODS = ("ft", "ft-m", "ft-l", "rome", "memit", "alphaedit", "retrieval", "ike")
MIN_SCORE_HELP = (
    "retrieval with --encoder embed/hidden: keep only facts whose cosine similarity to the "
    "query reaches this floor (default: none)"
)
ENCODER_NAME_HELP = (
    "sentence encoder of --encoder embed/auto: a hub id or a local folder saved by "
    "sentence-transformers (loads offline; default: all-MiniLM-L6-v2)"
)


def _err(msg: str) -> Exception:
    from edit_collapse.errors import EditInputError

    return EditInputError(msg)


def _eval_at(s: str) -> list[Any]:
    out: list[Any] = []
    for x in s.split(","):
        x = x.strip()
        if x == "all":
            out.append("all")
        elif x.isdigit() and int(x) > 0:
            out.append(int(x))
        else:
            raise _err(f"--eval-at item {x!r}: use positive integers or 'all', e.g. 1,10,100,all")
    return out


def _load(model: str, device: str, dtype: str) -> tuple[Any, Any]:
    from llmcore import load_model_and_tokenizer

    model_, tok = load_model_and_tokenizer(model, device=device, dtype=dtype)
    model_.requires_grad_(True)
    return model_, tok


def _judge(args: argparse.Namespace) -> Any:
    if args.matcher != "judge":
        return None
    if not args.judge_url:
        raise _err(
            "--matcher judge needs --judge-url (an OpenAI-compatible server) and --judge-model"
        )
    from llmcore.generation import get_backend

    return get_backend("openai", args.judge_model, base_url=args.judge_url)


def _encoder_kw(
    encoder: str, encoder_name: str | None, where: str = "--encoder-name"
) -> dict[str, Any]:
    """Keyword arguments of a retrieval/IKE editor for ``encoder`` and ``encoder_name``; a local
    folder that is not a sentence-transformers model is refused before any model loads."""
    if not encoder_name:
        return {"encoder": encoder}
    if encoder not in ("auto", "embed"):
        raise _err(
            f"{where} names a sentence encoder: use it with encoder 'embed' (or 'auto'), not {encoder!r}"
        )
    from edit_collapse.retrieval import check_encoder_name

    check_encoder_name(encoder_name)
    return {"encoder": encoder, "encoder_name": encoder_name}


def _editor(args: argparse.Namespace, stats_texts: list[str] | None) -> Any:
    from edit_collapse.config import load_hparams
    from edit_collapse.factory import make_editor

    if args.method in ("retrieval", "ike"):
        kw: dict[str, Any] = _encoder_kw(args.encoder, args.encoder_name)
        if args.method == "retrieval":
            kw["k"] = args.k
            if args.min_score is not None:
                kw["min_score"] = args.min_score
        return make_editor(args.method, **kw)
    cfg = load_hparams(args.hparams) if args.hparams else None
    return make_editor(args.method, cfg, stats_texts=stats_texts)


def _read_lines(path: str | None) -> list[str] | None:
    if not path:
        return None
    p = Path(path)
    if not p.is_file():
        raise _err(f"file {path!r} does not exist")
    return [x for x in p.read_text().splitlines() if x.strip()]


def cmd_edit(args: argparse.Namespace) -> int:
    from edit_collapse.requests import load_requests
    from edit_collapse.session import run_edit_session
    from llmcore.data import ResultsWriter, atomic_write_json

    if args.min_score is not None and args.method != "retrieval":
        raise _err("--min-score applies to --method retrieval")
    reqs = load_requests(args.data, fmt=args.fmt, limit=args.n_edits)
    ed = _editor(args, _read_lines(args.stats_texts))  # bad hparams/encoder fail before loading
    model, tok = _load(args.model, args.device, args.dtype)
    res = run_edit_session(
        ed, model, tok, reqs, eval_at=_eval_at(args.eval_at), mode=args.mode, matcher=args.matcher,
        sequential=args.sequential, judge=_judge(args), dataset=Path(args.data).stem,
    )  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    w = ResultsWriter(out / "results.jsonl", id_key="id")
    for c in res.cases:
        row = {"id": f"{res.method}:{c.get('n_edits', 1)}:{c['case_id']}", "method": res.method,
               "dataset": Path(args.data).stem, "n_edits": c.get("n_edits", 1), "sequential": args.sequential,
               "mode": args.mode, **{k: c[k] for k in ("case_id", "rel", "gen", "loc", "port")}}  # fmt: skip
        if not w.is_done(row["id"]):
            w.write(row)
    atomic_write_json(out / "summary.json", {"model": args.model, "rows": res.rows})
    if res.handle is not None and getattr(ed, "parametric", True):
        res.handle.save(out / "deltas.safetensors")
    elif hasattr(ed, "save"):
        ed.save(out / "memory.jsonl")
    for r in res.rows:
        print(
            json.dumps({k: r[k] for k in ("method", "n_edits", "rel", "gen", "loc", "port", "avg")})
        )
    return 0


def _apply_edited(model: Any, tok: Any, edited: str | None, encoder: str = "auto",
                  encoder_name: str | None = None, min_score: float | None = None) -> Any:  # fmt: skip
    if not edited:
        return model
    p = Path(edited)
    if (p / "deltas.safetensors").is_file():
        from edit_collapse.editors import EditHandle

        EditHandle.load(model, p / "deltas.safetensors")
        return model
    if (p / "memory.jsonl").is_file():
        from edit_collapse.retrieval import RetrievalEditor
        from llmcore.data import read_jsonl

        ed = RetrievalEditor(**_encoder_kw(encoder, encoder_name), min_score=min_score)
        ed.memory = [r["fact"] for r in read_jsonl(p / "memory.jsonl")]
        return ed.wrap(model, tok)
    raise _err(f"--edited {edited!r} holds neither deltas.safetensors nor memory.jsonl")


def cmd_capability(args: argparse.Namespace) -> int:
    from edit_collapse.capability import evaluate_capabilities

    _encoder_kw(args.encoder, args.encoder_name)  # a bad encoder folder fails before loading
    model, tok = _load(args.model, args.device, args.dtype)
    target = _apply_edited(model, tok, args.edited, args.encoder, args.encoder_name, args.min_score)
    tasks = [t for t in args.tasks.split(",") if t]
    res = evaluate_capabilities(
        target, tok, tasks, limit=args.limit, include_path=args.include_path
    )
    print(json.dumps(res, indent=1))
    return 0


def cmd_geometry(args: argparse.Namespace) -> int:
    import torch

    from edit_collapse.geometry import collapse_summary, hidden_states, relative_change

    model, tok = _load(args.model, args.device, args.dtype)
    probe = _read_lines(args.probe) or []
    layers = [int(x) for x in args.layers.split(",")]
    pre = hidden_states(model, tok, probe, layers)
    post = None
    if args.after:
        _apply_edited(model, tok, args.after)
        post = hidden_states(model, tok, probe, layers)
    rows = []
    for layer, H in pre.items():
        _, S, Vt = torch.linalg.svd(H, full_matrices=False)
        R = relative_change(H, post[layer], Vt, S) if post is not None else torch.zeros_like(S)
        summ = collapse_summary(S, R) if post is not None else {}
        print(json.dumps({"layer": layer, "effective_rank": float(torch.exp(-((p := S / S.sum()) * p.log()).sum())),
                          "condition": float(S[0] / S[-1]), **summ}))  # fmt: skip
        rows += [
            {"layer": layer, "k": k, "sigma": float(S[k]), "R": float(R[k])} for k in range(len(S))
        ]
    if args.out:
        from llmcore.data import write_jsonl

        write_jsonl(args.out, rows)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import yaml

    from edit_collapse.config import load_hparams
    from edit_collapse.factory import make_editor
    from edit_collapse.requests import load_requests
    from edit_collapse.session import run_edit_session
    from llmcore.data import ResultsWriter

    p = Path(args.config)
    if not p.is_file():
        raise _err(f"sweep config {args.config!r} does not exist")
    cfg = yaml.safe_load(p.read_text())
    for key in ("model", "methods", "n_edits", "data"):
        if key not in cfg:
            raise _err(
                f"sweep config {args.config!r} lacks {key!r} (needs model, methods, n_edits, data)"
            )
    enc_kw = _encoder_kw(cfg.get("encoder", "auto"), cfg.get("encoder_name"), "encoder_name")
    model, tok = _load(cfg["model"], cfg.get("device", "cpu"), cfg.get("dtype", "float32"))
    w = ResultsWriter(cfg.get("out", "sweep.jsonl"), id_key="id")
    stats = _read_lines(cfg.get("stats_texts"))
    datasets = cfg["data"] if isinstance(cfg["data"], list) else [cfg["data"]]
    for data in datasets:
        for method in cfg["methods"]:
            for n in cfg["n_edits"]:
                rid = f"{Path(data).stem}:{method}:{n}"
                if w.is_done(rid):
                    continue
                reqs = load_requests(
                    data, fmt=cfg.get("fmt", "zsre"), limit=None if n == "all" else int(n)
                )
                hp = (cfg.get("hparams") or {}).get(method)
                kw: dict[str, Any] = (
                    dict(enc_kw) if method in ("retrieval", "ike") else {"stats_texts": stats}
                )
                if method == "retrieval" and cfg.get("min_score") is not None:
                    kw["min_score"] = float(cfg["min_score"])
                ed = make_editor(method, load_hparams(hp) if hp else None, **kw)
                res = run_edit_session(ed, model, tok, reqs, eval_at=("all",), mode=cfg.get("mode", "teacher_forced"),
                                       dataset=Path(data).stem)  # fmt: skip
                w.write({"id": rid, **res.rows[-1]})
                if res.handle is not None:
                    res.handle.restore()
                print(
                    rid,
                    json.dumps({k: res.rows[-1][k] for k in ("rel", "gen", "loc", "port", "avg")}),
                )
    return 0


def cmd_make_synthetic(args: argparse.Namespace) -> int:
    from edit_collapse import world as W
    from edit_collapse.requests import world_requests
    from llmcore.data import write_jsonl

    w = W.make_world(args.entities, args.relations, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        out / "facts.jsonl",
        [{"subject": f.subject, "relation": f.relation, "value": f.value} for f in w.facts],
    )
    n = min(args.n_edits, len(w.facts))
    write_jsonl(out / "requests.jsonl", [r.to_dict() for r in world_requests(w, n, seed=args.seed)])
    _, held = W.reasoning_problems(args.seed)
    write_jsonl(out / "reasoning.jsonl", [{"question": p, "answer": a} for p, a in held])
    (out / "train.txt").write_text("\n".join(W.training_documents(w, seed=args.seed)) + "\n")
    print(f"wrote {len(w.facts)} facts, {n} requests, {len(held)} reasoning problems to {out}")
    return 0


def cmd_pretrain_tiny(args: argparse.Namespace) -> int:
    import shutil

    from edit_collapse.tiny import build_world_model

    e = build_world_model(
        args.entities, args.relations, args.steps, args.lr, args.seed, progress=True
    )
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise _err(f"output folder {args.out!r} is not empty")
    shutil.copytree(e.path, out, dirs_exist_ok=True)
    print(
        json.dumps(
            {
                "path": str(out),
                **{k: e.metrics.get(k) for k in ("gate_recall", "gate_reasoning", "eval_loss")},
            }
        )
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from edit_collapse.bench import run_bench

    run_bench(out=args.out, plot=args.plot, n_batch=args.batch)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="edit-collapse", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    def model_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model", required=True, help="hub id or local path of a causal LM")
        q.add_argument("--device", default="cpu", help="cpu, cuda, auto (default: cpu)")
        q.add_argument("--dtype", default="float32", help="float32, bf16, ... (default: float32)")

    def encoder_args(q: argparse.ArgumentParser, what: str) -> None:
        q.add_argument(
            "--encoder", default="auto", choices=("auto", "embed", "bm25", "hidden"), help=what
        )
        q.add_argument("--encoder-name", help=ENCODER_NAME_HELP)
        q.add_argument("--min-score", type=float, help=MIN_SCORE_HELP)

    e = sub.add_parser("edit", help="edit a model and evaluate Rel/Gen/Loc/Port at checkpoints")
    model_args(e)
    e.add_argument("--method", choices=METHODS, required=True)
    e.add_argument("--hparams", help="EasyEdit hparams YAML (parametric methods)")
    e.add_argument("--data", required=True, help="requests file (JSON list or JSONL)")
    e.add_argument("--fmt", default="zsre", choices=("zsre", "counterfact", "easyedit", "jsonl"))
    e.add_argument("--n-edits", type=int, default=100)
    g = e.add_mutually_exclusive_group()
    g.add_argument("--sequential", dest="sequential", action="store_true", default=True)
    g.add_argument("--independent", dest="sequential", action="store_false")
    e.add_argument("--eval-at", default="1,10,100,all")
    e.add_argument("--mode", default="teacher_forced", choices=("teacher_forced", "generate"))
    e.add_argument("--matcher", default="em", choices=("em", "contains", "judge"))
    e.add_argument("--judge-url", help="OpenAI-compatible base URL of the judge (matcher judge)")
    e.add_argument("--judge-model", default="Qwen/Qwen2.5-72B-Instruct")
    encoder_args(e, "retrieval/IKE encoder (default: auto, the sentence encoder else BM25)")
    e.add_argument("--k", type=int, default=3, help="retrieved facts (retrieval)")
    e.add_argument("--stats-texts", help="text file, one line per text, for covariance statistics")
    e.add_argument("-o", "--out", required=True)
    e.set_defaults(func=cmd_edit)

    c = sub.add_parser("capability", help="lm-eval accuracy of a (possibly edited) model")
    model_args(c)
    c.add_argument("--edited", help="output folder of `edit` (deltas or retrieval memory)")
    c.add_argument("--tasks", default="gsm8k,arc_challenge")
    c.add_argument("--limit", type=int)
    c.add_argument("--include-path", help="folder of local lm-eval task YAMLs")
    encoder_args(c, "retrieval encoder when --edited holds a retrieval memory")
    c.set_defaults(func=cmd_capability)

    gm = sub.add_parser("geometry", help="SVD of probe states and R_k after edits")
    model_args(gm)
    gm.add_argument("--probe", required=True, help="text file, one probe input per line")
    gm.add_argument("--layers", required=True, help="comma-separated layer indices")
    gm.add_argument("--after", help="output folder of `edit` to compare against")
    gm.add_argument("-o", "--out", help="JSONL of {layer, k, sigma, R}")
    gm.set_defaults(func=cmd_geometry)

    s = sub.add_parser("sweep", help="methods x edit counts x datasets into one resumable JSONL")
    s.add_argument("--config", required=True)
    s.set_defaults(func=cmd_sweep)

    m = sub.add_parser(
        "make-synthetic", help="write the synthetic world (facts, requests, reasoning)"
    )
    m.add_argument("-o", "--out", required=True)
    m.add_argument("--entities", type=int, default=300)
    m.add_argument("--relations", type=int, default=8)
    m.add_argument("--n-edits", type=int, default=100)
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(func=cmd_make_synthetic)

    t = sub.add_parser(
        "pretrain-tiny", help="pre-train (or load) the gated world model and copy it"
    )
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--entities", type=int, default=40)
    t.add_argument("--relations", type=int, default=4)
    t.add_argument("--steps", type=int, default=900)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=cmd_pretrain_tiny)

    b = sub.add_parser("bench", help="latency, overhead and retention table on the world model")
    b.add_argument("-o", "--out", default="bench.json")
    b.add_argument("--batch", type=int, default=100, help="MEMIT batch size measured besides 1")
    b.add_argument("--plot", help="PNG of retention and Average against edits (needs [plot])")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("edit-collapse", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
