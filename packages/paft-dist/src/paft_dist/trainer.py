"""A small data-parallel trainer: DDP + fault injector + PAFT, spawned or under torchrun.

`run_experiment(cfg)` spawns `cfg.world_size` processes (gloo on 127.0.0.1, a free port) or, when
launched by torchrun (RANK/WORLD_SIZE set), runs in place. Every rank writes
`metrics.rank{r}.jsonl`; rank 0 writes `config.json`, `events.jsonl` and `summary.json`.
Checkpoints (`ckpt/rank{r}.safetensors`, atomic, no pickle: see `paft_dist.checkpoint`) make a
resumed run bitwise equal to an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from paft_dist.checkpoint import load_checkpoint, save_checkpoint
from paft_dist.config import ExperimentConfig, FaultSpec, PAFTConfig
from paft_dist.errors import CheckpointError, PAFTConfigError, PAFTError, ReplicaCorruptionError

MLP_IN, MLP_HIDDEN, MLP_OUT = 32, 64, 10
TEST_SIZE = 2048


@dataclass
class ExperimentResult:
    """What a run returns (rank 0's summary plus the per-step curves)."""

    summary: dict[str, Any]
    metrics: list[list[dict[str, Any]]] = field(default_factory=list)
    sync_events: list[dict[str, Any]] = field(default_factory=list)
    fault_events: list[dict[str, Any]] = field(default_factory=list)
    out_dir: str = ""

    @property
    def worst_test_loss(self) -> float:
        return float(max(self.summary["test_loss"]))

    def final_params(self, rank: int) -> Any:
        """Rank `rank`'s final flat parameter vector (runs with `save_params=True`)."""
        from safetensors.torch import load_file

        return load_file(Path(self.out_dir) / f"params.rank{rank}.safetensors")["params"]

    def final_optimizer_state(self, rank: int) -> list[Any]:
        """Rank `rank`'s final optimizer-state tensors, in parameter then key order."""
        from safetensors.torch import load_file

        st = load_file(Path(self.out_dir) / f"optstate.rank{rank}.safetensors")
        return [st[f"{i}"] for i in range(len(st))]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_to_json(cfg: ExperimentConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["paft"].pop("process_group", None)
    return d


def config_from_json(d: dict[str, Any]) -> ExperimentConfig:
    d = dict(d)
    paft = PAFTConfig(**d.pop("paft"))
    faults = []
    for f in d.pop("faults"):
        if f.get("burst") is not None:
            f["burst"] = tuple(f["burst"])
        faults.append(FaultSpec(**f))
    return ExperimentConfig(paft=paft, faults=faults, **d)


# ---------------------------------------------------------------------------- tasks
class _MLPTask:
    """Synthetic teacher classification: MLP 32-64-10, labels argmax(xW + 0.5 noise)."""

    def __init__(self, cfg: ExperimentConfig, rank: int) -> None:
        import torch

        g = torch.Generator().manual_seed(10_000 + cfg.seed)
        self.teacher = torch.randn(MLP_IN, MLP_OUT, generator=g)
        self.test_x, self.test_y = self._draw(TEST_SIZE, g)
        self.gen = torch.Generator().manual_seed(100 + rank + 1000 * cfg.seed)
        self.bs = cfg.batch_size

    def _draw(self, n: int, g: Any) -> tuple[Any, Any]:
        import torch

        x = torch.randn(n, MLP_IN, generator=g)
        y = (x @ self.teacher + 0.5 * torch.randn(n, MLP_OUT, generator=g)).argmax(1)
        return x, y

    def build_model(self, seed: int) -> Any:
        import torch

        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Linear(MLP_IN, MLP_HIDDEN),
            torch.nn.ReLU(),
            torch.nn.Linear(MLP_HIDDEN, MLP_OUT),
        )

    def batch(self) -> tuple[Any, Any]:
        return self._draw(self.bs, self.gen)

    def loss(self, model: Any, batch: tuple[Any, Any]) -> Any:
        import torch.nn.functional as F

        x, y = batch
        return F.cross_entropy(model(x), y)

    def evaluate(self, model: Any) -> dict[str, float]:
        import torch
        import torch.nn.functional as F

        with torch.no_grad():
            logits = model(self.test_x)
            loss = F.cross_entropy(logits, self.test_y).item()
            acc = (logits.argmax(1) == self.test_y).float().mean().item()
        return {"loss": float(loss), "accuracy": float(acc)}

    def rng_state(self) -> Any:
        return self.gen.get_state()

    def set_rng_state(self, s: Any) -> None:
        self.gen.set_state(s)


def _lm_texts(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        w = rng.sample(words, 3)
        out.append(f"{a}+{b}={a + b}. {w[0]} {w[1]} {w[2]} {w[0]}.")
    return out


class _LMTask:
    """tiny-lm (a 2-layer Llama built in code, byte-level ids) or any HF causal LM id/path."""

    def __init__(self, cfg: ExperimentConfig, rank: int) -> None:
        import torch

        self.cfg = cfg
        self.name = cfg.model
        self.tok = None
        if self.name != "tiny-lm":
            from llmcore.models import load_tokenizer

            self.tok = load_tokenizer(self.name, padding_side="right")
        self.gen = torch.Generator().manual_seed(100 + rank + 1000 * cfg.seed)
        self.train_texts = _lm_texts(4096, 7 + cfg.seed)
        self.test_ids = self._encode(_lm_texts(64, 999 + cfg.seed))

    def _encode(self, texts: list[str]) -> Any:
        import torch

        L = self.cfg.seq_len
        rows = []
        for t in texts:
            if self.tok is None:
                ids = [1, *[min(b + 3, 258) for b in t.encode()][: L - 1]]
            else:
                ids = self.tok(t, add_special_tokens=True)["input_ids"][:L]
            rows.append(ids + [0] * (L - len(ids)))
        return torch.tensor(rows)

    def build_model(self, seed: int) -> Any:
        import torch

        torch.manual_seed(seed)
        if self.name == "tiny-lm":
            from transformers import LlamaConfig, LlamaForCausalLM

            c = LlamaConfig(
                vocab_size=259,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=self.cfg.seq_len,
                pad_token_id=0,
                tie_word_embeddings=False,
            )
            return LlamaForCausalLM(c)
        from llmcore.models import load_causal_lm

        return load_causal_lm(self.name, dtype="float32", device="cpu").train()

    def batch(self) -> Any:
        import torch

        idx = torch.randint(len(self.train_texts), (self.cfg.batch_size,), generator=self.gen)
        return self._encode([self.train_texts[int(i)] for i in idx])

    def loss(self, model: Any, ids: Any) -> Any:
        labels = ids.clone()
        labels[ids == 0] = -100
        return model(input_ids=ids, attention_mask=(ids != 0).long(), labels=labels).loss

    def evaluate(self, model: Any) -> dict[str, float]:
        import torch

        with torch.no_grad():
            return {"loss": float(self.loss(model, self.test_ids).item())}

    def rng_state(self) -> Any:
        return self.gen.get_state()

    def set_rng_state(self, s: Any) -> None:
        self.gen.set_state(s)


def make_task(cfg: ExperimentConfig, rank: int) -> Any:
    return _MLPTask(cfg, rank) if cfg.model == "mlp" else _LMTask(cfg, rank)


def make_optimizer(cfg: ExperimentConfig, params: Any) -> Any:
    import torch

    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "momentum":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


# ---------------------------------------------------------------------------- one rank
def resume_state(out: str | Path, rank: int) -> dict[str, Any] | None:
    """Rank `rank`'s checkpoint in run folder `out` (None when there is none to resume from).

    Only safetensors checkpoints are read; a pickle checkpoint (the 0.1 format, `ckpt/rank{r}.pt`)
    or a file that is not a valid checkpoint raises CheckpointError instead of being executed.
    """
    ckdir = Path(out) / "ckpt"
    ckpt, legacy = ckdir / f"rank{rank}.safetensors", ckdir / f"rank{rank}.pt"
    if ckpt.exists():
        return load_checkpoint(ckpt)
    if legacy.exists():
        raise CheckpointError(
            f"{legacy} is a pickle checkpoint (paft-dist 0.1 format); it is not loaded because "
            "unpickling can run arbitrary code. Delete the ckpt/ folder to start this run over."
        )
    return None


def _worker(
    rank: int, world: int, cfg_jsons: list[dict[str, Any]], outs: list[str], port: int | None
) -> None:
    import torch
    import torch.distributed as dist

    cfgs = [config_from_json(c) for c in cfg_jsons]
    torch.set_num_threads(cfgs[0].threads)
    torch.use_deterministic_algorithms(True)
    if port is not None:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group(
            cfgs[0].backend,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=cfgs[0].timeout_s),
        )
    try:
        for cfg, out in zip(cfgs, outs, strict=True):
            try:
                _train_rank(cfg, Path(out))
            except PAFTError as e:
                msg = f"{type(e).__name__}: {e}"
                (Path(out) / f"error.rank{dist.get_rank()}.txt").write_text(msg)
                raise
            dist.barrier()
    finally:
        if port is not None and dist.is_initialized():
            dist.destroy_process_group()


def _train_rank(cfg: ExperimentConfig, out: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from paft_dist.faults import FaultInjector
    from paft_dist.monitor import flat_parameters, parameter_divergence
    from paft_dist.paft import PAFT

    rank, world = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device("cuda", rank % torch.cuda.device_count())
        if cfg.backend == "nccl"
        else torch.device("cpu")
    )
    task = make_task(cfg, rank)
    module = task.build_model(cfg.seed).to(device)
    ddp_kw: dict[str, Any] = {}
    if cfg.bucket_cap_mb is not None:
        ddp_kw["bucket_cap_mb"] = cfg.bucket_cap_mb
    model = DDP(module, **ddp_kw)  # broadcasts rank 0's initial parameters
    opt = make_optimizer(cfg, model.parameters())
    injector = None
    if cfg.faults:
        injector = FaultInjector(cfg.faults, rank=rank, world_size=world)
        injector.attach(model)
        injector.attach(opt)
    if cfg.grad_clip is not None:
        # clip the gradient as received (after the injector's pre-step hook, registered first)
        clip = float(cfg.grad_clip)

        def _clip(o: Any, a: Any, k: Any) -> None:
            torch.nn.utils.clip_grad_norm_(module.parameters(), clip)

        opt.register_step_pre_hook(_clip)
    paft = None
    averager = None
    if cfg.paft.mode == "averager":
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager

        h = cfg.paft.sync_every
        averager = PeriodicModelAverager(period=h, warmup_steps=h - 1)
    elif cfg.paft.mode != "ddp":
        paft = PAFT(model, opt, cfg.paft).attach()
    sync_div: list[dict[str, Any]] = []
    if paft is not None:

        def _after_sync(ev: Any) -> None:
            d = parameter_divergence(module)
            sync_div.append({"step": ev.step, "after_sync_divergence": d.max})

        paft.on_sync.append(_after_sync)

    ckdir = out / "ckpt"
    ckpt = ckdir / f"rank{rank}.safetensors"
    start = 0
    sd = resume_state(out, rank)
    if sd is not None:
        module.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optimizer"])
        task.set_rng_state(sd["rng"])
        if paft is not None:
            paft.load_state_dict(sd["paft"])
        if injector is not None:
            injector.load_state_dict(sd["injector"])
        if averager is not None:
            averager.step = sd["averager_step"]
        start = int(sd["step"])
        sync_div.extend(sd.get("sync_div", []))
    mpath = out / f"metrics.rank{rank}.jsonl"
    mode = "a" if start > 0 else "w"
    grad_bytes = sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
    steps_end = cfg.steps if cfg.stop_after is None else min(cfg.steps, cfg.stop_after)
    corrupted_at: int | None = None
    t_wall = time.perf_counter()
    pbar = None
    if rank == 0 and os.environ.get("PAFT_PROGRESS", "0") == "1":
        from tqdm import tqdm

        pbar = tqdm(total=cfg.steps, initial=start, desc=f"{cfg.paft.mode}")
    with mpath.open(mode) as mf:
        for step in range(start, steps_end):
            t0 = time.perf_counter()
            batch = task.batch()
            if isinstance(batch, tuple):
                batch = tuple(b.to(device) for b in batch)
            else:
                batch = batch.to(device)
            loss = task.loss(model, batch)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            grad_norm = math.sqrt(
                sum(
                    float(p.grad.double().pow(2).sum())
                    for p in module.parameters()
                    if p.grad is not None
                )
            )
            syncs_before = paft.num_syncs if paft is not None else 0
            try:
                opt.step()
            except ReplicaCorruptionError:
                corrupted_at = step
                break
            synced = False
            if averager is not None:
                synced = (
                    averager.step >= averager.warmup_steps
                    and (averager.step - averager.warmup_steps) % averager.period == 0
                )
                averager.average_parameters(module.parameters())
            elif paft is not None:
                synced = paft.num_syncs > syncs_before
            row: dict[str, Any] = {
                "step": step + 1,
                "loss": float(loss.item()),
                "grad_norm": grad_norm,
                "lr": cfg.lr,
                "h": paft.current_h if paft is not None else None,
                "synced": synced,
                "sigma_est": (paft.events[-1].sigma_est if paft is not None and synced else None),
                "step_time_ms": 1000 * (time.perf_counter() - t0),
                "bytes_grad": grad_bytes,
                "bytes_sync": (paft.events[-1].bytes if paft is not None and synced else 0),
            }
            if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                row["divergence"] = parameter_divergence(module).max
            mf.write(json.dumps(row) + "\n")
            if pbar is not None:
                pbar.update(1)
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
                mf.flush()
                ckdir.mkdir(exist_ok=True)
                save_checkpoint(
                    {
                        "step": step + 1,
                        "model": module.state_dict(),
                        "optimizer": opt.state_dict(),
                        "rng": task.rng_state(),
                        "paft": paft.state_dict() if paft is not None else None,
                        "injector": injector.state_dict() if injector is not None else None,
                        "averager_step": averager.step if averager is not None else None,
                        "sync_div": sync_div,
                    },
                    ckpt,
                )
    if pbar is not None:
        pbar.close()
    if cfg.stop_after is not None and steps_end < cfg.steps:
        return
    if paft is not None and corrupted_at is None:
        paft.finalize()
    wall = time.perf_counter() - t_wall
    module.eval()
    ev = task.evaluate(module)
    # the averaged model (what a final sync would give)
    flat = flat_parameters(module).double()
    finite = bool(torch.isfinite(flat).all())
    div = parameter_divergence(module).max if finite else float("nan")
    mean = flat.clone()
    dist.all_reduce(mean)
    mean /= world
    saved = [p.detach().clone() for p in module.parameters()]
    off = 0
    for p in module.parameters():
        n = p.numel()
        p.data.copy_(mean[off : off + n].view_as(p).to(p.dtype))
        off += n
    avg_ev = task.evaluate(module)
    for p, s in zip(module.parameters(), saved, strict=True):
        p.data.copy_(s)
    if cfg.save_params:
        from safetensors.torch import save_file

        save_file({"params": flat_parameters(module)}, str(out / f"params.rank{rank}.safetensors"))
        st = [
            v
            for pg in opt.param_groups
            for q in pg["params"]
            for k, v in sorted(opt.state.get(q, {}).items())
            if isinstance(v, torch.Tensor) and v.dim() > 0
        ]
        save_file(
            {f"{i}": v.detach().contiguous() for i, v in enumerate(st)},
            str(out / f"optstate.rank{rank}.safetensors"),
        )
    local = {
        "rank": rank,
        "test_loss": ev["loss"],
        "test_accuracy": ev.get("accuracy"),
        "finite": finite and math.isfinite(ev["loss"]),
        "wall_s": wall,
        "corrupted_at": corrupted_at,
        "syncs": paft.num_syncs if paft is not None else None,
        "bytes_sync": paft.bytes_sent if paft is not None else 0,
        "check_bytes": paft.check_bytes if paft is not None else 0,
        "bytes_grad": grad_bytes * cfg.steps,
        "peak_rss_mb": _peak_rss_mb(),
        "fault_events": [e.to_dict() for e in injector.events] if injector else [],
        "sync_events": [e.to_dict() for e in paft.events] if paft is not None else [],
    }
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, local)
    if rank == 0:
        summary = {
            "test_loss": [g["test_loss"] for g in gathered],
            "test_accuracy": [g["test_accuracy"] for g in gathered],
            "finite": [g["finite"] for g in gathered],
            "averaged_model_loss": avg_ev["loss"],
            "final_divergence": div,
            "max_divergence": max([div] + [r.get("divergence", 0.0) for r in _read(mpath)]),
            "syncs": gathered[0]["syncs"],
            "bytes_sync": gathered[0]["bytes_sync"],
            "check_bytes": gathered[0]["check_bytes"],
            "bytes_grad": gathered[0]["bytes_grad"],
            "sync_ratio": gathered[0]["bytes_sync"] / gathered[0]["bytes_grad"],
            "wall_s": max(g["wall_s"] for g in gathered),
            "peak_rss_mb": [g["peak_rss_mb"] for g in gathered],
            "corrupted_at": [g["corrupted_at"] for g in gathered],
            "after_sync_divergence": [d["after_sync_divergence"] for d in sync_div],
            "final_h": paft.current_h if paft is not None else None,
        }
        with (out / "events.jsonl").open("w") as f:
            for g in gathered:
                for e in g["fault_events"]:
                    f.write(json.dumps({"event": "fault", **e}) + "\n")
            for e in gathered[0]["sync_events"]:
                f.write(json.dumps(e) + "\n")
        tmp = out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1))
        os.replace(tmp, out / "summary.json")


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------- driver
def run_experiment(cfg: ExperimentConfig, out_dir: str | Path | None = None) -> ExperimentResult:
    """Run one experiment on `cfg.world_size` processes (spawned), or in place under torchrun."""
    return run_experiments([cfg], [out_dir])[0]


