"""Unlearning trainers: GradAscent, GradDiff, NPO, SimNPO, RMU as one
``transformers.Trainer`` subclass whose ``compute_loss`` takes ``{"forget", "retain"}`` batches,
as in open-unlearning. Loss: ``L = gamma * L_forget + alpha * L_retain``."""

from __future__ import annotations

import copy
import logging
import math
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from unlearn_leakk.config import GreedyForgetStop, UnlearnConfig
from unlearn_leakk.data import LeakItem, validate_items
from unlearn_leakk.errors import LeakConfigError, UnlearnError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

#: name -> (needs a frozen reference model, needs a retain set)
METHODS: dict[str, tuple[bool, bool]] = {
    "GradAscent": (False, False),
    "GradDiff": (False, True),
    "NPO": (True, True),
    "SimNPO": (False, True),
    "RMU": (True, True),
}


# --- encoding -----------------------------------------------------------------------------


def target_text(item: LeakItem) -> str:
    """Answer tokens trained on: ``meta["target"]`` when set, else ``" " + answer``."""
    t = item.meta.get("target") if item.meta else None
    return t if t is not None else " " + item.answer.strip()


def encode_pair(
    tokenizer: PreTrainedTokenizerBase, prompt: str, target: str, max_length: int
) -> dict[str, list[int]]:
    """``input_ids``/``labels`` for prompt + target + eos; labels are -100 on the prompt."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a = tokenizer(target, add_special_tokens=False)["input_ids"]
    if tokenizer.eos_token_id is not None:
        a = [*a, tokenizer.eos_token_id]
    ids = (p + a)[:max_length]
    labels = ([-100] * len(p) + a)[:max_length]
    if all(t == -100 for t in labels):
        raise LeakConfigError(
            f"prompt of {len(p)} tokens leaves no answer token within max_length={max_length}"
        )
    return {"input_ids": ids, "labels": labels}


def encode_items(
    tokenizer: PreTrainedTokenizerBase,
    items: Sequence[LeakItem],
    *,
    chat_template: bool,
    max_length: int,
) -> list[dict[str, list[int]]]:
    from unlearn_leakk.sampling import render_prompts

    prompts = render_prompts(tokenizer, items, chat_template=chat_template)
    return [
        encode_pair(tokenizer, p, target_text(it), max_length)
        for p, it in zip(prompts, items, strict=True)
    ]


class ForgetRetainDataset:
    """Anchored on forget items; each gets a seeded random retain item (open-unlearning)."""

    def __init__(
        self,
        forget: list[dict],
        retain: list[dict] | None,
        weights: Sequence[float] | None,
        seed: int = 0,
    ) -> None:
        self.forget, self.retain = forget, retain or []
        self.weights = list(weights) if weights is not None else [1.0] * len(forget)
        self.seed = seed

    def __len__(self) -> int:
        return len(self.forget)

    def __getitem__(self, i: int) -> dict[str, Any]:
        row: dict[str, Any] = {"forget": self.forget[i], "weight": self.weights[i]}
        if self.retain:
            row["retain"] = self.retain[
                random.Random(self.seed * 100_003 + i).randrange(len(self.retain))
            ]
        return row


def _pad(rows: list[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    import torch

    T = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), T), -100, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        labels[i, :n] = torch.tensor(r["labels"])
        att[i, :n] = 1
    return {"input_ids": ids, "attention_mask": att, "labels": labels}


def make_collator(pad_id: int) -> Callable[[list[dict]], dict[str, Any]]:
    import torch

    def collate(batch: list[dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"forget": _pad([b["forget"] for b in batch], pad_id)}
        out["forget"]["weight"] = torch.tensor([b["weight"] for b in batch], dtype=torch.float32)
        if "retain" in batch[0]:
            out["retain"] = _pad([b["retain"] for b in batch], pad_id)
        return out

    return collate


# --- losses -------------------------------------------------------------------------------


def token_logprobs(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log pi(y_t | x, y_<t) on answer tokens ``[B, T-1]`` and the answer mask."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    labels = batch["labels"][:, 1:]
    mask = labels != -100
    lp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    tok = lp.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    return tok * mask, mask


def nll_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean token cross-entropy on answer tokens, sequences weighted by ``batch["weight"]``."""
    tok, mask = token_logprobs(model, batch)
    w = batch.get("weight")
    w = tok.new_ones(tok.shape[0]) if w is None else w.to(tok)
    return -(w * tok.sum(1)).sum() / (w * mask.sum(1)).sum().clamp_min(1)


