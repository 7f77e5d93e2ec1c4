"""The MONICA generation loop (section 2.5): one ``model.generate`` call, per-row step state
under left padding, reads before the edit, zero-token delay, no extra forward passes.

A forward pre-hook on the top-level model sees each pass's new ``input_ids`` (the prompt on
prefill, then one token per row); per row it feeds the token to the step segmenter and, when
the token closes a step, scores the step from the pooled running sums (boundary token
excluded) and updates the calibration state *for this same pass*, so the first token of the
next step is already sampled under calibration. Block outputs are read with
:func:`llmcore.hooks.capture_activations` and edited by :func:`llmcore.hooks.intervene`
closures registered after it, so each read is the pre-edit output of its block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from monica_syco.calibrator import Calibrator
from monica_syco.errors import MonicaConfigError
from monica_syco.monitor import StepScorer, SycophancyMonitor, check_layers
from monica_syco.segment import RowState, StepSegmenter

Policy = Literal["monitor", "always", "answer_level", "never"]
POLICIES = ("monitor", "always", "answer_level", "never")


@dataclass
class MonicaOutput:
    """Result of :func:`monica_generate` (section 2.5, item 5)."""

    sequences: Any
    texts: list[str]
    steps: list[list[str]]
    sds: list[list[float | None]]
    interventions: list[list[dict[str, Any]]]
    n_forward: int
    new_tokens: list[int] = field(default_factory=list)
    no_think_tags: list[bool] = field(default_factory=list)
    step_states: list[list[dict[int, Any]]] | None = None
    prompt_states: list[dict[int, Any]] | None = None
    edited_tokens: list[int] = field(default_factory=list)
    prompt_edits: int = 0


def block_names(model: Any, layers_path: str | None = None) -> list[str]:
    """Decoder-block module names: ``llmcore.hooks.layer_module_names`` (peft models resolve
    to the base model's blocks), or ``{layers_path}.{i}`` for a custom layout."""
    import torch.nn as nn

    from llmcore.errors import ConfigError
    from llmcore.hooks import get_module, layer_module_names

    if layers_path is not None:
        mod = get_module(model, layers_path)
        if not isinstance(mod, nn.ModuleList) or len(mod) == 0:
            raise MonicaConfigError(f"layers_path={layers_path!r} is not a non-empty ModuleList")
        return [f"{layers_path}.{i}" for i in range(len(mod))]
    try:
        return layer_module_names(model)
    except ConfigError as e:
        raise MonicaConfigError(
            f"cannot find the decoder blocks of {type(model).__name__} ({e}); known paths: "
            "model.layers (Llama/Qwen2/Mistral), transformer.h (GPT-2), gpt_neox.layers; pass "
            "layers_path='dotted.path.to.ModuleList'"
        ) from e


def require_white_box(model: Any, monitor: Any, calibrator: Any) -> None:
    """Hidden-state monitors and calibrators need an in-process torch model."""
    import torch.nn as nn

    if isinstance(model, nn.Module):
        return
    if isinstance(monitor, SycophancyMonitor) or calibrator is not None or monitor is None:
        raise NotImplementedError(
            f"a hidden-state monitor or calibrator needs an in-process transformers model, not "
            f"{type(model).__name__} (vLLM / HTTP backends expose no hidden states); score "
            "their text offline with `monica-syco score-trajectories`, or monitor it with a "
            "StepScorer (RuleStepScorer / LLMStepScorer) on the generated steps"
        )
    raise NotImplementedError(
        f"{type(model).__name__} cannot be hooked; run the StepScorer on its generated steps"
    )


class MonicaSession:
    """Per-generation state of :func:`attach` (use :attr:`processor` in ``model.generate``'s
    ``logits_processor`` for ``mode="logit"``; :meth:`outputs` after generation).

    With ``persistent=True`` the session serves several generations in a row: a forward pass
    on an empty KV cache starts a new generation (per-row step state, windows and calibration
    state start afresh, as in a separate :func:`attach`), and each finished generation's
    :class:`MonicaOutput` is appended to :attr:`generations`."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        monitor: SycophancyMonitor | StepScorer | None,
        calibrator: Calibrator | None,
        segmenter: StepSegmenter,
        *,
        policy: Policy = "monitor",
        layers_path: str | None = None,
        record_layers: list[int] | None = None,
        contexts: list[tuple[str, str]] | None = None,
        cued_answers: list[str | None] | None = None,
        strict: bool = True,
        persistent: bool = False,
    ) -> None:
        if policy not in POLICIES:
            raise MonicaConfigError(f"policy must be one of {POLICIES}, got {policy!r}")
        require_white_box(model, monitor, calibrator)
        self.model, self.tokenizer, self.segmenter = model, tokenizer, segmenter
        self.monitor, self.calibrator, self.policy = monitor, calibrator, policy
        self.names = block_names(model, layers_path)
        n = len(self.names)
        self.hidden = isinstance(monitor, SycophancyMonitor)
        if self.hidden:
            monitor.check_model(model, n, strict=strict)  # type: ignore[union-attr]
        if calibrator is not None:
            calibrator.check_model(model, n, strict=strict)
        if record_layers is not None:
            check_layers(list(record_layers), n)
        self.record_layers = list(record_layers or [])
        self.mon_layers = list(monitor.layers) if self.hidden else []  # type: ignore[union-attr]
        self.read_layers = sorted(set(self.mon_layers) | set(self.record_layers))
        mode = calibrator.mode if calibrator is not None else None
        self.edit_layers = (
            calibrator.layers if mode in ("add", "clamp") and policy != "never" else []
        )
        self.contexts = contexts
        self.cued_answers = cued_answers
        self.processor: Any = None
        if calibrator is not None and mode == "logit" and policy != "never":
            self.processor = _make_processor(self)
        self.n_forward = 0
        self._fwd0 = 0
        self.persistent = persistent
        self.generations: list[MonicaOutput] = []
        """finished generations, in order (``persistent=True``; the last one is appended when
        the ``attach`` block exits)"""
        self._rows: list[RowState] | None = None

    # -- per-pass state ------------------------------------------------------------------
    def _init_rows(self, ids: Any, att: Any) -> None:
        import torch

        B = ids.shape[0]
        if att is not None and B > 1 and bool((att[:, -1] == 0).any()):
            raise MonicaConfigError(
                "batched generation needs left padding (the last prompt position of some row "
                "is padding); set tokenizer.padding_side = 'left'"
            )
        self.B = B
        self.prompt_mask = (att if att is not None else torch.ones_like(ids)).bool()
        rows = []
        for b in range(B):
            text = self.tokenizer.decode(
                ids[b][self.prompt_mask[b]].tolist(), skip_special_tokens=False
            )
            rows.append(self.segmenter.new_row(text))
        self._rows = rows
        self._window = self.monitor.window if self.hidden else 1  # type: ignore[union-attr]
        dev = ids.device
        self.sums = {x: None for x in self.read_layers}
        self.last = {x: None for x in self.read_layers}
        self.count = torch.zeros(B, device=dev)
        self.prompt_sum: dict[int, Any] = {}
        self.windows: list[list[dict[int, Any]]] = [[] for _ in range(B)]
        self.states: list[list[dict[int, Any]]] = [[] for _ in range(B)]
        self.sds: list[list[float | None]] = [[] for _ in range(B)]
        self.interventions: list[list[dict[str, Any]]] = [[] for _ in range(B)]
        self.active = [False] * B
        self.alpha_row = [0.0] * B
        self.strength_row = [0.0] * B
        self.edited = [0] * B
        self.prompt_edits = 0
        self.new_tokens = [0] * B
        self.sds0: list[float] = [0.0] * B
        self.pool = torch.zeros(B, 1, 1, device=dev)
        self.alpha_t = torch.zeros(B, 1, 1, device=dev)
        self.edit_rows = torch.zeros(B, 1, 1, device=dev)
        self.prefill = True
        if self.policy == "always":
            self.active = [True] * B
            self.alpha_row = [self.calibrator.alpha_max if self.calibrator else 0.0] * B
            self.strength_row = [1.0] * B

    def _pre_hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        if ids is None:
            raise MonicaConfigError("MONICA needs input_ids in every forward (not inputs_embeds)")
        if self._rows is not None and self.persistent and _starts_generation(ids, kwargs):
            self.end_generation()
        self.n_forward += 1
        if self._rows is None:
            self._fwd0 = self.n_forward - 1
            self._init_rows(ids, kwargs.get("attention_mask"))
            return
        if ids.shape[1] != 1:
            raise MonicaConfigError(
                f"expected one new token per row after prefill, got {ids.shape[1]}; MONICA needs "
                "the KV cache (use_cache=True) and no assisted/speculative decoding; for several "
                "generate calls in one session use attach(..., persistent=True)"
            )
        self.prefill = False
        pooled = []
        for b, st in enumerate(self._rows):
            tok = int(ids[b, 0])
            if st.phase != "done":
                self.new_tokens[b] += 1
            ev = self.segmenter.push(st, tok)
            pooled.append(1.0 if ev.pooled else 0.0)
            if ev.kind == "reset":
                self._reset_pool(b)
            elif ev.kind in ("boundary", "close", "end"):
                self._close_step(b, ev.step_text, ev.kind)
        self.pool = torch.tensor(pooled, device=ids.device).view(-1, 1, 1)
        self.count += self.pool.view(-1)
        self.alpha_t = torch.tensor(
            [a if act else 0.0 for a, act in zip(self.alpha_row, self.active, strict=True)],
            device=ids.device,
        ).view(-1, 1, 1)
        self.edit_rows = torch.tensor(
            [
                1.0 if act and st.phase != "done" else 0.0
                for act, st in zip(self.active, self._rows, strict=True)
            ],
            device=ids.device,
        ).view(-1, 1, 1)

    def _reset_pool(self, b: int) -> None:
        for x in self.read_layers:
            if self.sums[x] is not None:
                self.sums[x][b] = 0
        self.count[b] = 0

    def _close_step(self, b: int, text: str, kind: str) -> None:
        """Score the finished step of row ``b`` and update its calibration state."""
        st = self._rows[b]  # type: ignore[index]
        n = float(self.count[b])
        if n == 0:  # nothing pooled (e.g. two delimiters in a row): no step to score
            if kind in ("boundary", "close") and st.steps:
                st.steps.pop()
            return
        if kind == "end":
            st.steps.append(text)
        if self.read_layers:
            if self.hidden and self.monitor.pooling == "last":  # type: ignore[union-attr]
                z = {x: self.last[x][b].clone() for x in self.read_layers}
            else:
                z = {x: self.sums[x][b] / n for x in self.read_layers}
            if self.record_layers:
                self.states[b].append({x: z[x].detach().float().cpu() for x in self.record_layers})
            self.windows[b].append(z)
            del self.windows[b][: -max(1, self._window)]
        self._reset_pool(b)
        s = self._score(b)
        self.sds[b].append(s)
        cal = self.calibrator
        if cal is None or self.policy == "never" or s is None:
            return
        t = len(self.sds[b]) - 1
        if self.policy == "monitor":
            self.active[b] = cal.update(self.active[b], s)
            self.alpha_row[b] = cal.alpha(s)
            self.strength_row[b] = cal.strength(s)
            if kind == "close" and not cal.apply_to_answer:
                self.active[b] = False
        elif self.policy == "answer_level" and kind == "close" and s > cal.threshold:
            self.active[b], self.alpha_row[b], self.strength_row[b] = True, cal.alpha_max, 1.0
        if self.active[b] and kind != "end":
            layers = self.edit_layers or (["logit"] if self.processor is not None else [])
            self.interventions[b].append(
                {"step": t, "alpha": self.alpha_row[b], "layers": list(layers), "sds": s}
            )

    def _score(self, b: int) -> float | None:
        import torch

        if self.hidden:
            mon: SycophancyMonitor = self.monitor  # type: ignore[assignment]
            win = self.windows[b][-mon.window :]
            ctx = {x: torch.stack([w[x] for w in win]).mean(0) for x in mon.layers}
            s = float(mon.score_contexts(ctx))
            if mon.drift_mode == "relative":
                s = min(1.0, max(0.0, s - self.sds0[b]))
            return s
        if self.monitor is None:
            return None
        q, cue = self.contexts[b] if self.contexts else ("", "")
        return self.monitor.score(q, cue, list(self._rows[b].steps))  # type: ignore[union-attr,index]

    # -- block hooks ---------------------------------------------------------------------
    def _edit_fn(self, layer: int, records: dict[str, list[Any]]) -> Any:
        name = self.names[layer]
        read = layer in self.read_layers
        edit = layer in self.edit_layers
        first_edit = bool(self.edit_layers) and layer == self.edit_layers[0]

        def fn(h: Any) -> Any:
            import torch

            rec = records.get(name)
            if rec:
                h_read = rec.pop()  # the pre-edit output (capture runs before this edit)
                rec.clear()
            else:
                h_read = h
            if read:
                if self.prefill:
                    m = self.prompt_mask.unsqueeze(-1).to(h_read.dtype)
                    self.prompt_sum[layer] = (h_read.float() * m).sum(1) / m.sum(1).clamp(min=1)
                    if self.sums[layer] is None:
                        self.sums[layer] = torch.zeros_like(self.prompt_sum[layer])
                        self.last[layer] = torch.zeros_like(self.prompt_sum[layer])
                else:
                    x = h_read[:, -1:].float()
                    self.sums[layer] += (x * self.pool)[:, 0]
                    keep = self.pool[:, 0] > 0
                    self.last[layer] = torch.where(keep, x[:, 0], self.last[layer])
            if self.prefill and read and layer == self.read_layers[-1] and self.hidden:
                mon: SycophancyMonitor = self.monitor  # type: ignore[assignment]
                if mon.drift_mode == "relative":
                    s0 = mon.score_contexts({x: self.prompt_sum[x] for x in mon.layers})
                    self.sds0 = [float(v) for v in s0]
            if not edit or self.prefill or not any(self.active):
                return None
            cal = self.calibrator
            v, unit, m_hon = cal.tensors(layer, h.device, h.dtype)  # type: ignore[union-attr]
            rows = self.edit_rows.to(h.dtype)
            if first_edit:
                for b in range(self.B):
                    self.edited[b] += int(rows[b].item() > 0)
            if cal.mode == "add":  # type: ignore[union-attr]
                return h - (self.alpha_t.to(h.dtype) * rows) * v
            proj = h @ unit
            excess = (proj - m_hon).clamp(min=0) * rows[:, :, 0]
            return h - excess.unsqueeze(-1) * unit

        return fn

    @contextlib.contextmanager
    def _installed(self) -> Iterator[MonicaSession]:
        from llmcore.hooks import capture_activations, intervene

        layers = sorted(set(self.read_layers) | set(self.edit_layers))
        read_names = [self.names[x] for x in self.read_layers]
        # a peft wrapper's generate() calls its base model directly: hook the model that runs
        top = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        handle = top.register_forward_pre_hook(self._pre_hook, with_kwargs=True)
        try:
            with capture_activations(self.model, read_names) as records:
                edits = {self.names[x]: self._edit_fn(x, records) for x in layers}
                with intervene(self.model, edits):
                    yield self
        finally:
            handle.remove()

    # -- results -------------------------------------------------------------------------
    def end_generation(self) -> None:
        """Close the current generation (``persistent=True``): flush its last step, append its
        :class:`MonicaOutput` to :attr:`generations` and reset the per-row state; a no-op
        between generations."""
        if self._rows is None:
            return
        self.flush()
        self.generations.append(self.outputs())
        self._rows = None

    def flush(self) -> None:
        """Score every row's unfinished last step (EOS or length stop)."""
        import torch

        if self._rows is None:
            return
        # the running sums are inference tensors when generate ran under inference_mode
        with torch.inference_mode():
            for b, st in enumerate(self._rows):
                if st.phase in ("pre", "reason"):
                    text = self.segmenter._decode(st.step_ids).strip()
                    self._close_step(b, text, "end")
                self.segmenter.finish(st)

    def outputs(self, sequences: Any = None, texts: list[str] | None = None) -> MonicaOutput:
        rows = self._rows or []
        prompt_states = None
        if self.record_layers and self._rows is not None:
            prompt_states = [
                {x: self.prompt_sum[x][b].detach().cpu() for x in self.record_layers}
                for b in range(self.B)
            ]
        return MonicaOutput(
            sequences=sequences,
            texts=texts or [],
            steps=[list(r.steps) for r in rows],
            sds=[list(s) for s in getattr(self, "sds", [])],
            interventions=[list(i) for i in getattr(self, "interventions", [])],
            n_forward=self.n_forward - self._fwd0,
            new_tokens=list(getattr(self, "new_tokens", [])),
            no_think_tags=[r.no_think_tags for r in rows],
            step_states=[list(s) for s in self.states] if self.record_layers and rows else None,
            prompt_states=prompt_states,
            edited_tokens=list(getattr(self, "edited", [])),
            prompt_edits=getattr(self, "prompt_edits", 0),
        )


def _starts_generation(ids: Any, kwargs: dict[str, Any]) -> bool:
    """Whether this forward pass opens a new generation: it runs on an empty KV cache
    (``generate`` passes its cache object from the first pass on)."""
    past = kwargs.get("past_key_values")
    if past is None:
        return False  # no cache at all: left to the one-token check (use_cache=False)
    length = getattr(past, "get_seq_length", None)
    if length is None:  # legacy tuple caches
        return len(past) == 0 or past[0][0].shape[-2] == 0
    return int(length()) == 0


def _make_processor(session: MonicaSession) -> Any:
    """``LogitsProcessor`` of ``mode="logit"``: while a row is active, the first token of
    each spelling of its cued answer loses ``beta * strength`` logits."""
    import torch
    from transformers import LogitsProcessor

    tok = session.tokenizer
    cued = session.cued_answers
    if not cued or any(c is None for c in cued):
        raise MonicaConfigError(
            "mode='logit' needs the cued answer of every prompt (cued_answers=[...]); items "
            "without a known cued answer cannot be calibrated at the logit level"
        )
    firsts: list[list[int]] = []
    for c in cued:
        ids = set()
        for spelling in (c, " " + str(c)) if str(c).strip() else ():
            t = tok(spelling, add_special_tokens=False)["input_ids"]
            if t:
                ids.add(t[0])
        if not ids:
            raise MonicaConfigError(f"cued answer {c!r} tokenises to zero tokens")
        firsts.append(sorted(ids))
    beta = session.calibrator.logit_beta  # type: ignore[union-attr]

    class MonicaProcessor(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if not any(session.active):
                return scores
            scores = scores.clone()
            for b, act in enumerate(session.active):
                if act and b < scores.shape[0]:
                    idx = torch.tensor(
                        firsts[b * len(firsts) // len(session.active)], device=scores.device
                    )
                    scores[b, idx] -= beta * session.strength_row[b]
            return scores

    return MonicaProcessor()


@contextlib.contextmanager
def attach(
    model: Any,
    tokenizer: Any,
    monitor: SycophancyMonitor | StepScorer | None,
    calibrator: Calibrator | None = None,
    segmenter: StepSegmenter | None = None,
    *,
    policy: Policy = "monitor",
    layers_path: str | None = None,
    record_layers: list[int] | None = None,
    contexts: list[tuple[str, str]] | None = None,
    cued_answers: list[str | None] | None = None,
    strict: bool = True,
    persistent: bool = False,
) -> Iterator[MonicaSession]:
    """Install MONICA's hooks for one ``model.generate`` call; every hook is removed on exit,
    also when generation raises. ``policy``: ``"monitor"`` (MONICA), ``"always"`` (constant
    ``alpha_max`` from the first fed generated token, CAA-style), ``"answer_level"`` (only
    after the think-close tag, when the last step's SDS > tau) or ``"never"`` (monitor only).

    ``persistent=True`` keeps the hooks for every ``generate`` call made inside the block (a
    library that calls ``model.generate`` several times, e.g. staged prefilled continuations):
    a forward pass on an empty KV cache starts a new generation, monitored and calibrated
    exactly as under its own ``attach``; its prompt (earlier stages included) is never edited
    nor scored. Finished generations are in ``session.generations``. ``contexts`` and
    ``cued_answers`` must then match every call's batch rows. A continuation prefilled on a
    non-empty cache (reused KV prefix) is refused: turn such reuse off."""
    seg = segmenter or StepSegmenter(tokenizer)
    session = MonicaSession(
        model,
        tokenizer,
        monitor,
        calibrator,
        seg,
        policy=policy,
        layers_path=layers_path,
        record_layers=record_layers,
        contexts=contexts,
        cued_answers=cued_answers,
        strict=strict,
        persistent=persistent,
    )
    with session._installed():
        yield session
    session.flush()
    if persistent and session._rows is not None:
        session.generations.append(session.outputs())


def encode_prompts(
    tokenizer: Any, prompts: list[str] | list[list[dict[str, str]]], device: Any
) -> dict[str, Any]:
    """Chat prompts rendered with the template (BOS added if the template omits it); left
    padded."""
    from monica_syco.world import render

    texts = [p if isinstance(p, str) else render(tokenizer, p) for p in prompts]
    if len(texts) > 1 and getattr(tokenizer, "padding_side", "left") != "left":
        raise MonicaConfigError(
            "batched generation needs left padding; set tokenizer.padding_side = 'left' "
            "(llmcore.load_tokenizer does)"
        )
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def monica_generate(
    model: Any,
    tokenizer: Any,
    prompts: list[str] | list[list[dict[str, str]]],
    monitor: SycophancyMonitor | StepScorer | None,
    calibrator: Calibrator | None = None,
    *,
    segmenter: StepSegmenter | None = None,
    policy: Policy = "monitor",
    layers_path: str | None = None,
    record_layers: list[int] | None = None,
    contexts: list[tuple[str, str]] | None = None,
    cued_answers: list[str | None] | None = None,
    strict: bool = True,
    **generate_kwargs: Any,
) -> MonicaOutput:
    """Generate with step-level monitoring and calibration in one ``model.generate`` call
    (section 2.5); ``generate_kwargs`` go to ``generate`` unchanged."""
    from llmcore.models import model_device

    require_white_box(model, monitor, calibrator)
    enc = encode_prompts(tokenizer, prompts, model_device(model))
    kw = dict(generate_kwargs)
    kw.setdefault("pad_token_id", tokenizer.pad_token_id)
    with attach(
        model,
        tokenizer,
        monitor,
        calibrator,
        segmenter,
        policy=policy,
        layers_path=layers_path,
        record_layers=record_layers,
        contexts=contexts,
        cued_answers=cued_answers,
        strict=strict,
    ) as s:
        if s.processor is not None:
            from transformers import LogitsProcessorList

            procs = LogitsProcessorList(list(kw.pop("logits_processor", None) or []))
            procs.append(s.processor)
            kw["logits_processor"] = procs
        import torch

        with torch.no_grad():
            seqs = model.generate(**enc, **kw)
    P = enc["input_ids"].shape[1]
    return s.outputs(seqs, [decode_generated(tokenizer, row) for row in seqs[:, P:].tolist()])


def decode_generated(tokenizer: Any, ids: list[int]) -> str:
    """Generated text up to EOS, keeping the think tags (special tokens in some tokenizers)
    but not padding or EOS."""
    stop = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
    out = []
    for t in ids:
        if t in stop:
            break
        out.append(t)
    return tokenizer.decode(out, skip_special_tokens=False)


def score_trajectory(
    model: Any,
    tokenizer: Any,
    monitor: SycophancyMonitor,
    prompt_ids: list[int],
    gen_ids: list[int],
    *,
    segmenter: StepSegmenter | None = None,
    layers_path: str | None = None,
) -> tuple[list[str], list[float]]:
    """Offline SDS of one trajectory from a single forward pass over prompt + generation
    (no generation; works on text produced by any backend): the same pooling, windows and
    probes as the streaming monitor."""
    import torch

    from llmcore.hooks import capture_activations
    from llmcore.models import model_device

    seg = segmenter or StepSegmenter(tokenizer)
    names = block_names(model, layers_path)
    monitor.check_model(model, len(names))
    prompt_text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
    # the last generated token is never fed back during generation: segment the fed ones
    events, st = seg.segment(list(gen_ids)[:-1], prompt_text)
    ids = torch.tensor([list(prompt_ids) + list(gen_ids)], device=model_device(model))
    with torch.no_grad(), capture_activations(model, [names[x] for x in monitor.layers]) as rec:
        model(input_ids=ids)
    hs = {x: rec[names[x]][0][0].float() for x in monitor.layers}  # [T, d]
    P = len(prompt_ids)
    steps: list[dict[int, Any]] = []
    texts: list[str] = []
    cur: list[int] = []
    it = iter(st.steps)
    # generated token k is fed at position P + k; pooled tokens join the current step
    for k, ev in enumerate(events):
        if ev.kind == "reset":
            cur = []
        elif ev.kind == "token" and ev.pooled:
            cur.append(P + k)
        elif ev.kind in ("boundary", "close", "end"):
            text = next(it) if ev.kind != "end" else ev.step_text
            if cur:
                steps.append(_pool(hs, cur, monitor))
                texts.append(text)
            cur = []
    if cur and st.phase in ("pre", "reason"):
        steps.append(_pool(hs, cur, monitor))
        texts.append(seg._decode(st.step_ids).strip())
    prompt_state = {x: hs[x][:P].mean(0) for x in monitor.layers}
    return texts, monitor.score_steps(steps, prompt_state)


def _pool(hs: dict[int, Any], pos: list[int], monitor: SycophancyMonitor) -> dict[int, Any]:
    if monitor.pooling == "last":
        return {x: hs[x][pos[-1]] for x in monitor.layers}
    return {x: hs[x][pos].mean(0) for x in monitor.layers}
