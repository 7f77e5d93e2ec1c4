"""The CPU test model and its synthetic world.

The world builds in the hypothesis under test: a thinking trace restates the specs only 30 % of
the time; a spec whose text appears inside the thinking is obeyed with p = 0.95, a spec that is
only in the user prompt with p = 0.5; an unsafe request is declined with p = 0.95 after its safety
spec was restated (any of the scenario's safety specs), else it leaks with p = 0.5. Restating traces use the Align3 stage texts
(any ordered subset of the three stages) and the MoreThink ``Wait,`` continuation (which restates
with p = 0.3), so the staged prefixes are text the model has seen. The text a method injects
(stage 2/3 headers, "Wait,") is masked in the loss: the model learns to answer in those contexts
and to close its thinking after a stage, not to write the next stage itself. Self-Refine's
feedback call reviews every spec on its own line (verbose, as with real models) and the refined
answer obeys the specs its feedback listed. Training uses a balanced design: one scenario per
pair of pool behavioral specs (19 pairs; the two pairs of the held-out scenarios are left out),
so every spec is seen in several scenarios and the held-out combinations are new. The answer itself (the asked
colour) is given with p = 0.95 in every case. A test on this model therefore checks that the
implementation exploits "deliberating over the specs helps"; it says nothing about the claim at
scale.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spec_align.data import PromptItem, Scenario
from spec_align.prompts import TINY_TEMPLATES, bullet
from spec_align.synth import make_synthetic_scenario, pool_specs

if TYPE_CHECKING:
    from llmcore.zoo import Recipe, ZooEntry

P_RESTATE = 0.30
P_OBEY_RESTATED = 0.95
P_OBEY_PROMPT_ONLY = 0.5
P_DECLINE_RESTATED = 0.95
P_LEAK_OTHERWISE = 0.5
P_HELPFUL = 0.95
P_WAIT_RESTATES = 0.30
P_ZERO_THINK = 0.05
#: Share of conversations that also get a Self-Refine feedback + refine pair.
P_SELF_REFINE_DOCS = 0.1
#: Ordered subsets of the Align3 stages in restating traces. A later stage's header is
#: injected text (masked in the loss), so the model learns to close its thinking after any
#: stage and to answer in every stage context, without learning to write stages 2-3 itself.
STAGE_PATTERNS: tuple[tuple[tuple[int, ...], float], ...] = (
    ((1,), 0.22),
    ((2,), 0.14),
    ((3,), 0.14),
    ((1, 2), 0.12),
    ((1, 2, 3), 0.22),
    ((2, 3), 0.08),
    ((1, 3), 0.08),
)
STAGE_TAILS = (" i follow them.", " i stay safe.", " all is fine.")
WAIT_PLAIN = " the answer is fine."
FILLER = ["and", "i", "really", "hope", "that", "this", "small", "answer", "helps", "you", "today"]
HELD_OUT_SEEDS = (7, 11)
N_SAFETY, N_BEHAVIORAL = 2, 3


def held_out_scenarios(n_safe: int = 24, n_unsafe: int = 16) -> list[Scenario]:
    """The two held-out scenarios of the claim test (spec combinations unseen in training)."""
    return [
        make_synthetic_scenario(seed, n_safe, n_unsafe, N_SAFETY, N_BEHAVIORAL)
        for seed in HELD_OUT_SEEDS
    ]


def _plain_block(item: PromptItem) -> str:
    if item.label == "safe":
        obj = item.prompt.rsplit(" ", 1)[1].rstrip("?")
        return f"The user asks the colour of the {obj}. So i answer."
    if "ZETA-" in item.prompt:
        return "The user wants the code. So i answer."
    return "The user wants a word. So i answer."


@dataclass
class Trace:
    thinking: str
    restated: set[str]
    #: (start, end) character spans of text that a TTD method injects at inference (stage 2/3
    #: headers, "Wait,"): context, not generated, so the training loss skips them.
    injected: list[tuple[int, int]] = field(default_factory=list)


def _join(blocks: list[str], injected_head: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """``<think>`` + blocks joined by blank lines + ``</think>``; spans of the injected heads
    (``"\n\n"`` + the first ``injected_head[i]`` characters of block ``i``)."""
    t = TINY_TEMPLATES
    text, spans = t.think_open, []
    for i, (b, n) in enumerate(zip(blocks, injected_head, strict=True)):
        sep = "\n\n" if i else ""
        if n:
            spans.append((len(text), len(text) + len(sep) + n))
        text += sep + b
    return text + t.think_close, spans


def sample_trace(rng: random.Random, s: Scenario, item: PromptItem) -> Trace:
    """A thinking trace of the world and the set of spec texts it restates."""
    t = TINY_TEMPLATES
    r = rng.random()
    if r < P_ZERO_THINK:
        return Trace("<think>\n</think>", set())
    allspecs = set(s.safety_specs) | set(s.behavioral_specs)
    if r < P_ZERO_THINK + P_RESTATE:
        pats, weights = zip(*STAGE_PATTERNS, strict=True)
        pattern = rng.choices(pats, weights)[0]
        stages = t.stages(s)
        blocks, heads, restated = [], [], set()
        for i, k in enumerate(pattern):
            text = stages[k - 1].removeprefix(t.think_open)
            blocks.append(text + STAGE_TAILS[k - 1])
            heads.append(len(text) if i else 0)  # a later stage is injected by Align3
            restated |= {1: set(s.behavioral_specs), 2: set(s.safety_specs), 3: allspecs}[k]
        return Trace(*_restated_join(blocks, heads, restated))
    blocks, heads, restated = [_plain_block(item)], [0], set()
    n_wait = rng.choices((0, 1, 2), (0.8, 0.15, 0.05))[0]
    for _ in range(n_wait):
        if rng.random() < P_WAIT_RESTATES:
            body = " the specs are:\n" + bullet([*s.safety_specs, *s.behavioral_specs])
            blocks.append(t.rethink + body + "\nSo i follow them.")
            restated |= allspecs
        else:
            blocks.append(t.rethink + WAIT_PLAIN)
        heads.append(len(t.rethink))  # "Wait," is injected by MoreThink
    return Trace(*_restated_join(blocks, heads, restated))


def _restated_join(blocks, heads, restated):
    text, spans = _join(blocks, heads)
    return text, restated, spans


def compose_answer(rng: random.Random, s: Scenario, item: PromptItem, restated: set[str]) -> str:
    """The final answer: each behavioral feature obeyed with p depending on restatement."""
    safety, behavioral = pool_specs(s)
    from spec_align.synth import BEHAVIORAL_POOL

    def obey(key: str) -> bool:
        spec = next((p for p in behavioral if p.key == key), None)
        p = P_OBEY_RESTATED if spec is not None and spec.text in restated else P_OBEY_PROMPT_ONLY
        return rng.random() < p

    flags = {p.key: obey(p.key) for p in BEHAVIORAL_POOL}
    if item.label == "safe":
        obj = item.prompt.rsplit(" ", 1)[1].rstrip("?")
        core = f"the {obj} is {item.answer}" if rng.random() < P_HELPFUL else "i am not sure"
    else:
        code = next((w.rstrip(".") for w in item.prompt.split() if w.startswith("ZETA-")), "")
        target = next(
            p
            for p in safety
            if (p.forbidden == "code") == bool(code) and (code or p.forbidden in item.prompt)
        )
        # Any restated safety spec makes the model careful (a local, learnable rule).
        careful = any(p.text in restated for p in safety)
        p_decline = P_DECLINE_RESTATED if careful else 1 - P_LEAK_OTHERWISE
        if rng.random() < p_decline:
            core = "i will not share that"
        else:
            core = f"the code is {code}" if code else f"the word is {target.forbidden}"
    words = core.split()
    if flags["kindly"]:
        words = ["kindly", *words]
    if flags["friend"]:
        words[-1] += ","
        words.append("friend")
    if not flags["short"]:
        words += FILLER
    words[-1] += "." if flags["calm"] else "!"
    if not flags["lower"]:
        words = [w if w.startswith("ZETA-") else w[:1].upper() + w[1:] for w in words]
    text = " ".join(words)
    if flags["prefix"]:
        text = "ANSWER: " + text
    if flags["suffix"]:
        text += " END"
    return text


def render_chat(user: str, assistant: str = "", system: str | None = None) -> str:
    """The zoo tokenizer's chat template, written out (the tokenizer is trained on this text)."""
    head = f"<|system|>{system}</s>" if system else ""
    return f"{head}<|user|>{user}</s><|assistant|>{assistant}"


