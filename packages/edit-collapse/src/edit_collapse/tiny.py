"""The world model: a 4 x 128 Llama (d_ff 512) pre-trained on the synthetic world of
:mod:`edit_collapse.world`, gated at build on fact recall and reasoning accuracy."""

from __future__ import annotations

from typing import Any

from edit_collapse import world as W

N_ENTITIES = 40
N_RELATIONS = 4
STEPS = 1500
LR = 3e-3
MIN_RECALL = 0.95
MIN_REASONING = 0.70


def recipe(n_entities: int = N_ENTITIES, n_relations: int = N_RELATIONS, steps: int = STEPS,
           lr: float = LR, seed: int = 0):  # fmt: skip
    """The zoo recipe of the world model (word tokenizer over the world's vocabulary)."""
    from llmcore import zoo

    world = W.make_world(n_entities, n_relations, seed)
    docs = W.training_documents(world, seed=seed)
    _, held = W.reasoning_problems(seed)
    corpus = zoo.Corpus(
        f"ec-world-{n_entities}x{n_relations}-s{seed}",
        tuple(docs),
        tuple(f"{p} {a}" for p, a in held),
    )
    return zoo.Recipe(
        f"edit-collapse-world-{n_entities}x{n_relations}",
        corpus,
        tokenizer=zoo.TokenizerSpec(kind="word", symbols=tuple(W.vocabulary(world))),
        model=zoo.ModelSpec(arch="llama", intermediate_size=512, max_position_embeddings=128),
        train=zoo.TrainSpec(
            steps=steps,
            lr=lr,
            batch_size=32,
            max_length=48,
            seed=seed,
            warmup_steps=60,
            weight_decay=0.0,
        ),
        max_eval_loss=3.0,
        description=f"Llama 4x128 on a {n_entities}x{n_relations} synthetic knowledge world",
    )


def world_gate(world: W.World, seed: int = 0):
    """``accuracy_gate`` on fact recall (template 0, every fact) and on the held-out reasoning
    problems (final answer after ``#``)."""
    from llmcore import zoo

    recall = zoo.accuracy_gate(
        [f.prompt(0) for f in world.facts], [f.value for f in world.facts],
        lo=MIN_RECALL, max_new_tokens=1, name="gate_recall",
    )  # fmt: skip
    _, held = W.reasoning_problems(seed)

    def final(pred: str, gold: str) -> bool:
        return pred.split("#")[-1].strip().split(" ")[0] == gold.split("#")[-1].strip()

    reasoning = zoo.accuracy_gate(
        [p for p, _ in held], [a for _, a in held], lo=MIN_REASONING, max_new_tokens=20,
        match=final, name="gate_reasoning",
    )  # fmt: skip

    def gate(model: Any, tok: Any) -> dict[str, float]:
        import sys

        from edit_collapse import metrics as M

        seen = {"recall_all": sum(M.teacher_forced_acc(model, tok, [f.prompt(0) for f in world.facts],
                                                        [f.value for f in world.facts])) / len(world.facts),
                "reasoning_strict": M.reasoning_accuracy(model, tok, held)}  # fmt: skip
        print(f"edit-collapse world gate: {seen}", file=sys.stderr)
        return {**recall(model, tok), **reasoning(model, tok), **seen}

    return gate


def build_world_model(n_entities: int = N_ENTITIES, n_relations: int = N_RELATIONS,
                      steps: int = STEPS, lr: float = LR, seed: int = 0, progress: bool = False):  # fmt: skip
    """Build (or load) the gated world model; returns the ``ZooEntry``."""
    from llmcore import zoo

    world = W.make_world(n_entities, n_relations, seed)
    return zoo.build(
        recipe(n_entities, n_relations, steps, lr, seed),
        gate=world_gate(world, seed),
        key_extra={"gate": [MIN_RECALL, MIN_REASONING], "code": zoo.code_digest(W, __name__)},
        progress=progress,
    )
