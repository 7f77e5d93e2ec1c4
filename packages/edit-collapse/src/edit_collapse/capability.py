"""Capability retention through lm-evaluation-harness: the edited model in memory (``HFLM``), or
a retrieval/IKE generator through the registered ``edit-collapse-retrieval`` LM whose
``generate_until`` rewrites each context with the editor's prompt transform. The synthetic
reasoning suite is written as a local ``generate_until`` task."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

REASONING_TASK = "ec_reasoning"


def write_reasoning_task(
    folder: str | Path, problems: Sequence[tuple[str, str]], task: str = REASONING_TASK
) -> Path:
    """Write ``problems`` (prompt, worked answer) as JSONL plus a ``generate_until`` YAML with
    exact match on the whole worked answer (greedy, stop at eos)."""
    from llmcore.data import write_jsonl
    from llmcore.lmeval import write_generate_until_task

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{task}.jsonl"
    write_jsonl(data, [{"question": p, "answer": a} for p, a in problems])
    return write_generate_until_task(
        folder, task=task, data_files=data, doc_to_text="{{question}}", doc_to_target="{{answer}}",
        generation_kwargs={"max_gen_toks": 24, "until": ["\n"]}, filter_regex=r"^\s*(.*?)\s*$",
    )  # fmt: skip


def _lm_class() -> Any:
    from lm_eval.api.registry import get_model, register_model
    from lm_eval.models.huggingface import HFLM

    try:
        return get_model("edit-collapse-retrieval")
    except Exception:
        pass

    @register_model("edit-collapse-retrieval")
    class RetrievalLM(HFLM):
        """An in-memory HF model whose generation contexts go through a prompt transform."""

        def __init__(self, generator: Any = None, bos_text: str = "", **kw: Any) -> None:
            super().__init__(**kw)
            self.generator = generator
            self.bos_text = bos_text

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            for r in requests:
                ctx, *rest = r.args
                if self.generator is not None:
                    ctx = self.generator.transform(ctx)
                r.arguments = (self.bos_text + ctx, *rest)
            return super().generate_until(requests, disable_tqdm=disable_tqdm)

    return RetrievalLM


def as_lm(model_or_generator: Any, tok: Any, batch_size: int = 16) -> Any:
    """An lm-eval LM for a model (BOS added, as the zoo models were trained) or a generator."""
    cls = _lm_class()
    gen = model_or_generator if hasattr(model_or_generator, "transform") else None
    model = gen.model if gen is not None else model_or_generator
    # tokenizers without a BOS post-processor (the zoo's) ignore add_special_tokens: prepend it
    bos = tok.bos_token_id
    adds = bos is not None and tok("a", add_special_tokens=True)["input_ids"][:1] == [bos]
    bos_text = tok.bos_token + " " if bos is not None and not adds else ""
    return cls(generator=gen, bos_text=bos_text, pretrained=model, tokenizer=tok,
               batch_size=batch_size, add_bos_token=adds)  # fmt: skip


def evaluate_capabilities(model_or_generator: Any, tok: Any, tasks: Sequence[str], limit: int | None = None,
                          include_path: str | Path | None = None, **kw: Any) -> dict[str, dict[str, float]]:  # fmt: skip
    """``{task: {metric: value}}`` from ``llmcore.lmeval.evaluate_model``."""
    try:
        from llmcore import lmeval
    except ImportError as e:  # pragma: no cover
        from edit_collapse.errors import EditInputError

        raise EditInputError(
            "capability evaluation needs pip install 'edit-collapse[lm-eval]'"
        ) from e
    out = lmeval.evaluate_model(as_lm(model_or_generator, tok), tok, list(tasks), include_path=include_path,
                                limit=limit, **kw)  # fmt: skip
    return lmeval.scores(out)
