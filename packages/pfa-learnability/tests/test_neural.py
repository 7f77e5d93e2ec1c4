"""train -> eval-kl smoke on the few-step tiny Llama and LSTM fixtures."""

from __future__ import annotations

import numpy as np
import pytest
from pfa_learnability import decomposed_kl
from pfa_learnability.errors import VocabularyError
from pfa_learnability.fixtures import build_smoke_llama, build_smoke_lstm, smoke_corpus
from pfa_learnability.neural import LMNextSymbolModel, check_vocabulary, load_lm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke():
    pfa, _ = smoke_corpus()
    return pfa, {"llama": build_smoke_llama(), "lstm": build_smoke_lstm()}


@pytest.mark.parametrize("arch", ["llama", "lstm"])
def test_train_then_eval_kl(smoke, arch):
    pfa, entries = smoke
    entry = entries[arch]
    model, tok = load_lm(entry.path)  # from disk: the tokenizer survived save_pretrained
    ids = check_vocabulary(tok, pfa.alphabet)
    assert len(set(ids)) == len(pfa.alphabet) + 1
    assert entry.metrics["final_train_loss"] < entry.metrics["first_loss"]
    lm = LMNextSymbolModel(model, tok, pfa.alphabet)
    rep = decomposed_kl(pfa, lm, "sym:a", n_eval=64, seed=0, n_boot=100)
    assert np.isfinite(rep.total) and rep.total > 0
    tot = sum(rep.visits[q] * rep.per_state[q] for q in rep.visits)
    assert tot == pytest.approx(rep.total, abs=1e-9)
    # a model that learned something beats the uniform distribution
    from pfa_learnability import UniformModel

    uni = decomposed_kl(pfa, UniformModel(pfa.alphabet), n_eval=64, seed=0, n_boot=10)
    assert rep.total < uni.total


def test_vocabulary_errors_list_missing_symbols(smoke):
    pfa, entries = smoke
    _, tok = load_lm(entries["lstm"].path)
    with pytest.raises(VocabularyError, match="zz"):
        check_vocabulary(tok, [*pfa.alphabet, "zz"])


def test_cli_train_and_eval_kl(tmp_path, smoke, capsys):
    import json

    from pfa_learnability.cli import main

    pfa, entries = smoke
    pfa_path = tmp_path / "pfa.json"
    pfa.to_json(pfa_path)
    corpus = tmp_path / "c.txt"
    assert main(["sample", str(pfa_path), "--prop", "sym:a", "--n", "100", "-o", str(corpus)]) == 0
    run = tmp_path / "run"
    argv = ["train", str(corpus), "--arch", "lstm", "--steps", "3", "--d-model", "16"]
    assert main([*argv, "--n-layers", "1", "--pfa", str(pfa_path), "-o", str(run)]) == 0
    for model_dir in (run, entries["llama"].path):
        out = tmp_path / "kl.json"
        argv = ["eval-kl", str(pfa_path), str(model_dir), "--prop", "sym:a", "--n-eval", "32"]
        assert main([*argv, "-o", str(out)]) == 0
        rep = json.loads(out.read_text())
        assert rep["total"] > 0 and rep["n_eval"] == 32
    capsys.readouterr()
    argv = ["eval-kl", str(pfa_path), str(run), "--reference", "training", "--corpus", str(corpus)]
    assert main([*argv, "--n-eval", "16"]) == 0
