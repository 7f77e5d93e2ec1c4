"""Pseudo-trajectory distillation (paper Sec. 3.1).

1. :func:`extract_trajectories`: the teacher decodes each training prompt one token per forward
   (LLaDA low-confidence remasking), retrying a wrong answer at temperatures 0.0, 0.1, ... ; the
   order in which it unmasked the response is stored (``trajectory`` and the compact
   ``unmask_step``).
2. :class:`PseudoTrajectoryCollator`: the *targets* are ground-truth responses; only the
   teacher's mask pattern is taken from the trajectory. One block of the response is chosen, the
   positions before it stay clean, the positions after it are masked, and inside it the
   positions the teacher had not yet decoded after ``(s - P) + n_unmasked`` steps are masked
   (mask ratio curriculum ``r ~ U[r_cur, r_max]``, block size interpolated per epoch). A
   complementary input masks the exact complement inside the block (dParallel).
3. :func:`d3llm_loss`: ``(CE + CE_c + lambda_H * H) / 4``, H the entropy at temperature T of
   correctly predicted masked positions (certainty forcing).
4. :class:`D3LLMTrainer`: a transformers ``Trainer`` computing that loss.

The trajectory is aligned to each example *relative to its own response start*: the official
code slices by absolute position, which mis-aligns when the teacher's prompt length differs
from the training prompt's (a deliberate deviation).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from d3llm.errors import D3LLMConfigError, TrajectoryAlignmentError

if TYPE_CHECKING:
    import torch

    from d3llm.model import MaskedDiffusionLM


# --------------------------------------------------------------------------- answer checking
def boxed_answer_checker(generated_text: str, gt_answer: str) -> tuple[bool, str]:
    """``(is_correct, llm_answer)``: the last ``\\boxed{}`` of the generation (the whole
    stripped text if none) against the ground truth by :func:`llmcore.metrics.math_equivalent`.
    An empty ground truth counts as correct (code tasks)."""
    from llmcore.metrics import last_boxed, math_equivalent

    pred = last_boxed(generated_text)
    pred = generated_text.strip() if pred is None else pred
    if not str(gt_answer).strip():
        return True, pred
    gold = last_boxed(gt_answer)
    gold = gt_answer.strip() if gold is None else gold
    return bool(pred == gold or math_equivalent(pred, gold)), pred


def exact_answer_checker(generated_text: str, gt_answer: str) -> tuple[bool, str]:
    """``(is_correct, llm_answer)`` by exact match of the stripped texts."""
    pred = generated_text.strip()
    return (not gt_answer.strip()) or pred == gt_answer.strip(), pred


# --------------------------------------------------------------------------- extraction
def extract_trajectories(
    teacher: MaskedDiffusionLM,
    tokenizer: Any,
    records: Sequence[Mapping[str, Any]],
    gen_length: int = 256,
    block_length: int = 32,
    steps: int | None = None,
    max_attempts: int = 5,
    temperature_step: float = 0.1,
    checker: Callable[[str, str], tuple[bool, str]] = boxed_answer_checker,
    *,
    batch_size: int = 64,
    seed: int = 0,
) -> Any:
    """Decode every record (``question`` text or ``prompt_ids``, and ``gt_answer``) with the
    teacher one token per step and return a ``datasets.Dataset`` of trajectories.

    A wrong answer is retried at temperatures ``0, temperature_step, 2 * temperature_step, ...``
    (``max_attempts`` in all); the last attempt is kept either way with its ``is_correct``.
    Prompts of equal length are decoded as one batch. ``trajectory[k]`` is the full sequence
    after step ``k + 1``; ``unmask_step[i]`` the step (1-based) that committed response
    position ``i``."""
    import datasets
    import torch

    from d3llm.decoding import decode_vanilla

    if max_attempts < 1:
        raise D3LLMConfigError(f"max_attempts must be >= 1, got {max_attempts}")
    if temperature_step < 0:
        raise D3LLMConfigError(f"temperature_step must be >= 0, got {temperature_step}")
    steps = gen_length if steps is None else steps
    prompts: list[list[int]] = []
    for i, r in enumerate(records):
        if "prompt_ids" in r and r["prompt_ids"] is not None:
            prompts.append([int(t) for t in r["prompt_ids"]])
        elif "question" in r:
            prompts.append(tokenizer(r["question"], add_special_tokens=False)["input_ids"])
        else:
            raise D3LLMConfigError(f"record {i} has neither 'prompt_ids' nor 'question'")
    gen = torch.Generator().manual_seed(seed)
    out: list[dict[str, Any] | None] = [None] * len(records)
    pending = list(range(len(records)))
    eos = teacher.eos_token_id
    for attempt in range(max_attempts):
        temp = attempt * temperature_step
        by_len: dict[int, list[int]] = {}
        for i in pending:
            by_len.setdefault(len(prompts[i]), []).append(i)
        still: list[int] = []
        for _, idxs in sorted(by_len.items()):
            for c in range(0, len(idxs), batch_size):
                chunk = idxs[c : c + batch_size]
                res = decode_vanilla(
                    teacher,
                    [prompts[i] for i in chunk],
                    gen_length=gen_length,
                    steps=steps,
                    block_length=block_length,
                    temperature=temp,
                    generator=gen,
                    record_history=True,
                )
                hist = torch.stack(res.history or [], 1)  # [B, steps, T]
                for j, i in enumerate(chunk):
                    row = res.generated[j].tolist()
                    cut = row.index(eos) if eos is not None and eos in row else len(row)
                    text = tokenizer.decode(row[:cut], skip_special_tokens=True)
                    gt = str(records[i].get("gt_answer", ""))
                    ok, ans = checker(text, gt)
                    out[i] = {
                        "idx": int(records[i].get("idx", i)),
                        "question": str(records[i].get("question", "")),
                        "prompt_ids": prompts[i],
                        "trajectory": hist[j].tolist(),
                        "unmask_step": res.commit_step[j],
                        "final_output": res.sequences[j].tolist(),
                        "generated_text": text,
                        "llm_answer": ans,
                        "gt_answer": gt,
                        "is_correct": bool(ok),
                        "attempts": attempt + 1,
                    }
                    if not ok:
                        still.append(i)
        pending = still
        if not pending:
            break
    return datasets.Dataset.from_list([o for o in out if o is not None])


def trajectory_from_unmask_steps(
    prompt_ids: Sequence[int], final_output: Sequence[int], unmask_step: Sequence[int], mask_id: int
) -> list[list[int]]:
    """Expand the compact form (the step that committed each response position) to the full
    per-step sequences: ``trajectory[k]`` has the positions committed by step ``k + 1``."""
    P = len(prompt_ids)
    n = max(unmask_step) if unmask_step else 0
    out = []
    for k in range(n):
        seq = list(final_output)
        for i, s in enumerate(unmask_step):
            if s > k + 1:
                seq[P + i] = mask_id
        out.append(seq)
    return out


def trajectory_response_masks(record: Mapping[str, Any], mask_id: int) -> list[list[bool]]:
    """Per step, which response positions are still masked (True), from either storage form."""
    P = len(record["prompt_ids"])
    traj = record.get("trajectory")
    if traj:
        return [[t == mask_id for t in row[P:]] for row in traj]
    steps = record["unmask_step"]
    n = max(steps) if steps else 0
    return [[s > k + 1 for s in steps] for k in range(n)]


# --------------------------------------------------------------------------- collator
@dataclass
class D3LLMDistillConfig:
    """Pseudo-trajectory distillation settings (paper Sec. 3.1 and its training config)."""

    max_length: int = 384
    """Prompt + response, right-padded with EOS to this length."""
    progressive_block_sizes: list[int] = field(default_factory=lambda: [16, 16, 24, 24, 32, 32])
    """Block size per epoch, interpolated linearly from ``sizes[i]`` to ``sizes[i + 1]`` within
    epoch ``i`` (progressive window)."""
    min_mask_ratio: float = 0.0
    """Start of the mask-ratio curriculum (lower end of ``r`` at step 0)."""
    max_mask_ratio: float = 0.8
    """Upper end of ``r``; the lower end grows to it linearly over training."""
    entropy_temperature: float = 0.5
    """T of the entropy term ``H(softmax(logits / T))``."""
    entropy_weight: float = 2.0
    """lambda_H (LLaDA 2.0, Dream 1.0)."""
    use_complementary_loss: bool = True
    """Add the CE of the complementary-masked input."""
    use_naive_random_mask: bool = False
    """Ablation: mask the block at random with ratio r instead of the teacher's pattern."""
    align: Literal["response"] = "response"
    """Slice the trajectory relative to the response start (the only supported alignment)."""
    fallback: Literal["error", "random"] = "error"
    """A trajectory that cannot be aligned: raise, or warn and mask at random."""
    variant: Literal["llada", "dream"] = "llada"
    """``"dream"`` adds the complementary entropy term."""
    eps: float = 1e-3
    """Floor of the random-mask probability ``(1 - eps) r + eps``."""

    def __post_init__(self) -> None:
        sizes = list(self.progressive_block_sizes)
        if not sizes or any(int(s) <= 0 for s in sizes):
            raise D3LLMConfigError(
                f"progressive_block_sizes must be a non-empty list of positive ints, got {sizes}"
            )
        if not (0.0 <= self.min_mask_ratio <= 1.0 and 0.0 <= self.max_mask_ratio <= 1.0):
            raise D3LLMConfigError(
                f"mask ratios must be in [0, 1], got min={self.min_mask_ratio}, "
                f"max={self.max_mask_ratio}"
            )
        if self.min_mask_ratio > self.max_mask_ratio:
            raise D3LLMConfigError(
                f"min_mask_ratio={self.min_mask_ratio} exceeds max_mask_ratio={self.max_mask_ratio}"
            )
        if self.max_length <= 0:
            raise D3LLMConfigError(f"max_length must be positive, got {self.max_length}")
        if self.align != "response":
            raise D3LLMConfigError(f"align must be 'response', got {self.align!r}")
        if self.fallback not in ("error", "random"):
            raise D3LLMConfigError(f"fallback must be 'error' or 'random', got {self.fallback!r}")
        if self.variant not in ("llada", "dream"):
            raise D3LLMConfigError(f"variant must be 'llada' or 'dream', got {self.variant!r}")
        if self.entropy_temperature <= 0:
            raise D3LLMConfigError(
                f"entropy_temperature must be > 0, got {self.entropy_temperature}"
            )


