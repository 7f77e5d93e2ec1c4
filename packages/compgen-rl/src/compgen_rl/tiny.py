"""The CPU-sized setting: a tiny Llama trained on the routing-context split, and its cached arms.

``sft_recipe`` is an ``llmcore.zoo`` recipe (2 x 128 Llama, one token per character, loss on the
completion only); ``build_sft`` trains it once per machine through ``zoo.build`` with an
accuracy gate on seen and unseen prompts. ``build_rl_arm`` / ``build_rft_arm`` derive the
SFT->RL (GRPO) and SFT->RFT checkpoints from it through ``zoo.cached``, keyed by the code digest
of the method modules (this one included) and their configuration.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import lru_cache
from typing import Any

from compgen_rl.data import SplitConfig, build_rows

__all__ = [
    "CLAIM_GRPO",
    "CLAIM_SFT",
    "CLAIM_SFT_STEPS",
    "DEMO",
    "PREFILTER_BATCH",
    "build_rft_arm",
    "build_rl_arm",
    "build_sft",
    "claim_split",
    "sft_recipe",
]

#: SFT of the claim fixture: steps, sequences per step and peak learning rate (AdamW, 50
#: linear warm-up steps, then cosine decay to 10 % of the peak).
CLAIM_SFT: dict[str, Any] = {"steps": 1000, "batch_size": 64, "lr": 1e-3}

#: SFT steps of the claim fixture.
CLAIM_SFT_STEPS: int = CLAIM_SFT["steps"]

#: GRPO settings of the claim arm: the CPU recipe (8 x 8, beta 0, dapo, T 1.0, 60 steps) at
#: lr 2e-5; at 5e-5 this SFT model lost 0.06 seen accuracy (see the claim test's docstring).
CLAIM_GRPO: dict[str, Any] = {"lr": 2e-5}

#: Completions per sampling call in the claim arm's prefilter (128 prompts x 8 samples). The
#: batch size changes the random draws and hence which prompts are kept.
PREFILTER_BATCH = 1024

#: Demo sizes: short SFT, a few GRPO steps (shows the pipeline, not the claim).
DEMO = {"sft_steps": 150, "n_sft": 12_000, "grpo_steps": 3}


def claim_split(**overrides: Any) -> SplitConfig:
    """The routing-context CPU split (see :meth:`SplitConfig.routing_context_cpu`)."""
    return SplitConfig.routing_context_cpu(**overrides)


@lru_cache(maxsize=4)
def _rows(cfg_json: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    import json

    d = json.loads(cfg_json)
    if d.get("holdout_events") is not None:
        d["holdout_events"] = tuple(d["holdout_events"])
    d["context_routings"] = tuple(d["context_routings"])
    return build_rows(SplitConfig(**d))


def split_rows(cfg: SplitConfig) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Rows and metadata of ``cfg`` (memoised per process)."""
    import json

    return _rows(json.dumps(asdict(cfg), sort_keys=True, default=list))


def sft_recipe(
    cfg: SplitConfig | None = None,
    *,
    steps: int = CLAIM_SFT_STEPS,
    name: str = "compgen-rl-sft",
    batch_size: int = CLAIM_SFT["batch_size"],
    lr: float = CLAIM_SFT["lr"],
    context: int = 64,
):
    """An ``llmcore.zoo.Recipe``: the SFT documents (prompt + canonical trace) of ``cfg``, a
    byte-level tokenizer without merges (one token per character), a 2-layer d=128 Llama with
    tied embeddings and ``context`` positions (documents are cut there: raise it for depth-3 or
    length-6 tasks), ``batch_size`` sequences per step, peak ``lr`` with 50 warm-up steps and
    cosine decay."""
    from llmcore import zoo

    cfg = cfg or claim_split()
    rows, _ = split_rows(cfg)
    train = tuple(r["prompt"] + r["completion"] for r in rows["sft"])
    held = tuple(r["prompt"] + r["completion"] for r in rows["test_seen"][:256])
    return zoo.Recipe(
        name,
        zoo.Corpus(f"compgen-{cfg.inventory}-{cfg.strategy}-s{cfg.seed}", train, held),
        tokenizer=zoo.TokenizerSpec(vocab_size=264, min_frequency=2),
        model=zoo.ModelSpec(
            arch="llama",
            hidden_size=128,
            num_layers=2,
            num_heads=4,
            intermediate_size=512,
            max_position_embeddings=context,
            tie_word_embeddings=True,
        ),
        train=zoo.TrainSpec(
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            warmup_steps=50,
            max_length=context,
            seed=cfg.seed,
        ),
        # the held-out loss covers the random prompts too (never trained on): a loose sanity gate
        max_eval_loss=8.0,
        description="2x128 Llama SFT on canonical traces of the routing-context split",
    )


def _answer_match(pred: str, answer: str) -> bool:
    from compgen_rl.hlsm import extract_answer

    return extract_answer(pred) == answer


