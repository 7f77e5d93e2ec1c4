"""Excess description length EDL_A(D) = MDL_A(D) - n L(theta_n) with three learners A.

* online with replay: code z_i under theta_{i-1}, then R AdamW steps on z_i plus uniform replay
  draws from z_1..z_i; one pass gives EDL at every checkpoint;
* single-pass (first epoch): batch j coded before its update;
* blockwise (Voita & Titov 2020): block k coded by a model fit from the base on the prefix.
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections.abc import Sequence
from typing import Any

from excess_dl.config import EDLConfig
from excess_dl.curve import EDLCurve, EDLPoint
from excess_dl.data import Example, check_overlap, normalize_examples, shuffled_labels
from excess_dl.errors import EDLConfigError, EDLInputError, NumericalError
from excess_dl.methods import Learnable, has_dropout, prepare
from excess_dl.scoring import LN2, EncodedExample, check_tokenizer, encode_examples


def default_checkpoints(n: int) -> list[int]:
    """Powers of two <= n, plus n."""
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    if out[-1] != n:
        out.append(n)
    return out


def block_boundaries(n: int, config: EDLConfig) -> list[int]:
    """0 = t_0 < t_1 < ... < t_S = n from ``block_sizes`` or the Voita-Titov fractions."""
    if config.block_sizes is not None:
        sizes = [int(t) for t in config.block_sizes]
        if sizes[-1] > n:
            raise EDLConfigError(
                f"block_sizes={sizes} exceed the {n} training examples; use boundaries <= n"
            )
        if sizes[-1] != n:
            sizes.append(n)
    else:
        sizes = sorted({max(1, round(f * n)) for f in config.block_fractions})
    return [0, *sizes]


class _Batcher:
    """Right-padded completion-only forward on pre-encoded examples (positions 0..len-1)."""

    def __init__(self, pad_id: int, device: Any):
        self.pad_id = pad_id
        self.device = device

    def nats(self, model: Any, batch: Sequence[EncodedExample]):
        """(per-example nats [B] tensor with grad, completion token count)."""
        import torch

        rows = [(ex_i, c, y) for ex_i, e in enumerate(batch) for c, y in e.rows]
        length = max(len(c) + len(y) for _, c, y in rows)
        ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), length), dtype=torch.long)
        tgt = torch.zeros((len(rows), length - 1), dtype=torch.bool)
        for r, (_, c, y) in enumerate(rows):
            seq = list(c) + list(y)
            ids[r, : len(seq)] = torch.tensor(seq)
            att[r, : len(seq)] = 1
            tgt[r, len(c) - 1 : len(seq) - 1] = True
        pos = torch.arange(length).unsqueeze(0).expand(len(rows), -1)
        ids, att, tgt, pos = (t.to(self.device) for t in (ids, att, tgt, pos))
        logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        row_nats = -(tok * tgt).sum(1)
        owner = torch.tensor([ex_i for ex_i, _, _ in rows], device=row_nats.device)
        per_ex = torch.zeros(len(batch), device=row_nats.device).index_add(0, owner, row_nats)
        return per_ex, int(tgt.sum())


class _Run:
    """Shared state of one compute_edl run (tokenised data, scoring, optimiser factory)."""

    def __init__(self, base, tokenizer, train, test, config: EDLConfig, task_label: str):
        import torch

        self.base = base
        self.tok = tokenizer
        self.cfg = config
        self.label = task_label
        self.device = (
            torch.device(config.device) if config.device else next(base.parameters()).device
        )
        maxlen = getattr(base.config, "max_position_embeddings", None)
        self.train = train
        self.test = test
        kw = {"add_eos": config.add_eos, "add_bos": config.add_bos, "max_length": maxlen}
        self.enc_train = encode_examples(train, tokenizer, **kw)
        self.enc_test = encode_examples(test, tokenizer, **kw)
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        self.batcher = _Batcher(pad, self.device)
        self.vocab_bits = math.log2(len(tokenizer))
        self.timings = {"coding": 0.0, "training": 0.0, "test": 0.0}

    # --- scoring -------------------------------------------------------------------------
    def code(
        self, model, idx: Sequence[int], enc=None, batch_size: int | None = None
    ) -> list[float]:
        import torch

        enc = self.enc_train if enc is None else enc
        t0 = time.perf_counter()
        was = model.training
        model.eval()
        out: list[float] = []
        bs = batch_size or self.cfg.coding_batch_size
        with torch.no_grad():
            for s in range(0, len(idx), bs):
                nats, _ = self.batcher.nats(model, [enc[i] for i in idx[s : s + bs]])
                out.extend((nats / LN2).tolist())
        model.train(was)
        self.timings["coding"] += time.perf_counter() - t0
        return out

    def test_eval(self, model, n: int) -> tuple[float, float | None]:
        """(L(theta) in bits per example on T, greedy exact-match accuracy or None)."""
        t0 = time.perf_counter()
        if self.cfg.scoring_backend == "vllm":
            bits = self._vllm_bits(model)
        else:
            coding = self.timings["coding"]
            bits = self.code(model, range(len(self.enc_test)), self.enc_test, batch_size=64)
            self.timings["coding"] = coding  # counted under "test"
        mean = sum(bits) / len(bits)
        if not math.isfinite(mean):
            raise NumericalError(
                f"non-finite test loss at n={n} (method {self.cfg.label()}); lower the lr or "
                "enable max_grad_norm"
            )
        acc = None
        if self.cfg.accuracy:
            from excess_dl.scoring import greedy_exact_match

            ok = greedy_exact_match(model, self.enc_test, batch_size=512)
            acc = sum(ok) / len(ok)
        self.timings["test"] += time.perf_counter() - t0
        return mean, acc

    def _vllm_bits(self, model) -> list[float]:
        import tempfile

        from excess_dl.scoring import vllm_code_lengths
        from llmcore.generation import VLLMBackend

        with tempfile.TemporaryDirectory() as tmp:
            m = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
            m.save_pretrained(tmp, safe_serialization=True)
            self.tok.save_pretrained(tmp)
            backend = VLLMBackend(tmp)
            ex = self.test
            if self.cfg.add_eos:
                ex = [
                    Example(tuple((p, c + self.tok.eos_token) for p, c in e.pairs), e.row)
                    for e in ex
                ]
            return vllm_code_lengths(backend, ex)

    # --- training ------------------------------------------------------------------------
    def optimizer(self, learn: Learnable):
        import torch

        if not learn.params:
            return None
        return torch.optim.AdamW(
            learn.params,
            lr=self.cfg.effective_lr,
            betas=(0.9, 0.999),
            weight_decay=self.cfg.weight_decay,
        )

    def lr_at(self, step: int) -> float:
        lr = self.cfg.effective_lr
        if self.cfg.lr_schedule == "inverse_sqrt":
            s0 = max(1, self.cfg.lr_decay_start)
            lr *= math.sqrt(s0 / max(step, s0))
        return lr

    def step(
        self, learn: Learnable, opt, batch_idx: Sequence[int], step: int, n: int
    ) -> list[float]:
        """One optimizer step on the mean completion-token loss; returns the batch's bits
        under the pre-update parameters (train mode)."""
        import torch

        t0 = time.perf_counter()
        model = learn.model
        model.train()
        for g in opt.param_groups:
            g["lr"] = self.lr_at(step)
        nats, ntok = self.batcher.nats(model, [self.enc_train[i] for i in batch_idx])
        loss = nats.sum() / max(ntok, 1)
        if not torch.isfinite(loss):
            raise NumericalError(
                f"non-finite training loss at n={n} (method {self.cfg.label()}); lower the lr "
                "or enable max_grad_norm"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(learn.params, self.cfg.max_grad_norm)
        opt.step()
        learn.after_step()
        self.timings["training"] += time.perf_counter() - t0
        return (nats.detach() / LN2).tolist()

    def fresh(self) -> Learnable:
        return prepare(self.base, self.cfg, device=self.device)


def _curve(
    run: _Run,
    learn: Learnable,
    mode: str,
    cum_bits: dict[int, float],
    tests: dict[int, tuple[float, float | None]],
    base: tuple[float, float | None],
    per_example_bits: list[float],
    **blocks: Any,
) -> EDLCurve:
    """The curve of one learner run: its points plus the run's configuration and timings."""
    return EDLCurve(
        points=_points(run, cum_bits, tests, base),
        method=run.cfg.label(),
        mode=mode,
        trainable_params=learn.trainable_params,
        config=run.cfg.to_dict(),
        per_example_bits=per_example_bits,
        timings=dict(run.timings),
        **blocks,
    )