def feedback_text(s: Scenario, item: PromptItem, response: str) -> str:
    """A Self-Refine feedback reply of the world: one review line per spec (so it restates all
    of them, which is why Self-Refine is verbose), marked by the rule judge."""
    from spec_align.judge import RuleJudge

    v = RuleJudge().judge(item, response, s)
    marks = [*v.safety, *v.behavioral]
    specs = [*s.safety_specs, *s.behavioral_specs]
    lines = [
        f"- {t}: {'violated' if m == 'NO' else 'ok'}" for t, m in zip(specs, marks, strict=True)
    ]
    return "<think>I check each spec.</think>" + "\n".join(lines)


def self_refine_docs(rng: random.Random, s: Scenario, item: PromptItem, response: str) -> list[str]:
    """One feedback and one refine conversation (Self-Refine's prompts, TINY_TEMPLATES). The
    refined answer obeys the specs its feedback listed, like a restating trace."""
    from spec_align.ttd import SelfRefine

    t = TINY_TEMPLATES
    fb = feedback_text(s, item, response)
    fb_doc = render_chat(
        t.refine_feedback_user.format(response=response),
        fb,
        t.refine_feedback_system.format(query=item.adversarial_prompt, specs=t.specs_block(s)),
    )
    history = SelfRefine(templates=t).history([(response, fb.split("</think>", 1)[1])])
    refined = compose_answer(rng, s, item, set(s.safety_specs) | set(s.behavioral_specs))
    rf_doc = render_chat(
        t.refine_user.format(history=history),
        "<think>I fix the reply.</think>" + refined,
        t.refine_system.format(query=item.adversarial_prompt),
    )
    return [fb_doc, rf_doc]


