"""``respin-quant compare``: the methods x residual-ranks perplexity table on any model.

One run loads the model once and evaluates FP, then each requested method; ReSpinQuant's
rotations are learned once and applied at every requested residual rank. Every finished row is
appended to a JSONL file (``llmcore.data.ResultsWriter``) and learned rotation sets are saved
next to it, so an interrupted run resumes without re-learning or re-evaluating anything.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from respin_quant.config import CompareConfig, QuantConfig, RotationConfig

log = logging.getLogger(__name__)


def _rotation_file(work: Path, method: str, cfg: CompareConfig, q: QuantConfig) -> Path:
    tag = f"{method}_{q.label}_seed{cfg.rotation_seed}_steps{cfg.steps}_lr{cfg.lr:g}"
    return work / f"rotations_{tag}.safetensors"


def compare(
    model: nn.Module,
    calib_ids: Tensor,
    ppl_fn: Any,
    cfg: CompareConfig,
    results: str | Path,
    *,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Evaluate FP and every (method, rank) arm of ``cfg`` on ``model``; returns all rows.

    ``ppl_fn(model) -> float`` is the perplexity protocol; ``results`` the JSONL file that
    makes the run resumable (rows already there are kept, not recomputed)."""
    from llmcore.data import ResultsWriter
    from respin_quant.arch import check_model
    from respin_quant.baselines import quantized_arm
    from respin_quant.learn import learn_rotations
    from respin_quant.rotation import RotationSet, init_rotations, online_state

    d = check_model(model)
    q = QuantConfig(**cfg.quant_kwargs())
    rot = RotationConfig(
        steps=cfg.steps,
        lr=cfg.lr,
        batch_size=min(cfg.batch_size, calib_ids.shape[0]),
        calib_nsamples=calib_ids.shape[0],
        calib_seqlen=calib_ids.shape[1],
        rotation_seed=cfg.rotation_seed,
        online_dense=cfg.online_dense,
        online_block=cfg.online_block,
    )
    work = Path(results).with_suffix(".rotations")  # learned sets, reused on resume
    work.mkdir(parents=True, exist_ok=True)
    gptq = q.weight_quantizer == "gptq" and q.w_bits < 16
    arms: list[tuple[str, str, int | str]] = [("fp", "fp", 0)]
    for m in cfg.method_list():
        if m == "respin":
            arms += [(f"respin r={r}", "respin", r) for r in cfg.rank_list()]
        else:
            arms.append((m, m, 0))
    rows: list[dict[str, Any]] = []
    learned: dict[str, tuple[RotationSet, float]] = {}
    with ResultsWriter(results) as out:
        done = {r["id"]: r for r in out.rows()}
        fp_ppl = None
        for name, method, rank in arms:
            rid = f"{q.label}:{name}"
            if rid in done:
                row = done[rid]
                rows.append(row)
                if method == "fp":
                    fp_ppl = row["ppl"]
                continue
            t_cal = 0.0
            if method == "fp":
                m = model
            else:
                rs = None
                if method == "quarot":
                    rs = init_rotations(model, "quarot", cfg.rotation_seed)
                elif method in ("spinquant", "respin"):
                    if method not in learned:
                        f = _rotation_file(work, method, cfg, q)
                        secs = f.with_suffix(".seconds")
                        if f.exists() and secs.exists():  # resumed: reuse the learned set
                            learned[method] = (RotationSet.load(f, model), float(secs.read_text()))
                        else:
                            t0 = time.perf_counter()
                            rs_l = learn_rotations(
                                model, calib_ids, replace(rot, method=method), q, progress=progress
                            )
                            learned[method] = (rs_l, time.perf_counter() - t0)
                            rs_l.save(f)
                            secs.write_text(f"{learned[method][1]:.6f}")
                    rs, t_cal = learned[method]
                m = quantized_arm(
                    model,
                    q,
                    rs,
                    residual_rank=rank if method == "respin" else 0,
                    calib_ids=calib_ids if gptq else None,
                    online_dense=cfg.online_dense,
                    online_block=cfg.online_block,
                )
            p = float(ppl_fn(m))
            if method == "fp":
                fp_ppl = p
            st = online_state(m) if method != "fp" else None
            row = {
                "id": rid,
                "setting": q.label,
                "method": name,
                "rank": rank if method == "respin" else None,
                "ppl": p,
                "ppl_ratio": p / fp_ppl if fp_ppl else None,
                "calib_s": t_cal,
                "online_macs_per_token": st.macs_per_token(d)["transition_macs"] if st else 0,
            }
            out.write(row)
            rows.append(row)
            if progress:
                print(f"  {rid:<24} ppl {p:.4f}", flush=True)
            del m
    return rows


def format_compare(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| setting | method | PPL | PPL / FP | calib s | online MACs/token |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['ppl_ratio']:.3f}" if r.get("ppl_ratio") else "-"
        lines.append(
            f"| {r['setting']} | {r['method']} | {r['ppl']:.4f} | {ratio} | {r['calib_s']:.1f} | "
            f"{r['online_macs_per_token']:,} |"
        )
    return "\n".join(lines)