def _points(
    run: _Run,
    cum_bits: dict[int, float],
    tests: dict[int, tuple[float, float | None]],
    base: tuple[float, float | None],
) -> list[EDLPoint]:
    l0, acc0 = base
    lref = run.cfg.loss_ref
    pts = []
    for n in sorted(tests):
        ln, acc = tests[n]
        mdl = cum_bits[n]
        gap = l0 - lref
        pts.append(
            EDLPoint(
                n=n,
                mdl_bits=mdl,
                test_bits_per_example=ln,
                edl_bits=mdl - n * ln,
                base_test_bits_per_example=l0,
                zero_shot_code_bits=n * l0,
                compression=(n * l0 / mdl) if mdl > 0 else float("inf"),
                loss_gap_closed=(l0 - ln) / gap if gap > 0 else float("nan"),
                accuracy=acc,
                accuracy_base=acc0,
            )
        )
    return pts


def _checkpoints(n: int, config: EDLConfig) -> list[int]:
    if config.checkpoints is None:
        return default_checkpoints(n)
    cps = [int(c) for c in config.checkpoints]
    if cps[-1] > n:
        raise EDLConfigError(
            f"checkpoints={cps} go beyond the {n} training examples; use checkpoints <= n"
        )
    return cps


def _online(run: _Run, evaluate: bool = True) -> tuple[EDLCurve | None, Learnable]:
    """Online learner with replay (the default A)."""
    cfg = run.cfg
    n = len(run.enc_train)
    cps = set(_checkpoints(n, cfg)) if evaluate else set()
    learn = run.fresh()
    opt = run.optimizer(learn)
    rng = random.Random(cfg.seed)
    base = run.test_eval(learn.model, 0) if evaluate else (0.0, None)
    per_ex: list[float] = []
    cum, tests = {}, {}
    step = 0
    # without dropout the first replay step's forward (before its update) is z_i's code
    reuse = opt is not None and not has_dropout(learn.model)
    for i in range(1, n + 1):
        bits = None if reuse else run.code(learn.model, [i - 1])[0]
        if opt is not None:
            for r in range(cfg.replay_steps):
                extra = [rng.randrange(i) for _ in range(min(cfg.batch_size, i) - 1)]
                step += 1
                got = run.step(learn, opt, [i - 1, *extra], step, i)
                if r == 0 and reuse:
                    bits = got[0]
        if bits is None or not math.isfinite(bits):
            raise NumericalError(f"non-finite code length at n={i} (method {cfg.label()})")
        per_ex.append(bits)
        if i in cps:
            cum[i] = math.fsum(per_ex)
            tests[i] = run.test_eval(learn.model, i)
    if not evaluate:
        return None, learn
    return _curve(run, learn, "online", cum, tests, base, per_ex), learn


