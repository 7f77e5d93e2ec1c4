"""Checkpoints are safetensors + JSON: they round-trip a training state exactly, and a tampered file
(a pickle with a malicious ``__reduce__`` dropped where the checkpoint is expected, a truncated or
garbled safetensors file) raises CheckpointError without executing anything."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest
import torch
from paft_dist import ExperimentConfig
from paft_dist.checkpoint import load_checkpoint, save_checkpoint
from paft_dist.errors import CheckpointError, PAFTError
from paft_dist.trainer import resume_state, run_experiment


class _Touch:
    """Unpickling this creates `path`: the stand-in for arbitrary code in a checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (str(self.path), "w"))


def _evil_pickle(marker: Path) -> bytes:
    return pickle.dumps({"step": 3, "model": _Touch(marker)})


def _evil_torch_save(marker: Path, path: Path) -> None:
    torch.save({"step": 3, "model": _Touch(marker)}, path)


def _adam_like_state() -> dict:
    """An optimizer-shaped state (integer keys, tuple betas, 0-d step tensors, None, bools)
    without running an optimizer (the first in-process optimizer step imports torch._dynamo, ~5 s;
    continuing bitwise after a resume is tested on real runs in test_resume.py)."""
    g = torch.Generator().manual_seed(0)
    state = {
        i: {
            "step": torch.tensor(3.0),
            "exp_avg": torch.randn(3, 5, generator=g),
            "exp_avg_sq": torch.rand(3, 5, generator=g),
            "max_exp_avg_sq": torch.rand(3, 5, generator=g).double(),
        }
        for i in (0, 1)
    }
    group = {
        "lr": 0.01,
        "betas": (0.8, 0.95),
        "eps": 1e-8,
        "amsgrad": True,
        "foreach": None,
        "params": [0, 1],
    }
    return {"state": state, "param_groups": [group]}


def _assert_same(a: object, b: object) -> None:
    # a module's OrderedDict comes back as a plain dict (same order), everything else as saved
    assert type(a) is type(b) or (isinstance(a, dict) and type(b) is dict), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_payload_is_live_when_unpickled(tmp_path: Path) -> None:
    """Control: the tampered files below really run code when unpickled the unsafe way."""
    marker = tmp_path / "pwned"
    pickle.loads(_evil_pickle(marker))
    assert marker.exists()
    marker.unlink()
    _evil_torch_save(marker, tmp_path / "evil.pt")
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()


def test_round_trip_restores_training_state_exactly(tmp_path: Path) -> None:
    model = torch.nn.Linear(5, 3)
    gen = torch.Generator().manual_seed(5)
    torch.randn(4, generator=gen)  # advance the stream
    state = {
        "step": 3,
        "model": model.state_dict(),
        "optimizer": _adam_like_state(),
        "rng": gen.get_state(),
        "window": 0.1 + 0.2,
        "nan": float("nan"),
        "pending": {"flats": [torch.arange(4.0)], "excluded": [1], "include_state": True},
        "flags": torch.tensor([True, False]),
        "half": torch.ones(3, dtype=torch.bfloat16) / 3,
        "none": None,
        "pair": (3, 1.5),
    }
    path = save_checkpoint(state, tmp_path / "ck")
    assert path.suffix == ".safetensors"
    assert not list(tmp_path.glob("*.tmp"))
    back = load_checkpoint(path)
    _assert_same(state, back)  # every leaf: same type, dtype, shape and bits; int keys, tuples
    g2 = torch.Generator()
    g2.set_state(back["rng"])
    assert torch.equal(torch.randn(8, generator=gen), torch.randn(8, generator=g2))


def test_unsupported_value_is_refused_at_save(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"cannot store object at \.extra"):
        save_checkpoint({"extra": object()}, tmp_path / "ck")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["pickle", "torch_save"])
def test_malicious_pickle_in_place_of_checkpoint(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "ckpt" / "rank0.safetensors"
    path.parent.mkdir()
    if kind == "pickle":
        path.write_bytes(_evil_pickle(marker))
    else:
        _evil_torch_save(marker, path)
    with pytest.raises(CheckpointError, match="not a valid paft-dist checkpoint"):
        resume_state(tmp_path, 0)
    assert not marker.exists()


def test_legacy_pickle_checkpoint_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "ckpt").mkdir()
    _evil_torch_save(marker, tmp_path / "ckpt" / "rank0.pt")
    with pytest.raises(CheckpointError, match="pickle checkpoint"):
        resume_state(tmp_path, 0)
    assert not marker.exists()
    assert resume_state(tmp_path, 1) is None  # nothing for rank 1: a fresh start


def _valid(tmp_path: Path) -> Path:
    state = {"model": torch.nn.Linear(5, 3).state_dict(), "optimizer": _adam_like_state()}
    return save_checkpoint(state, tmp_path / "c")


def test_truncated_checkpoint(tmp_path: Path) -> None:
    path = _valid(tmp_path)
    data = path.read_bytes()
    for cut in (4, 40, len(data) - 8):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="not a valid paft-dist checkpoint"):
            load_checkpoint(path)


def test_garbled_payload_and_metadata(tmp_path: Path) -> None:
    path = _valid(tmp_path)
    data = bytearray(path.read_bytes())
    flipped = bytearray(data)
    flipped[-3] ^= 0x40  # one bit of the last tensor's bytes
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_checkpoint(path)
    # a well-formed safetensors file that this module did not write
    from safetensors.torch import save_file

    save_file({"w": torch.ones(2)}, str(path), metadata={"format": "something-else"})
    with pytest.raises(CheckpointError, match="format"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing")


@pytest.mark.extended
def test_training_run_refuses_tampered_checkpoint(tmp_path: Path) -> None:
    """End to end: a run folder whose checkpoint was replaced by a pickle stops with a clear
    error in the parent process; the spawned rank never unpickles it."""
    marker = tmp_path / "pwned"
    (tmp_path / "ckpt").mkdir()
    _evil_torch_save(marker, tmp_path / "ckpt" / "rank0.safetensors")
    cfg = ExperimentConfig(world_size=1, steps=4, checkpoint_every=2)
    with pytest.raises(CheckpointError, match="not a valid paft-dist checkpoint") as ei:
        run_experiment(cfg, tmp_path)
    assert isinstance(ei.value, PAFTError)
    assert not marker.exists()