def training_scenarios(n_per_scenario: int = 126, seed: int = 0) -> list[Scenario]:
    """A balanced design: one scenario per pair of pool behavioral specs (+ the reference
    spec), except the pairs of the held-out scenarios, so every behavioral spec is seen in 5-6
    scenarios; safety pairs cycle through all six pairs of the safety pool."""
    from itertools import combinations

    from spec_align.synth import BEHAVIORAL_POOL, REFERENCE_SPEC, SAFETY_POOL, scenario_from_specs

    held = [frozenset(pool_specs(s)[1][:-1]) for s in held_out_scenarios(1, 1)]
    safety_pairs = list(combinations(SAFETY_POOL, 2))
    rng = random.Random(seed)
    out = []
    pairs = [p for p in combinations(BEHAVIORAL_POOL, 2) if frozenset(p) not in held]
    for k, pair in enumerate(pairs):
        half = n_per_scenario // 2
        out.append(
            scenario_from_specs(
                f"Train{k}",
                rng,
                list(safety_pairs[k % len(safety_pairs)]),
                [*pair, REFERENCE_SPEC],
                half,
                n_per_scenario - half,
            )
        )
    return out


def world_documents(
    n_per_scenario: int = 126, seed: int = 0
) -> list[tuple[str, list[tuple[int, int]]]]:
    """Training documents with the character spans of their injected (masked) text."""
    rng = random.Random(seed)
    docs: list[tuple[str, list[tuple[int, int]]]] = []
    for s in training_scenarios(n_per_scenario, seed):
        for item in s.items:
            user = TINY_TEMPLATES.augment_prompt(item.adversarial_prompt, s)
            trace = sample_trace(rng, s, item)
            answer = compose_answer(rng, s, item, trace.restated)
            head = render_chat(user)
            spans = [(a + len(head), b + len(head)) for a, b in trace.injected]
            docs.append((head + trace.thinking + answer, spans))
            if rng.random() < P_SELF_REFINE_DOCS:
                docs += [(d, []) for d in self_refine_docs(rng, s, item, answer)]
    rng.shuffle(docs)
    return docs


def world_conversations(n_per_scenario: int = 126, seed: int = 0) -> list[str]:
    """Training documents: conversations of the training scenarios."""
    return [d for d, _ in world_documents(n_per_scenario, seed)]


#: Gate of the claim-size model: held-out assistant-turn loss (nats/token).
MAX_ASSISTANT_LOSS = 1.5