def _single_pass(run: _Run) -> tuple[EDLCurve, Learnable]:
    """First-epoch code: batch j coded under the model before its update."""
    cfg = run.cfg
    n = len(run.enc_train)
    b = cfg.batch_size
    ends = [*range(b, n, b), n]
    wanted = _checkpoints(n, cfg)
    cps = {next(e for e in ends if e >= c) for c in wanted}
    learn = run.fresh()
    opt = run.optimizer(learn)
    eval_forward = cfg.eval_forward
    if not eval_forward and has_dropout(learn.model):
        warnings.warn(
            "the model has dropout > 0: its training loss is not the code, so single_pass runs "
            "the extra eval forward (eval_forward=True)",
            stacklevel=3,
        )
        eval_forward = True
    base = run.test_eval(learn.model, 0)
    per_ex: list[float] = []
    cum, tests = {}, {}
    for j, end in enumerate(ends):
        idx = list(range(len(per_ex), end))
        if eval_forward or opt is None:
            per_ex.extend(run.code(learn.model, idx))
            if opt is not None:
                run.step(learn, opt, idx, j + 1, end)
        else:
            per_ex.extend(run.step(learn, opt, idx, j + 1, end))
        if any(not math.isfinite(v) for v in per_ex[-len(idx) :]):
            raise NumericalError(f"non-finite code length at n={end} (method {cfg.label()})")
        if end in cps:
            cum[end] = math.fsum(per_ex)
            tests[end] = run.test_eval(learn.model, end)
    return _curve(run, learn, "single_pass", cum, tests, base, per_ex), learn


