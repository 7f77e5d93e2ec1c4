"""Bad input gets clear errors (single-process gloo group where one is needed)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from paft_dist import (
    PAFT,
    DistributedSetupError,
    ExperimentConfig,
    FaultSpec,
    FaultSpecError,
    PAFTConfig,
    PAFTConfigError,
    UnsupportedOptimizerError,
    predicted_divergence,
)
from paft_dist.trainer import free_port, run_experiments, validate


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sync_every": 0}, "sync_every"),
        ({"h_min": 5, "h_max": 2}, "h_min"),
        ({"state_sync_every": 0}, "state_sync_every"),
        ({"reduce": "vote"}, "reduce"),
        ({"mode": "local"}, "mode"),
        ({"trigger": "never"}, "trigger"),
    ],
)
def test_bad_paft_config(kwargs: dict, match: str) -> None:
    with pytest.raises(PAFTConfigError, match=match):
        PAFTConfig(**kwargs)


def test_bad_experiment_config() -> None:
    with pytest.raises(ValueError, match="world_size >= 2"):
        ExperimentConfig(world_size=1, paft=PAFTConfig(mode="sync"))
    with pytest.raises(FaultSpecError, match=r"outside \[0, 2\)"):
        ExperimentConfig(world_size=2, faults=[FaultSpec(ranks=[3])])
    with pytest.raises(PAFTConfigError, match="optimizer"):
        ExperimentConfig(optimizer="lbfgs")
    if not torch.cuda.is_available():
        with pytest.raises(PAFTConfigError, match="nccl"):
            validate(ExperimentConfig(backend="nccl"))
    with pytest.raises(PAFTConfigError, match="same world_size"):
        run_experiments([ExperimentConfig(world_size=2), ExperimentConfig(world_size=3)])
    with pytest.raises(ValueError):
        predicted_divergence(10, -1.0, 2, [0.1])


def test_paft_without_process_group() -> None:
    if dist.is_initialized():
        pytest.skip("a process group exists")
    m = torch.nn.Linear(2, 2)
    with pytest.raises(DistributedSetupError, match="init_process_group"):
        PAFT(m, torch.optim.SGD(m.parameters(), lr=0.1), PAFTConfig(mode="sync"))


@pytest.fixture()
def single_group():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_world_size_one_and_bad_optimizers(single_group: None) -> None:
    m = torch.nn.Linear(2, 2)
    with pytest.raises(PAFTConfigError, match="world_size >= 2"):
        PAFT(m, torch.optim.SGD(m.parameters(), lr=0.1), PAFTConfig(mode="sync"))
    with pytest.raises(UnsupportedOptimizerError, match="LBFGS"):
        PAFT(m, torch.optim.LBFGS(m.parameters()), PAFTConfig(mode="sync"))
    with pytest.raises(TypeError, match="Optimizer"):
        PAFT(m, object(), PAFTConfig(mode="sync"))
    # ddp mode is a valid no-op wrapper on one process
    with PAFT(m, torch.optim.SGD(m.parameters(), lr=0.1), PAFTConfig(mode="ddp")) as p:
        assert p.num_syncs == 0
    # parameters-only sync accepts any optimizer
    PAFT(m, torch.optim.LBFGS(m.parameters()), PAFTConfig(mode="ddp", sync_optimizer_state="none"))


def test_sharded_models_rejected(single_group: None) -> None:
    from torch.distributed.tensor import DeviceMesh, distribute_tensor

    mesh = DeviceMesh("cpu", [0])
    m = torch.nn.Linear(2, 2)
    m.weight = torch.nn.Parameter(distribute_tensor(m.weight.detach(), mesh))
    with pytest.raises(NotImplementedError, match="DDP"):
        PAFT(m, torch.optim.SGD(m.parameters(), lr=0.1), PAFTConfig(mode="ddp"))


def test_every_package_error_is_an_llmcore_error() -> None:
    import paft_dist.errors as E

    from llmcore.errors import LLMCoreError

    classes = [v for v in vars(E).values() if isinstance(v, type) and issubclass(v, Exception)]
    own = [c for c in classes if c.__module__ == E.__name__]
    assert len(own) >= 8
    assert all(issubclass(c, LLMCoreError) for c in own)