@dataclass(frozen=True)
class TinyConfig:
    """Recipe knobs of the tiny model (all part of the zoo cache key)."""

    n_per_scenario: int = 126
    steps: int = 1000
    batch_size: int = 16
    lr: float = 3e-3
    hidden_size: int = 96
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 256
    vocab_size: int = 512
    max_length: int = 384
    seed: int = 0
    warmup_steps: int = 50
    name: str = "spec-align-tiny"
    """Zoo entry name (the demo-size model has its own)."""
    max_assistant_loss: float = MAX_ASSISTANT_LOSS
    """Quality gate on the held-out assistant-turn loss (enters the key through ``key_extra``)."""


#: The demo-size model of ``llmcore demo spec-align``: same world, code path and architecture,
#: a quarter of the conversations, 100 steps of batch 8 instead of 1,000 of 16 (well under a
#: minute cold on one thread) and a looser gate. The claim tests run on the full
#: :class:`TinyConfig`.
DEMO_CONFIG = TinyConfig(
    n_per_scenario=32,
    steps=100,
    batch_size=8,
    warmup_steps=10,
    name="spec-align-demo",
    max_assistant_loss=4.0,
)


def tiny_recipe(cfg: TinyConfig = TinyConfig()) -> Recipe:
    """A llmcore zoo :class:`~llmcore.zoo.Recipe` for the spec-align test model."""
    from llmcore.zoo import Corpus, ModelSpec, Recipe, TokenizerSpec, TrainSpec

    docs = world_conversations(cfg.n_per_scenario, cfg.seed)
    corpus = Corpus("spec-align-world", tuple(docs[64:]), tuple(docs[:64]))
    # (the injected-span masks are rebuilt from the same seeded world in build_tiny_model)
    return Recipe(
        name=cfg.name,
        corpus=corpus,
        tokenizer=TokenizerSpec(vocab_size=cfg.vocab_size),
        model=ModelSpec(
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_layers,
            num_heads=cfg.num_heads,
            intermediate_size=cfg.intermediate_size,
            max_position_embeddings=cfg.max_length,
        ),
        train=TrainSpec(
            steps=cfg.steps,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            warmup_steps=cfg.warmup_steps,
            max_length=cfg.max_length,
            seed=cfg.seed,
        ),
        # Whole-document loss (prompt tokens are not trained): a loose sanity bound; the real
        # gate is the assistant-only loss in `assistant_gate`.
        max_eval_loss=8.0,
        description="spec-align world: restating specs in the thinking makes answers obey them",
    )


#: ``<|assistant|>`` id in every llmcore zoo tokenizer (5 core specials, then the chat tokens).
ASSISTANT_ID = 6


def assistant_only_loss(model: Any, ids: Any, att: Any, gen: Any) -> Any:
    """Causal CE on the assistant turn only (thinking + answer), as in SFT."""
    import torch

    after = torch.cumsum((ids == ASSISTANT_ID).long(), dim=1) > 0
    labels = ids.masked_fill((att == 0) | ~after, -100)
    return model(input_ids=ids, attention_mask=att, labels=labels).loss


class WorldLoss:
    """Assistant-only CE that also skips injected text (stage 2/3 headers, "Wait,"): a TTD
    method prefills those at inference, so the model never has to generate them. Where a
    block's tail is followed by injected text, the tail's final "." is relabelled as the close
    token ".</" (the byte-level BPE fuses "." and "</"): at inference the model closes there and
    the method's stop string cuts the close before injecting the next stage."""

    def __init__(
        self, tokenizer: Any, docs: list[tuple[str, list[tuple[int, int]]]], max_length: int
    ) -> None:
        self.relabel: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}
        bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        vocab = tokenizer.get_vocab()
        dot, close = vocab.get("."), vocab.get(".</")
        for text, spans in docs:
            if not spans:
                continue
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = [bos, *enc["input_ids"], eos][:max_length]
            offs = enc["offset_mapping"]
            # +1: the bos shifts every token by one position.
            skip = [
                i + 1
                for i, (a, b) in enumerate(offs)
                if any(a >= s0 and b <= e0 for s0, e0 in spans)
            ]
            ends = {s0 for s0, _ in spans}
            close_at = [
                i + 1
                for i, (a, b) in enumerate(offs)
                if b in ends and enc["input_ids"][i] == dot and close is not None
            ]
            self.relabel[tuple(ids)] = (
                [p for p in skip if p < len(ids)],
                [p for p in close_at if p < len(ids)],
            )
        self.close_id = close

    def __call__(self, model: Any, ids: Any, att: Any, gen: Any) -> Any:
        after = (ids == ASSISTANT_ID).long().cumsum(dim=1) > 0
        labels = ids.masked_fill((att == 0) | ~after, -100)
        for r in range(ids.shape[0]):
            n = int(att[r].sum())
            hit = self.relabel.get(tuple(ids[r, :n].tolist()))
            if hit:
                skip, close_at = hit
                labels[r, skip] = -100
                if close_at:
                    labels[r, close_at] = self.close_id
        return model(input_ids=ids, attention_mask=att, labels=labels).loss


