"""Shared pieces of the locate-then-edit editors: tokenisation with the BOS rule, the subject's
last-token position, key capture (inputs of the rewrite module), model-generated context
prefixes, and the v* / z* optimisation of ROME (Meng et al. 2022, §3.1 eq. 4) used by MEMIT and
AlphaEdit at their top layer."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from edit_collapse.config import EditConfig
from edit_collapse.errors import (
    EditDivergedError,
    EditInputError,
    TargetNotReachedWarning,
    UnsupportedModelError,
)
from edit_collapse.requests import EditRequest

V_STAR_NLL_TOL = 5e-2
"""v*/z* stops once the target's mean negative log-likelihood (per token, averaged over the
prefixed prompts) is below this (EasyEdit's tolerance); a search that ends above it is recorded
as not ``reached``."""

V_STAR_WARN_PROB = 0.5
"""A search whose final ``P(target) = exp(-NLL)`` is below this warns
(:class:`~edit_collapse.errors.TargetNotReachedWarning`): the target is then not reliably the
model's most likely continuation, so the edit may not land. Searches between this and
:data:`V_STAR_NLL_TOL` are common on small models and usually land, so they only count in the
records."""


def encode(tok: Any, text: str) -> list[int]:
    """Token ids of ``text`` with the tokenizer's BOS in front (llmcore's scoring rule)."""
    ids = list(tok(text, add_special_tokens=False)["input_ids"])
    bos = tok.bos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids = [bos, *ids]
    return ids


def target_ids(tok: Any, target: str) -> list[int]:
    """Ids of the completion ``" " + target`` tokenised alone (no special tokens)."""
    ids = list(tok(" " + target.strip(), add_special_tokens=False)["input_ids"])
    if not ids:
        raise EditInputError(f"target {target!r} tokenises to nothing")
    return ids


def lookup_index(tok: Any, prompt: str, subject: str, fact_token: str, case: Any = "?") -> int:
    """Position of the subject's last token in ``encode(prompt)`` (``fact_token='last'``: the
    prompt's last token)."""
    if fact_token == "last":
        return len(encode(tok, prompt)) - 1
    pos = prompt.rfind(subject) if subject else -1
    if pos < 0:
        raise EditInputError(
            f"request {case!r}: subject {subject!r} does not occur in the prompt {prompt!r}; "
            "the editors read the key at the subject's last token"
        )
    return len(encode(tok, prompt[: pos + len(subject)])) - 1


def pad_right(
    rows: Sequence[Sequence[int]], pad_id: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(r) for r in rows)
    ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    att = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(list(r))
        att[i, : len(r)] = 1
    return ids.to(device), att.to(device)


def pad_id(tok: Any) -> int:
    return tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)


def device_of(model: Any) -> torch.device:
    return next(model.parameters()).device


def module(model: Any, name: str) -> Any:
    from llmcore.hooks import get_module

    return get_module(model, name)


def weight_of(model: Any, name: str) -> torch.nn.Parameter:
    """The weight of module ``name``, refusing quantised or frozen ones."""
    w = getattr(module(model, name), "weight", None)
    if w is None:
        raise EditInputError(f"module {name!r} has no weight to edit")
    qual = type(w).__name__
    if (
        not w.dtype.is_floating_point
        or "4bit" in qual
        or "Int8" in qual
        or hasattr(w, "quant_state")
    ):
        raise UnsupportedModelError(
            f"{name}.weight is quantised ({w.dtype}, {qual}); load the model in float32/bf16 to edit it"
        )
    if not w.requires_grad:
        raise UnsupportedModelError(
            f"{name}.weight is frozen (requires_grad=False); call model.requires_grad_(True) "
            "before editing, or target another layer"
        )
    return w


def as_out_in(model: Any, name: str, delta: torch.Tensor) -> torch.Tensor:
    """``delta`` (out x in) in the layout of the module's weight (GPT-2's Conv1D is in x out)."""
    m = module(model, name)
    return delta if isinstance(m, torch.nn.Linear) else delta.T


@torch.no_grad()
def compute_keys(
    model: Any, tok: Any, name: str, texts: Sequence[str], idxs: Sequence[int]
) -> torch.Tensor:
    """Inputs of module ``name`` at position ``idxs[i]`` of ``texts[i]``: ``[n, d_in]``."""
    from llmcore.hooks import capture_activations

    rows = [encode(tok, t) for t in texts]
    ids, att = pad_right(rows, pad_id(tok), device_of(model))
    with capture_activations(model, [name], input=True) as acts:
        model(input_ids=ids, attention_mask=att)
    x = acts[name][0]
    return torch.stack([x[i, j] for i, j in enumerate(idxs)]).float()


@torch.no_grad()
def module_outputs(
    model: Any, tok: Any, name: str, texts: Sequence[str], idxs: Sequence[int]
) -> torch.Tensor:
    """Outputs of module ``name`` (first element of tuples) at ``idxs``: ``[n, d_out]``."""
    from llmcore.hooks import capture_activations

    rows = [encode(tok, t) for t in texts]
    ids, att = pad_right(rows, pad_id(tok), device_of(model))
    with capture_activations(model, [name]) as acts:
        model(input_ids=ids, attention_mask=att)
    x = acts[name][0]
    return torch.stack([x[i, j] for i, j in enumerate(idxs)]).float()


