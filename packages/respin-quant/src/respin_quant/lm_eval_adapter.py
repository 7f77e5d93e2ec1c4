"""lm-evaluation-harness on a fake-quantised model (optional extra ``lm-eval``).

``run_lm_eval`` evaluates the in-memory model through :func:`llmcore.lmeval.evaluate_model`;
the registered model
``respin_fakequant`` (model_args ``respin_dir=DIR``) loads a ``save_quantized`` directory for
``lm_eval --model respin_fakequant --model_args respin_dir=DIR``.
"""

from __future__ import annotations

from typing import Any

from respin_quant.errors import RespinError

TASKS = (
    "arc_easy",
    "arc_challenge",
    "boolq",
    "hellaswag",
    "openbookqa",
    "piqa",
    "social_iqa",
    "winogrande",
)


def _require() -> Any:
    try:
        import lm_eval
        import lm_eval.models.huggingface  # needs accelerate
    except ImportError as e:
        raise RespinError(
            f"lm-eval with its Hugging Face backend is not installed ({e}): "
            "pip install 'respin-quant[lm-eval]'"
        ) from None
    return lm_eval


def register() -> None:
    """Register ``respin_fakequant`` with lm-eval (idempotent)."""
    _require()
    from lm_eval.api.registry import MODEL_REGISTRY, register_model
    from lm_eval.models.huggingface import HFLM

    if "respin_fakequant" in MODEL_REGISTRY:
        return

    @register_model("respin_fakequant")
    class RespinFakeQuantLM(HFLM):  # type: ignore[misc, valid-type]
        def __init__(self, respin_dir: str, pretrained: str | None = None, **kw: Any):
            from llmcore.models import load_tokenizer
            from respin_quant.pipeline import load_quantized

            model = load_quantized(respin_dir)
            tok = load_tokenizer(pretrained or respin_dir, padding_side="right")
            super().__init__(pretrained=model, tokenizer=tok, **kw)


def run_lm_eval(
    model: Any,
    tokenizer: Any,
    tasks: list[str],
    *,
    limit: int | None = None,
    batch_size: int = 1,
    num_fewshot: int | None = None,
    include_path: str | None = None,
) -> dict[str, Any]:
    """Zero-shot scores of the in-memory (fake-quantised) model: acc_norm where the task defines
    it, else acc, plus their average.

    Runs :func:`llmcore.lmeval.evaluate_model` on ``model`` as it is (hooks and fake quantisers
    stay attached). ``include_path``: a folder of extra lm-eval task YAMLs (e.g. a task over
    local files); ``limit``: documents per task."""
    from llmcore.lmeval import evaluate_model

    if tokenizer is None:
        raise RespinError("lm-eval needs a tokenizer saved with the model")
    out = evaluate_model(
        model,
        tokenizer,
        list(tasks),
        include_path=include_path,
        limit=limit,
        batch_size=batch_size,
        num_fewshot=num_fewshot,
    )
    scores: dict[str, Any] = {}
    for task, res in out.get("results", {}).items():
        for key in ("acc_norm,none", "acc,none"):
            if key in res:
                scores[task] = {"metric": key.split(",")[0], "value": res[key]}
                break
    if scores:
        scores["average"] = sum(v["value"] for v in scores.values()) / len(scores)
    return scores