def block_size_at(sizes: Sequence[int], epoch: float) -> int:
    """Block size at fractional ``epoch``: from ``sizes[i]`` to ``sizes[i + 1]`` within epoch
    ``i`` (the last size stays)."""
    i = min(math.floor(max(0.0, epoch)), len(sizes) - 1)
    frac = max(0.0, epoch) - i if i < len(sizes) - 1 else 0.0
    nxt = sizes[i + 1] if i + 1 < len(sizes) else sizes[i]
    return max(1, round(sizes[i] + (nxt - sizes[i]) * min(frac, 1.0)))


def mask_ratio_bounds(
    cfg: D3LLMDistillConfig, global_step: int, max_steps: int
) -> tuple[float, float]:
    """``(r_cur, r_max)`` with ``r_cur`` growing linearly from ``min_mask_ratio`` to
    ``max_mask_ratio`` over training (progressive noise schedule)."""
    frac = min(1.0, global_step / max(1, max_steps))
    r_cur = cfg.min_mask_ratio + (cfg.max_mask_ratio - cfg.min_mask_ratio) * frac
    return r_cur, cfg.max_mask_ratio


class PseudoTrajectoryCollator:
    """Builds the noisy and complementary inputs of pseudo-trajectory distillation.

    Examples are mappings with ``prompt_ids``, ``response_ids`` (ground truth; EOS is appended
    and the row right-padded with EOS to ``max_length``) and ``idx`` (the trajectory record with
    that ``idx``). Call :meth:`set_progress` before each step (the trainer does)."""

    def __init__(
        self,
        tokenizer: Any,
        config: D3LLMDistillConfig,
        trajectories: Any = None,
        *,
        mask_token_id: int | None = None,
        eos_token_id: int | None = None,
        seed: int = 0,
    ) -> None:
        self.config = config
        self.mask_id = mask_token_id if mask_token_id is not None else tokenizer.mask_token_id
        self.eos_id = eos_token_id if eos_token_id is not None else tokenizer.eos_token_id
        if self.mask_id is None:
            raise D3LLMConfigError("the tokenizer has no mask token; pass mask_token_id")
        self.traj: dict[int, list[list[bool]]] = {}
        for rec in trajectories or []:
            self.traj[int(rec["idx"])] = trajectory_response_masks(rec, self.mask_id)
        self.rng = random.Random(seed)
        self.global_step, self.max_steps, self.epoch = 0, 1, 0.0

    def set_progress(self, global_step: int, max_steps: int, epoch: float) -> None:
        self.global_step, self.max_steps, self.epoch = global_step, max(1, max_steps), epoch

    def block_size(self) -> int:
        return block_size_at(self.config.progressive_block_sizes, self.epoch)

    def _row(self, ex: Mapping[str, Any], B: int) -> dict[str, Any]:
        cfg = self.config
        prompt = [int(t) for t in ex["prompt_ids"]]
        resp = [int(t) for t in ex["response_ids"]] + [self.eos_id]
        ids = (prompt + resp)[: cfg.max_length]
        ids += [self.eos_id] * (cfg.max_length - len(ids))
        P, T = len(prompt), cfg.max_length
        R = T - P
        if R <= 0:
            raise D3LLMConfigError(f"prompt of {P} tokens leaves no response in max_length={T}")
        n_blocks = -(-R // B)  # ceil: never an empty last block
        nb = self.rng.randrange(n_blocks)
        s = P + nb * B
        e = T if nb == n_blocks - 1 else s + B
        r_cur, r_max = mask_ratio_bounds(cfg, self.global_step, self.max_steps)
        r = self.rng.uniform(r_cur, r_max)
        n_unmasked = math.floor((1 - r) * (e - s))
        m: list[bool] | None = None
        if not cfg.use_naive_random_mask:
            masks = self.traj.get(int(ex.get("idx", -1)))
            problem = None
            if masks is None:
                problem = f"no trajectory for idx={ex.get('idx')!r}"
            elif len(masks[0]) != R:
                problem = (
                    f"trajectory idx={ex.get('idx')!r} has a response of {len(masks[0])} "
                    f"positions but the example has {R} (max_length {T} - prompt {P})"
                )
            if problem is None:
                k = min((s - P) + n_unmasked, len(masks) - 1)
                m = masks[k][s - P : e - P]
            elif cfg.fallback == "error":
                raise TrajectoryAlignmentError(
                    f"{problem}; extract trajectories with gen_length = max_length - prompt "
                    "length, or set fallback='random'"
                )
            else:
                warnings.warn(f"{problem}; masking this block at random", stacklevel=3)
        if m is None:
            p = (1 - cfg.eps) * r + cfg.eps
            m = [self.rng.random() < p for _ in range(e - s)]
        blk = [False] * T
        comp = [False] * T
        for j, mj in enumerate(m):
            blk[s + j] = mj
            comp[s + j] = not mj
        return {"ids": ids, "blk": blk, "comp": comp, "s": s, "e": e}

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import torch

        B = self.block_size()
        rows = [self._row(ex, B) for ex in examples]
        ids = torch.tensor([r["ids"] for r in rows])
        blk = torch.tensor([r["blk"] for r in rows])
        comp = torch.tensor([r["comp"] for r in rows])
        pos = torch.arange(ids.shape[1])[None]
        after = pos >= torch.tensor([r["e"] for r in rows])[:, None]
        noisy = ids.masked_fill(blk | after, self.mask_id)
        comp_ids = ids.masked_fill(comp | after, self.mask_id)
        return {
            "input_ids": noisy,
            "complementary_input_ids": comp_ids,
            "labels": ids,
            "loss_mask": blk,
            "complementary_loss_mask": comp,
            "block_start": torch.tensor([r["s"] for r in rows]),
            "block_end": torch.tensor([r["e"] for r in rows]),
        }


# --------------------------------------------------------------------------- loss
def _masked_entropy(logits, labels, mask, temperature: float):
    import torch

    correct = mask & (logits.argmax(-1) == labels)
    if not bool(correct.any()):
        return logits.sum() * 0.0
    logp = torch.log_softmax(logits[correct].float() / temperature, -1)
    return -(logp.exp() * logp).sum(-1).mean()


def _masked_ce(logits, labels, mask):
    import torch.nn.functional as F

    if not bool(mask.any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits[mask].float(), labels[mask])


def d3llm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    loss_mask: torch.Tensor,
    complementary_logits: torch.Tensor | None = None,
    complementary_loss_mask: torch.Tensor | None = None,
    entropy_weight: float = 2.0,
    entropy_temperature: float = 0.5,
    variant: Literal["llada", "dream"] = "llada",
) -> tuple[torch.Tensor, dict[str, float]]:
    """``L = (CE + CE_c + lambda_H * H) / 4`` (``H + H_c`` in the bracket for Dream).

    CE is the mean cross-entropy over the masked block positions, CE_c the same on the
    complementary input (0 without it), H the mean entropy of ``softmax(logits / T)`` over masked
    positions whose argmax is the target. Logits must already be aligned with the labels (the
    Dream shift applied). Returns the loss and its parts."""
    ce = _masked_ce(logits, labels, loss_mask)
    h = _masked_entropy(logits, labels, loss_mask, entropy_temperature)
    ce_c = logits.sum() * 0.0
    h_c = logits.sum() * 0.0
    if complementary_logits is not None and complementary_loss_mask is not None:
        ce_c = _masked_ce(complementary_logits, labels, complementary_loss_mask)
        if variant == "dream":
            h_c = _masked_entropy(
                complementary_logits, labels, complementary_loss_mask, entropy_temperature
            )
    loss = (ce + ce_c + entropy_weight * (h + h_c)) / 4
    parts = {
        k: float(v.detach())
        for k, v in (("ce", ce), ("ce_c", ce_c), ("entropy", h), ("entropy_c", h_c))
    }
    return loss, parts