def _fit(run: _Run, t: int) -> Learnable:
    """A_fit(theta_0, z_1..z_t): b = min(B, t), steps = clip(epochs * ceil(t/b), min, max)."""
    cfg = run.cfg
    learn = run.fresh()
    opt = run.optimizer(learn)
    if opt is None:
        return learn
    b = min(cfg.batch_size, t)
    steps = min(max(cfg.fit_epochs * math.ceil(t / b), cfg.fit_min_steps), cfg.fit_max_steps)
    rng = random.Random(cfg.seed * 1_000_003 + t)
    order: list[int] = []
    for s in range(1, steps + 1):
        if len(order) < b:
            perm = list(range(t))
            rng.shuffle(perm)
            order.extend(perm)
        batch, order = order[:b], order[b:]
        run.step(learn, opt, batch, s, t)
    return learn


def _blockwise(run: _Run) -> tuple[EDLCurve, Learnable]:
    """Blockwise prequential code: block k coded by theta^(k) fit on the prefix z_1..z_{t_k}."""
    cfg = run.cfg
    n = len(run.enc_train)
    bounds = block_boundaries(n, cfg)
    if cfg.method == "prompt":
        warnings.warn(
            "method 'prompt' trains nothing: blockwise fit options are ignored", stacklevel=3
        )
    base_learn = run.fresh()
    base = run.test_eval(base_learn.model, 0)
    block_bits: list[float] = []
    per_ex: list[float] = []
    cum, tests = {}, {}
    learn = base_learn
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        idx = list(range(lo, hi))
        if k == 0:
            if cfg.first_block == "uniform":
                bits = [run.vocab_bits * run.enc_train[i].n_tokens for i in idx]
            else:
                bits = run.code(base_learn.model, idx)
        else:
            learn = _fit(run, lo)
            bits = run.code(learn.model, idx)
            cum[lo] = math.fsum(per_ex)
            tests[lo] = run.test_eval(learn.model, lo)
        if any(not math.isfinite(v) for v in bits):
            raise NumericalError(
                f"non-finite code length in block {k} (n={hi}, method {cfg.label()})"
            )
        per_ex.extend(bits)
        block_bits.append(math.fsum(bits))
    learn = _fit(run, n)
    cum[n] = math.fsum(per_ex)
    tests[n] = run.test_eval(learn.model, n)
    curve = _curve(
        run, learn, "blockwise", cum, tests, base, per_ex,
        block_boundaries=bounds, block_bits=block_bits,
    )  # fmt: skip
    return curve, learn


def _load(model_or_path: Any, tokenizer: Any, config: EDLConfig):
    if isinstance(model_or_path, str):
        from llmcore.models import load_causal_lm, load_tokenizer

        model = load_causal_lm(model_or_path, device=config.device or "cpu", dtype="float32")
        tok = tokenizer if tokenizer is not None and not isinstance(tokenizer, str) else None
        if tok is None:
            tok = load_tokenizer(tokenizer or model_or_path)
        return model, tok
    if tokenizer is None:
        raise EDLInputError("pass tokenizer= when compute_edl gets a model object")
    if isinstance(tokenizer, str):
        from llmcore.models import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    return model_or_path, tokenizer


