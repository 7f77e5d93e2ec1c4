"""``respin-quant compare``: the spec section 6 table on any model (spec section 5.3).

One run loads the model once and evaluates FP, then each requested method; ReSpinQuant's
rotations are learned once and applied at every requested residual rank. Every finished row is
appended to a JSONL file (``llmcore.data.ResultsWriter``) and learned rotation sets are saved
next to it, so an interrupted run resumes without re-learning or re-evaluating anything.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from respin_quant.config import QuantConfig, RotationConfig, parse_rank
from respin_quant.errors import RespinConfigError

log = logging.getLogger(__name__)

COMPARE_METHODS = ("rtn", "quarot", "spinquant", "respin")


@dataclass
class CompareConfig:
    """What one ``compare`` run evaluates (quantiser, methods, ranks, rotation learning)."""

    methods: str = field(
        default="rtn,quarot,spinquant,respin", metadata={"help": "comma-separated methods"}
    )
    ranks: str = field(default="0,8,32,full", metadata={"help": "ReSpin residual ranks"})
    w_bits: int = field(default=4, metadata={"help": "weight bits"})
    a_bits: int = field(default=4, metadata={"help": "activation bits"})
    kv_bits: int = field(default=16, metadata={"help": "KV-cache bits"})
    weight_quantizer: str = field(default="rtn", metadata={"help": "rtn or gptq"})
    w_clip_grid: int = field(default=100, metadata={"help": "weight clip ratios searched"})
    w_clip_min: float = field(default=0.8, metadata={"help": "smallest weight clip ratio"})
    steps: int = field(default=100, metadata={"help": "Cayley steps (SpinQuant, ReSpin)"})
    lr: float = field(default=1.5, metadata={"help": "Cayley learning rate"})
    batch_size: int = field(default=8, metadata={"help": "calibration sequences per step"})
    rotation_seed: int = field(default=0, metadata={"help": "seed of the shared Hadamard"})
    online_dense: bool = field(default=False, metadata={"help": "dense non-pow2 H_down"})
    online_block: bool = field(default=False, metadata={"help": "block non-pow2 H_down"})

    def __post_init__(self) -> None:
        bad = [m for m in self.method_list() if m not in COMPARE_METHODS]
        if bad or not self.method_list():
            raise RespinConfigError(
                f"methods={self.methods!r}: use a comma-separated subset of {', '.join(COMPARE_METHODS)}"
            )
        self.rank_list()  # validates
        QuantConfig(**self.quant_kwargs())  # validates bits, quantiser

    def method_list(self) -> list[str]:
        return [m.strip() for m in self.methods.split(",") if m.strip()]

    def rank_list(self) -> list[int | str]:
        ranks = [parse_rank(r) for r in self.ranks.split(",") if r.strip()]
        if any(isinstance(r, int) and r < 0 for r in ranks):
            raise RespinConfigError(f"ranks={self.ranks!r}: ranks must be >= 0 or 'full'")
        return ranks

    def quant_kwargs(self) -> dict[str, Any]:
        return {
            "w_bits": self.w_bits,
            "a_bits": self.a_bits,
            "k_bits": self.kv_bits,
            "v_bits": self.kv_bits,
            "weight_quantizer": self.weight_quantizer,
            "w_clip_grid": self.w_clip_grid,
            "w_clip_min": self.w_clip_min,
        }


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
