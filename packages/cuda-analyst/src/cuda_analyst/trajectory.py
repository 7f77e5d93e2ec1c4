"""Reference trajectories: a minimal built-in evolver and trajectory freezing (Sec. 3).

``evolve`` writes OpenEvolve-style checkpoints (one JSON per program with ``id``, ``parent_id``,
``generation``, ``iteration_found``, ``code``, ``metrics``, ``prompts``). Freezing groups a
checkpoint by generation: every program with children yields one frozen sample per child
prompt, ``gen{g}/{pid}_{idx}.json`` = ``{id, generation, code, metrics, prompts}``, where
``prompts`` is the exact (pre-injection) system/user prompt that produced that child.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cuda_analyst.errors import FrozenDataError
from cuda_analyst.evaluator import Evaluator, status_rank
from cuda_analyst.feedback import build_reports
from cuda_analyst.masks import AnalysisMask
from cuda_analyst.prompting import (
    ANCHOR,
    SYSTEM_PROMPT,
    decision_block,
    extract_code,
    inject,
    user_prompt,
)

PROMPT_KEY = "full_rewrite_user"


def stable_seed(*parts: Any) -> int:
    """A 31-bit seed from arbitrary parts (stable across processes, unlike ``hash``)."""
    return (
        int.from_bytes(
            hashlib.sha256(json.dumps(parts, default=str).encode()).digest()[:4], "little"
        )
        >> 1
    )


def generate_with_retries(
    llm: Any, prompt: str, n: int, seed: int, max_new_tokens: int = 1024
) -> tuple[list[str], str]:
    """``n`` completions of ``prompt`` (up to 2 retries with jittered backoff); errors are returned."""
    import time

    from llmcore.generation import SamplingParams

    params = SamplingParams(
        n=n, temperature=0.8, top_p=0.95, max_new_tokens=max_new_tokens, seed=seed
    )
    rng = np.random.default_rng(seed)
    err = ""
    for attempt in range(3):
        try:
            return [c.text for c in llm.generate([prompt], params)[0]], ""
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
            if attempt < 2:
                time.sleep(0.2 * 2**attempt + rng.uniform(0, 0.2))
    return [], err


def evolve(
    evaluator: Evaluator,
    llm: Any,
    out_dir: str | Path,
    *,
    generations: int = 8,
    population: int = 8,
    children: int = 4,
    mask: AnalysisMask | None = None,
    seed: int = 0,
    initial: str | None = None,
) -> Path:
    """Minimal evolver: each generation picks ``population`` parents (weighted by status rank),
    asks ``llm`` for ``children`` rewrites each (decision block of ``mask`` injected when given)
    and writes checkpoints under ``out_dir/checkpoints/programs``. Per-generation counts (each
    parent by the highest status of its children) go to ``out_dir/stats.json``."""
    task = evaluator.task
    out = Path(out_dir)
    progdir = out / "checkpoints" / "programs"
    progdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    code0 = initial or task.baseline_src
    r0 = evaluator.evaluate(code0)
    archive = [{"id": "p0000", "parent_id": None, "generation": 0, "iteration_found": 0, "code": code0,
                "metrics": r0.metrics(), "prompts": {}, "task": task.name, "_result": r0}]  # fmt: skip
    stats: dict[str, dict[str, int]] = {}
    it = 0
    for g in range(1, generations + 1):
        weights = np.array([1.0 + status_rank(p["_result"].status) for p in archive])
        k = min(population, len(archive))
        picks = rng.choice(len(archive), size=k, replace=False, p=weights / weights.sum())
        counts = {"total": 0, "fail": 0, "compile": 0, "pass": 0, "fast": 0}
        new = []
        for pi in picks:
            parent = archive[int(pi)]
            best = -1
            for c in range(children):
                it += 1
                history = "\n".join(f"- {a['id']}: {a['metrics'].get('status')} score {a['metrics'].get('combined_score')}"
                                    for a in archive[-3:])  # fmt: skip
                user = user_prompt(parent["code"], parent["metrics"], history, task=task.name)
                block = ""
                if mask is not None:
                    reports = build_reports(
                        task,
                        parent["code"],
                        parent["_result"],
                        mask,
                        llm=llm,
                        seed=stable_seed(seed, g, parent["id"], c),
                    )
                    block = decision_block(reports)
                child_seed = stable_seed(seed, g, parent["id"], c, "child")
                texts, err = generate_with_retries(
                    llm, SYSTEM_PROMPT + "\n\n" + inject(user, block), 1, child_seed
                )
                code = extract_code(texts[0]) if texts else None
                res = evaluator.evaluate(code)
                best = max(best, status_rank(res.status))
                child = {"id": f"p{len(archive) + len(new):04d}", "parent_id": parent["id"], "generation": g,
                         "iteration_found": it, "code": code or "", "metrics": res.metrics(),
                         "prompts": {PROMPT_KEY: {"system": SYSTEM_PROMPT, "user": user}}, "decision": block,
                         "sampling_seed": child_seed, "task": task.name, "error": err, "_result": res}  # fmt: skip
                new.append(child)
            counts["total"] += 1
            counts[("fail", "compile", "pass", "fast")[best]] += 1
        archive += new
        stats[str(g)] = counts
    for p in archive:
        rec = {k: v for k, v in p.items() if k != "_result"}
        (progdir / f"{p['id']}.json").write_text(json.dumps(rec, indent=1))
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    return out


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        warnings.warn(f"skipping malformed JSON {path}: {e}", stacklevel=3)
        return None
    if not isinstance(d, dict):
        warnings.warn(f"skipping {path}: not a JSON object", stacklevel=3)
        return None
    return d


def group_openevolve_by_gen(checkpoint_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Freeze an OpenEvolve-style checkpoint (a folder of program JSONs, or one holding
    ``programs/``): one sample per (parent, child prompt). Returns the written files."""
    cdir = Path(checkpoint_dir)
    pdir = cdir / "programs" if (cdir / "programs").is_dir() else cdir
    files = sorted(pdir.glob("*.json"))
    progs = {d["id"]: d for p in files if (d := _read_json(p)) is not None and "id" in d}
    kids: dict[str, list[dict[str, Any]]] = {}
    for p in progs.values():
        if p.get("parent_id") in progs:
            kids.setdefault(p["parent_id"], []).append(p)
    out, written, no_prompt = Path(out_dir), [], 0
    for pid, ch in sorted(kids.items()):
        parent = progs[pid]
        for idx, child in enumerate(
            sorted(ch, key=lambda c: (c.get("iteration_found", 0), c["id"]))
        ):
            prompts = (child.get("prompts") or {}).get(PROMPT_KEY)
            if not prompts or "user" not in prompts:
                no_prompt += 1
                continue
            g = int(child.get("generation", parent.get("generation", 0)))
            sample = {"id": pid, "generation": g, "code": parent.get("code", ""), "metrics": parent.get("metrics", {}),
                      "prompts": {"system": prompts.get("system", SYSTEM_PROMPT), "user": prompts["user"]},
                      "task": parent.get("task", child.get("task", "")), "child_id": child["id"],
                      "child_code": child.get("code", ""), "sampling_seed": child.get("sampling_seed")}  # fmt: skip
            path = out / f"gen{g}" / f"{pid}_{idx}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(sample, indent=1))
            written.append(path)
    if not written:
        raise FrozenDataError(
            f"no usable samples in {cdir}: {len(files)} files, {len(progs)} programs, "
            f"{len(kids)} with children, {no_prompt} children without prompts['{PROMPT_KEY}']"
        )
    return written


