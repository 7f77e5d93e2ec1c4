"""transformers `Trainer` and `trl.SFTTrainer` + PAFTCallback under `torchrun --nproc-per-node 2`
on CPU: the callback attaches PAFT and the injector, syncs on schedule and leaves the replicas
bitwise identical (both trainers run in one torchrun launch to pay the start-up once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("trl")


@pytest.fixture(scope="module")
def hf_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from paft_dist.trainer import free_port

    out = tmp_path_factory.mktemp("hf")
    script = Path(__file__).with_name("hf_train_script.py")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        str(script),
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "paft.json").read_text())


@pytest.mark.slow
def test_trainer_callback_under_torchrun(hf_runs: dict) -> None:
    res = hf_runs["trainer"]
    # 20 steps, H = 5: four syncs; the last one leaves the replicas bitwise identical
    assert res["steps_seen"] == 20
    assert res["syncs"] == 4
    assert res["consistent"] is True
    assert min(res["fault_events"]) > 0  # faults on every rank (the default target)


@pytest.mark.slow
def test_trl_sft_trainer_callback_under_torchrun(hf_runs: dict) -> None:
    res = hf_runs["sft"]
    assert res["global_step"] == 3
    # H = 1: PAFT saw every optimizer step of SFTTrainer and synced after each
    assert res["steps_seen"] == 3
    assert res["syncs"] == 3
    # rank 1's gradient was corrupted at every step, yet the final sync made replicas identical
    assert res["fault_events"][0] == 0 and len(res["fault_steps"][1]) == 3
    assert res["consistent"] is True