@torch.no_grad()
def context_templates(
    model: Any, tok: Any, params: Sequence[Sequence[int]], seed: int
) -> list[str]:
    """``["{}"]`` plus model-sampled prefixes (top-k 5) of each ``[length, count]``, each
    followed by ``". {}"`` (ROME's context templates)."""
    out = ["{}"]
    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    dev = device_of(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for length, count in params:
            ids = torch.full((int(count), 1), start, dtype=torch.long, device=dev)
            gen = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=5,
                max_new_tokens=int(length), min_new_tokens=int(length), pad_token_id=pad_id(tok),
                temperature=1.0, top_p=1.0,
            )  # fmt: skip
            for row in gen[:, 1:]:
                text = tok.decode(row, skip_special_tokens=True).replace("{", " ").replace("}", " ")
                out.append(text.strip() + " . {}")
    return out


def frozen_modules(model: Any, hook_name: str, include_hook: bool = True) -> list[str]:
    """Modules whose outputs do not depend on a change at ``hook_name``'s output (or weights):
    every decoder block before the one holding ``hook_name``, and (``include_hook``)
    ``hook_name`` itself."""
    from llmcore.errors import ConfigError
    from llmcore.hooks import layer_module_names

    try:
        blocks = layer_module_names(model)
    except ConfigError:  # no recognisable decoder stack: freeze the hook only
        blocks = []
    out: list[str] = []
    for b in blocks:
        if hook_name == b or hook_name.startswith(b + "."):
            break
        out.append(b)
    else:
        out = []
    return [*out, hook_name] if include_hook else out


