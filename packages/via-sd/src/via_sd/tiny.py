"""CPU fixtures (spec §6, issue 3): a synthetic list-transform language and two tiny Llamas.

Each line is ``Q:<k digits>|R:<reversed>|S:<sorted>|M:<running digit sum mod 10>.`` with
k ~ U{4..8}. Separators are easy tokens; R, S and M are hard ones where drafter and target
disagree. The target q (8 layers) is trained with LayerSkip-style layer dropout on layers
1..6 so that skipped-layer variants stay usable (a fixture convenience; VIA-SD itself is
training-free). The drafter p (2 layers) is trained briefly so it agrees with q only partly.

Both are :class:`llmcore.zoo.Recipe` s with this package's own corpus. The drafter goes through
``llmcore.zoo.build``; the target needs a custom loss (layer dropout), which ``zoo.build``
does not take, so :func:`build_target` trains it with ``llmcore.zoo.train.train_lm`` and caches
it in the zoo cache the same way (hash-keyed directory, file lock, atomic rename).
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llmcore.zoo import Corpus, ModelSpec, Recipe, TokenizerSpec, TrainSpec

CORPUS_SEED = 0
N_TRAIN = 6000
LAYER_DROPOUT = 0.15
DROPOUT_LAYERS = (1, 2, 3, 4, 5, 6)
TARGET_GATE = 0.9
AGREEMENT_GATE = (0.6, 0.9)


def make_example(rng: random.Random) -> tuple[str, str]:
    """``(prompt, answer)``: prompt ``Q:<digits>|``, answer ``R:...|S:...|M:....``."""
    k = rng.randint(4, 8)
    d = [rng.randint(0, 9) for _ in range(k)]
    run, s = [], 0
    for x in d:
        s = (s + x) % 10
        run.append(s)
    j = "".join
    q = j(map(str, d))
    return f"Q:{q}|", f"R:{j(map(str, d[::-1]))}|S:{j(map(str, sorted(d)))}|M:{j(map(str, run))}."


def list_corpus(n: int = N_TRAIN, seed: int = CORPUS_SEED) -> Corpus:
    rng = random.Random(seed)
    docs = ["".join(make_example(rng)) for _ in range(n)]
    return Corpus.from_texts("via-sd-lists", docs, eval_fraction=0.05, seed=seed)


def eval_prompts(n: int = 64, seed: int = 12345) -> list[dict[str, Any]]:
    """Held-out prompts in the prompts-JSONL format (seed disjoint from the corpus)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p, a = make_example(rng)
        out.append({"id": f"list-{i:03d}", "prompt": p, "reference": a})
    return out


def calib_texts(n: int = 16, seed: int = 777) -> list[str]:
    """Full example lines for the mask search's calibration set (seed disjoint from eval)."""
    rng = random.Random(seed)
    return ["".join(make_example(rng)) for _ in range(n)]


TOKENIZER = TokenizerSpec(vocab_size=264, min_frequency=2)


def target_recipe() -> Recipe:
    return Recipe(
        "via-sd-target",
        list_corpus(),
        tokenizer=TOKENIZER,
        model=ModelSpec(
            arch="llama",
            hidden_size=128,
            num_layers=8,
            num_heads=4,
            intermediate_size=320,
            max_position_embeddings=128,
        ),
        train=TrainSpec(steps=2000, batch_size=32, lr=3e-3, warmup_steps=100, max_length=48),
        max_eval_loss=0.9,
        description="8-layer Llama target with layer dropout (p=0.15 on layers 1..6)",
    )


DRAFTER_STEPS = 300


