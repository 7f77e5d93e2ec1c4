import pytest
from respin_quant.errors import RespinError


def test_lm_eval_registration_or_clear_error():
    from respin_quant import lm_eval_adapter

    try:
        import lm_eval.models.huggingface  # noqa: F401
    except ImportError:
        with pytest.raises(RespinError, match="pip install"):
            lm_eval_adapter.register()
        return
    lm_eval_adapter.register()
    lm_eval_adapter.register()  # idempotent
    from lm_eval.api.registry import MODEL_REGISTRY

    assert "respin_fakequant" in MODEL_REGISTRY


WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "bird",
    "sat",
    "ran",
    "flew",
    "on",
    "under",
    "mat",
    "log",
    "tree",
    "red",
    "blue",
    "big",
    "small",
]


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>"
    )


def _docs(n: int = 12):
    import random

    rng = random.Random(0)
    docs = []
    for _ in range(n):
        ctx = " ".join(rng.choice(WORDS) for _ in range(4))
        choices = [" ".join(rng.choice(WORDS) for _ in range(2)) for _ in range(3)]
        docs.append({"context": ctx, "choices": choices, "label": rng.randrange(3)})
    return docs


def _by_hand(model, tok, docs) -> tuple[float, list[list[float]]]:
    """Multiple-choice accuracy computed directly: argmax over choices of the summed
    log-probability of the choice tokens after the context (and those log-probabilities)."""
    import torch

    hits = 0
    table = []
    for d in docs:
        ctx = tok(d["context"], add_special_tokens=False)["input_ids"]
        scores = []
        for c in d["choices"]:
            cont = tok(d["context"] + " " + c, add_special_tokens=False)["input_ids"][len(ctx) :]
            ids = torch.tensor([ctx + cont])
            with torch.no_grad():
                lp = torch.log_softmax(model(ids).logits[0].double(), -1)
            scores.append(sum(float(lp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)))
        hits += int(max(range(len(scores)), key=scores.__getitem__) == d["label"])
        table.append(scores)
    return hits / len(docs), table


def test_lm_eval_end_to_end_on_a_local_task(tmp_path, monkeypatch):
    """A packed W4A8 checkpoint evaluated by lm-eval (limit 2) on a loglikelihood task over a
    local JSONL file (offline), through the CLI (llmcore's ``evaluate_model`` on the loaded
    in-memory model) and through the registered model name; the accuracy and the per-choice
    log-likelihoods equal the ones computed by hand from the same model."""
    pytest.importorskip("lm_eval.models.huggingface")
    import json

    import lm_eval
    from conftest import make_model
    from lm_eval.tasks import TaskManager
    from respin_quant.cli import main
    from respin_quant.config import QuantConfig
    from respin_quant.lm_eval_adapter import register, run_lm_eval
    from respin_quant.pipeline import load_quantized, save_quantized
    from respin_quant.ptq import quantize
    from respin_quant.rotation import apply_rotations, init_rotations

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    docs = _docs()
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "toy.yaml").write_text(
        "task: respin_toy_mc\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "{{context}}"\n'
        'doc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{label}}"\n'
        "metric_list:\n  - metric: acc\n"
    )
    tok = _word_tokenizer()
    model = make_model("llama")
    apply_rotations(model, init_rotations(model, "quarot", 0), 0)
    quantize(model, QuantConfig(w_bits=4, a_bits=8))
    save_quantized(model, tmp_path / "q", tokenizer=tok)
    expected, logliks = _by_hand(load_quantized(tmp_path / "q"), tok, docs[:2])

    out = tmp_path / "res.json"
    argv = ["eval", "--model", str(tmp_path / "q"), "--tasks", "respin_toy_mc", "--limit", "2"]
    assert main([*argv, "--include-path", str(tasks), "--json", str(out)]) == 0
    got = json.loads(out.read_text())["lm_eval"]["respin_toy_mc"]
    assert got["metric"] == "acc" and got["value"] == pytest.approx(expected)

    direct = run_lm_eval(model, tok, ["respin_toy_mc"], limit=2, include_path=str(tasks))
    assert direct["respin_toy_mc"]["value"] == pytest.approx(expected)  # in memory, not reloaded

    register()
    res = lm_eval.simple_evaluate(
        model="respin_fakequant",
        model_args=f"respin_dir={tmp_path / 'q'}",
        tasks=["respin_toy_mc"],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        log_samples=True,
        limit=2,
    )
    assert res["results"]["respin_toy_mc"]["acc,none"] == pytest.approx(expected)
    samples = sorted(res["samples"]["respin_toy_mc"], key=lambda x: x["doc_id"])
    got_ll = [[float(r[0]) for r in smp["filtered_resps"]] for smp in samples]
    assert len(got_ll) == len(logliks)
    for g, want in zip(got_ll, logliks, strict=True):
        assert g == pytest.approx(want, abs=1e-4)
