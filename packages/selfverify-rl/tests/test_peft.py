"""LoRA through peft on the tiny warm-up model: the GRPO trainer (``gen``, ``verify`` and an
``alternate`` round pair) and the SFT warm-up train only the adapter, with finite losses, the
base weights bit-identical, and the saved adapter folder loading back to the same function;
the CLI's ``--use-peft`` path end to end."""

from __future__ import annotations

import json
import math

import pytest
from conftest import small_trainer

peft = pytest.importorskip("peft")
pytestmark = pytest.mark.slow


def _lora():
    from selfverify_rl.lora import lora_config

    return lora_config(r=4, alpha=8, dropout=0.0)


def _check_adapter_only(trainer, before):
    """Finite losses; some adapter weights moved; every non-adapter weight is bit-identical."""
    import torch

    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses), losses
    params = dict(trainer.model.named_parameters())
    assert set(params) == set(before)
    changed = [k for k, v in params.items() if not torch.equal(v, before[k])]
    assert changed and all("lora_" in k for k in changed), changed
    base = [k for k in params if "lora_" not in k]
    assert base and all(not params[k].requires_grad for k in base)
    assert all(torch.equal(params[k], before[k]) for k in base)


def _check_reload(trainer, warm_entry, tmp_path):
    """``save_model`` writes only the adapter; :func:`load_policy` rebuilds the same function
    (adapter merged into the base weights) and the original base weights are untouched."""
    import torch
    from selfverify_rl.lora import is_adapter_dir, load_policy

    out = tmp_path / "adapter"
    trainer.save_model(str(out))
    assert is_adapter_dir(out) and (out / "adapter_model.safetensors").exists()
    assert not (out / "model.safetensors").exists()
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["r"] == 4 and cfg["peft_type"] == "LORA"
    model, tok = load_policy(out)
    assert not hasattr(model, "peft_config")  # merged into plain transformers weights
    ids = tok("\nSolve 12+34. Box the answer.\n", return_tensors="pt")["input_ids"]
    trainer.model.eval()
    with torch.no_grad():
        a = trainer.model(input_ids=ids).logits
        b = model(input_ids=ids).logits
        c = warm_entry.load()[0](input_ids=ids).logits
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    assert not torch.allclose(a, c, atol=1e-6)  # the adapter changed the function


@pytest.mark.parametrize(
    ("mode", "steps", "kinds"),
    [("gen", 1, ["gen"]), ("verify", 1, ["verify"]), ("alternate", 2, ["gen", "verify"])],
)
def test_grpo_trains_only_the_adapter(warm_entry, tmp_path, mode, steps, kinds):
    import torch

    tr = small_trainer(warm_entry, mode, steps, interval=1, peft_config=_lora())
    assert isinstance(tr.model, peft.PeftModel)
    before = {k: v.detach().clone() for k, v in tr.model.named_parameters()}
    assert all(v.dtype == torch.float32 for v in before.values())
    tr.train()
    assert [k for _, k, _ in tr.round_log] == kinds
    _check_adapter_only(tr, before)
    if mode == "alternate":
        _check_reload(tr, warm_entry, tmp_path)


def test_grpo_with_kl_on_lora_uses_the_base_as_reference(warm_entry):
    """beta > 0 with an adapter: trl takes the reference log-probs from the same model with the
    adapter switched off (no second copy). The KL starts at 0 (LoRA's B starts at zero, so policy
    and reference agree), becomes positive once the adapter has moved, and stays finite; only the
    adapter trains."""
    import torch

    tr = small_trainer(warm_entry, "gen", 3, peft_config=_lora(), beta=0.04, learning_rate=1e-3)
    assert tr.ref_model is None and tr.beta == 0.04
    before = {k: v.detach().clone() for k, v in tr.model.named_parameters()}
    tr.train()
    kls = [h["kl"] for h in tr.state.log_history if "kl" in h]
    assert len(kls) == 3 and all(math.isfinite(k) for k in kls), kls
    assert kls[0] == pytest.approx(0.0, abs=1e-6) and max(kls[1:]) > 0, kls
    _check_adapter_only(tr, before)
    assert all(
        not torch.equal(v, before[k]) for k, v in tr.model.named_parameters() if "lora_B" in k
    )


def test_sft_warmup_trains_only_the_adapter(warm_entry, tmp_path):
    import torch
    from selfverify_rl.sft import sft_warmup, warmup_pairs
    from selfverify_rl.warmup import WarmupSpec

    torch.manual_seed(0)
    model, tok = warm_entry.load()
    pairs = warmup_pairs(WarmupSpec(n_docs=16))
    from llmcore.rl import reset_accelerate_state

    reset_accelerate_state()
    # one step: LoRA's B starts at 0, so B moves (A gets no gradient until B is non-zero)
    tr = sft_warmup(model, tok, pairs, output_dir=str(tmp_path / "run"), max_steps=1,
                    batch_size=4, learning_rate=1e-2, max_length=128, peft_config=_lora())  # fmt: skip
    assert isinstance(tr.model, peft.PeftModel)
    assert tr.completion_only_loss
    # the trainer wrapped the model after we handed it over: compare against the warm-up
    base = warm_entry.load()[0].state_dict()
    before = {
        k: base[k.removeprefix("base_model.model.").replace(".base_layer", "")]
        for k, _ in tr.model.named_parameters()
        if "lora_" not in k
    }
    params = dict(tr.model.named_parameters())
    assert all(torch.equal(params[k], v) for k, v in before.items())
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in params.items())
    losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)
    _check_reload(tr, warm_entry, tmp_path)


def test_cli_train_and_eval_with_lora(warm_entry, tmp_path):
    """``train --use-peft`` saves an adapter folder; ``eval`` loads it on its base model."""
    from selfverify_rl.cli import main

    from llmcore.rl import reset_accelerate_state

    d, run = tmp_path / "data", tmp_path / "run"
    assert main(["make-data", "--n-train", "8", "--n-test", "8", "--out", str(d)]) == 0
    reset_accelerate_state()
    rc = main(["train", "--mode", "alternate", "--verification-interval", "1", "--model",
               str(warm_entry.path), "--data", str(d), "--steps", "2", "--num-generations", "4",
               "--prompts-per-step", "2", "--max-completion-length", "48", "--cpu",
               "--use-peft", "--lora-r", "4", "--lora-alpha", "8",
               "--lora-target-modules", "q_proj", "k_proj", "v_proj", "--out", str(run)])  # fmt: skip
    assert rc == 0 and (run / "adapter_model.safetensors").exists()
    cfg = json.loads((run / "adapter_config.json").read_text())
    assert set(cfg["target_modules"]) == {"q_proj", "k_proj", "v_proj"} and cfg["r"] == 4
    out = tmp_path / "m.json"
    assert main(["eval", "--model", str(run), "--data", str(d), "--limit", "8",
                 "--verify-set", "self", "--out", str(out)]) == 0  # fmt: skip
    assert 0.0 <= json.loads(out.read_text())["gen_acc"] <= 1.0


def test_lora_settings_are_checked(capsys):
    from selfverify_rl.cli import main
    from selfverify_rl.errors import SelfVerifyConfigError
    from selfverify_rl.lora import lora_config

    with pytest.raises(SelfVerifyConfigError, match="r=0"):
        lora_config(r=0)
    with pytest.raises(SelfVerifyConfigError, match="dropout"):
        lora_config(dropout=1.0)
    assert lora_config(target_modules=["all-linear"]).target_modules == "all-linear"
    assert main(["warmup", "--model", "tiny", "--use-peft", "--out", "x"]) == 2
    assert "--use-peft with --model tiny" in capsys.readouterr().err