def run_experiments(
    cfgs: list[ExperimentConfig], out_dirs: list[str | Path | None] | None = None
) -> list[ExperimentResult]:
    """Run several experiments back to back in ONE process group (process start-up is paid once).

    All configs must share world_size and backend. Under torchrun the current group is used.
    """
    import torch.multiprocessing as mp

    if not cfgs:
        return []
    if len({(c.world_size, c.backend) for c in cfgs}) > 1:
        raise PAFTConfigError("run_experiments: every config needs the same world_size and backend")
    for c in cfgs:
        validate(c)
    out_dirs = list(out_dirs) if out_dirs is not None else [None] * len(cfgs)
    outs = [Path(o) if o is not None else Path(tempfile.mkdtemp(prefix="paft-")) for o in out_dirs]
    under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if under_torchrun:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(cfgs[0].backend, timeout=timedelta(seconds=cfgs[0].timeout_s))
        for c in cfgs:
            c.world_size = dist.get_world_size()
    cjs = [config_to_json(c) for c in cfgs]
    for out, cj in zip(outs, cjs, strict=True):
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(cj, indent=1))
        for f in out.glob("error.rank*.txt"):
            f.unlink()
    world = cfgs[0].world_size
    if under_torchrun:
        import torch.distributed as dist

        _worker(dist.get_rank(), world, cjs, [str(o) for o in outs], None)
    else:
        try:
            mp.start_processes(
                _worker,
                args=(world, cjs, [str(o) for o in outs], free_port()),
                nprocs=world,
                join=True,
                start_method="spawn",
            )
        except Exception as e:
            for out in outs:
                errs = sorted(out.glob("error.rank*.txt"))
                if errs:
                    name, _, text = errs[0].read_text().partition(": ")
                    from paft_dist import errors as E

                    cls = getattr(E, name, PAFTError)
                    if cls is ReplicaCorruptionError:
                        raise PAFTError(text) from None
                    raise cls(text) from None
            raise PAFTError(f"a training process failed: {e}") from e
    results = []
    for c, out in zip(cfgs, outs, strict=True):
        if c.stop_after is not None and c.stop_after < c.steps:
            results.append(ExperimentResult(summary={}, out_dir=str(out)))
        else:
            results.append(load_result(out, world))
    return results


def load_result(out: Path, world: int) -> ExperimentResult:
    summary = json.loads((out / "summary.json").read_text())
    metrics = [_read(out / f"metrics.rank{r}.jsonl") for r in range(world)]
    events = _read(out / "events.jsonl") if (out / "events.jsonl").exists() else []
    return ExperimentResult(
        summary=summary,
        metrics=metrics,
        sync_events=[e for e in events if e.get("event") == "sync"],
        fault_events=[e for e in events if e.get("event") == "fault"],
        out_dir=str(out),
    )


def validate(cfg: ExperimentConfig) -> None:
    if cfg.backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise PAFTConfigError("backend 'nccl' needs CUDA GPUs; use --backend gloo on CPU")