def build_sft(
    cfg: SplitConfig | None = None,
    *,
    steps: int = CLAIM_SFT_STEPS,
    seen_min: float = 0.5,
    unseen_window: tuple[float, float] | None = (0.0, 0.9),
    n_gate: int = 200,
    progress: bool = False,
    name: str = "compgen-rl-sft",
    batch_size: int = CLAIM_SFT["batch_size"],
    lr: float = CLAIM_SFT["lr"],
    context: int = 64,
):
    """Train (once) and return the SFT ``ZooEntry``. Gate: greedy seen accuracy >= ``seen_min``
    and unseen accuracy inside ``unseen_window`` on ``n_gate`` prompts each (a model that already
    solves the held-out events leaves RL nothing to show; one that cannot run traces is useless)."""
    import compgen_rl.hlsm
    import compgen_rl.modules
    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    cfg = cfg or claim_split()
    recipe = sft_recipe(cfg, steps=steps, name=name, batch_size=batch_size, lr=lr, context=context)
    tok = zoo.recipe_tokenizer(recipe)
    newline = tok.convert_tokens_to_ids(tok.tokenize("\n"))[0]
    rows, _ = split_rows(cfg)
    seen = rows["test_seen"][:n_gate]
    unseen = rows["test_unseen"][:n_gate]
    max_new = max(40, max(len(r["completion"]) for r in seen + unseen) + 4)
    gates = [
        zoo.accuracy_gate(
            [r["prompt"] for r in seen],
            [r["answer"] for r in seen],
            lo=seen_min,
            max_new_tokens=max_new,
            match=_answer_match,
            name="gate_seen_acc",
        )
    ]
    if unseen_window is not None:
        gates.append(
            zoo.accuracy_gate(
                [r["prompt"] for r in unseen],
                [r["answer"] for r in unseen],
                lo=unseen_window[0],
                hi=unseen_window[1],
                max_new_tokens=max_new,
                match=_answer_match,
                name="gate_unseen_acc",
            )
        )

    def gate(model: Any, tokenizer: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        for g in gates:
            out.update(g(model, tokenizer))
        return out

    return zoo.build(
        recipe,
        progress=progress,
        loss_fn=completion_loss(newline),
        gate=gate,
        key_extra={
            "loss": "completion after the first newline",
            "gate": {"seen_min": seen_min, "unseen_window": unseen_window, "n": n_gate},
            "code": zoo.code_digest(compgen_rl.hlsm, compgen_rl.modules),
        },
    )


def _arm_code() -> str:
    """Digest of the code that builds a derived arm, this module (the arms' ``make``) included."""
    import compgen_rl.evaluate
    import compgen_rl.hlsm
    import compgen_rl.modules
    import compgen_rl.rewards
    import compgen_rl.tiny
    import compgen_rl.train
    from llmcore import zoo

    return zoo.code_digest(
        compgen_rl.train,
        compgen_rl.rewards,
        compgen_rl.hlsm,
        compgen_rl.modules,
        compgen_rl.evaluate,
        compgen_rl.tiny,
    )


def build_rl_arm(
    sft_entry: Any, cfg: SplitConfig | None = None, grpo: Any = None, *, progress: bool = False
):
    """SFT -> prefilter -> GRPO, cached by ``zoo.cached`` (material: SFT key, split and GRPO
    configs, code digest). The entry's metrics hold the prefilter and GRPO statistics."""
    from compgen_rl.train import GRPOArgs, prefilter_rows, run_grpo
    from llmcore import zoo

    cfg = cfg or claim_split()
    grpo = grpo or GRPOArgs(**CLAIM_GRPO)

    def make(out: Any) -> dict[str, Any]:
        model, tok = sft_entry.load()
        rows, _ = split_rows(cfg)
        kept, pf = (
            prefilter_rows(
                model,
                tok,
                rows["rl"],
                k=grpo.prefilter_k,
                temperature=grpo.temperature,
                seed=grpo.seed,
                max_new_tokens=grpo.max_completion_length,
                batch_size=PREFILTER_BATCH,
            )
            if grpo.prefilter
            else (rows["rl"], {})
        )
        model, stats = run_grpo(model, tok, kept, grpo)
        model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        return {**{f"prefilter_{k}": v for k, v in pf.items()}, **stats}

    material = {
        "sft": sft_entry.key,
        "split": asdict(cfg),
        "grpo": asdict(grpo),
        "code": _arm_code(),
    }
    return zoo.cached(
        "compgen-rl-sft-rl",
        material,
        make,
        progress=progress,
        description="SFT -> GRPO arm on the routing-context split",
    )


def build_rft_arm(
    sft_entry: Any, cfg: SplitConfig | None = None, rft: Any = None, *, progress: bool = False
):
    """SFT -> rejection-sampling fine-tuning with the RL arm's sample budget, cached."""
    from compgen_rl.train import RFTArgs, run_rft
    from llmcore import zoo

    cfg = cfg or claim_split()
    rft = rft or RFTArgs()

    def make(out: Any) -> dict[str, Any]:
        model, tok = sft_entry.load()
        rows, _ = split_rows(cfg)
        model, stats = run_rft(model, tok, rows["rl"], rft)
        model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        return stats

    material = {"sft": sft_entry.key, "split": asdict(cfg), "rft": asdict(rft), "code": _arm_code()}
    return zoo.cached(
        "compgen-rl-sft-rft",
        material,
        make,
        progress=progress,
        description="SFT -> RFT arm on the routing-context split",
    )
