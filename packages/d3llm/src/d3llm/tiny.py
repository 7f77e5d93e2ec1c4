"""The CPU fixture: a tiny masked-diffusion teacher on :class:`~d3llm.task.ParityTask`, its
trajectories, the distilled student and a causal baseline, all cached in the llmcore zoo.

Everything is deterministic (seeded data, one torch thread, float32, temperature 0), so TPF and
NFE are exactly reproducible on one machine.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from d3llm.task import DigitTask, ParityTask

TASK = ParityTask(n_digits=4, gen_length=12)
BLOCK = 12
"""Block size of the fixture's threshold and multi-block decoding: one block spanning the 12
generated positions, so a decoder may commit the whole answer in one forward (with blocks of 4
every decoder needs one forward per block, which caps TPF at 8 / 3 for every model alike)."""
DEMO_BLOCK = 4
"""Block size of the demo task's decoding (8 generated positions = 2 blocks)."""
N_EVAL = 128
TEACHER_STEPS = 1000
TEACHER_HIDDEN = 64
TEACHER_LAYERS = 4
TEACHER_LR = 3e-3
TEACHER_BATCH = 32
GATE = 0.85
"""Vanilla (one token per forward) accuracy the teacher must reach on the held-out prompts."""
DEMO_TASK = ParityTask(n_digits=3, gen_length=8)
DEMO_STEPS = 200


def _model_spec(hidden: int = 128, layers: int = 4):
    from llmcore.zoo import ModelSpec

    return ModelSpec(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=4,
        intermediate_size=4 * hidden,
        max_position_embeddings=64,
    )


def eval_inputs(task: DigitTask = TASK, n: int = N_EVAL) -> list[str]:
    return task.eval_inputs(n)


def teacher_recipe(
    steps: int = TEACHER_STEPS,
    lr: float = TEACHER_LR,
    batch: int = TEACHER_BATCH,
    *,
    task: DigitTask = TASK,
    hidden: int = 128,
    layers: int = 4,
    name: str = "d3llm-teacher",
    objective: str = "masked_diffusion",
):
    """The zoo recipe: fresh seeded documents (``steps * batch``), char-level tokenizer."""
    from llmcore import zoo

    train = [task.document(x) for x in task.inputs(steps * batch, seed=0)]
    held = [task.document(x) for x in task.eval_inputs(64, seed=777)]
    corpus = zoo.Corpus(f"d3llm-{task.name}", tuple(train), tuple(held))
    return zoo.Recipe(
        name,
        corpus,
        tokenizer=zoo.TokenizerSpec(vocab_size=264),
        model=_model_spec(hidden, layers),
        train=zoo.TrainSpec(
            objective=objective,  # type: ignore[arg-type]
            steps=steps,
            batch_size=batch,
            lr=lr,
            warmup_steps=50,
            max_length=64,
        ),
        # the held-out loss also scores the (random, unpredictable) prompt digits, so the loss
        # gate is loose; the accuracy gate below is the real one
        max_eval_loss=50.0,
    )


def build_teacher(
    steps: int = TEACHER_STEPS,
    lr: float = TEACHER_LR,
    batch: int = TEACHER_BATCH,
    *,
    task: DigitTask = TASK,
    hidden: int = TEACHER_HIDDEN,
    layers: int = TEACHER_LAYERS,
    gate: float = GATE,
    name: str = "d3llm-teacher",
    progress: bool = False,
):
    """Train (or load) the teacher: LLaDA SFT loss on the answer only (the prompt is never
    masked); the build fails unless vanilla accuracy on the held-out prompts is >= ``gate``."""
    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    recipe = teacher_recipe(steps, lr, batch, task=task, hidden=hidden, layers=layers, name=name)
    tok = zoo.recipe_tokenizer(recipe)
    marker = tok.convert_tokens_to_ids("=")
    xs = eval_inputs(task)
    check = zoo.accuracy_gate(
        [task.prompt(x) for x in xs],
        [task.answer(x) for x in xs],
        lo=gate,
        max_new_tokens=task.gen_length,
        objective="masked_diffusion",
        name="vanilla_accuracy",
    )
    return zoo.build(
        recipe,
        loss_fn=completion_loss(
            marker, objective="masked_diffusion", mask_token_id=tok.mask_token_id
        ),
        gate=check,
        key_extra={"loss": "completion-masked-diffusion", "gate": f"vanilla>={gate}", "n": len(xs)},
        progress=progress,
    )


def build_ar_baseline(
    steps: int = 600,
    lr: float = 3e-3,
    *,
    task: DigitTask = TASK,
    hidden: int = TEACHER_HIDDEN,
    layers: int = TEACHER_LAYERS,
    name: str = "d3llm-ar",
):
    """The same architecture trained causally on the same corpus (answer-only loss)."""
    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    recipe = teacher_recipe(
        steps, lr, TEACHER_BATCH, task=task, hidden=hidden, layers=layers, name=name,
        objective="causal",
    )  # fmt: skip
    tok = zoo.recipe_tokenizer(recipe)
    return zoo.build(
        recipe,
        loss_fn=completion_loss(tok.convert_tokens_to_ids("="), objective="causal"),
        key_extra={"loss": "completion-causal"},
        progress=False,
    )


