"""PAFT-Sync and PAFT-Dyn around a user's model and optimizer (paper Alg. 1 and 2).

Usage (inside any DDP training loop; every rank runs the same code)::

    with PAFT(ddp_model, optimizer, PAFTConfig(mode="sync", sync_every=10)) as paft:
        for batch in loader:
            loss_fn(ddp_model(batch)).backward()
            optimizer.step()          # PAFT's step hooks run here
            optimizer.zero_grad()

The step pre-hook completes an in-flight (overlapped) sync before the parameters change; the
post-hook counts steps, runs the checksum trigger and starts or performs the scheduled sync.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from paft_dist.config import PAFTConfig
from paft_dist.errors import (
    DistributedSetupError,
    PAFTConfigError,
    ReplicaCorruptionError,
    ReplicaMismatchError,
    UnsupportedOptimizerError,
)
from paft_dist.monitor import gather_fingerprints, majority_of, tensor_fingerprint

_SUPPORTED_OPT = ("SGD", "Adam", "AdamW")
_FIRST_MOMENTS = ("momentum_buffer", "exp_avg")
_ALL_MOMENTS = ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")


@dataclass
class SyncEvent:
    """One completed synchronisation (a line of events.jsonl)."""

    step: int
    h_new: int
    deviation: float
    reduce: str
    excluded_ranks: list[int] = field(default_factory=list)
    reason: str = "schedule"
    state_synced: bool = False
    bytes: int = 0
    sigma_est: float | None = None
    resynced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"event": "sync", **asdict(self)}


def _unwrap_module(model: Any) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except ImportError:  # pragma: no cover
        FSDP = ()  # type: ignore[assignment]
    if FSDP and isinstance(model, FSDP):
        raise NotImplementedError(
            "PAFT v1 supports DDP-replicated models only; FSDP/HSDP shards are not replicas. "
            "Wrap the model in DistributedDataParallel instead."
        )
    module = model.module if isinstance(model, DDP) else model
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"PAFT needs a torch.nn.Module (or DDP), got {type(model)}")
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover
        DTensor = None  # type: ignore[assignment]
    if DTensor is not None and any(isinstance(p, DTensor) for p in module.parameters()):
        raise NotImplementedError(
            "sharded (DTensor/FSDP2) parameters are not supported by PAFT v1; use DDP"
        )
    return module


class PAFT:
    """Periodic (PAFT-Sync) or dynamic, overlapped (PAFT-Dyn) replica synchronisation."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        config: PAFTConfig | None = None,
        *,
        allow_gloo_cuda: bool = False,
    ) -> None:
        self.cfg = config if config is not None else PAFTConfig()
        if not dist.is_available() or not dist.is_initialized():
            raise DistributedSetupError(
                "PAFT needs an initialised torch.distributed process group: launch with torchrun "
                "(or paft_dist.run_experiment) and call dist.init_process_group first"
            )
        self.group = self.cfg.process_group
        self.world = dist.get_world_size(self.group)
        self.rank = dist.get_rank(self.group)
        self.module = _unwrap_module(model)
        opt = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer)}")
        self.optimizer = opt
        self._check_optimizer()
        if self.world < 2 and self.cfg.mode != "ddp":
            raise PAFTConfigError(
                f"mode={self.cfg.mode!r} needs world_size >= 2 (got {self.world}); "
                "use mode='ddp' on a single process"
            )
        if self.cfg.mode == "averager":
            raise PAFTConfigError("mode='averager' is the torch baseline; use 'sync' or 'dyn'")
        self._params = [p for p in self.module.parameters() if p.is_floating_point()]
        self._buffers = [b for b in self.module.buffers() if b.is_floating_point()]
        self._check_devices(allow_gloo_cuda)
        self._check_shapes()
        self.grad_bytes_per_step = sum(
            p.numel() * p.element_size() for p in self._params if p.requires_grad
        )
        self.t = 0
        self.current_h = self.cfg.sync_every
        self.next_sync_step = self.cfg.sync_every
        self.num_syncs = 0
        self.num_param_syncs = 0
        self.bytes_sent = 0
        self.check_bytes = 0
        self.events: list[SyncEvent] = []
        self.on_sync: list[Any] = []
        self._window = 0.0
        self._pending: dict[str, Any] | None = None
        self._handles: list[Any] = []
        self._warned_majority = False
        self.log_path = Path(self.cfg.log_path) if self.cfg.log_path else None

    # ------------------------------------------------------------------ validation
    def _check_optimizer(self) -> None:
        if self.cfg.sync_optimizer_state == "none" or self.cfg.mode == "ddp":
            return
        name = type(self.optimizer).__name__
        if name not in _SUPPORTED_OPT:
            raise UnsupportedOptimizerError(
                f"cannot average the state of {name}: supported are SGD (with or without "
                "momentum), Adam and AdamW; pass sync_optimizer_state='none' to sync parameters only"
            )
        allowed = set(_ALL_MOMENTS) | {"step"}
        for st in self.optimizer.state.values():
            for key in st:
                if key not in allowed:
                    raise UnsupportedOptimizerError(
                        f"optimizer state key {key!r} of {name} cannot be averaged; "
                        "use sync_optimizer_state='none'"
                    )

    def _check_devices(self, allow_gloo_cuda: bool) -> None:
        backend = str(dist.get_backend(self.group))
        devs = {p.device.type for p in self._params}
        if backend == "nccl" and "cpu" in devs:
            raise DistributedSetupError(
                "backend 'nccl' with CPU parameters: move the model to its GPU or use backend gloo"
            )
        if backend == "gloo" and "cuda" in devs and not allow_gloo_cuda:
            raise DistributedSetupError(
                "backend 'gloo' with CUDA parameters is slow and usually a mistake: use nccl, "
                "or pass allow_gloo_cuda=True"
            )

    def _check_shapes(self) -> None:
        desc = ";".join(f"{tuple(p.shape)}:{p.dtype}" for p in self._params + self._buffers)
        h = int.from_bytes(hashlib.sha256(desc.encode()).digest()[:8], "little", signed=True)
        fps = gather_fingerprints(h, self.group)
        if len(set(fps)) > 1:
            bad = [r for r, f in enumerate(fps) if f != majority_of(fps)]
            raise ReplicaMismatchError(
                f"parameter shapes/dtypes/order differ across ranks (rank(s) {bad or 'all'}); "
                "every rank must build the same model"
            )

    # ------------------------------------------------------------------ hooks
    def attach(self) -> PAFT:
        """Register the optimizer step pre/post hooks (done by `with PAFT(...)`)."""
        if not self._handles:
            self._handles.append(self.optimizer.register_step_pre_hook(self._pre_hook))
            self._handles.append(self.optimizer.register_step_post_hook(self._post_hook))
        return self

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self) -> PAFT:
        return self.attach()

    def __exit__(self, *exc: Any) -> None:
        try:
            if exc[0] is None:
                self.finalize()
        finally:
            self.detach()

    def _pre_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        self.pre_step()

    def _post_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        self.step_end()

    # ------------------------------------------------------------------ public API
    def pre_step(self) -> SyncEvent | None:
        """Complete an in-flight overlapped sync before the optimizer changes the parameters."""
        if self._pending is None:
            return None
        return self._complete()

    def step_end(self, grad_norm: float | None = None) -> SyncEvent | None:
        """Call once after every optimizer step (the post-hook does it); may sync (Alg. 1 l.3)."""
        if self.cfg.mode == "ddp":
            self.t += 1
            return None
        lr = float(self.optimizer.param_groups[0].get("lr", 0.0))
        self._window += lr * lr
        self.t += 1
        if self._pending is not None:  # manual use without pre_step(): finish it now
            self._complete()
        checksum_hit = False
        if self.cfg.trigger in ("checksum", "both"):
            grads = [p.grad for p in self._params if p.grad is not None]
            fps = gather_fingerprints(tensor_fingerprint(grads), self.group)
            self.check_bytes += 8 * self.world
            checksum_hit = len(set(fps)) > 1
        scheduled = self.cfg.trigger in ("schedule", "both") and self.t >= self.next_sync_step
        if checksum_hit:
            if scheduled:
                self._advance_schedule(None)
            return self._sync_blocking("checksum", grad_norm)
        if scheduled:
            if self.cfg.use_overlap:
                self._launch("schedule", grad_norm)
                return None
            return self._sync_blocking("schedule", grad_norm)
        return None

    def sync_now(self) -> SyncEvent:
        """Synchronise immediately (blocking), outside the schedule."""
        if self._pending is not None:
            self._complete()
        return self._sync_blocking("manual", None)

    def finalize(self) -> SyncEvent | None:
        """Wait for an in-flight sync and load its result."""
        if self._pending is None:
            return None
        return self._complete()

    @property
    def bytes_grad(self) -> int:
        return self.grad_bytes_per_step * self.t

    # ------------------------------------------------------------------ sync mechanics
    def _state_tensors(self) -> list[torch.Tensor]:
        keys = _FIRST_MOMENTS if self.cfg.sync_optimizer_state == "momentum" else _ALL_MOMENTS
        out: list[torch.Tensor] = []
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                st = self.optimizer.state.get(p, {})
                for key in sorted(st):
                    v = st[key]
                    if key in keys and isinstance(v, torch.Tensor):
                        out.append(v)
                    elif key not in _ALL_MOMENTS and key != "step":
                        raise UnsupportedOptimizerError(
                            f"optimizer state key {key!r} cannot be averaged; "
                            "use sync_optimizer_state='none'"
                        )
        return out

    def _include_state(self) -> bool:
        return (
            self.cfg.sync_optimizer_state != "none"
            and self.num_param_syncs % self.cfg.state_sync_every == 0
        )

    def _groups(self, include_state: bool) -> list[tuple[list[torch.Tensor], torch.Tensor]]:
        """Flat copies grouped by dtype: [(tensors, flat)] in a rank-independent order."""
        tensors = self._params + self._buffers
        if include_state:
            tensors = tensors + self._state_tensors()
        by: dict[str, list[torch.Tensor]] = {}
        for t in tensors:
            by.setdefault(str(t.dtype), []).append(t)
        return [
            (ts, torch.cat([t.detach().reshape(-1) for t in ts])) for _, ts in sorted(by.items())
        ]

    def _nonfinite_ranks(self, groups: list[tuple[list[torch.Tensor], torch.Tensor]]) -> list[int]:
        if self.cfg.nonfinite == "ignore":
            return []
        bad = any(not bool(torch.isfinite(f).all()) for _, f in groups)
        flags = torch.zeros(self.world, dtype=torch.int32)
        flags[self.rank] = int(bad)
        dist.all_reduce(flags, group=self.group)
        ranks = [r for r in range(self.world) if flags[r].item()]
        if ranks and (self.cfg.nonfinite == "raise" or len(ranks) == self.world):
            raise ReplicaCorruptionError(ranks, self.t)
        return ranks

    def _start_reduce(
        self, groups: list[tuple[list[torch.Tensor], torch.Tensor]], excluded: list[int], asyn: bool
    ) -> tuple[list[Any], str]:
        """Start (mean) or perform (median, majority) the reduction of every flat buffer."""
        reduce = self.cfg.reduce
        if reduce == "majority":
            fp = tensor_fingerprint([f for _, f in groups])
            fps = gather_fingerprints(fp, self.group)
            self.check_bytes += 8 * self.world
            maj = majority_of([f for r, f in enumerate(fps) if r not in excluded])
            if maj is not None:
                src = min(r for r, f in enumerate(fps) if f == maj and r not in excluded)
                for _, flat in groups:
                    gsrc = src if self.group is None else dist.get_global_rank(self.group, src)
                    dist.broadcast(flat, src=gsrc, group=self.group)
                return [], "majority"
            if not self._warned_majority:
                warnings.warn(
                    f"reduce='majority': no strict majority among {self.world} ranks at step "
                    f"{self.t}; falling back to the mean",
                    stacklevel=3,
                )
                self._warned_majority = True
            reduce = "mean"
        if reduce == "median":
            ok = [r for r in range(self.world) if r not in excluded]
            for _, flat in groups:
                parts = [torch.empty_like(flat) for _ in range(self.world)]
                dist.all_gather(parts, flat, group=self.group)
                st = torch.sort(torch.stack([parts[r] for r in ok]), dim=0).values
                k = len(ok)
                med = st[k // 2] if k % 2 else (st[k // 2 - 1] + st[k // 2]) / 2
                flat.copy_(med)
            return [], "median"
        # mean: divide by M, then SUM (the order of torch's average_parameters)
        works = []
        n_ok = self.world - len(excluded)
        for _, flat in groups:
            if self.rank in excluded:
                flat.zero_()
            else:
                flat.div_(n_ok)
            works.append(dist.all_reduce(flat, group=self.group, async_op=asyn))
        return (works if asyn else []), "mean"

    def _launch(self, reason: str, grad_norm: float | None) -> None:
        include_state = self._include_state()
        groups = self._groups(include_state)
        excluded = self._nonfinite_ranks(groups)
        works, used = self._start_reduce(groups, excluded, asyn=True)
        self._pending = {
            "groups": groups,
            "works": works,
            "include_state": include_state,
            "excluded": excluded,
            "reduce": used,
            "window": self._window,
            "reason": reason,
            "step": self.t,
        }
        self._window = 0.0

    def _sync_blocking(self, reason: str, grad_norm: float | None) -> SyncEvent:
        self._launch(reason, grad_norm)
        return self._complete(grad_norm)

    def _complete(self, grad_norm: float | None = None) -> SyncEvent:
        pend = self._pending
        assert pend is not None
        self._pending = None
        for w in pend["works"]:
            w.wait()
        groups = pend["groups"]
        # pre-sync deviation D^m = ||theta^m - theta_bar|| over the parameters, measured before loading the mean
        par_ids = {id(p) for p in self._params}
        dev2 = 0.0
        for ts, flat in groups:
            off = 0
            for t in ts:
                n = t.numel()
                if id(t) in par_ids:
                    d = t.detach().reshape(-1).double() - flat[off : off + n].double()
                    dev2 += float((d * d).sum())
                off += n
        deviation = math.sqrt(dev2) if math.isfinite(dev2) else float("inf")
        for ts, flat in groups:
            off = 0
            for t in ts:
                n = t.numel()
                t.detach().copy_(flat[off : off + n].view_as(t))
                off += n
        resynced = False
        if self.cfg.verify_sync:
            resynced = self._verify(groups)
        nbytes = sum(f.numel() * f.element_size() for _, f in groups)
        self.bytes_sent += nbytes
        self.num_syncs += 1
        self.num_param_syncs += 1
        sigma_est = None
        if pend["reason"] == "schedule":
            sigma_est = self._advance_schedule((deviation, pend["window"], grad_norm))
        ev = SyncEvent(
            step=pend["step"],
            h_new=self.current_h,
            deviation=deviation,
            reduce=pend["reduce"],
            excluded_ranks=pend["excluded"],
            reason=pend["reason"],
            state_synced=pend["include_state"],
            bytes=nbytes,
            sigma_est=sigma_est,
            resynced=resynced,
        )
        self.events.append(ev)
        if self.log_path is not None and self.rank == 0:
            with self.log_path.open("a") as f:
                f.write(json.dumps(ev.to_dict()) + "\n")
        for cb in self.on_sync:
            cb(ev)
        return ev

    def _verify(self, groups: list[tuple[list[torch.Tensor], torch.Tensor]]) -> bool:
        """verify_sync: compare a 64-bit fingerprint of the result; re-broadcast on mismatch."""
        tensors = [t for ts, _ in groups for t in ts]
        fps = gather_fingerprints(tensor_fingerprint(tensors), self.group)
        self.check_bytes += 8 * self.world
        if len(set(fps)) == 1:
            return False
        maj = majority_of(fps)
        src = 0 if maj is None else fps.index(maj)
        for t in tensors:
            dist.broadcast(t.data, src=src, group=self.group)
        return True

    def _grad_norm(self) -> float:
        sq = 0.0
        for p in self._params:
            if p.grad is not None:
                sq += float(p.grad.detach().double().pow(2).sum())
        return math.sqrt(sq)

    def _advance_schedule(self, measured: tuple[float, float, float | None] | None) -> float | None:
        """Sync mode: next = t + H. Dyn mode: choose H_new from the noise estimate and the policy."""
        cfg = self.cfg
        if cfg.mode == "sync" or measured is None:
            base = self.next_sync_step if cfg.mode == "sync" else self.t
            self.next_sync_step = base + self.current_h
            while self.next_sync_step <= self.t:
                self.next_sync_step += self.current_h
            return None
        deviation, window, grad_norm = measured
        m = self.world
        gnorm = grad_norm if grad_norm is not None else self._grad_norm()
        denom = math.sqrt((m - 1) / m * window) if window > 0 else 0.0
        s_hat = deviation / denom if denom > 0 and math.isfinite(deviation) else 0.0
        if cfg.dyn_policy == "snr":
            r = cfg.snr_scale * gnorm / s_hat if s_hat > 0 else float(cfg.h_max)
        elif cfg.dyn_policy == "snr_raw":
            r = gnorm / deviation if deviation > 0 else float(cfg.h_max)
        else:  # budget: largest H with ((M-1)/M) s^2 eta^2 H <= (rho ||theta_bar||)^2
            lr = float(self.optimizer.param_groups[0].get("lr", 0.0))
            theta = math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in self._params))
            per = (m - 1) / m * s_hat**2 * lr**2
            r = (cfg.budget_rel * theta) ** 2 / per if per > 0 else float(cfg.h_max)
        r = min(r, float(cfg.h_max)) if math.isfinite(r) else float(cfg.h_max)
        buf = torch.tensor([r], dtype=torch.float64)
        dist.all_reduce(buf, group=self.group)
        h_new = round(float(buf.item()) / m)
        self.current_h = max(cfg.h_min, min(cfg.h_max, h_new))
        # overlapped: the sync launched after step t completes before step t+1's update
        self.next_sync_step = self.t + (1 if cfg.use_overlap else 0) + self.current_h
        return s_hat

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """Counters, the H schedule and an in-flight sync's (finished) result."""
        pending = None
        if self._pending is not None:
            for w in self._pending["works"]:
                w.wait()
            self._pending["works"] = []
            pending = {k: v for k, v in self._pending.items() if k not in ("groups", "works")}
            pending["flats"] = [f.clone() for _, f in self._pending["groups"]]
        return {
            "t": self.t,
            "current_h": self.current_h,
            "next_sync_step": self.next_sync_step,
            "num_syncs": self.num_syncs,
            "num_param_syncs": self.num_param_syncs,
            "bytes_sent": self.bytes_sent,
            "check_bytes": self.check_bytes,
            "window": self._window,
            "pending": pending,
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        for k in ("t", "current_h", "next_sync_step", "num_syncs", "num_param_syncs"):
            setattr(self, k, int(sd[k]))
        self.bytes_sent = int(sd["bytes_sent"])
        self.check_bytes = int(sd.get("check_bytes", 0))
        self._window = float(sd["window"])
        pend = sd.get("pending")
        if pend is None:
            self._pending = None
            return
        groups = self._groups(bool(pend["include_state"]))
        if len(groups) != len(pend["flats"]) or any(
            tuple(f.shape) != tuple(g.shape)
            for (_, g), f in zip(groups, pend["flats"], strict=True)
        ):
            raise PAFTConfigError("checkpoint's pending sync does not match this model/optimizer")
        self._pending = {
            **{k: v for k, v in pend.items() if k != "flats"},
            "groups": [
                (ts, f.to(device=g.device, dtype=g.dtype, copy=True))
                for (ts, g), f in zip(groups, pend["flats"], strict=True)
            ],
            "works": [],
        }