def _prepare_data(model, tok, train, test, config: EDLConfig):
    check_tokenizer(model, tok)
    tr = normalize_examples(train, tok, name="train")
    te = normalize_examples(test, tok, name="test")[: config.test_size]
    n_ck = len(config.checkpoints or [])
    if config.checkpoints is not None and len(tr) < n_ck:
        raise EDLConfigError(
            f"{len(tr)} training examples are fewer than the {n_ck} requested checkpoints"
        )
    if (
        config.block_sizes is not None
        and config.mode == "blockwise"
        and len(tr) < len(config.block_sizes)
    ):
        raise EDLConfigError(
            f"{len(tr)} training examples are fewer than the {len(config.block_sizes)} blocks"
        )
    check_overlap(tr, te, config.allow_overlap)
    return tr, te


def _run_mode(run: _Run) -> tuple[EDLCurve, Learnable]:
    if run.cfg.mode == "online":
        curve, learn = _online(run)
        assert curve is not None
        return curve, learn
    if run.cfg.mode == "single_pass":
        return _single_pass(run)
    return _blockwise(run)


def compute_edl(
    model_or_path: Any,
    train: Any,
    test: Any,
    config: EDLConfig | None = None,
    tokenizer: Any = None,
    *,
    task: str | None = None,
) -> EDLCurve:
    """EDL_A(D) = sum_i [l(theta_{i-1}; z_i) - L(theta_n)] at every checkpoint, in bits.

    ``train``/``test``: prompt-completion or conversational rows, tuples, a JSONL path or a
    ``datasets.Dataset``. The caller's model is deep-copied for every fit and never changed.
    With ``config.format_control`` the same learner also runs on label-shuffled training data
    and its curve is attached as ``curve.control``."""
    import torch

    config = config or EDLConfig()
    model, tok = _load(model_or_path, tokenizer, config)
    tr, te = _prepare_data(model, tok, train, test, config)
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        curve, _ = _run_mode(_Run(model, tok, tr, te, config, task or ""))
        curve.task = task
        if config.format_control:
            ctrl, _ = _run_mode(_Run(model, tok, shuffled_labels(tr, config.seed), te, config, ""))
            ctrl.task = f"{task}:format-control" if task else "format-control"
            curve.control = ctrl
    curve.timings["total"] = time.perf_counter() - t0
    return curve


def finetune(
    model_or_path: Any,
    train: Any,
    config: EDLConfig | None = None,
    tokenizer: Any = None,
) -> Any:
    """Run the learner of ``config`` on ``train`` (no test evaluation) and return the trained
    copy (LoRA merged into the weights): e.g. to warm a base before measuring EDL."""
    import torch

    config = config or EDLConfig()
    model, tok = _load(model_or_path, tokenizer, config)
    check_tokenizer(model, tok)
    tr = normalize_examples(train, tok, name="train")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        run = _Run(model, tok, tr, tr[:1], config, "")
        if config.mode == "online":
            _, learn = _online(run, evaluate=False)
        elif config.mode == "blockwise":
            learn = _fit(run, len(tr))
        else:
            _, learn = _single_pass(run)
    out = learn.model
    if hasattr(out, "merge_and_unload"):
        out = out.merge_and_unload()
    for p in out.parameters():
        p.requires_grad_(True)
    return out.eval()


def edl_sweep(
    model: Any,
    train_pool: Any,
    test: Any,
    methods: Sequence[EDLConfig],
    ns: Sequence[int] | None = None,
    tokenizer: Any = None,
    *,
    task: str | None = None,
) -> list[EDLCurve]:
    """One curve per method on the first max(ns) pool examples, checkpoints at ``ns``."""
    model, tok = _load(model, tokenizer, methods[0] if methods else EDLConfig())
    pool = normalize_examples(train_pool, tok, name="train_pool")
    if ns:
        ns = sorted({int(x) for x in ns})
        if ns[-1] > len(pool):
            raise EDLConfigError(f"ns={ns} exceed the {len(pool)} pool examples")
        pool = pool[: ns[-1]]
    out = []
    for cfg in methods:
        d = cfg.to_dict()
        if ns:
            d["checkpoints"] = list(ns)
        out.append(compute_edl(model, pool, test, EDLConfig(**d), tok, task=task))
    return out
