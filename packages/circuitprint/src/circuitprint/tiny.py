"""Tiny models of the two-hop task: base models through ``zoo.build`` and derivatives
(fine-tunes, LoRA, merges) through ``zoo.cached``, all cached by what makes them."""

from __future__ import annotations

from typing import Any

from circuitprint import task

#: Base-model training steps: the shortest schedule that passes the >= 99 % accuracy gate
#: with a margin (measured; see the README).
BASE_STEPS = 300
BATCH = 128
CORPUS_SIZE = 20_000
GATE_PROMPTS = 256
#: Derivative fine-tunes: steps, learning rate (the gentle recipe the claim uses), batch.
FT_STEPS = 500
FT_LR = 1e-4
FT_BATCH = 32


def recipe(
    seed: int, *, steps: int = BASE_STEPS, hidden: int = 64, d_ff: int = 256, name: str = ""
):
    """The base-model recipe: Llama, 2 layers x ``hidden``, 4 heads, MLP ``d_ff``, untied
    embeddings, AdamW 3e-3, batch 128, cosine schedule; ``seed`` sets init and data order."""
    from llmcore import zoo

    docs = [ex.document for ex in task.sample_examples(CORPUS_SIZE, seed=0)]
    corpus = zoo.Corpus.from_texts("circuitprint-twohop", docs, eval_fraction=0.02, seed=0)
    return zoo.Recipe(
        name or f"circuitprint-twohop-s{seed}",
        corpus,
        tokenizer=zoo.TokenizerSpec(kind="word", symbols=tuple(task.SYMBOLS)),
        model=zoo.ModelSpec(
            arch="llama",
            hidden_size=hidden,
            num_layers=2,
            num_heads=4,
            intermediate_size=d_ff,
            max_position_embeddings=32,
            tie_word_embeddings=False,
        ),
        train=zoo.TrainSpec(
            steps=steps, batch_size=BATCH, lr=3e-3, warmup_steps=50, max_length=16, seed=seed
        ),
        max_eval_loss=2.4,
    )


def task_accuracy(model: Any, tokenizer: Any, examples: list[task.TaskExample]) -> float:
    """Greedy first-token accuracy on ``examples``."""
    import torch

    ids = torch.tensor([tokenizer(ex.prompt)["input_ids"] for ex in examples])
    with torch.no_grad():
        pred = model(input_ids=ids).logits[:, -1].argmax(-1).tolist()
    want = tokenizer.convert_tokens_to_ids([ex.answer for ex in examples])
    return sum(int(a == b) for a, b in zip(pred, want, strict=True)) / len(examples)


def _gate(model: Any, tokenizer: Any, min_acc: float = 0.99) -> dict[str, float]:
    from llmcore.errors import QualityGateError

    acc = task_accuracy(model, tokenizer, task.sample_examples(GATE_PROMPTS, seed=99))
    if acc < min_acc:
        raise QualityGateError(f"two-hop accuracy {acc:.3f} < {min_acc}; train longer")
    return {"task_accuracy": acc}


def build_base(seed: int, *, steps: int = BASE_STEPS, progress: bool = False, **kw: Any):
    """P (seed 0) or an independent model I_k (seed k); gated at >= 99 % task accuracy."""
    from llmcore import zoo

    return zoo.build(
        recipe(seed, steps=steps, **kw),
        gate=_gate,
        key_extra={"gate": "twohop-acc>=0.99", "code": zoo.code_digest("circuitprint.task")},
        progress=progress,
    )


#: Demo-size models (``llmcore demo``): base steps, the demo's accuracy gate, fine-tune steps.
DEMO_STEPS = {0: 120, 3: 120}
DEMO_GATE = 0.9
DEMO_FT_STEPS = 50


def _demo_gate(model: Any, tokenizer: Any) -> dict[str, float]:
    return _gate(model, tokenizer, DEMO_GATE)


def _demo_base_args(seed: int) -> tuple[Any, dict[str, Any]]:
    from llmcore import zoo

    r = recipe(seed, steps=DEMO_STEPS.get(seed, 100), name=f"circuitprint-demo-s{seed}")
    extra = {"gate": f"twohop-acc>={DEMO_GATE}", "code": zoo.code_digest("circuitprint.task")}
    return r, extra


def build_demo_base(seed: int, *, progress: bool = False):
    """Demo-size P (seed 0) or independent model (seed k): the base recipe cut to
    ``DEMO_STEPS`` steps (100 if unlisted), gated at ``DEMO_GATE`` task accuracy (lower than
    the fixtures')."""
    from llmcore import zoo

    r, extra = _demo_base_args(seed)
    return zoo.build(r, gate=_demo_gate, key_extra=extra, progress=progress)


def lookup_base(seed: int) -> Any:
    """The registered fixture model of ``seed`` if it is already cached, else ``None``."""
    from llmcore import zoo

    material = recipe(seed).key_material()
    material["extra"] = {"gate": "twohop-acc>=0.99",
                         "code": zoo.code_digest("circuitprint.task")}  # fmt: skip
    return zoo.lookup(f"circuitprint-twohop-s{seed}", material)


def _ft_docs(half: int, seed: int, n: int) -> list[str]:
    return [ex.document for ex in task.shifted_examples(n, half=half, seed=seed)]