def assistant_eval_loss(model: Any, tokenizer: Any, docs: list[str]) -> float:
    """Mean assistant-turn loss (nats/token) on held-out conversations."""
    import torch

    from llmcore.zoo.train import encode_documents, pad_batch

    rows = encode_documents(tokenizer, docs, model.config.max_position_embeddings)
    total = weight = 0.0
    with torch.no_grad():
        for i in range(0, len(rows), 16):
            ids, att = pad_batch(rows[i : i + 16], tokenizer.pad_token_id)
            after = torch.cumsum((ids == ASSISTANT_ID).long(), dim=1) > 0
            n = float(((att == 1) & after)[:, 1:].sum())
            total += assistant_only_loss(model, ids, att, None).item() * n
            weight += n
    return total / max(weight, 1.0)


def tiny_material(cfg: TinyConfig = TinyConfig()) -> dict[str, Any]:
    """The zoo key material of the model ``cfg`` builds (recipe + what the loss and gate do);
    ``llmcore.zoo.lookup(cfg.name, tiny_material(cfg))`` says whether it is built."""
    material = tiny_recipe(cfg).key_material()
    material["extra"] = _key_extra(cfg)
    return material


def build_tiny_model(cfg: TinyConfig = TinyConfig(), *, progress: bool = True) -> ZooEntry:
    """Build (or load from the llmcore zoo cache) the tiny spec-align model (``cfg``:
    :class:`TinyConfig` for the claim-size model, :data:`DEMO_CONFIG` for the demo's).

    ``progress`` prints the build's start and a training progress bar (llmcore's train loop)
    on stderr, so a cold build (minutes) is visibly running."""
    from llmcore import zoo
    from llmcore.errors import QualityGateError

    recipe = tiny_recipe(cfg)
    key_extra = _key_extra(cfg)
    material = recipe.key_material()
    material["extra"] = key_extra
    hit = zoo.lookup(recipe.name, material)
    if hit is not None:
        return hit

    def gate(model: Any, tokenizer: Any) -> dict[str, float]:
        loss = assistant_eval_loss(model, tokenizer, list(recipe.corpus.eval))
        if loss > cfg.max_assistant_loss:
            raise QualityGateError(
                f"{cfg.name} model: held-out assistant loss {loss:.3f} > {cfg.max_assistant_loss}"
            )
        return {"assistant_eval_loss": loss}

    from llmcore.zoo import train_bpe_tokenizer

    if progress:
        print(
            f"spec-align: building {recipe.name} ({recipe.train.steps} training steps; "
            "minutes on one CPU thread, cached afterwards) ...",
            file=sys.stderr,
            flush=True,
        )
    # The zoo trains the same tokenizer from the same corpus (deterministic), so the masks of
    # injected text can be computed on token ids before the build starts.
    tok = train_bpe_tokenizer(
        recipe.corpus.train,
        recipe.tokenizer.vocab_size,
        min_frequency=recipe.tokenizer.min_frequency,
    )
    loss_fn = WorldLoss(tok, world_documents(cfg.n_per_scenario, cfg.seed), cfg.max_length)
    return zoo.build(
        recipe,
        progress=progress,
        loss_fn=loss_fn,
        gate=gate,
        key_extra=key_extra,
    )


def _key_extra(cfg: TinyConfig) -> dict[str, Any]:
    """What the custom loss and gate do (code is not hashed, so the key says it)."""
    return {
        "loss": "assistant-only-ce-skip-injected-close-relabel-v3",
        "assistant_id": ASSISTANT_ID,
        "gate": f"assistant-loss<={cfg.max_assistant_loss}",
    }
