"""Bad input gives clear errors."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TARGETS, logits, small_cfg
from nara_peft import (
    NaraConfig,
    NaraConfigError,
    NaraDataError,
    NaraError,
    NaraNoiseLevelError,
    get_nara_model,
)
from torch import nn


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"r": 0}, "r must be"),
        ({"r": -3}, "r must be"),
        ({"embedding_dim": 7}, "even"),
        ({"input_mode": "nd"}, "density_radius"),
        ({"input_mode": "both", "density_radius": 0}, "density_radius"),
        ({"use_rslora": True}, "use_rslora"),
        ({"bias": "all"}, "bias"),
        ({"noise_source": "mask_fraction"}, "mask_token_id"),
        (
            {"mapper_groups": {"a": ["q_proj", "k_proj"], "b": ["k_proj", "v_proj", "o_proj"]}},
            "overlap",
        ),
        ({"mapper_groups": {"a": ["q_proj"]}}, "partition"),
        ({"input_mode": "bogus"}, "input_mode"),
    ],
)
def test_config_errors(kw, match):
    d = dict(r=4, target_modules=TARGETS)
    d.update(kw)
    with pytest.raises(NaraConfigError, match=match) as e:
        NaraConfig(**d)
    assert isinstance(e.value, ValueError) and isinstance(e.value, NaraError)


def test_unknown_target_modules(base):
    with pytest.raises(NaraConfigError, match="no_such_proj"):
        get_nara_model(copy.deepcopy(base), small_cfg(target_modules=["no_such_proj"]))


def test_non_linear_target(base):
    with pytest.raises(ValueError, match="Embedding"):
        get_nara_model(copy.deepcopy(base), small_cfg(target_modules=["embed_tokens"]))


def test_model_without_noise_level_path(base, batch):
    """A forward that gives NaRA no lambda is refused, never run with a stale/identity C."""
    model = get_nara_model(copy.deepcopy(base), small_cfg())
    with pytest.raises(NaraNoiseLevelError, match="noise_level"):
        model(input_ids=batch)


@pytest.mark.parametrize(
    ("lam", "match"),
    [(float("nan"), "NaN"), (1.5, r"\[0, 1\]"), (-0.1, r"\[0, 1\]"), ([0.1, 0.2], "batch")],
)
def test_bad_noise_levels(base, batch, lam, match):
    model = get_nara_model(copy.deepcopy(base), small_cfg())
    with pytest.raises(NaraNoiseLevelError, match=match):
        logits(model, batch, lam)


def test_constant_mode_warns_on_noise(base, batch):
    model = get_nara_model(copy.deepcopy(base), small_cfg(input_mode="constant"))
    with pytest.warns(UserWarning, match="ignored"):
        logits(model, batch, 0.5)


def test_mixed_adapter_batches_rejected(base, batch):
    model = get_nara_model(copy.deepcopy(base), small_cfg())
    with pytest.raises(NaraConfigError, match="mixed-adapter"):
        model(input_ids=batch, noise_level=0.5, adapter_names=["default"] * 3)


def test_prompt_length_and_empty_answers():
    from nara_peft import compute_noise_level, diffusion_sft_loss

    x = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(NaraDataError, match="prompt_lengths"):
        compute_noise_level(x, 9, prompt_lengths=torch.tensor([5, 1]))
    with pytest.raises(NaraDataError, match="answer region is empty"):
        diffusion_sft_loss(nn.Identity(), x, torch.tensor([5, 5]), 9)


def test_missing_mapper_tensors_on_load(base, tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file, save_file

    model = get_nara_model(copy.deepcopy(base), small_cfg())
    model.save_pretrained(tmp_path)
    f = tmp_path / "adapter_model.safetensors"
    sd = {k: v for k, v in load_file(str(f)).items() if "nara_mapper" not in k}
    save_file(sd, str(f))
    with pytest.raises(ValueError, match="lacks NaRA shared tensors"):
        PeftModel.from_pretrained(copy.deepcopy(base), tmp_path)


def test_shape_mismatch_on_load(base, tmp_path):
    import json

    from peft import PeftModel

    model = get_nara_model(copy.deepcopy(base), small_cfg())
    model.save_pretrained(tmp_path)
    cfg_path = tmp_path / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["embedding_dim"] = 8
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="embedding_dim"):
        PeftModel.from_pretrained(copy.deepcopy(base), tmp_path)


def test_old_peft_detected(monkeypatch):
    from nara_peft.errors import NaraVersionError
    from nara_peft.register import _check_peft
    from peft.tuners.tuners_utils import BaseTuner

    monkeypatch.delattr(BaseTuner, "_remap_adapter_state_dict_for_load")
    with pytest.raises(NaraVersionError, match=r"peft>=0\.21"):
        _check_peft()


def test_errors_derive_from_llmcore_root():
    import nara_peft

    from llmcore.errors import LLMCoreError

    for name in nara_peft.__all__:
        if name.startswith("Nara") and name.endswith("Error"):
            assert issubclass(getattr(nara_peft, name), LLMCoreError), name


def test_lazy_exports_stay_torch_free():
    import subprocess
    import sys

    code = (
        "import sys, nara_peft\n"
        "assert 'torch' not in sys.modules\n"
        "nara_peft.NaraError\n"
        "assert 'torch' not in sys.modules and 'NaraConfig' in dir(nara_peft)\n"
        "try:\n    nara_peft.nope\nexcept AttributeError as e:\n    assert 'nope' in str(e)\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
