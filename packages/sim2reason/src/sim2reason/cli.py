"""``sim2reason`` command line: scenes -> recordings -> QA -> filter -> export -> train -> eval.

``sim2reason --help`` imports neither torch nor transformers (heavy imports live in the
commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _write_json(path: str | Path, obj: Any) -> None:
    from llmcore.data import atomic_write_json

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, obj)


def _load_scenes(folder: str) -> list[Any]:
    from sim2reason.dsl import load_yaml
    from sim2reason.errors import SceneError

    root = Path(folder)
    manifest = root / "manifest.jsonl"
    if manifest.is_file():
        from llmcore.data import read_jsonl

        paths = [root / r["path"] for r in read_jsonl(manifest)]
    else:
        paths = sorted(root.rglob("*.yaml"))
    if not paths:
        raise SceneError(f"no scenes in {folder!r} (expected manifest.jsonl or *.yaml files)")
    return [load_yaml(p) for p in paths]


def _cmd_gen_scenes(a: argparse.Namespace) -> int:
    from llmcore.data import write_jsonl
    from sim2reason.dsl import dump_yaml
    from sim2reason.generate import generate_scenes

    scenes = generate_scenes(a.types, a.n, a.seed, a.difficulty)
    out = Path(a.out)
    rows = []
    for s in scenes:
        stype, i = s.tag.split("/")[0], s.name.rsplit("_", 1)[1]
        rel = Path(stype) / f"scene_{i}" / "scene_output.yaml"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(dump_yaml(s))
        rows.append({"path": str(rel), "name": s.name, "scene_type": stype,
                     "entities": len(s.entities)})  # fmt: skip
    write_jsonl(out / "manifest.jsonl", rows)
    print(f"wrote {len(rows)} scenes to {out}")
    return 0


def _cmd_simulate(a: argparse.Namespace) -> int:
    from llmcore.data import write_jsonl
    from sim2reason.engines import get_engine
    from sim2reason.errors import Sim2ReasonError

    eng = get_engine(a.engine)
    out = Path(a.out)
    rows = []
    for s in _load_scenes(a.scenes):
        try:
            rec = eng.simulate(s, dt=a.dt, duration=a.duration)
            status = f"unstable: {rec.reason}" if rec.unstable else "ok"
        except Sim2ReasonError as e:
            if "dt=" in str(e) or "duration=" in str(e):
                raise
            rec, status = None, f"{type(e).__name__}: {e}"
        if rec is not None and not rec.unstable:
            rec.save(out / f"{s.name}.npz")
        else:
            print(f"dropped {s.name}: {status}", file=sys.stderr)
        rows.append({"name": s.name, "status": status})
    write_jsonl(out / "manifest.jsonl", rows)
    ok = sum(r["status"] == "ok" for r in rows)
    print(f"simulated {ok}/{len(rows)} scenes with {a.engine} (dt={a.dt}, {a.duration} s) -> {out}")
    return 0


def _cmd_gen_qa(a: argparse.Namespace) -> int:
    import random

    from sim2reason.data import write_jsonl_qas
    from sim2reason.engines import get_engine
    from sim2reason.qa import generate_qa
    from sim2reason.recording import Recording

    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    eng = get_engine(a.engine)
    qas = []
    for s in _load_scenes(a.scenes):
        npz = Path(a.recordings) / f"{s.name}.npz" if a.recordings else None
        if npz is not None and not npz.is_file():
            continue  # dropped at simulation time
        rec = Recording.load(npz) if npz is not None else eng.simulate(s)
        for k in kinds:
            qas += generate_qa(s, rec, k, a.per_scene, random.Random(f"{a.seed}:{s.name}:{k}"),
                               engine=eng)  # fmt: skip
    write_jsonl_qas(qas, a.out)
    print(f"wrote {len(qas)} questions to {a.out}")
    return 0


def _cmd_filter(a: argparse.Namespace) -> int:
    from sim2reason.data import read_jsonl_qas, write_jsonl_qas
    from sim2reason.engines import get_engine
    from sim2reason.filters import dedup, shortcut_filter

    scenes = {s.name: s for s in _load_scenes(a.scenes)}
    qas = read_jsonl_qas(a.qa)
    eng = get_engine(a.engine)
    kept = []
    by_scene: dict[str, list[Any]] = {}
    for q in qas:
        by_scene.setdefault(q.reference, []).append(q)
    for name, group in by_scene.items():
        if name not in scenes:
            print(f"skipping {len(group)} questions of unknown scene {name!r}", file=sys.stderr)
            continue
        kept += shortcut_filter(group, scenes[name], eng, a.rel_tol, max_children=a.max_children)
    kept = dedup(kept)
    write_jsonl_qas(kept, a.out)
    print(f"kept {len(kept)}/{len(qas)} questions -> {a.out}")
    return 0


def _cmd_export(a: argparse.Namespace) -> int:
    from sim2reason.data import read_jsonl_qas, split_train_test, to_dataset, write_verl_parquet
    from sim2reason.filters import dedup

    qas = dedup(read_jsonl_qas(a.qa))
    train, test = split_train_test(qas, a.split, a.seed)
    out = Path(a.out)
    if a.format == "verl":
        write_verl_parquet(train, out / "train.parquet", split="train", instruction=a.instruction)
        if test:
            write_verl_parquet(test, out / "test.parquet", split="test", instruction=a.instruction)
    else:
        to_dataset(train, a.instruction).save_to_disk(str(out / "train"))
        if test:
            to_dataset(test, a.instruction).save_to_disk(str(out / "test"))
    print(f"exported {len(train)} train / {len(test)} test rows ({a.format}) -> {out}")
    return 0


def _load_train_rows(folder: str) -> Any:
    from datasets import Dataset, load_from_disk

    from sim2reason.evaluate import load_eval_rows

    p = Path(folder)
    if (p / "train.parquet").is_file():
        rows = load_eval_rows(p / "train.parquet")
        return Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}],
                                   "answer": float(r["answer"]), "kind": r["kind"],
                                   "given_variable_mapping": r["given_variable_mapping"] or "{}"}
                                  for r in rows])  # fmt: skip
    if (p / "train").is_dir():
        return load_from_disk(str(p / "train"))
    from sim2reason.errors import QAError

    raise QAError(f"{folder!r} holds neither train.parquet nor a train/ dataset (run export)")


def _cmd_train(a: argparse.Namespace) -> int:
    from llmcore.models import load_model_and_tokenizer
    from sim2reason.train import grpo_config, train_grpo

    if a.model == "tiny":
        from sim2reason.arm import ArmConfig, build_warm_start

        model, tok = build_warm_start(ArmConfig(), progress=True).load()
    else:
        model, tok = load_model_and_tokenizer(a.model, dtype=a.dtype, device=a.device)
    ds = _load_train_rows(a.data)
    over: dict[str, Any] = {"max_steps": a.steps}
    if a.lr is not None:
        over["learning_rate"] = a.lr
    if a.use_vllm:
        over.update(use_cpu=False, use_vllm=True, vllm_mode="colocate")
    if a.max_completion_length is not None:
        over["max_completion_length"] = a.max_completion_length
    cfg = grpo_config(a.preset, output_dir=a.out + ".trl", **over)
    model = train_grpo(model, tok, ds, None, cfg)
    model.save_pretrained(a.out, safe_serialization=True)
    tok.save_pretrained(a.out)
    print(f"saved the trained model to {a.out}")
    return 0


def _cmd_eval(a: argparse.Namespace) -> int:
    from llmcore.models import load_model_and_tokenizer
    from sim2reason.evaluate import accuracy, load_eval_rows

    rows = load_eval_rows(a.data)
    if a.limit:
        rows = rows[: a.limit]
    model, tok = load_model_and_tokenizer(a.model, dtype=a.dtype, device=a.device)
    res = accuracy(model, tok, rows, n=a.n, temperature=a.temperature if a.n > 1 else 0.0,
                   rel=a.tol, max_new_tokens=a.max_new_tokens)  # fmt: skip
    res.update({"model": a.model, "data": a.data, "tol": a.tol})
    if a.out:
        _write_json(a.out, res)
    print(json.dumps(res, indent=2))
    return 0


def _cmd_check(a: argparse.Namespace) -> int:
    from sim2reason.errors import ConfigError
    from sim2reason.rewards import check_answer, extract_last_boxed

    mapping = None
    if a.mapping:
        try:
            mapping = json.loads(a.mapping)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--mapping is not JSON: {e}") from e
    if a.kind == "symbolic" and not mapping:
        raise ConfigError("--kind symbolic needs --mapping '{\"symbol\": value, ...}'")
    res = check_answer(a.pred, a.gt, a.kind, mapping, rel=a.tol, math_verify=a.math_verify)
    verdict = "correct" if res["reward"] == 1.0 else "wrong"
    print(f"{verdict}: parsed {res['pred']!r} from {extract_last_boxed(a.pred)!r} "
          f"(ground truth {a.gt}, tolerance {a.tol:g}, boxed={res['has_boxed']})")  # fmt: skip
    return 0 if res["reward"] == 1.0 else 1


def _cmd_demo(a: argparse.Namespace) -> int:
    from sim2reason.demo import run

    res = run()
    if a.json_out:
        _write_json(a.json_out, res)
    print(json.dumps(res, indent=2))
    return 0


def _cmd_bench(a: argparse.Namespace) -> int:
    from sim2reason.bench import run_bench

    run_bench(a.out, quick=a.quick, plot=not a.no_plot, grpo=a.grpo)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sim2reason",
        description="Physics simulators as QA generators for RL on LLMs (scene DSL, engines, "
        "QA + shortcut filter, 5 % reward, GRPO, evaluation)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("gen-scenes", help="random scenes (YAML per scene + manifest.jsonl)")
    p.add_argument("--types", default="analytic", help="all | analytic | comma-separated names")
    p.add_argument("--n", type=int, default=100, help="scenes per type")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--difficulty", choices=["EASY", "MEDIUM", "HARD"], default=None)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_gen_scenes)
    p = sub.add_parser("simulate", help="simulate scenes to .npz recordings")
    p.add_argument("--scenes", required=True)
    p.add_argument("--engine", default="analytic", choices=["analytic", "mujoco"])
    p.add_argument("--dt", type=float, default=1e-3)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_simulate)
    p = sub.add_parser("gen-qa", help="questions from scenes (and their recordings)")
    p.add_argument("--scenes", required=True)
    p.add_argument("--recordings", default=None, help="folder of .npz (else simulate here)")
    p.add_argument("--engine", default="analytic", choices=["analytic", "mujoco"])
    p.add_argument("--kinds", default="numeric", help="comma list of numeric,reverse,symbolic")
    p.add_argument("--per-scene", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_gen_qa)
    p = sub.add_parser("filter", help="shortcut filter (component ablation) + dedup")
    p.add_argument("--qa", required=True)
    p.add_argument("--scenes", required=True)
    p.add_argument("--engine", default="analytic", choices=["analytic", "mujoco"])
    p.add_argument("--rel-tol", type=float, default=0.05)
    p.add_argument("--max-children", type=int, default=None,
                   help="cap on child scenes (required above 10 entities)")  # fmt: skip
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_filter)
    p = sub.add_parser("export", help="90/10 split to a HF dataset or verl parquet")
    p.add_argument("--qa", required=True)
    p.add_argument("--format", choices=["hf", "verl"], default="verl")
    p.add_argument("--split", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--instruction", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_export)
    p = sub.add_parser("train", help="GRPO on exported QA (preset official|tiny)")
    p.add_argument("--model", required=True, help="tiny | hub id | local path")
    p.add_argument("--data", required=True, help="export folder (train.parquet or train/)")
    p.add_argument("--preset", choices=["official", "tiny"], default="tiny")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--max-completion-length", type=int, default=None)
    p.add_argument("--use-vllm", action="store_true", help="vLLM generation (GPU, extra vllm)")
    p.add_argument("--dtype", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser("eval", help="mean@n / pass@n / per scene type on a local set")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help=".jsonl or .parquet")
    p.add_argument("--n", type=int, default=1)
    p.add_argument("--temperature", type=float, default=1.0, help="used when n > 1")
    p.add_argument("--tol", type=float, default=0.01)
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--out", default=None)
    p.set_defaults(func=_cmd_eval)
    p = sub.add_parser("check-answer", help="grade one answer (prints the verdict and parse)")
    p.add_argument("--pred", required=True)
    p.add_argument("--gt", required=True, type=float)
    p.add_argument("--kind", choices=["numeric", "reverse", "symbolic"], default="numeric")
    p.add_argument("--mapping", default=None, help="JSON symbol -> value (symbolic)")
    p.add_argument("--tol", type=float, default=0.05)
    p.add_argument("--math-verify", action="store_true", help="math-verify fallback (extra)")
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("demo", help="generate, simulate, make and filter QA, check answers")
    p.add_argument("--json-out", default=None)
    p.set_defaults(func=_cmd_demo)
    p = sub.add_parser("bench", help="engines, QA/s with the filter, reward checks/s, pipeline")
    p.add_argument("--out", default="sim2reason-bench")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--grpo", action="store_true", help="also time GRPO steps (slow)")
    p.set_defaults(func=_cmd_bench)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("sim2reason", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
