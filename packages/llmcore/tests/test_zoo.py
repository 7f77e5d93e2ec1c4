from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch

from llmcore import zoo
from llmcore.errors import ConfigError, QualityGateError
from llmcore.zoo.train import build_model, eval_loss

# Bounds stated in the llmcore README (held-out mean per-token loss, nats). Calibrated on a
# 2-core machine: tiny-llama reaches ~0.6, far below the ~6.2 loss of the untrained model.
TINY_LLAMA_MAX_LOSS = 1.0


def test_tiny_llama_trains_below_bound(tiny_llama_entry) -> None:
    m = tiny_llama_entry.metrics
    assert m["eval_loss"] <= TINY_LLAMA_MAX_LOSS
    assert m["first_loss"] > 4.0  # it started from chance level (log 512 = 6.2)
    assert 0.5e6 <= m["n_params"] <= 5e6


def test_reload_from_cache_is_bit_identical(tiny_llama_entry, tiny_llama) -> None:
    again = zoo.build("tiny-llama", progress=False)
    assert again.from_cache and again.path == tiny_llama_entry.path
    model2, _ = again.load()
    model1, _ = tiny_llama
    # The digest was computed from the in-memory weights right after training.
    assert zoo.weights_digest(model2) == tiny_llama_entry.metrics["weights_sha256"]
    for (n1, t1), (n2, t2) in zip(
        model1.state_dict().items(), model2.state_dict().items(), strict=True
    ):
        assert n1 == n2 and torch.equal(t1, t2)


def test_cached_model_loss_matches_recorded(tiny_llama_entry, tiny_llama) -> None:
    model, tok = tiny_llama
    recipe = zoo.get_recipe("tiny-llama")
    got = eval_loss(model, tok, recipe.corpus.eval, max_length=recipe.train.max_length)
    assert got == pytest.approx(tiny_llama_entry.metrics["eval_loss"], abs=1e-5)


def test_zoo_model_is_a_plain_transformers_checkpoint(tiny_llama_entry) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    files = {p.name for p in tiny_llama_entry.path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "zoo.json"} <= files
    assert not any(f.endswith((".bin", ".pt")) for f in files)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_entry.path, use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(tiny_llama_entry.path)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert tok.mask_token is not None and tok.pad_token_id == 0 and tok.chat_template
    meta = json.loads((tiny_llama_entry.path / "zoo.json").read_text())
    assert meta["key"] == tiny_llama_entry.key and "torch" in meta["versions"]


def test_tiny_llama_learned_worked_arithmetic(tiny_llama) -> None:
    from llmcore.generation import HFBackend, SamplingParams

    model, tok = tiny_llama
    prompts = [f"{tok.bos_token}{a}+{b}:" for a, b in [(12, 34), (47, 38), (5, 90), (66, 66)]]
    outs = HFBackend(model, tok, progress=False).generate(
        prompts, SamplingParams(max_new_tokens=40)
    )
    answers = [o[0].text.rsplit(";", 1)[-1].strip() for o in outs]
    assert sum(a == str(x) for a, x in zip(answers, [46, 85, 95, 132], strict=True)) >= 3, answers


def _micro(name: str, gate: float, steps: int = 3) -> zoo.Recipe:
    corpus = zoo.Corpus("micro", tuple(f"a{i % 7} b{i % 5}" for i in range(200)))
    return zoo.Recipe(
        name,
        corpus,
        model=zoo.ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
        train=zoo.TrainSpec(steps=steps, batch_size=4, warmup_steps=1),
        tokenizer=zoo.TokenizerSpec(vocab_size=300),
        max_eval_loss=gate,
    )


def test_quality_gate_fails_loudly_and_caches_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    with pytest.raises(QualityGateError, match="missed its quality gate"):
        zoo.build(_micro("micro-gate", gate=0.01), progress=False)
    assert zoo.list_entries() == []
    assert not [p for p in (tmp_path / "zoo").iterdir() if p.is_dir()]


def test_gate_failure_names_other_cpu_kernels(tmp_path, monkeypatch) -> None:
    """A quality-gate miss with other kernels than the calibrated ones (on x86) says so and how
    to pin them; with the calibrated kernels it does not."""
    import platform

    from llmcore.zoo.cache import REFERENCE_KERNELS

    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("llmcore.zoo.store.cpu_kernels", lambda: REFERENCE_KERNELS)
    with pytest.raises(QualityGateError) as plain:
        zoo.build(_micro("micro-gate", gate=0.01), progress=False)
    assert not getattr(plain.value, "__notes__", None)
    monkeypatch.setattr("llmcore.zoo.store.cpu_kernels", lambda: "AVX512/mkl-native")
    with pytest.raises(QualityGateError) as other:
        zoo.build(_micro("micro-gate", gate=0.01), progress=False)
    notes = " ".join(getattr(other.value, "__notes__", []))
    if platform.machine().lower() in {"x86_64", "amd64"}:
        assert "CPU kernels AVX512/mkl-native" in notes and "pin_reference_kernels()" in notes
    else:
        assert notes == ""


def test_cache_key_tracks_recipe_and_seed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    a = zoo.build(_micro("micro", gate=100.0), progress=False)
    b = zoo.build(_micro("micro", gate=100.0), progress=False)
    assert b.from_cache and a.key == b.key
    r = _micro("micro", gate=100.0)
    c = zoo.build(replace(r, train=replace(r.train, seed=1)), progress=False)
    assert not c.from_cache and c.key != a.key
    # threads do not change the weights, so they are not part of the key
    d = zoo.build(replace(r, train=replace(r.train, threads=2)), progress=False)
    assert d.from_cache and d.key == a.key
    assert len(zoo.list_entries()) == 2
    assert zoo.clear("micro") == 2 and zoo.list_entries() == []