@contextmanager
def replay_outputs(
    model: Any, names: Sequence[str], ids: torch.Tensor, att: torch.Tensor
) -> Iterator[None]:
    """Run ``model`` once on ``(ids, att)`` without gradients, then, inside the context, make
    each module in ``names`` return that pass's output without computing (forward hooks such
    as ``intervene`` still run on it). Every later forward must use the same ``ids``/``att``
    and unchanged weights below and at ``names``: the result is then bit-identical to the full
    forward, which lets an optimisation of a delta at one module skip the layers below it."""
    mods = {n: module(model, n) for n in names}
    seen: dict[str, Any] = {}
    handles = [
        m.register_forward_hook(lambda _m, _a, o, n=n: seen.__setitem__(n, o))
        for n, m in mods.items()
    ]
    try:
        with torch.no_grad():
            model(input_ids=ids, attention_mask=att, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    saved = {n: m.__dict__.get("forward") for n, m in mods.items()}
    try:
        for n, m in mods.items():
            m.forward = lambda *_a, _o=seen[n], **_k: _o
        yield
    finally:
        for n, m in mods.items():
            if saved[n] is None:
                del m.forward
            else:
                m.forward = saved[n]


def _target_nll(logp: torch.Tensor, label_pos: Sequence[int], tgt: torch.Tensor) -> torch.Tensor:
    """Mean over the first ``len(label_pos)`` rows of the target's per-token NLL."""
    nll: Any = 0.0
    for i, p in enumerate(label_pos):
        pos = torch.arange(p, p + len(tgt), device=logp.device)
        nll = nll - logp[i, pos, tgt].sum() / len(tgt)
    return nll / len(label_pos)


def optimize_target(
    model: Any,
    tok: Any,
    cfg: EditConfig,
    requests: Sequence[EditRequest],
    hook_name: str,
    templates: Sequence[str],
    replay: bool = True,
    report: list[dict[str, Any]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """v*/z* per request: ``delta`` added to ``hook_name``'s output at the subject's last token,
    optimised so the model emits ``target_new`` after every prefixed prompt, plus
    ``kl_factor`` x KL on ``"{subject} is a"`` and ``v_weight_decay`` x ||delta||^2/||v||^2, with
    ||delta|| clamped to ``clamp_norm_factor`` x ||v|| (ROME §3.1; MEMIT eq. 16).
    Returns ``(targets, inits)``, each ``[n, d]``. With ``replay`` (and the model in eval mode)
    the blocks below ``hook_name`` and the hooked module itself run once per request and their
    outputs are replayed in every step (:func:`replay_outputs`: the same values, without the
    recomputation). The search stops once the target NLL is below :data:`V_STAR_NLL_TOL`; one
    that uses all ``v_num_grad_steps`` is scored once more with its final delta and, if its
    ``P(target)`` is below :data:`V_STAR_WARN_PROB`, warns
    (:class:`~edit_collapse.errors.TargetNotReachedWarning`, naming the request, the NLL and the
    threshold). ``report`` (a list) receives one record per request:
    ``case_id``, ``nll`` (final), ``target_prob`` (``exp(-nll)``), ``steps``, ``reached``,
    ``threshold``."""
    from llmcore.hooks import intervene

    dev = device_of(model)
    targets, inits = [], []
    for req in requests:
        tgt = target_ids(tok, req.target_new)
        rows, idxs, label_pos = [], [], []
        for t in templates:
            p = t.format(req.prompt)
            pid = encode(tok, p)
            rows.append(pid + tgt[:-1])
            idxs.append(lookup_index(tok, p, req.subject, cfg.fact_token, req.case_id))
            label_pos.append(len(pid) - 1)
        kl_prompt = f"{req.subject} is a"
        rows.append(encode(tok, kl_prompt))
        idxs.append(lookup_index(tok, kl_prompt, req.subject, cfg.fact_token, req.case_id))
        ids, att = pad_right(rows, pad_id(tok), dev)
        n_rw = len(templates)
        mask = torch.zeros(ids.shape[0], ids.shape[1], 1, device=dev)
        for i, j in enumerate(idxs):
            mask[i, j] = 1.0
        tgt_t = torch.tensor(tgt, device=dev)
        with torch.no_grad():
            init = module_outputs(
                model, tok, hook_name, [templates[0].format(req.prompt)], [idxs[0]]
            )[0]
        delta = torch.zeros_like(init, requires_grad=True)
        opt = torch.optim.Adam([delta], lr=cfg.v_lr)
        max_norm = cfg.clamp_norm_factor * init.norm()
        kl_ref = None

        def add_delta(
            out: torch.Tensor, mask: torch.Tensor = mask, delta: torch.Tensor = delta
        ) -> torch.Tensor:
            return out + mask.to(out.dtype) * delta.to(out.dtype)

        frozen = (
            replay_outputs(model, frozen_modules(model, hook_name), ids, att)
            if replay and not model.training
            else nullcontext()
        )
        last_nll, steps, reached = float("nan"), 0, False
        with frozen:
            for _ in range(cfg.v_num_grad_steps):
                with intervene(model, {hook_name: add_delta}):
                    logits = model(
                        input_ids=ids, attention_mask=att, use_cache=False
                    ).logits.float()
                logp = torch.log_softmax(logits, -1)
                nll = _target_nll(logp, label_pos, tgt_t)
                kl_lp = logp[n_rw, idxs[n_rw]]
                if kl_ref is None:
                    kl_ref = kl_lp.detach()
                kl = torch.nn.functional.kl_div(kl_lp, kl_ref, log_target=True, reduction="sum")
                wd = cfg.v_weight_decay * delta.norm() ** 2 / init.norm() ** 2
                loss = nll + cfg.kl_factor * kl + wd
                last_nll = float(nll.detach())
                if last_nll < V_STAR_NLL_TOL:
                    reached = True
                    break
                (g,) = torch.autograd.grad(loss, [delta])
                delta.grad = g
                opt.step()
                opt.zero_grad(set_to_none=True)
                steps += 1
                with torch.no_grad():
                    if delta.norm() > max_norm:
                        delta.mul_(max_norm / delta.norm())
            if not reached:  # score the final delta (the loop ends after its last update)
                with torch.no_grad(), intervene(model, {hook_name: add_delta}):
                    logits = model(input_ids=ids, attention_mask=att, use_cache=False).logits
                last_nll = float(
                    _target_nll(torch.log_softmax(logits.float(), -1), label_pos, tgt_t)
                )
                reached = last_nll < V_STAR_NLL_TOL
        record = {"case_id": req.case_id, "nll": last_nll, "target_prob": math.exp(-last_nll),
                  "steps": steps, "reached": reached, "threshold": V_STAR_NLL_TOL}  # fmt: skip
        if report is not None:
            report.append(record)
        if not reached and record["target_prob"] < V_STAR_WARN_PROB:
            warnings.warn(
                f"v*/z* for request {req.case_id!r} ({req.prompt!r} -> {req.target_new!r}) did "
                f"not reach its target at {hook_name} in {steps} steps: target NLL "
                f"{last_nll:.3g}, P(target) {record['target_prob']:.3g} < {V_STAR_WARN_PROB:g} "
                f"(stopping tolerance NLL {V_STAR_NLL_TOL:g}); the edit may not land (raise "
                "v_num_grad_steps or v_lr)",
                TargetNotReachedWarning,
                stacklevel=2,
            )
        out = (init + delta).detach()
        if not torch.isfinite(out).all():
            raise EditDivergedError(
                f"request {req.case_id!r}: v* is not finite (||delta||={float(delta.norm()):.3g}); "
                "lower v_lr or clamp_norm_factor"
            )
        targets.append(out)
        inits.append(init)
    return torch.stack(targets), torch.stack(inits)


def check_update(delta: torch.Tensor, what: str) -> None:
    if not torch.isfinite(delta).all():
        raise EditDivergedError(
            f"{what}: the update has non-finite entries (||delta||={float(delta.norm()):.3g}); the "
            "statistics are ill-conditioned or v* exploded: raise mom2_update_weight (or L2) or "
            "lower v_lr"
        )