def drafter_recipe(steps: int = DRAFTER_STEPS) -> Recipe:
    """The drafter p. ``steps`` other than the default trades agreement for build time
    (measured agreement with q: 300 steps 0.747, 700 steps 0.870, 1,200 steps 0.974)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        from via_sd.errors import ViaSDConfigError

        raise ViaSDConfigError(f"drafter steps must be a positive integer, got {steps!r}")
    return Recipe(
        "via-sd-drafter",
        list_corpus(),
        tokenizer=TOKENIZER,
        model=ModelSpec(
            arch="llama",
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            intermediate_size=192,
            max_position_embeddings=128,
        ),
        train=TrainSpec(steps=steps, batch_size=32, lr=3e-3, warmup_steps=30, max_length=48),
        max_eval_loss=1.5,
        description="2-layer Llama drafter, briefly trained (partial agreement with the target)",
    )


@dataclass
class TinyModels:
    """The built fixtures: target q, drafter p, their shared tokenizer, and build metadata."""

    target: Any
    drafter: Any
    tokenizer: Any
    info: dict[str, Any]


def answer_exact_match(
    model, tokenizer, prompts: list[dict[str, Any]], max_new_tokens: int = 40
) -> float:
    """Greedy exact match of the answer field on ``prompts`` (AR decoding with q)."""
    from via_sd.config import ViaSDConfig
    from via_sd.decoding import autoregressive_generate

    cfg = ViaSDConfig(max_new_tokens=max_new_tokens, eos_token_id=tokenizer.eos_token_id)
    hits = 0
    for row in prompts:
        ids = [
            tokenizer.bos_token_id,
            *tokenizer(row["prompt"], add_special_tokens=False)["input_ids"],
        ]
        res = autoregressive_generate(model, ids, cfg)
        hits += score(tokenizer.decode(res.new_tokens, skip_special_tokens=True), row["reference"])
    return hits / len(prompts)


def score(output: str, reference: str | None) -> bool | None:
    """Exact match of the generated answer (up to and including the final period)."""
    if reference is None:
        return None
    return output.strip().split(".")[0] + "." == reference.strip()


#: Stage 2 of the target: continue from stage 1 on the answer tokens only (the random Q digits
#: are unpredictable; their gradient is noise), still with layer dropout. Calibration: after
#: stage 1 alone (2000 steps) greedy exact match was 0.47, the errors all in the running-sum
#: M field.
STAGE2 = TrainSpec(steps=1000, batch_size=32, lr=2e-3, warmup_steps=20, max_length=48, seed=1)

#: Stage 2 continues in these chunks (new data order each) while the gate is missed, at most
#: :data:`STAGE2_MAX_EXTENSIONS` times. On this project's machine stage 2 passes after its
#: 1,000 steps (0.922) and no extension runs; with two torch threads the same recipe ended at
#: 0.844, which is what the extension is for (BLAS summation order differs across CPUs).
#: Exercised on a deliberately short stage 2 (300 steps): exact match 0.469, then 0.531,
#: 0.750, 0.844, 0.984 after each chunk (lr 2e-3); chunks at lr 5e-4 only reached 0.828.
#: Not part of the cache key: an entry is only written when the gate passes, and when it
#: passes without extension the weights are exactly those of the recipe without the policy.
STAGE2_EXTENSION = TrainSpec(
    steps=250, batch_size=32, lr=2e-3, warmup_steps=10, max_length=48, seed=101
)
STAGE2_MAX_EXTENSIONS = 4


def train_to_gate(
    measure: Callable[[], float], extend: Callable[[int], None], gate: float, max_extensions: int
) -> tuple[float, int]:
    """Measure; while below ``gate`` run ``extend(k)`` (k = 1, 2, ...) and measure again, at
    most ``max_extensions`` times. Returns (last score, extensions run)."""
    value = measure()
    k = 0
    while value < gate and k < max_extensions:
        k += 1
        extend(k)
        value = measure()
    return value, k


def _layer_dropout_loss(p: float, layers: tuple[int, ...], answer_only_after: int | None = None):
    """Causal CE with LayerSkip-style layer dropout: each listed layer is skipped with
    probability ``p`` (one draw per step, from the trainer's seeded generator). With
    ``answer_only_after`` (a token id), positions up to its first occurrence are not scored."""
    import torch

    from via_sd.slim import _SkipLayer, find_layers

    def loss_fn(model, ids, att, gen):
        mods = find_layers(model)
        u = torch.rand(len(layers), generator=gen).tolist()
        drop = [i for i, x in zip(layers, u, strict=True) if x < p]
        saved = {i: mods[i] for i in drop}
        labels = ids.masked_fill(att == 0, -100)
        if answer_only_after is not None:
            hit = (ids == answer_only_after).int()
            before = hit.cumsum(1) - hit == 0  # up to and including the first separator
            labels = labels.masked_fill(before, -100)
        try:
            for i in drop:
                mods[i] = _SkipLayer(False)
            return model(input_ids=ids, attention_mask=att, labels=labels).loss
        finally:
            for i, m in saved.items():
                mods[i] = m

    return loss_fn


def _cached(name: str, material: dict[str, Any], make, progress: bool):
    """Zoo-cache semantics for a custom build: ``make(tmp_dir) -> metrics`` runs once per key."""
    import shutil

    from llmcore.zoo import ZooEntry
    from llmcore.zoo.cache import build_lock, entry_dir, install, library_versions, recipe_key

    key = recipe_key(material)
    final = entry_dir(name, key)
    with build_lock(final):
        if (final / "zoo.json").exists():
            meta = json.loads((final / "zoo.json").read_text())
            return ZooEntry(name, final, key, meta["metrics"], meta["build_seconds"], True)
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=final.parent))
        try:
            metrics = make(tmp)
            seconds = time.perf_counter() - t0
            meta = {
                "name": name,
                "key": key,
                "recipe": material,
                "versions": library_versions(),
                "metrics": metrics,
                "build_seconds": seconds,
            }
            (tmp / "zoo.json").write_text(json.dumps(meta, indent=2))
            install(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return ZooEntry(name, final, key, metrics, seconds, False)


def _stage1_material(recipe: Recipe) -> dict[str, Any]:
    return {
        **recipe.key_material(),
        "layer_dropout": {"p": LAYER_DROPOUT, "layers": list(DROPOUT_LAYERS)},
    }


def build_target(recipe: Recipe | None = None, *, progress: bool = True):
    """Build (or load from the zoo cache) the layer-dropout target; returns a ``ZooEntry``.

    Stage 1: ``recipe`` (all tokens, layer dropout). Stage 2: :data:`STAGE2` on answer
    tokens. Each stage is cached. Gate: greedy exact match >= 0.9 on 64 held-out prompts
    (else ``QualityGateError``, nothing cached for stage 2)."""
    from dataclasses import asdict

    import torch

    from llmcore.errors import QualityGateError
    from llmcore.models import load_causal_lm, load_tokenizer
    from llmcore.zoo import train_bpe_tokenizer, weights_digest
    from llmcore.zoo.train import build_model, eval_loss, train_lm

    recipe = recipe or target_recipe()
    m1 = _stage1_material(recipe)

    def stage1(tmp: Path) -> dict[str, Any]:
        tok = train_bpe_tokenizer(
            recipe.corpus.train,
            recipe.tokenizer.vocab_size,
            min_frequency=recipe.tokenizer.min_frequency,
        )
        model = build_model(recipe.model, tok, seed=recipe.train.seed)
        stats = train_lm(
            model,
            tok,
            recipe.corpus.train,
            recipe.train,
            progress=progress,
            desc=recipe.name + "-stage1",
            loss_fn=_layer_dropout_loss(LAYER_DROPOUT, DROPOUT_LAYERS),
        )
        held = eval_loss(model, tok, recipe.corpus.eval, max_length=recipe.train.max_length)
        if held > recipe.max_eval_loss:
            raise QualityGateError(
                f"via-sd target stage 1 held-out loss {held:.3f} > "
                f"{recipe.max_eval_loss}; nothing was cached"
            )
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        return {**stats, "eval_loss": held, "weights_sha256": weights_digest(model)}

    e1 = _cached(recipe.name + "-stage1", m1, stage1, progress)
    train2 = asdict(STAGE2)
    train2.pop("threads")
    m2 = {"stage1": m1, "stage2": train2, "answer_only": True, "exact_match_gate": TARGET_GATE}

    def stage2(tmp: Path) -> dict[str, Any]:
        model = load_causal_lm(e1.path, dtype="float32", device="cpu")
        tok = load_tokenizer(e1.path)
        bar = tok.convert_tokens_to_ids("|")
        loss_fn = _layer_dropout_loss(LAYER_DROPOUT, DROPOUT_LAYERS, bar)
        stats = train_lm(
            model,
            tok,
            recipe.corpus.train,
            STAGE2,
            progress=progress,
            desc=recipe.name + "-stage2",
            loss_fn=loss_fn,
        )

        def measure() -> float:
            with torch.no_grad():
                return answer_exact_match(model, tok, eval_prompts(64))

        def extend(k: int) -> None:
            spec = replace(STAGE2_EXTENSION, seed=STAGE2_EXTENSION.seed + k - 1)
            train_lm(
                model,
                tok,
                recipe.corpus.train,
                spec,
                progress=progress,
                desc=f"{recipe.name}-stage2-ext{k}",
                loss_fn=loss_fn,
            )

        em, n_ext = train_to_gate(measure, extend, TARGET_GATE, STAGE2_MAX_EXTENSIONS)
        held = eval_loss(model, tok, recipe.corpus.eval, max_length=recipe.train.max_length)
        metrics = {
            **stats,
            "eval_loss": held,
            "exact_match": em,
            "stage2_extensions": n_ext,
            "stage1_build_seconds": e1.build_seconds,
            "n_params": float(sum(p.numel() for p in model.parameters())),
        }
        if em < TARGET_GATE:
            raise QualityGateError(
                f"via-sd target missed its gate: greedy exact match {em:.3f} < {TARGET_GATE} "
                f"on 64 held-out prompts after {n_ext} extension chunks; fix the recipe; "
                "nothing was cached"
            )
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        metrics["weights_sha256"] = weights_digest(model)
        return metrics

    return _cached(recipe.name, m2, stage2, progress)


def token_agreement(target, drafter, tokenizer, prompts: list[dict[str, Any]]) -> float:
    """Fraction of positions of the target's greedy answers where argmax p == argmax q."""
    import torch

    agree = total = 0
    with torch.no_grad():
        for row in prompts:
            text = row["prompt"] + (row["reference"] or "")
            ids = torch.tensor(
                [[tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]]
            )
            n = 1 + len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"])
            a = target(input_ids=ids).logits[0, n - 1 : -1].argmax(-1)
            b = drafter(input_ids=ids).logits[0, n - 1 : -1].argmax(-1)
            agree += int((a == b).sum())
            total += a.numel()
    return agree / total


def build_fixtures(*, progress: bool = True, drafter_steps: int = DRAFTER_STEPS) -> TinyModels:
    """Build or load both fixtures and check the drafter's agreement gate (0.6-0.9).

    ``drafter_steps`` other than the default builds a differently trained drafter (for the
    agreement/γ regime map in the README); the gate is then reported, not enforced."""
    import torch

    from llmcore.errors import QualityGateError
    from llmcore.zoo import build

    t0 = time.perf_counter()
    with_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        te = build_target(progress=progress)
        de = build(drafter_recipe(drafter_steps), progress=progress)
        target, tok = te.load()
        drafter, dtok = de.load()
        if tok.get_vocab() != dtok.get_vocab():
            raise QualityGateError("fixture tokenizers differ; clear the zoo cache and rebuild")
        agree = token_agreement(target, drafter, tok, eval_prompts(64))
    finally:
        torch.set_num_threads(with_threads)
    lo, hi = AGREEMENT_GATE
    if drafter_steps == DRAFTER_STEPS and not lo <= agree <= hi:
        raise QualityGateError(
            f"drafter/target greedy token agreement {agree:.3f} is outside [{lo}, {hi}]; "
            "adjust the drafter recipe (steps) so there is something to verify"
        )
    info = {
        "target_path": str(te.path),
        "drafter_path": str(de.path),
        "target_from_cache": te.from_cache,
        "drafter_from_cache": de.from_cache,
        "target_build_seconds": te.build_seconds,
        "drafter_build_seconds": de.build_seconds,
        "target_exact_match": te.metrics.get("exact_match"),
        "agreement": agree,
        "drafter_steps": drafter_steps,
        "load_seconds": time.perf_counter() - t0,
    }
    return TinyModels(target, drafter, tok, info)