def build_finetune(
    base: Any,
    *,
    half: int,
    seed: int,
    lr: float = FT_LR,
    steps: int = FT_STEPS,
    progress: bool = False,
):
    """FT: the base fine-tuned on shifted fillers plus the unseen subjects (full FT)."""
    from circuitprint import transforms
    from llmcore import zoo

    def make(out):
        model, tok = base.load()
        stats = transforms.finetune(
            model, tok, _ft_docs(half, seed, 4000), lr=lr, steps=steps, seed=seed, batch=FT_BATCH
        )
        acc = task_accuracy(model, tok, task.sample_examples(256, seed=98))
        model.save_pretrained(out)
        tok.save_pretrained(out)
        return {**stats, "task_accuracy": acc, "weights_sha256": zoo.weights_digest(model)}

    material = _ft_material(base, half, seed, lr, steps)
    return zoo.cached(f"circuitprint-ft-h{half}-s{seed}", material, make, progress=progress)


def _ft_material(base: Any, half: int, seed: int, lr: float, steps: int) -> dict[str, Any]:
    from llmcore import zoo

    return {"base": base.key, "half": half, "seed": seed, "lr": lr, "steps": steps,
            "code": zoo.code_digest("circuitprint.transforms", "circuitprint.task")}  # fmt: skip


def build_lora(base: Any, *, seed: int = 5, lr: float = 2e-3, steps: int = FT_STEPS,
               progress: bool = False):  # fmt: skip
    """LoRA (r 8, alpha 16, q/v/gate/up) on the shifted data, merged into the weights."""
    from circuitprint import transforms
    from llmcore import zoo

    def make(out):
        model, tok = base.load()
        model, stats = transforms.lora_finetune(
            model, tok, _ft_docs(0, seed, 4000), lr=lr, steps=steps, seed=seed, batch=FT_BATCH
        )
        acc = task_accuracy(model, tok, task.sample_examples(256, seed=98))
        model.save_pretrained(out)
        tok.save_pretrained(out)
        return {**stats, "task_accuracy": acc, "weights_sha256": zoo.weights_digest(model)}

    material = {"base": base.key, "seed": seed, "lr": lr, "steps": steps,
                "code": zoo.code_digest("circuitprint.transforms", "circuitprint.task")}  # fmt: skip
    return zoo.cached(f"circuitprint-lora-s{seed}", material, make, progress=progress)


def build_merge(
    kind: str, base: Any, parts: list[Any], *, density: float = 0.5, progress: bool = False
):
    """M-lin (0.5/0.5 average) or M-ties (TIES on the base, density ``density``, lambda 1)."""
    from circuitprint import transforms
    from llmcore import zoo

    def make(out):
        models = [p.load()[0] for p in parts]
        b, tok = base.load()
        if kind == "linear":
            m = transforms.merge_linear(models, [1.0 / len(models)] * len(models))
        elif kind == "ties":
            m = transforms.merge_ties(b, models, density=density, lam=1.0)
        else:
            raise ValueError(f"merge kind {kind!r}")
        acc = task_accuracy(m, tok, task.sample_examples(256, seed=98))
        m.save_pretrained(out)
        tok.save_pretrained(out)
        return {"task_accuracy": acc, "weights_sha256": zoo.weights_digest(m)}

    material = _merge_material(kind, base, parts, density)
    return zoo.cached(f"circuitprint-merge-{kind}", material, make, progress=progress)


def _merge_material(kind: str, base: Any, parts: list[Any], density: float) -> dict[str, Any]:
    from llmcore import zoo

    return {"kind": kind, "base": base.key, "parts": [p.key for p in parts],
            "density": density, "code": zoo.code_digest("circuitprint.transforms")}  # fmt: skip


def lookup_fixture_models() -> dict[str, Any] | None:
    """P, FT1, M-lin and I3 of the registered fixtures if all are cached (never builds)."""
    from llmcore import zoo

    p, i3 = lookup_base(0), lookup_base(3)
    if p is None or i3 is None:
        return None
    ft1 = zoo.lookup("circuitprint-ft-h0-s1", _ft_material(p, 0, 1, FT_LR, FT_STEPS))
    ft2 = zoo.lookup("circuitprint-ft-h1-s2", _ft_material(p, 1, 2, FT_LR, FT_STEPS))
    if ft1 is None or ft2 is None:
        return None
    mlin = zoo.lookup("circuitprint-merge-linear", _merge_material("linear", p, [ft1, ft2], 0.5))
    if mlin is None:
        return None
    return {"P": p, "FT": ft1, "M-lin": mlin, "I": i3}


def build_demo_models(progress: bool = False) -> dict[str, Any]:
    """Demo-size P, a fine-tune (``DEMO_FT_STEPS`` at lr 1e-4), the 0.5/0.5 merge of two such
    fine-tunes and an independent model (seed 3)."""
    p = build_demo_base(0, progress=progress)
    fa = build_finetune(p, half=0, seed=1, steps=DEMO_FT_STEPS, progress=progress)
    fb = build_finetune(p, half=1, seed=2, steps=DEMO_FT_STEPS, progress=progress)
    mlin = build_merge("linear", p, [fa, fb], progress=progress)
    return {"P": p, "FT": fa, "M-lin": mlin, "I": build_demo_base(3, progress=progress)}
