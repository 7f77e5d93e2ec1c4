"""Seeded fault injector for the all-reduced gradient a rank receives.

Every draw is keyed by (seed, rank, step, global parameter index), so the DDP communication-hook
injection point and the optimizer pre-step point corrupt the same elements by the same amounts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from paft_dist.config import FaultSpec
from paft_dist.errors import FaultSpecError

_MASK64 = (1 << 64) - 1
_WIDTH = {torch.float32: 32, torch.float64: 64, torch.float16: 16, torch.bfloat16: 16}
_IVIEW = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def _mix(*xs: int) -> int:
    """splitmix64 over a tuple of ints -> a 63-bit generator seed."""
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = (h ^ (x & _MASK64)) & _MASK64
        h = (h + 0x9E3779B97F4A7C15) & _MASK64
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        h = z ^ (z >> 31)
    return h & ((1 << 63) - 1)


def _gen(*key: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(_mix(*key))
    return g


@dataclass
class FaultEvent:
    """One corruption applied to one parameter's gradient on one rank."""

    step: int
    rank: int
    kind: str
    index: int
    count: int
    spec: int = 0
    bits: list[int] | None = None
    factor: float | None = None
    sigma: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class FaultInjector:
    """Corrupts the received gradient of target ranks, deterministically.

    `attach(ddp_model)` registers a DDP comm hook for specs with where='comm_hook';
    `attach(optimizer)` registers an optimizer step pre-hook for where='pre_step'.
    """

    def __init__(
        self,
        specs: FaultSpec | Sequence[FaultSpec],
        rank: int | None = None,
        world_size: int | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.specs = [specs] if isinstance(specs, FaultSpec) else list(specs)
        if rank is None:
            rank = dist.get_rank() if dist.is_initialized() else 0
        if world_size is None:
            world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.rank, self.world_size = int(rank), int(world_size)
        for s in self.specs:
            if s.ranks != "all" and any(r < 0 or r >= self.world_size for r in s.ranks):
                raise FaultSpecError(
                    f"fault ranks {s.ranks} outside [0, {self.world_size}); "
                    f"use ranks between 0 and {self.world_size - 1} or 'all'"
                )
        self.log_path = Path(log_path) if log_path else None
        self.events: list[FaultEvent] = []
        self.step = 0  # index of the step whose gradient is being corrupted
        self._offsets: dict[int, int] | None = None
        self._total = 0
        self._handles: list[Any] = []
        self._params: list[torch.nn.Parameter] = []
        self._pindex: dict[int, int] = {}
        self._has_opt = False

    # ---------------------------------------------------------------- bookkeeping
    def _index_params(self, params: Sequence[torch.nn.Parameter]) -> None:
        self._params = list(params)
        self._offsets, self._pindex, off = {}, {}, 0
        for i, p in enumerate(self._params):
            self._offsets[id(p)] = off
            self._pindex[id(p)] = i
            off += p.numel()
        self._total = off

    def _active(self, spec: FaultSpec, step: int) -> bool:
        if spec.kind == "none":
            return False
        if spec.ranks != "all" and self.rank not in spec.ranks:
            return False
        if step < spec.start_step or (spec.end_step is not None and step >= spec.end_step):
            return False
        if (step - spec.start_step) % spec.every != 0:
            return False
        if spec.prob >= 1.0:
            return True
        u = torch.rand(1, generator=_gen(spec.seed, self.rank, step, -2)).item()
        return u < spec.prob

    def _positions(self, spec: FaultSpec, si: int, step: int) -> torch.Tensor | None:
        """Global flat positions hit this step (None: every element, subject to `fraction`)."""
        if spec.num_elements is None or spec.kind == "gaussian":
            return None
        n = min(spec.num_elements, self._total)
        g = _gen(spec.seed, self.rank, step, -3, si)
        return torch.randperm(self._total, generator=g)[:n]

    def noise(self, spec: FaultSpec, si: int, step: int, index: int, numel: int) -> torch.Tensor:
        """The gaussian draw of spec `si` for parameter `index` at `step` (for exact replays)."""
        g = _gen(spec.seed, self.rank, step, index, si)
        eps = torch.randn(numel, generator=g) * spec.sigma
        if spec.fraction < 1.0:
            eps = eps * (torch.rand(numel, generator=g) < spec.fraction)
        return eps

    # ---------------------------------------------------------------- corruption
    def corrupt_(
        self, tensor: torch.Tensor, step: int, index: int = 0, offset: int | None = None
    ) -> list[FaultEvent]:
        """Corrupt `tensor` (gradient of global parameter `index`) in place for `step`."""
        if not tensor.is_floating_point():
            if any(s.kind == "bitflip" for s in self.specs):
                raise FaultSpecError(f"bitflip needs a floating tensor, got dtype {tensor.dtype}")
            return []
        if offset is None:
            offset = 0
            if self._offsets is None:
                self._total = max(self._total, tensor.numel())
        flat = tensor.view(-1)
        n = flat.numel()
        events: list[FaultEvent] = []
        for si, spec in enumerate(self.specs):
            large = None
            if spec.burst is not None:
                k, s_large = spec.burst
                if (
                    step >= spec.start_step
                    and (step - spec.start_step) % k == 0
                    and (spec.ranks == "all" or self.rank in spec.ranks)
                ):
                    large = s_large
            active = self._active(spec, step)
            if not active and large is None:
                continue
            if active:
                ev = self._apply(spec, si, step, index, flat, offset, n)
                if ev is not None:
                    events.append(ev)
            if large is not None:
                g = _gen(spec.seed, self.rank, step, index, si, 7)
                flat.add_(torch.randn(n, generator=g).to(flat.dtype) * large)
                events.append(FaultEvent(step, self.rank, "burst", index, n, si, sigma=large))
        self.events.extend(events)
        if self.log_path and events:
            with self.log_path.open("a") as f:
                for ev in events:
                    f.write(json.dumps(ev.to_dict()) + "\n")
        return events

    def _apply(
        self,
        spec: FaultSpec,
        si: int,
        step: int,
        index: int,
        flat: torch.Tensor,
        offset: int,
        n: int,
    ) -> FaultEvent | None:
        pos = self._positions(spec, si, step)
        if pos is not None:
            local = pos[(pos >= offset) & (pos < offset + n)] - offset
            if local.numel() == 0:
                return None
            local, _ = torch.sort(local)
        if spec.kind == "gaussian":
            flat.add_(self.noise(spec, si, step, index, n).to(flat.dtype))
            return FaultEvent(step, self.rank, "gaussian", index, n, si, sigma=spec.sigma)
        if pos is None:
            if spec.fraction < 1.0:
                g = _gen(spec.seed, self.rank, step, index, si, 3)
                local = torch.nonzero(torch.rand(n, generator=g) < spec.fraction).reshape(-1)
            else:
                local = torch.arange(n)
        if spec.kind == "scale":
            flat[local] = flat[local] * spec.factor
            return FaultEvent(
                step, self.rank, "scale", index, int(local.numel()), si, factor=spec.factor
            )
        if spec.kind == "zero":
            flat[local] = 0
            return FaultEvent(step, self.rank, "zero", index, int(local.numel()), si)
        # bitflip: one bit, drawn from spec.bits, per selected element
        width = _WIDTH.get(flat.dtype)
        if width is None:
            raise FaultSpecError(f"bitflip on dtype {flat.dtype} is not supported")
        if max(spec.bits) >= width:
            raise FaultSpecError(
                f"bits={spec.bits} outside the {width}-bit width of {flat.dtype}; "
                f"use positions 0..{width - 1}"
            )
        g = _gen(spec.seed, self.rank, step, index, si, 5)
        choice = torch.randint(len(spec.bits), (local.numel(),), generator=g)
        chosen = [spec.bits[int(c)] for c in choice]
        ints = flat.view(_IVIEW[flat.dtype])
        masks = torch.tensor(
            [(1 << b) - (1 << width) if b == width - 1 else (1 << b) for b in chosen],
            dtype=ints.dtype,
        )
        ints[local] = ints[local] ^ masks
        return FaultEvent(step, self.rank, "bitflip", index, int(local.numel()), si, bits=chosen)

    # ---------------------------------------------------------------- injection points
    def attach(self, target: Any) -> FaultInjector:
        """DDP model: comm hook for 'comm_hook' specs; optimizer: pre-step hook for 'pre_step'."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        if isinstance(target, DDP):
            self._index_params([p for p in target.module.parameters() if p.requires_grad])
            if any(s.where == "comm_hook" for s in self.specs):
                state, hook = self.comm_hook()
                target.register_comm_hook(state, hook)
            return self
        opt = getattr(target, "optimizer", target)  # accelerate's AcceleratedOptimizer
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(
                f"attach() takes a DistributedDataParallel model or an optimizer, got {type(target)}"
            )
        if self._offsets is None:
            self._index_params([p for g in opt.param_groups for p in g["params"]])
        self._handles.append(opt.register_step_pre_hook(self._pre_step))
        self._handles.append(opt.register_step_post_hook(self._post_step))
        self._has_opt = True
        return self

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre_step(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        specs_here = [s for s in self.specs if s.where == "pre_step"]
        if not specs_here:
            return
        saved = self.specs
        self.specs = specs_here
        try:
            for i, p in enumerate(self._params):
                if p.grad is not None:
                    self.corrupt_(p.grad, self.step, index=i, offset=self._offsets[id(p)])
        finally:
            self.specs = saved

    def _post_step(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.step += 1

    def comm_hook(self) -> tuple[Any, Any]:
        """(state, hook) for `DDP.register_comm_hook`: all-reduce(buffer/M), then corrupt."""
        specs_here = [s for s in self.specs if s.where == "comm_hook"]

        def hook(state: Any, bucket: Any) -> torch.futures.Future:
            group = dist.group.WORLD
            buf = bucket.buffer()
            buf.div_(dist.get_world_size(group))
            fut = dist.all_reduce(buf, group=group, async_op=True).get_future()
            step = self.step
            params = list(bucket.parameters())
            last = bucket.is_last()
            if last and not self._has_opt:
                self.step += 1

            def corrupt(f: torch.futures.Future) -> torch.Tensor:
                out = f.value()[0]
                saved = self.specs
                self.specs = specs_here
                try:
                    off = 0
                    for p in params:
                        n = p.numel()
                        self.corrupt_(
                            out[off : off + n],
                            step,
                            index=self._pindex[id(p)],
                            offset=self._offsets[id(p)],
                        )
                        off += n
                finally:
                    self.specs = saved
                return out

            return fut.then(corrupt)

        # DDP checks these annotations; set them as objects (this module uses PEP 563 strings)
        hook.__annotations__ = {
            "state": object,
            "bucket": dist.GradBucket,
            "return": torch.futures.Future[torch.Tensor],
        }
        return None, hook

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.step = int(sd["step"])
