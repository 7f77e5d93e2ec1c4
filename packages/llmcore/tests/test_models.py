from __future__ import annotations

import pytest
import torch

from llmcore import load_causal_lm, load_tokenizer
from llmcore.errors import ConfigError, ModelLoadError
from llmcore.runtime import num_threads, select_device, select_dtype, set_seed


def test_load_from_zoo_path(tiny_llama_entry) -> None:
    model = load_causal_lm(tiny_llama_entry.path, dtype="float32", device="cpu")
    tok = load_tokenizer(tiny_llama_entry.path)
    assert not model.training and model.dtype == torch.float32
    assert tok.padding_side == "left"
    ids = tok("12+34:", return_tensors="pt").input_ids
    assert model(ids).logits.shape[-1] == len(tok)


def test_load_in_other_dtype(tiny_llama_entry) -> None:
    model = load_causal_lm(tiny_llama_entry.path, dtype="bf16", device="cpu")
    assert model.dtype == torch.bfloat16


def test_missing_path_is_clear(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_causal_lm(tmp_path / "nope")
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_tokenizer("./no/such/dir")


def test_directory_without_model_is_clear(tmp_path) -> None:
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_causal_lm(tmp_path)


def test_model_and_tokenizer_report_the_folder_problem(tmp_path) -> None:
    from llmcore import load_model_and_tokenizer

    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_model_and_tokenizer(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "bogus-arch"}')
    with pytest.raises(ModelLoadError, match="could not load a model") as info:
        load_model_and_tokenizer(tmp_path)
    msg = str(info.value)
    assert msg.startswith("could not load a model") and "bogus-arch" in msg
    assert msg.rstrip().endswith((".", ")", "`", "'")), msg  # the whole cause, not a fragment


def test_unreachable_hub_id_is_clear(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="not a local path"):
        load_causal_lm("no-such-org/no-such-model-xyz")


def test_trust_remote_code_off_by_default() -> None:
    import inspect

    for fn in (load_causal_lm, load_tokenizer):
        assert inspect.signature(fn).parameters["trust_remote_code"].default is False


def test_runtime_helpers() -> None:
    assert select_device("cpu").type == "cpu"
    assert select_dtype("bf16") == torch.bfloat16
    assert select_dtype(None, "cpu") == torch.float32
    with pytest.raises(ConfigError, match="unknown dtype"):
        select_dtype("float7")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            select_device("cuda")
    set_seed(3)
    a = torch.rand(3)
    set_seed(3)
    assert torch.equal(a, torch.rand(3))
    with pytest.raises(ConfigError):
        set_seed(-1)
    before = torch.get_num_threads()
    with num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def _saved_base_and_adapter(tmp_path):
    """A tiny random Llama saved with its tokenizer, and a rank-2 LoRA adapter on it whose B
    matrices are non-zero (so the adapter changes the logits)."""
    peft = pytest.importorskip("peft")
    from tinymodels import random_llama, sums_corpus, toy_tokenizer

    tok = toy_tokenizer(sums_corpus())
    base = random_llama(tok, hidden=32, max_positions=64)
    base.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    cfg = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    wrapped = peft.get_peft_model(base, cfg)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    wrapped.peft_config["default"].base_model_name_or_path = str(tmp_path / "base")
    wrapped.save_pretrained(tmp_path / "adapter")
    ids = tok("12+34:", return_tensors="pt").input_ids
    with torch.no_grad():
        want = wrapped.eval()(ids).logits
        plain = wrapped.get_base_model()
        with wrapped.disable_adapter():
            base_logits = plain(ids).logits
    return tmp_path / "adapter", ids, want, base_logits


def test_adapter_folder_loads_on_its_base(tmp_path) -> None:
    from llmcore import load_model_and_tokenizer
    from llmcore.models import is_adapter_dir

    adapter, ids, want, base_logits = _saved_base_and_adapter(tmp_path)
    assert is_adapter_dir(adapter) and not is_adapter_dir(tmp_path / "base")
    assert not torch.allclose(want, base_logits, atol=1e-4)  # the adapter does something
    model, tok = load_model_and_tokenizer(adapter, device="cpu", dtype="float32")
    assert not model.training and len(tok) > 0
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, want, atol=1e-5)
    merged, _ = load_model_and_tokenizer(adapter, device="cpu", dtype="float32", merge_adapter=True)
    assert not any("lora_" in k for k in merged.state_dict())  # plain transformers weights
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, want, atol=1e-5)


def test_adapter_folder_errors_are_clear(tmp_path) -> None:
    import json

    from llmcore import load_model_and_tokenizer

    adapter, *_ = _saved_base_and_adapter(tmp_path)
    with pytest.raises(ModelLoadError, match="PEFT adapter"):
        load_causal_lm(adapter)
    with pytest.raises(ModelLoadError, match="only used for a PEFT adapter"):
        load_model_and_tokenizer(tmp_path / "base", base_model=tmp_path / "base")
    cfg_path = adapter / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = None
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="names no base model"):
        load_model_and_tokenizer(adapter)
    # an explicit base model still works
    model, _ = load_model_and_tokenizer(adapter, base_model=tmp_path / "base", device="cpu")
    assert not model.training