def test_training_is_deterministic() -> None:
    r = _micro("micro", gate=100.0, steps=5)
    tok = zoo.train_bpe_tokenizer(r.corpus.train, 300)
    digests = []
    for _ in range(2):
        model = build_model(r.model, tok, seed=0)
        from llmcore.zoo.train import train_lm

        train_lm(model, tok, r.corpus.train, r.train, progress=False)
        digests.append(zoo.weights_digest(model))
    assert digests[0] == digests[1]


def test_qwen2_architecture_builds() -> None:
    tok = zoo.train_bpe_tokenizer(["x y z"] * 50, 300)
    model = build_model(zoo.ModelSpec(arch="qwen2", num_kv_heads=2), tok)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.num_key_value_heads == 2


def test_bad_recipe_values_are_clear() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        zoo.ModelSpec(hidden_size=100, num_heads=3)
    with pytest.raises(ConfigError, match="arch"):
        zoo.ModelSpec(arch="gpt2")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown zoo recipe 'nope'"):
        zoo.get_recipe("nope")
    with pytest.raises(ConfigError, match="vocab_size"):
        zoo.train_bpe_tokenizer(["a"], vocab_size=10)
    with pytest.raises(ConfigError, match="no training documents"):
        zoo.Corpus("empty", ())


def test_corpora_are_deterministic() -> None:
    assert zoo.default_corpus(0).fingerprint == zoo.default_corpus(0).fingerprint
    assert zoo.default_corpus(0).fingerprint != zoo.default_corpus(1).fingerprint
    corpus, table = zoo.facts_corpus(n_entities=10, repeats=2)
    assert len(table) == 10 and len(corpus.train) == 10 * 5 * 2
    for doc in zoo.dyck_corpus(n=50).train:
        depth = 0
        for ch in doc.split():
            depth += 1 if ch in "([" else -1
            assert depth >= 0
        assert depth == 0


def test_packing_trains_on_full_windows() -> None:
    from llmcore.zoo.train import pack_windows

    rows = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    assert pack_windows(rows, 4) == [[1, 2, 3, 4], [5, 6, 7, 8]]
    with pytest.raises(ConfigError, match="fewer than one window"):
        pack_windows([[1]], 4)
    r = _micro("micro", gate=100.0, steps=2)
    packed = replace(r, train=replace(r.train, packing=True, max_length=16))
    assert "packing" in packed.key_material()["train"]
    assert "packing" not in r.key_material()["train"]
    tok = zoo.train_bpe_tokenizer(r.corpus.train, 300)
    model = build_model(r.model, tok)
    from llmcore.zoo.train import train_lm

    stats = train_lm(model, tok, r.corpus.train, packed.train, progress=False)
    assert stats["final_train_loss"] > 0


def test_custom_loss_and_gate(tmp_path, monkeypatch) -> None:
    from llmcore.zoo.train import causal_loss

    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    r = _micro("micro", gate=100.0)
    calls = []

    def loss(model, ids, att, gen):
        calls.append(ids.shape)
        return causal_loss(model, ids, att)

    with pytest.raises(ConfigError, match="key_extra"):
        zoo.build(r, loss_fn=loss, progress=False)
    plain = zoo.build(r, progress=False)
    custom = zoo.build(
        r,
        loss_fn=loss,
        gate=lambda m, t: {"probe": 1.0},
        key_extra={"loss": "counting"},
        progress=False,
    )
    assert len(calls) == r.train.steps and custom.key != plain.key
    assert custom.metrics["probe"] == 1.0

    def reject(model, tok):
        raise QualityGateError("probe too low")

    with pytest.raises(QualityGateError, match="probe too low"):
        zoo.build(r, gate=reject, key_extra={"gate": "reject"}, progress=False)
    assert len(zoo.list_entries()) == 2


def test_pin_reference_kernels(monkeypatch) -> None:
    """On x86 the pin asks for the calibrated kernels, keeps a user's own value, and warns when
    torch runs other kernels than asked."""
    import platform
    import warnings

    from llmcore.zoo.cache import REFERENCE_KERNELS, cpu_kernels, pin_reference_kernels

    if platform.machine().lower() not in {"x86_64", "amd64"}:
        monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
        assert pin_reference_kernels() == cpu_kernels()
        assert "MKL_ENABLE_INSTRUCTIONS" not in os.environ
        return
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pin_reference_kernels() == REFERENCE_KERNELS
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
    assert os.environ["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX512")  # the user's choice wins
    assert pin_reference_kernels() == "AVX2/mkl-AVX512"
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    with pytest.warns(RuntimeWarning, match="asked torch for AVX2 CPU kernels but it runs AVX512"):
        assert pin_reference_kernels() == "AVX512/mkl-AVX512"


def test_cache_key_records_cpu_kernels(monkeypatch) -> None:
    """Weights trained with other CPU kernels are another artifact: the key changes with them."""
    import torch

    from llmcore.zoo.cache import cpu_kernels, library_versions, recipe_key

    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "avx2")
    assert cpu_kernels() == f"{torch.backends.cpu.get_cpu_capability()}/mkl-AVX2"
    assert library_versions()["cpu_kernels"] == cpu_kernels()
    pinned = recipe_key({"name": "x"})
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS")
    assert cpu_kernels().endswith("/mkl-native")
    assert recipe_key({"name": "x"}) != pinned
    native = recipe_key({"name": "x"})
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "OTHER")
    assert cpu_kernels() == "OTHER/mkl-native"
    assert recipe_key({"name": "x"}) not in (pinned, native)