def load_mdlm_entry(entry: Any):
    """``(MaskedDiffusionLM, tokenizer)`` from a zoo entry holding a masked-diffusion model."""
    from d3llm.model import MaskedDiffusionLM

    model, tok = entry.load()
    return MaskedDiffusionLM(model.eval(), tok.mask_token_id, "none", tok.eos_token_id), tok


def prompt_ids(tok: Any, task: DigitTask, x: str) -> list[int]:
    return [tok.bos_token_id, *tok(task.prompt(x), add_special_tokens=False)["input_ids"]]


# --------------------------------------------------------------------------- trajectories
@dataclass(frozen=True)
class TrajectorySpec:
    """Which prompts the teacher decodes into trajectories."""

    n_prompts: int = 512
    seed: int = 1
    max_attempts: int = 5
    temperature_step: float = 0.1


def build_trajectories(teacher_entry: Any, spec: TrajectorySpec = TrajectorySpec(), task=TASK):
    """Cached trajectory dataset (``datasets.save_to_disk`` inside the zoo entry)."""
    import d3llm.decoding
    import d3llm.distill
    from llmcore import zoo

    def make(out):
        from d3llm.distill import exact_answer_checker, extract_trajectories

        m, tok = load_mdlm_entry(teacher_entry)
        xs = task.inputs(spec.n_prompts, seed=spec.seed)
        records = [
            {"idx": i, "prompt_ids": prompt_ids(tok, task, x), "question": task.prompt(x),
             "gt_answer": task.answer(x)}
            for i, x in enumerate(xs)
        ]  # fmt: skip
        t0 = time.perf_counter()
        ds = extract_trajectories(
            m, tok, records, gen_length=task.gen_length, block_length=task.gen_length,
            max_attempts=spec.max_attempts, temperature_step=spec.temperature_step,
            checker=exact_answer_checker, batch_size=128,
        )  # fmt: skip
        ds.save_to_disk(str(out / "trajectories"))
        return {
            "n": len(ds),
            "correct": float(sum(ds["is_correct"])) / max(1, len(ds)),
            "seconds": time.perf_counter() - t0,
        }

    material = {
        "teacher": teacher_entry.key,
        "spec": asdict(spec),
        "task": asdict(task),
        "code": zoo.code_digest(d3llm.distill, d3llm.decoding),
    }
    return zoo.cached("d3llm-trajectories", material, make, progress=False)


def load_trajectories(entry: Any):
    import datasets

    return datasets.load_from_disk(str(entry.path / "trajectories"))


# --------------------------------------------------------------------------- student
@dataclass(frozen=True)
class StudentSpec:
    """Distillation recipe of the fixture student."""

    epochs: int = 6
    block_sizes: tuple[int, ...] = (4, 8, 12)
    batch_size: int = 32
    lr: float = 1e-3
    entropy_weight: float = 2.0
    use_complementary_loss: bool = True
    use_naive_random_mask: bool = False
    seed: int = 0
    extra: dict = field(default_factory=dict)


def distill_examples(tok: Any, traj: Any, task: DigitTask = TASK) -> list[dict]:
    """Training examples: the trajectory's prompt and the ground-truth response (pseudo)."""
    out = []
    for rec in traj:
        resp = tok(rec["gt_answer"], add_special_tokens=False)["input_ids"]
        out.append({"idx": rec["idx"], "prompt_ids": rec["prompt_ids"], "response_ids": resp})
    return out


def build_student(
    teacher_entry: Any, traj_entry: Any, spec: StudentSpec = StudentSpec(), task=TASK, name=None
):
    """Cached student: the teacher distilled on its trajectories with :func:`distill`."""
    import d3llm.distill
    from llmcore import zoo

    def make(out):
        from d3llm.distill import D3LLMDistillConfig, run_distillation

        m, tok = load_mdlm_entry(teacher_entry)
        traj = load_trajectories(traj_entry)
        examples = distill_examples(tok, traj, task)
        P = len(examples[0]["prompt_ids"])
        cfg = D3LLMDistillConfig(
            max_length=P + task.gen_length,
            progressive_block_sizes=list(spec.block_sizes),
            entropy_weight=spec.entropy_weight,
            use_complementary_loss=spec.use_complementary_loss,
            use_naive_random_mask=spec.use_naive_random_mask,
        )
        stats = run_distillation(
            m, tok, examples, list(traj), cfg, epochs=spec.epochs, batch_size=spec.batch_size,
            lr=spec.lr, seed=spec.seed,
        )  # fmt: skip
        m.model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        return {k: v for k, v in stats.items() if k != "last_parts"}

    material = {
        "teacher": teacher_entry.key,
        "trajectories": traj_entry.key,
        "spec": asdict(spec),
        "code": zoo.code_digest(d3llm.distill),
    }
    return zoo.cached(name or "d3llm-student", material, make, progress=False)


