"""Fine-tuning a masked diffusion LM with NaRA / LoRA / NaRA-constant.

Data: JSONL rows ``{"prompt", "response"}``, ``{"messages": [...]}`` (last assistant turn is the
answer) or the LLM-Adapters keys ``instruction`` / ``input`` / ``output``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from nara_peft.errors import NaraConfigError, NaraDataError
from nara_peft.options import TrainConfig

BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)


def split_row(row: dict[str, Any], where: str = "") -> tuple[str | list[dict], str]:
    """(prompt or chat messages, answer) of one JSONL row."""
    if "prompt" in row and "response" in row:
        return str(row["prompt"]), str(row["response"])
    if "messages" in row:
        msgs = list(row["messages"])
        if not msgs or msgs[-1].get("role") != "assistant":
            raise NaraDataError(f"{where}: 'messages' must end with an assistant turn")
        return msgs[:-1], str(msgs[-1]["content"])
    if "instruction" in row and "output" in row:
        inst = str(row["instruction"])
        if row.get("input"):
            inst = f"{inst}\n{row['input']}"
        return inst, str(row["output"])
    raise NaraDataError(
        f"{where}: row has keys {sorted(row)}; expected prompt/response, messages, or "
        "instruction/output"
    )


def encode_prompt(tokenizer: Any, prompt: str | list[dict]) -> list[int]:
    """Chat template with generation prompt when the tokenizer has one, else plain text."""
    msgs = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return list(ids)
    text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in msgs)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def encode_examples(
    rows: Iterable[dict[str, Any]], tokenizer: Any, max_length: int
) -> tuple[list[list[int]], list[int], int]:
    """prompt + answer + EOS, right-padded with EOS to ``max_length``.

    Returns (sequences, prompt_lengths, n_skipped)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise NaraDataError("the tokenizer has no eos_token_id; set one")
    seqs, pls, skipped = [], [], 0
    for i, row in enumerate(rows):
        prompt, answer = split_row(row, f"row {i + 1}")
        p = encode_prompt(tokenizer, prompt)
        a = tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos]
        if len(p) + len(a) > max_length or len(p) >= max_length:
            skipped += 1
            continue
        seqs.append(p + a + [eos] * (max_length - len(p) - len(a)))
        pls.append(len(p))
    if not seqs:
        raise NaraDataError(
            f"no example fits max_length={max_length} ({skipped} skipped); raise --max-length"
        )
    return seqs, pls, skipped


def build_adapter(model: Any, cfg: TrainConfig) -> tuple[Any, bool]:
    """Wrap ``model`` for ``cfg.method``; returns (peft model, takes noise_level)."""
    from peft import LoraConfig, get_peft_model

    from nara_peft.api import get_nara_model
    from nara_peft.config import DEFAULT_TARGETS, LLADA_TARGETS, NaraConfig

    mtype = getattr(getattr(model, "config", None), "model_type", "")
    targets = cfg.target_modules or (LLADA_TARGETS if mtype == "llada" else DEFAULT_TARGETS)
    if cfg.method == "lora":
        lc = LoraConfig(
            r=cfg.r, lora_alpha=cfg.r, lora_dropout=cfg.lora_dropout, target_modules=list(targets)
        )
        return get_peft_model(model, lc), False
    nc = NaraConfig(
        r=cfg.r,
        c_scale=cfg.c_scale,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(targets),
        input_mode="constant" if cfg.method == "nara-constant" else "nl",
        stage_1=cfg.stage_1,
        fourier_seed=cfg.seed,
    )
    return get_nara_model(model, nc), cfg.method == "nara"


def train(cfg: TrainConfig, *, progress: bool = True) -> dict[str, Any]:
    """Fine-tune and save; AdamW(0.9, 0.95, wd 0.05), clip 1.0, 5 % warm-up + linear decay."""
    from tqdm.auto import tqdm

    from llmcore.data import atomic_write_json, read_jsonl
    from llmcore.models import load_model_and_tokenizer
    from llmcore.runtime import set_seed
    from nara_peft.diffusion import diffusion_sft_loss
    from nara_peft.model import stage1

    set_seed(cfg.seed)
    model, tok = load_model_and_tokenizer(cfg.model, device=cfg.device, dtype=cfg.dtype)
    mask_id = cfg.mask_token_id if cfg.mask_token_id is not None else tok.mask_token_id
    if mask_id is None:
        raise NaraConfigError("the tokenizer has no mask token; pass --mask-token-id")
    seqs, pls, skipped = encode_examples(read_jsonl(cfg.data), tok, cfg.max_length)
    peft_model, takes = build_adapter(model, cfg)
    dev = next(peft_model.parameters()).device
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.05, eps=1e-8)
    n_micro = math.ceil(len(seqs) / cfg.batch_size)
    total = max(1, cfg.epochs * n_micro // cfg.grad_accum)
    if cfg.max_steps is not None:
        total = min(total, cfg.max_steps)
    warm = max(1, int(0.05 * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm))
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "train_log.jsonl"
    log_path.write_text("")
    peft_model.train()
    step, micro, acc_loss, buckets = 0, 0, 0.0, _empty_buckets()
    bar = tqdm(total=total, disable=not progress, desc=f"train {cfg.method}")
    for _epoch in range(cfg.epochs):
        order = torch.randperm(len(seqs), generator=gen).tolist()
        for lo in range(0, len(order), cfg.batch_size):
            idx = order[lo : lo + cfg.batch_size]
            x = torch.tensor([seqs[i] for i in idx], device=dev)
            pl = torch.tensor([pls[i] for i in idx])
            in_stage1 = takes and step < cfg.stage_1 * total
            with stage1(peft_model, in_stage1) if takes else _null():
                loss, info = diffusion_sft_loss(peft_model, x, pl, mask_id, gen, pass_noise=takes)
            (loss / cfg.grad_accum).backward()
            acc_loss += float(loss.detach()) / cfg.grad_accum
            _add_buckets(buckets, info["t"], info["per_row"])
            micro += 1
            if micro % cfg.grad_accum:
                continue
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            row = {
                "step": step,
                "loss": acc_loss,
                "lr": sched.get_last_lr()[0],
                "bucket_loss": _mean_buckets(buckets),
            }
            with log_path.open("a") as f:
                import json

                f.write(json.dumps(row) + "\n")
            acc_loss, buckets = 0.0, _empty_buckets()
            bar.update(1)
            if step >= total:
                break
        if step >= total:
            break
    bar.close()
    peft_model.save_pretrained(str(out))
    summary = {
        "method": cfg.method,
        "updates": step,
        "examples": len(seqs),
        "skipped": skipped,
        "mask_token_id": mask_id,
        "trainable_params": sum(p.numel() for p in params),
    }
    atomic_write_json(out / "train_summary.json", summary)
    return summary


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def _empty_buckets() -> dict[str, list[float]]:
    return {f"{lo:.2f}-{hi:.2f}": [] for lo, hi in itertools.pairwise(BUCKETS)}


def _add_buckets(b: dict[str, list[float]], t: torch.Tensor, per_row: torch.Tensor) -> None:
    keys = list(b)
    for tv, lv in zip(t.tolist(), per_row.tolist(), strict=True):
        k = min(int(tv * (len(BUCKETS) - 1)), len(keys) - 1)
        b[keys[k]].append(lv)


def _mean_buckets(b: dict[str, list[float]]) -> dict[str, float | None]:
    return {k: (sum(v) / len(v) if v else None) for k, v in b.items()}