def group_llm4ad_by_gen(
    samples_json: str | Path, out_dir: str | Path, *, task: str = ""
) -> list[Path]:
    """Freeze LLM4AD (EoH) samples ``[{function, sample_order, generation, score, prompt}]``:
    user prompt = stored prompt + ``# Program Evolution History`` + the function in a code
    block; the system prompt is the built-in one."""
    try:
        rows = json.loads(Path(samples_json).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FrozenDataError(f"cannot read LLM4AD samples {samples_json}: {e}") from None
    out, written, bad = Path(out_dir), [], 0
    for k, r in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(r, dict) or not r.get("function") or not r.get("prompt"):
            bad += 1
            continue
        g = int(r.get("generation", 0))
        user = f"{r['prompt']}\n\n{ANCHOR}\n```c\n{r['function']}\n```\n"
        sample = {"id": f"s{r.get('sample_order', k)}", "generation": g, "code": r["function"],
                  "metrics": {"combined_score": r.get("score")}, "prompts": {"system": SYSTEM_PROMPT, "user": user},
                  "task": task}  # fmt: skip
        path = out / f"gen{g}" / f"{sample['id']}_0.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sample, indent=1))
        written.append(path)
    if not written:
        raise FrozenDataError(
            f"no usable LLM4AD samples in {samples_json}: {bad} rows lack function/prompt"
        )
    return written


def load_frozen(frozen_dir: str | Path) -> list[dict[str, Any]]:
    """Frozen samples of a folder (``gen*/*.json``), each with its ``key`` (``gen/pid_idx``);
    malformed files are skipped with a warning, no usable sample is an error with counts."""
    root = Path(frozen_dir)
    files = sorted(root.glob("gen*/*.json"))
    out, bad = [], 0
    for p in files:
        d = _read_json(p)
        if (
            d is None
            or not isinstance(d.get("prompts"), Mapping)
            or "user" not in d["prompts"]
            or "code" not in d
        ):
            bad += 1
            continue
        d["key"] = f"{p.parent.name}/{p.stem}"
        out.append(d)
    if not out:
        raise FrozenDataError(
            f"no usable frozen samples in {root}: {len(files)} files under gen*/, {bad} malformed or without prompts"
        )
    return out