# --------------------------------------------------------------------------- evaluation
def evaluate(
    m: Any,
    tok: Any,
    method: str,
    *,
    task: DigitTask = TASK,
    inputs: list[str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """Accuracy (exact match before ``</s>``), TPF, NFE and tokens processed of one decoder.

    ``method``: ``vanilla`` (one token per forward, one block), ``threshold`` (``mode``,
    ``threshold``, ``block_length``) or ``multiblock`` (keyword arguments of
    :func:`~d3llm.decoding.decode_multiblock`). The block size defaults to :data:`BLOCK` when it
    divides the task's generated positions (the fixture), else :data:`DEMO_BLOCK`."""
    import torch

    from d3llm.decoding import decode_multiblock, decode_threshold, decode_vanilla
    from d3llm.errors import D3LLMConfigError

    xs = inputs if inputs is not None else eval_inputs(task)
    gold = [task.answer(x) for x in xs]
    L = task.gen_length
    block = BLOCK if L % BLOCK == 0 else DEMO_BLOCK
    t0 = time.perf_counter()
    results = []
    if method == "vanilla":
        batch = torch.tensor([prompt_ids(tok, task, x) for x in xs])
        results.append(decode_vanilla(m, batch, L, L, kw.get("block_length", L)))
    elif method in ("threshold", "multiblock"):
        for x in xs:
            ids = prompt_ids(tok, task, x)
            if method == "threshold":
                results.append(decode_threshold(m, ids, L, kw.get("block_length", block),
                                                kw.get("mode", "entropy"), kw.get("threshold", 0.5)))  # fmt: skip
            else:
                kw2 = {"block_size": block, **kw}
                results.append(decode_multiblock(m, ids, L, **kw2))
    else:
        raise D3LLMConfigError(f"method must be vanilla, threshold or multiblock, got {method!r}")
    seconds = time.perf_counter() - t0
    texts, tokens, nfe, processed, content_nfe, content_tok = [], [], [], 0, 0, 0
    for r in results:
        for b in range(r.sequences.shape[0]):
            row = r.generated[b].tolist()[: r.tokens[b]]
            texts.append(tok.decode(row, skip_special_tokens=True))
            tokens.append(r.tokens[b])
            nfe.append(r.nfe[b])
        processed += r.tokens_processed
        cs = r.commit_step
        for b in range(len(cs)):
            upto = min(r.tokens[b] + 1, L)
            content_tok += upto
            content_nfe += max(cs[b][:upto])
    correct = [t == g for t, g in zip(texts, gold, strict=True)]
    return {
        "method": method,
        "settings": kw,
        "accuracy": sum(correct) / len(correct),
        "tpf": sum(tokens) / max(1, sum(nfe)),
        "tpf_content": content_tok / max(1, content_nfe),
        "tpf_positions": L * len(xs) / max(1, sum(nfe)),
        "nfe_mean": sum(nfe) / len(nfe),
        "tokens_mean": sum(tokens) / len(tokens),
        "tokens_processed_per_sample": processed / len(xs),
        "seconds": seconds,
        "tokens_per_second": sum(tokens) / max(seconds, 1e-9),
        "texts": texts,
    }


# --------------------------------------------------------------------------- setups
def setup(size: str = "fixture") -> dict[str, Any]:
    """Teacher, student and AR-baseline builders of one size: ``"fixture"`` (the calibrated
    recipe, gated at vanilla accuracy >= 0.85) or ``"demo"`` (2 layers x 64 on 3 digits, no
    gate: seconds to build, for demos and smoke runs)."""
    from d3llm.errors import D3LLMConfigError

    if size == "fixture":
        teacher = build_teacher()
        traj = build_trajectories(teacher)
        student = build_student(teacher, traj)
        return {"task": TASK, "teacher": teacher, "student": student,
                "ar": lambda: build_ar_baseline()}  # fmt: skip
    if size == "demo":
        teacher = build_teacher(
            DEMO_STEPS, 3e-3, 32, task=DEMO_TASK, hidden=64, layers=2, gate=0.0,
            name="d3llm-demo-teacher",
        )  # fmt: skip
        traj = build_trajectories(teacher, TrajectorySpec(n_prompts=256), task=DEMO_TASK)
        student = build_student(
            teacher, traj, StudentSpec(epochs=3, block_sizes=(2, 3, 4)), task=DEMO_TASK,
            name="d3llm-demo-student",
        )  # fmt: skip
        return {"task": DEMO_TASK, "teacher": teacher, "student": student,
                "ar": lambda: build_ar_baseline(DEMO_STEPS, task=DEMO_TASK, hidden=64, layers=2,
                                                name="d3llm-demo-ar")}  # fmt: skip
    raise D3LLMConfigError(f"size must be 'fixture' or 'demo', got {size!r}")
