"""HF Trainer + PAFTCallback under `torchrun --nproc-per-node 2` on CPU (spec §6.10)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")


@pytest.mark.slow
def test_trainer_callback_under_torchrun(tmp_path: Path) -> None:
    from paft_dist.trainer import free_port

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
        str(tmp_path),
    ]
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    import os

    env = {**os.environ, **env}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / "paft.json").read_text())
    # 20 steps, H = 5: four syncs; the last one leaves the replicas bitwise identical
    assert res["syncs"] == 4
    assert res["consistent"] is True
    assert res["fault_events"] > 0