def _shifted_logits(model, ids, shift: str):
    import torch

    from llmcore.diffusion import diffusion_logits

    logits = diffusion_logits(model, ids)
    if shift == "right":
        logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
    return logits


try:  # transformers is a hard dependency; the import is deferred only for `--help` speed
    from transformers import Trainer as _Trainer
    from transformers import TrainerCallback as _Callback
except ImportError:  # pragma: no cover
    _Trainer = object  # type: ignore[assignment,misc]
    _Callback = object  # type: ignore[assignment,misc]


class _ProgressCallback(_Callback):  # type: ignore[misc,valid-type]
    def __init__(self, collator: PseudoTrajectoryCollator) -> None:
        self.collator = collator

    def on_step_begin(self, args, state, control, **kw):
        self.collator.set_progress(state.global_step, state.max_steps, float(state.epoch or 0.0))


class D3LLMTrainer(_Trainer):  # type: ignore[misc,valid-type]
    """transformers ``Trainer`` with d3LLM's loss: one forward on the noisy input, one on the
    complementary input (bidirectional attention), :func:`d3llm_loss` on both."""

    def __init__(
        self,
        *args: Any,
        distill_config: D3LLMDistillConfig,
        logits_shift: str = "none",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.distill_config = distill_config
        self.logits_shift = logits_shift
        self.last_parts: dict[str, float] = {}
        coll = kwargs.get("data_collator")
        if isinstance(coll, PseudoTrajectoryCollator):
            self.add_callback(_ProgressCallback(coll))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        cfg = self.distill_config
        logits = _shifted_logits(model, inputs["input_ids"], self.logits_shift)
        comp_logits = None
        if cfg.use_complementary_loss:
            comp_logits = _shifted_logits(
                model, inputs["complementary_input_ids"], self.logits_shift
            )
        loss, parts = d3llm_loss(
            logits,
            inputs["labels"],
            inputs["loss_mask"],
            comp_logits,
            inputs["complementary_loss_mask"] if cfg.use_complementary_loss else None,
            cfg.entropy_weight,
            cfg.entropy_temperature,
            cfg.variant,
        )
        self.last_parts = parts
        return (loss, {"logits": logits}) if return_outputs else loss


def lora_model(model: Any, r: int = 256, alpha: int = 256, dropout: float = 0.0) -> Any:
    """Wrap ``model`` with peft LoRA on q/k/v/o and gate/up/down projections (the paper's
    r = alpha = 256 on real models)."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        bias="none",
    )
    return get_peft_model(model, cfg)


def run_distillation(
    student: MaskedDiffusionLM,
    tokenizer: Any,
    examples: Sequence[Mapping[str, Any]],
    trajectories: Any,
    config: D3LLMDistillConfig,
    *,
    epochs: int | None = None,
    max_steps: int = -1,
    batch_size: int = 16,
    grad_accum: int = 1,
    lr: float = 2e-5,
    weight_decay: float = 0.01,
    lr_scheduler: str = "constant",
    warmup_steps: int = 0,
    seed: int = 0,
    output_dir: str | None = None,
    use_lora: bool = False,
    lora_r: int = 256,
    lora_alpha: int = 256,
) -> dict[str, Any]:
    """Distil ``student`` in place with :class:`D3LLMTrainer` (AdamW, grad-norm 1) for
    ``epochs`` (default: one per progressive block size) or ``max_steps``. Returns training
    stats. With ``use_lora`` the adapters are merged back after training."""
    import tempfile

    import datasets
    from transformers import TrainingArguments

    if epochs is None:
        epochs = len(config.progressive_block_sizes)
    if epochs <= 0 and max_steps <= 0:
        raise D3LLMConfigError(f"epochs must be positive, got {epochs}")
    model = student.model
    if use_lora:
        model = lora_model(model, lora_r, lora_alpha)
    coll = PseudoTrajectoryCollator(
        tokenizer,
        config,
        trajectories,
        mask_token_id=student.mask_token_id,
        eos_token_id=student.eos_token_id,
        seed=seed,
    )
    ds = datasets.Dataset.from_list([dict(e) for e in examples])
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=output_dir or tmp,
            num_train_epochs=epochs,
            max_steps=max_steps,
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=grad_accum,
            learning_rate=lr,
            weight_decay=weight_decay,
            lr_scheduler_type=lr_scheduler,
            warmup_steps=warmup_steps,
            max_grad_norm=1.0,
            logging_steps=10**9,
            save_strategy="no",
            report_to=[],
            use_cpu=str(student.device) == "cpu",
            remove_unused_columns=False,
            seed=seed,
            data_seed=seed,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = D3LLMTrainer(
            model=model,
            args=args,
            train_dataset=ds,
            data_collator=coll,
            distill_config=config,
            logits_shift=student.logits_shift,
        )
        out = trainer.train()
    if use_lora:
        model = model.merge_and_unload()
    student.model = model.eval()
    return {
        "train_loss": float(out.training_loss),
        "steps": int(out.global_step),
        "last_parts": trainer.last_parts,
        "train_seconds": float(out.metrics.get("train_runtime", 0.0)),
    }
