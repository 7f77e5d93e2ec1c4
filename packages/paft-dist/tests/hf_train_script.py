"""Launched by test_hf.py under torchrun (2 CPU processes, gloo): PAFTCallback attached to a
transformers `Trainer` (20 steps) and then to a `trl.SFTTrainer` (3 steps), on tiny Llamas built
in code. Rank 0 writes what the callback did to `<out>/paft.json`."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
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


def _tiny_llama(vocab_size: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
            pad_token_id=0,
        )
    )


def _report(cb: PAFTCallback, model: Any, **extra: Any) -> dict[str, Any]:
    rep = check_replicas(model)
    local = {
        "events": len(cb.injector.events),
        "steps": sorted({e.step for e in cb.injector.events}),
    }
    per_rank: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, local)
    return {
        "syncs": cb.paft.num_syncs,
        "steps_seen": cb.paft.t,
        "consistent": rep.consistent,
        "fault_events": [r["events"] for r in per_rank],
        "fault_steps": [r["steps"] for r in per_rank],
        **extra,
    }


def run_trainer(out: str) -> dict[str, Any]:
    model = _tiny_llama(64)
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
    return _report(cb, model)


def run_sft(out: str) -> dict[str, Any]:
    """trl.SFTTrainer on a text dataset; noise on rank 1 only, PAFT-Sync every step."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from llmcore.zoo import word_tokenizer

    words = ["red", "green", "blue", "cat", "dog", "runs", "sleeps", "the", "a"]
    texts = [f"the {words[i % 3]} {words[3 + i % 2]} {words[5 + i % 2]}" for i in range(64)]
    tok = word_tokenizer(words)
    model = _tiny_llama(len(tok))
    cb = PAFTCallback(
        PAFTConfig(mode="sync", sync_every=1),
        fault_specs=[FaultSpec(kind="gaussian", sigma=0.05, ranks=[1])],
    )
    args = SFTConfig(
        output_dir=f"{out}/sft",
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        max_length=16,
        ddp_backend="gloo",
        disable_tqdm=True,
        seed=0,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": texts}),
        processing_class=tok,
        callbacks=[cb],
    )
    trainer.train()
    return _report(cb, model, global_step=trainer.state.global_step)


def main() -> None:
    torch.set_num_threads(1)
    out = sys.argv[1]
    t0 = time.perf_counter()
    res = {"trainer": run_trainer(out)}
    t1 = time.perf_counter()
    res["sft"] = run_sft(out)
    res["wall_s"] = {"trainer": t1 - t0, "sft": time.perf_counter() - t1}
    if dist.get_rank() == 0:
        with open(f"{out}/paft.json", "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