def sequence_logprob(
    model: Any, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of answer-token log-probs per sequence ``[B]`` and the answer lengths ``[B]``."""
    tok, mask = token_logprobs(model, batch)
    return tok.sum(1), mask.sum(1)


def _wmean(x: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    w = batch.get("weight")
    if w is None:
        return x.mean()
    w = w.to(x)
    return (w * x).sum() / w.sum()


def npo_loss(model: Any, ref: Any, batch: dict[str, torch.Tensor], beta: float) -> torch.Tensor:
    """NPO forget loss ``-(2/beta) mean log sigmoid(-beta (log pi - log pi_ref))`` (sequence
    log-likelihoods); equals ``(2/beta) log 2`` at ``pi = pi_ref``."""
    import torch
    import torch.nn.functional as F

    lp, _ = sequence_logprob(model, batch)
    with torch.no_grad():
        lp_ref, _ = sequence_logprob(ref, batch)
    return _wmean(-F.logsigmoid(-beta * (lp - lp_ref)), batch) * 2.0 / beta


def simnpo_loss(
    model: Any, batch: dict[str, torch.Tensor], beta: float, delta: float
) -> torch.Tensor:
    """SimNPO forget loss: ``u = NLL_sum / |y| - delta``, ``-(2/beta) mean log sigmoid(beta u)``."""
    import torch.nn.functional as F

    lp, n = sequence_logprob(model, batch)
    u = -lp / n.clamp_min(1) - delta
    return _wmean(-F.logsigmoid(beta * u), batch) * 2.0 / beta


def kl_retain_loss(model: Any, ref: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """KL(pi_ref || pi_theta) per answer token, averaged."""
    import torch

    att = batch["attention_mask"]
    logits = model(input_ids=batch["input_ids"], attention_mask=att).logits[:, :-1].float()
    with torch.no_grad():
        ref_logits = ref(input_ids=batch["input_ids"], attention_mask=att).logits[:, :-1].float()
    mask = (batch["labels"][:, 1:] != -100).float()
    lp, lq = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    kl = (lq.exp() * (lq - lp)).sum(-1)
    return (kl * mask).sum() / mask.sum().clamp_min(1)


def _hidden(model: Any, name: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    from llmcore.hooks import capture_activations

    with capture_activations(model, [name], detach=False) as acts:
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return acts[name][-1]


def rmu_losses(
    model: Any, ref: Any, forget: dict, retain: dict | None, layer: str, control: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMU: MSE(h_theta(x_f), c u) and MSE(h_theta(x_r), h_ref(x_r)) at ``layer``, averaged
    over answer tokens (retain ``EMBED_DIFF``)."""
    import torch

    def masked_mse(h: torch.Tensor, target: torch.Tensor, b: dict) -> torch.Tensor:
        # the hidden state at position t predicts label t+1: align with the shifted answer mask
        mask = torch.zeros_like(b["labels"], dtype=h.dtype)
        mask[:, :-1] = (b["labels"][:, 1:] != -100).to(h.dtype)
        err = ((h.float() - target.float()) ** 2).mean(-1)
        return (err * mask).sum() / mask.sum().clamp_min(1)

    hf = _hidden(model, layer, forget)
    lf = masked_mse(hf, control.to(hf).expand_as(hf), forget)
    if retain is None:
        return lf, hf.new_zeros(())
    hr = _hidden(model, layer, retain)
    with torch.no_grad():
        hr_ref = _hidden(ref, layer, retain)
    return lf, masked_mse(hr, hr_ref, retain)


def entropy_term(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token entropy on answer positions (RULE's optional NPO+ENT term)."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    lp = torch.log_softmax(logits[:, :-1].float(), -1)
    ent = -(lp.exp() * lp).sum(-1)
    mask = (batch["labels"][:, 1:] != -100).float()
    return (ent * mask).sum() / mask.sum().clamp_min(1)


def unlearning_loss(
    cfg: UnlearnConfig,
    model: Any,
    ref: Any,
    inputs: dict[str, Any],
    *,
    rmu_layer: str | None = None,
    control: torch.Tensor | None = None,
    entropy_weight: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``gamma * L_forget + alpha * L_retain`` of ``cfg.method`` on one batch."""
    forget, retain = inputs["forget"], inputs.get("retain")
    m = cfg.method
    if m == "RMU":
        assert rmu_layer is not None and control is not None
        lf, lr = rmu_losses(model, ref, forget, retain, rmu_layer, control)
    else:
        if m in ("GradAscent", "GradDiff"):
            lf = -nll_loss(model, forget)
        elif m == "NPO":
            lf = npo_loss(model, ref, forget, float(cfg.beta))
        elif m == "SimNPO":
            lf = simnpo_loss(model, forget, float(cfg.beta), cfg.delta)
        else:  # pragma: no cover - validated by UnlearnConfig
            raise LeakConfigError(f"unknown method {m!r}")
        if m == "GradAscent" or retain is None or cfg.alpha == 0:
            lr = lf.new_zeros(())
        elif cfg.retain_loss_type == "KL":
            lr = kl_retain_loss(model, ref, retain)
        else:
            lr = nll_loss(model, {k: v for k, v in retain.items() if k != "weight"})
    loss = cfg.gamma * lf + cfg.alpha * lr
    if entropy_weight:
        loss = loss + entropy_weight * entropy_term(model, forget)
    return loss, {"forget_loss": float(lf.detach()), "retain_loss": float(lr.detach())}


# --- greedy check -------------------------------------------------------------------------


def greedy_accuracy(
    model: Any,
    tokenizer: Any,
    items: Sequence[LeakItem],
    *,
    chat_template: bool = False,
    max_new_tokens: int = 16,
) -> float:
    """Fraction of items whose greedy answer contains the reference (exact phrase)."""
    from llmcore.generation import HFBackend, SamplingParams
    from unlearn_leakk.judges import ExactPhraseJudge
    from unlearn_leakk.sampling import render_prompts

    was_training = model.training
    be = HFBackend(model, tokenizer, batch_size=max(1, len(items)), progress=False)
    prompts = render_prompts(tokenizer, items, chat_template=chat_template)
    outs = be.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens))
    judge = ExactPhraseJudge()
    hits = sum(judge([o[0].text], it.answer)[0] for o, it in zip(outs, items, strict=True))
    if was_training:
        model.train()
    return hits / len(items)


# --- trainer ------------------------------------------------------------------------------


def _trainer_cls():
    from transformers import Trainer

    class UnlearnTrainer(Trainer):
        """``transformers.Trainer`` whose loss is the configured unlearning objective."""

        def __init__(
            self,
            *args: Any,
            unlearn_cfg: UnlearnConfig,
            ref_model: Any = None,
            rmu_layer: str | None = None,
            control: Any = None,
            entropy_weight: float = 0.0,
            **kw: Any,
        ) -> None:
            super().__init__(*args, **kw)
            self.unlearn_cfg, self.ref_model = unlearn_cfg, ref_model
            self.rmu_layer, self.rmu_control, self.entropy_weight = (
                rmu_layer,
                control,
                entropy_weight,
            )
            self.loss_log: list[dict[str, float]] = []

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss, parts = unlearning_loss(
                self.unlearn_cfg,
                model,
                self.ref_model,
                inputs,
                rmu_layer=self.rmu_layer,
                control=self.rmu_control,
                entropy_weight=self.entropy_weight,
            )
            self.loss_log.append(parts)
            return (loss, None) if return_outputs else loss

    return UnlearnTrainer


def __getattr__(name: str) -> Any:
    if name == "UnlearnTrainer":
        return _trainer_cls()
    raise AttributeError(name)


@dataclass
class UnlearnResult:
    """What :func:`unlearn` did: optimizer steps, whether the greedy stop fired, timings."""

    steps: int = 0
    stopped_early: bool = False
    seconds: float = 0.0
    greedy_forget_acc: list[tuple[int, float]] = field(default_factory=list)
    losses: list[dict[str, float]] = field(default_factory=list)


def _stop_callback(
    stop: GreedyForgetStop,
    tokenizer: Any,
    items: list[LeakItem],
    chat_template: bool,
    result: UnlearnResult,
):
    from transformers import TrainerCallback

    class _GreedyStop(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step % stop.eval_every_steps == 0:
                acc = greedy_accuracy(
                    model,
                    tokenizer,
                    items,
                    chat_template=chat_template,
                    max_new_tokens=stop.max_new_tokens,
                )
                result.greedy_forget_acc.append((state.global_step, acc))
                if acc <= stop.max_forget_acc:
                    result.stopped_early = True
                    control.should_training_stop = True
            return control

    return _GreedyStop()


def make_reference(model: Any) -> Any:
    """A frozen copy of ``model`` (pi_ref)."""
    try:
        ref = copy.deepcopy(model)
    except (MemoryError, RuntimeError) as exc:
        raise UnlearnError(
            f"cannot copy the model as the frozen reference ({type(exc).__name__}); NPO/RMU/KL "
            "need pi_ref: pass ref_model= (e.g. loaded on another device) or use GradDiff/SimNPO"
        ) from exc
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def resolve_rmu_layer(model: Any, index: int) -> str:
    """Module name of decoder layer ``index`` (``model.layers.N`` for Llama/Qwen2)."""
    from llmcore.hooks import layer_module_names

    names = layer_module_names(model)
    if not 0 <= index < len(names):
        raise LeakConfigError(
            f"rmu_layer={index} is out of range: the model has {len(names)} decoder layers "
            f"(valid 0..{len(names) - 1})"
        )
    return names[index]


def _import_peft() -> Any:
    """The ``peft`` module, or :class:`~llmcore.errors.MissingExtraError` naming the
    ``unlearn-leakk[peft]`` extra when it is not installed (LoRA unlearning only)."""
    try:
        import peft
    except ImportError:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError("LoRA unlearning", "peft", package="unlearn-leakk") from None
    return peft


def unlearn(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    forget: Sequence[LeakItem],
    retain: Sequence[LeakItem] | None,
    cfg: UnlearnConfig,
    *,
    chat_template: bool = False,
    ref_model: Any = None,
    forget_weights: Sequence[float] | None = None,
    stop_items: Sequence[LeakItem] | None = None,
    entropy_weight: float = 0.0,
    progress: bool = False,
    result: UnlearnResult | None = None,
) -> PreTrainedModel:
    """Run ``cfg.method`` on ``model`` in place and return it.

    ``forget_weights`` weight forget items in the loss (RULE ``leakk``); the greedy stop (if
    ``cfg.early_stop``) checks ``stop_items`` (default: ``forget``). Pass ``result=`` to get
    step counts and the greedy-accuracy trace.
    """
    import torch
    from transformers import TrainingArguments

    from llmcore.runtime import num_threads

    forget = validate_items(forget, what="forget items")
    needs_ref, needs_retain = METHODS[cfg.method]
    if needs_retain and cfg.alpha != 0 and not retain:
        raise UnlearnError(
            f"{cfg.method} with alpha={cfg.alpha} needs a non-empty retain set; pass retain "
            "items or set alpha=0"
        )
    retain = validate_items(retain, what="retain items") if retain else []
    if forget_weights is not None and len(forget_weights) != len(forget):
        raise LeakConfigError(
            f"forget_weights has {len(forget_weights)} entries for {len(forget)} forget items"
        )
    rmu_name = resolve_rmu_layer(model, cfg.rmu_layer) if cfg.method == "RMU" else None
    if cfg.peft_config is not None:
        peft = _import_peft()
        pc = cfg.peft_config
        if isinstance(pc, dict):  # from a config file or the CLI: LoraConfig fields
            pc = peft.LoraConfig(**{"task_type": "CAUSAL_LM", **pc})
        model = peft.get_peft_model(model, pc)
    use_ref = needs_ref or cfg.retain_loss_type == "KL"
    ref = (ref_model or make_reference(model)) if use_ref else None
    control = None
    if cfg.method == "RMU":
        g = torch.Generator().manual_seed(cfg.seed)
        u = torch.rand(model.config.hidden_size, generator=g)
        control = cfg.steering_coeff * u / u.norm()

    fr = encode_items(tokenizer, forget, chat_template=chat_template, max_length=cfg.max_length)
    rr = encode_items(tokenizer, retain, chat_template=chat_template, max_length=cfg.max_length)
    ds = ForgetRetainDataset(
        fr, rr if (retain and cfg.method != "GradAscent") else None, forget_weights, seed=cfg.seed
    )
    steps_per_epoch = max(1, math.ceil(len(ds) / (cfg.batch_size * cfg.grad_accum)))
    result = result if result is not None else UnlearnResult()
    callbacks = []
    if cfg.early_stop is not None:
        callbacks.append(
            _stop_callback(
                cfg.early_stop, tokenizer, list(stop_items or forget), chat_template, result
            )
        )
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=cfg.batch_size,
            gradient_accumulation_steps=cfg.grad_accum,
            learning_rate=cfg.lr,
            weight_decay=cfg.weight_decay,
            num_train_epochs=float(cfg.epochs),
            max_steps=cfg.max_steps or -1,
            warmup_steps=round(cfg.warmup_epochs * steps_per_epoch),
            lr_scheduler_type="constant_with_warmup",
            save_strategy="no",
            report_to=[],
            logging_strategy="no",
            remove_unused_columns=False,
            seed=cfg.seed,
            data_seed=cfg.seed,
            disable_tqdm=not progress,
            dataloader_num_workers=0,
            use_cpu=not torch.cuda.is_available(),
        )
        trainer = _trainer_cls()(
            model=model,
            args=args,
            train_dataset=ds,
            data_collator=make_collator(tokenizer.pad_token_id or 0),
            callbacks=callbacks,
            unlearn_cfg=cfg,
            ref_model=ref,
            rmu_layer=rmu_name,
            control=control,
            entropy_weight=entropy_weight,
        )
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        t0 = time.perf_counter()
        with num_threads(cfg.threads):
            trainer.train()
        result.seconds += time.perf_counter() - t0
        result.steps += trainer.state.global_step
        result.losses += trainer.loss_log
    model.eval()
    return model
