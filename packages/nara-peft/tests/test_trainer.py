"""NaraDiffusionTrainer (transformers.Trainer with the LLaDA SFT loss) runs and logs buckets."""

from __future__ import annotations

import copy

import torch
from conftest import small_cfg
from nara_peft import NaraDiffusionTrainer, diffusion_sft_loss, get_nara_model
from nara_peft.synth import MASK_ID, SynthSpec, make_chains


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        self.x = make_chains(n, SynthSpec(), torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "prompt_lengths": torch.tensor(4)}


def test_trainer_two_steps(base, tmp_path):
    from transformers import TrainingArguments

    model = get_nara_model(copy.deepcopy(base), small_cfg())
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=8,
        logging_steps=1,
        report_to=[],
        remove_unused_columns=False,
        use_cpu=True,
        save_strategy="no",
        learning_rate=1e-3,
    )
    trainer = NaraDiffusionTrainer(
        model=model, args=args, train_dataset=_Rows(32), mask_token_id=MASK_ID
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    assert any(k.startswith("loss_lambda_") for k in logs[0])


def test_sft_loss_masks_only_answers(base):
    model = get_nara_model(copy.deepcopy(base), small_cfg())
    x = make_chains(4, SynthSpec(), torch.Generator().manual_seed(1))
    loss, info = diffusion_sft_loss(
        model, x, torch.tensor([3, 5, 7, 9]), MASK_ID, torch.Generator().manual_seed(0)
    )
    assert loss > 0 and info["t"].shape == (4,)
    from nara_peft.diffusion import mask_answers

    _noisy, masked, t = mask_answers(
        x, torch.tensor([3, 5, 7, 9]), MASK_ID, torch.Generator().manual_seed(0)
    )
    for i, pl in enumerate([3, 5, 7, 9]):
        assert not masked[i, :pl].any()
        k = int(torch.ceil(t[i] * (16 - pl)).clamp(min=1))
        assert int(masked[i].sum()) == k
