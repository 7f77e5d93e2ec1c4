"""Launched by test_hf.py under torchrun: HF Trainer + PAFTCallback on a tiny Llama, CPU/gloo."""

from __future__ import annotations

import json
import sys

import torch
from paft_dist import FaultSpec, PAFTConfig, check_replicas
from paft_dist.integrations.hf import PAFTCallback
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


class Data(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(3, 60, (16,), generator=g)
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones(16).long()}


def main() -> None:
    torch.set_num_threads(1)
    out = sys.argv[1]
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
        )
    )
    cb = PAFTCallback(
        PAFTConfig(mode="sync", sync_every=5), fault_specs=[FaultSpec(kind="gaussian", sigma=0.01)]
    )
    args = TrainingArguments(
        output_dir=out,
        use_cpu=True,
        ddp_backend="gloo",
        max_steps=20,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=5,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    Trainer(model=model, args=args, train_dataset=Data(), callbacks=[cb]).train()
    rep = check_replicas(model)
    if torch.distributed.get_rank() == 0:
        with open(f"{out}/paft.json", "w") as f:
            json.dump(
                {
                    "syncs": cb.paft.num_syncs,
                    "consistent": rep.consistent,
                    "fault_events": len(cb.injector.events),
                },
                f,
            )


if __name__ == "__main__":
    main()
