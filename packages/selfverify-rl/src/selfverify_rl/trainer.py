"""GRPO on generation, on self-verification, or both (alternating / stage-wise / mixed).

:class:`SelfVerifyGRPOTrainer` subclasses trl's ``GRPOTrainer`` and overrides only
``_generate_and_score_completions``: on a verification round the incoming generation rows
(P prompts x G repeats) are replaced by verification samples built from the policy's own
rollouts (Sec. 2.2 builder), each repeated G times, so every GRPO group stays single-task and the
two reward functions (``None`` on the other task's rows) score them. Modes (Sec. 2.4):

* ``gen``: GRPO on generation only;
* ``verify``: each step samples generation rollouts from the current policy without gradient,
  builds the balanced verification batch and updates on verification only;
* ``alternate``: ``verification_interval`` generation rounds (their verification samples go to a
  buffer), then ``verification_looplen`` verification rounds on buffer chunks, then the buffer is
  flushed (verification data is up to ``interval`` steps stale, as in the paper);
* ``stagewise``: ``verify`` for ``stagewise_verify_steps`` steps, then ``gen``;
* ``mixed`` (RISE-style, beyond the paper): every batch replaces a fraction of its prompt groups
  with verification groups drawn from the buffer.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trl import GRPOConfig, GRPOTrainer

from selfverify_rl.errors import SelfVerifyConfigError, UnsupportedTRLError
from selfverify_rl.prompts import generation_prompt
from selfverify_rl.rewards import make_reward_funcs, parse_verdict, score_generation
from selfverify_rl.sampling import (
    VERIFICATION_MODES,
    Rollout,
    VerificationBuffer,
    VerificationSample,
    build_verification_samples,
)
from selfverify_rl.tasks import check_rows

__all__ = [
    "MODES",
    "SUPPORTED_TRL",
    "RoundSchedule",
    "SelfVerifyConfig",
    "SelfVerifyGRPOTrainer",
    "check_trl",
    "cpu_config",
    "make_train_dataset",
    "row_schema",
]

log = logging.getLogger(__name__)

MODES = ("gen", "verify", "alternate", "stagewise", "mixed")
SUPPORTED_TRL = ">=1.16,<2"
ROW_KEYS = ("prompt", "task", "question", "answer", "label", "pass_rate", "problem_id")


def check_trl(grpo_cls: type | None = None, version: str | None = None) -> None:
    """Fail with the supported range when trl lacks the hook this trainer overrides
    (``GRPOTrainer._generate_and_score_completions(self, inputs)``) or is outside it."""
    import trl

    cls = grpo_cls or GRPOTrainer
    ver = version or trl.__version__
    major_minor = tuple(int(x) for x in ver.split(".")[:2] if x.isdigit())
    hook = getattr(cls, "_generate_and_score_completions", None)
    params = list(inspect.signature(hook).parameters) if hook is not None else []
    if hook is None or params != ["self", "inputs"] or not (1, 16) <= major_minor < (2, 0):
        raise UnsupportedTRLError(
            f"trl {ver}: SelfVerifyGRPOTrainer overrides GRPOTrainer._generate_and_score_completions"
            f"(self, inputs), found {params or 'no such method'}; install trl{SUPPORTED_TRL} "
            f"(pip install 'trl{SUPPORTED_TRL}')"
        )


@dataclass
class SelfVerifyConfig(GRPOConfig):
    """trl's ``GRPOConfig`` plus the self-verification schedule (Sec. 2.4 of the method)."""

    mode: str = field(default="alternate", metadata={"help": f"Training mode, one of {MODES}."})
    verification_interval: int = field(
        default=5,
        metadata={"help": "alternate/mixed: generation rounds between verification rounds."},
    )
    verification_looplen: int = field(
        default=1, metadata={"help": "alternate: verification rounds per verification phase."}
    )
    verification_mode: str = field(
        default="judge_answer",
        metadata={"help": "judge_answer (only the final answer shown) or judge_response."},
    )
    pass_rate_weighting: bool = field(
        default=True,
        metadata={"help": "Multiply the verification reward by min(pass_rate, 0.5)."},
    )
    mixed_verification_fraction: float = field(
        default=0.25, metadata={"help": "mixed: fraction of prompt groups that are verification."}
    )
    stagewise_verify_steps: int | None = field(
        default=None,
        metadata={"help": "stagewise: verification steps before switching to gen (default half)."},
    )
    prompt_style: str = field(default="plain", metadata={"help": "plain or chat prompts."})
    max_prompt_tokens: int | None = field(
        default=None,
        metadata={"help": "Verification prompts longer than this lose candidate text on the left."},
    )
    overlong_buffer: int = field(
        default=0, metadata={"help": "DAPO overlong-penalty buffer in tokens (0 = off)."}
    )
    overlong_factor: float = field(default=1.0, metadata={"help": "DAPO overlong-penalty factor."})
    use_math_verify: bool = field(
        default=False, metadata={"help": "Grade generation with math_equivalent (real math)."}
    )

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SelfVerifyConfigError(f"mode={self.mode!r}: use one of {MODES}")
        if self.verification_mode not in VERIFICATION_MODES:
            raise SelfVerifyConfigError(
                f"verification_mode={self.verification_mode!r}: use one of {VERIFICATION_MODES}"
            )
        for name in ("verification_interval", "verification_looplen"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise SelfVerifyConfigError(f"{name}={v!r}: must be an int >= 1")
        if not 0.0 < self.mixed_verification_fraction < 1.0:
            raise SelfVerifyConfigError(
                f"mixed_verification_fraction={self.mixed_verification_fraction}: need 0 < f < 1"
            )
        if self.prompt_style not in ("plain", "chat"):
            raise SelfVerifyConfigError(f"prompt_style={self.prompt_style!r}: use plain or chat")
        if self.num_generations is not None and self.num_generations < 2:
            raise SelfVerifyConfigError(
                f"num_generations={self.num_generations}: GRPO needs >= 2 completions per prompt"
            )
        if self.bf16 or self.fp16:
            import torch

            if self.use_cpu or not torch.cuda.is_available():
                raise SelfVerifyConfigError(
                    f"bf16={self.bf16}, fp16={self.fp16} on CPU: train with use_cpu=True, "
                    "bf16=False, fp16=False (fp32) on CPU"
                )
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if self.num_generations and batch % self.num_generations:
            raise SelfVerifyConfigError(
                f"num_generations={self.num_generations} does not divide the generation batch "
                f"{batch} (per_device_train_batch_size * gradient_accumulation_steps); make the "
                "batch a multiple of num_generations"
            )
        super().__post_init__()


def cpu_config(output_dir: str | None = None, **overrides: Any) -> SelfVerifyConfig:
    """A :class:`SelfVerifyConfig` on :func:`llmcore.rl.cpu_grpo_config`'s CPU defaults (fp32,
    nothing saved or reported), checked by it first; ``overrides`` set any field."""
    from llmcore import rl

    ours = {f.name for f in dataclasses.fields(SelfVerifyConfig)} - {
        f.name for f in dataclasses.fields(GRPOConfig)
    }
    mine = {k: v for k, v in overrides.items() if k in ours}
    grpo = {k: v for k, v in overrides.items() if k not in ours}
    for k in ("bf16", "fp16"):
        if grpo.get(k):
            raise SelfVerifyConfigError(
                f"{k}=True on CPU: train with use_cpu=True, bf16=False, fp16=False (fp32)"
            )
    base = rl.cpu_grpo_config(output_dir, **grpo)
    kw = {**rl.CPU_GRPO_DEFAULTS, **grpo}
    return SelfVerifyConfig(output_dir=base.output_dir, **kw, **mine)


def row_schema(**values: Any) -> dict[str, Any]:
    """One row of the shared schema (``prompt, task, question, answer, label, pass_rate,
    problem_id``); unset keys are ``None``."""
    return {k: values.get(k) for k in ROW_KEYS}


def make_train_dataset(
    rows: Sequence[dict[str, Any]],
    *,
    style: Literal["plain", "chat"] = "plain",
    tokenizer: Any = None,
    prefix: str = "",
):
    """Generation rows in the shared schema as a ``datasets.Dataset`` (``prefix`` is prepended
    to every prompt, e.g. a tiny model's BOS token)."""
    from datasets import Dataset

    rows = check_rows(rows, where="train data")
    out = [
        row_schema(
            prompt=prefix + generation_prompt(r["question"], style, tokenizer),
            task="gen",
            question=r["question"],
            answer=r["answer"],
            problem_id=r["problem_id"],
        )
        for r in rows
    ]
    return Dataset.from_list(out)


@dataclass
class RoundSchedule:
    """Which task a training round trains, per mode (``alternate``: ``interval`` generation
    rounds, then ``looplen`` verification rounds, then the buffer is flushed)."""

    mode: str
    interval: int = 5
    looplen: int = 1
    stagewise_verify_steps: int = 0

    def kind(self, step: int) -> Literal["gen", "verify", "mixed"]:
        if self.mode == "gen":
            return "gen"
        if self.mode == "verify":
            return "verify"
        if self.mode == "stagewise":
            return "verify" if step < self.stagewise_verify_steps else "gen"
        if self.mode == "mixed":
            return "mixed"
        pos = step % (self.interval + self.looplen)
        return "verify" if pos >= self.interval else "gen"

    def flush_after(self, step: int) -> bool:
        """True after the last verification round of a phase (``alternate``)."""
        return self.mode == "alternate" and (step % (self.interval + self.looplen)) == (
            self.interval + self.looplen - 1
        )


class SelfVerifyGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose rounds train generation, verification, or both (see module doc).

    ``reward_funcs`` default to :func:`selfverify_rl.rewards.make_reward_funcs` built from the
    config. ``round_log`` lists ``(step, kind, buffer_size_after)``; ``phase_seconds`` the wall
    time per phase (``sample_candidates``, ``verify_round``, ``gen_round``).
    """

    def __init__(self, *args: Any, reward_funcs: Any = None, **kwargs: Any) -> None:
        check_trl()
        cfg = kwargs.get("args") or (args[1] if len(args) > 1 else None)
        if not isinstance(cfg, SelfVerifyConfig):
            raise SelfVerifyConfigError("SelfVerifyGRPOTrainer needs args=SelfVerifyConfig(...)")
        if reward_funcs is None:
            reward_funcs = make_reward_funcs(
                max_completion_length=cfg.max_completion_length,
                overlong_buffer=cfg.overlong_buffer,
                overlong_factor=cfg.overlong_factor,
                pass_rate_weighting=cfg.pass_rate_weighting,
                use_math_verify=cfg.use_math_verify,
            )
        super().__init__(*args, reward_funcs=reward_funcs, **kwargs)
        steps = cfg.stagewise_verify_steps
        if steps is None:
            steps = max(cfg.max_steps, 0) // 2
        self.schedule = RoundSchedule(
            cfg.mode, cfg.verification_interval, cfg.verification_looplen, steps
        )
        self.buffer = VerificationBuffer()
        self.round_log: list[tuple[int, str, int]] = []
        self.phase_seconds: dict[str, float] = defaultdict(float)
        self._sv_round = 0
        self._last_samples: list[VerificationSample] = []

    # -- helpers -----------------------------------------------------------------------------
    @property
    def _cfg(self) -> SelfVerifyConfig:
        return self.args  # type: ignore[return-value]

    def _rng(self) -> random.Random:
        return random.Random(self.args.seed * 1_000_003 + self._sv_round)

    def _metric(self, name: str, value: float) -> None:
        self._metrics["train"][name].append(float(value))

    def _decode(self, output: dict[str, Any], rows: range | None = None) -> list[str]:
        ids, mask = output["completion_ids"], output["completion_mask"]
        idx = list(rows) if rows is not None else range(ids.size(0))
        return [
            self.processing_class.decode(ids[i][mask[i].bool()].tolist(), skip_special_tokens=True)
            for i in idx
        ]

    def _rollouts(self, rows: Sequence[dict[str, Any]], texts: Sequence[str]) -> list[Rollout]:
        out = []
        for r, t in zip(rows, texts, strict=True):
            rew, valid, _ = score_generation(
                t, r["answer"], use_math_verify=self._cfg.use_math_verify
            )
            out.append(Rollout(str(r["problem_id"]), str(r["question"]), t, rew, valid))
        return out

    def _build(self, rollouts: list[Rollout]) -> list[VerificationSample]:
        cfg = self._cfg
        samples = build_verification_samples(
            rollouts,
            self.num_generations,
            cfg.verification_mode,
            self._rng(),
            style=cfg.prompt_style,  # type: ignore[arg-type]
            tokenizer=self.processing_class if cfg.max_prompt_tokens else None,
            max_prompt_tokens=cfg.max_prompt_tokens,
        )
        st = samples.stats
        self._metric("verify/all_wrong_rate", st.all_wrong_rate)
        self._metric("verify/all_right_rate", st.all_right_rate)
        if samples:
            self._metric("verify/label_balance", st.n_yes / len(samples))
        if st.n_truncated:
            self._metric("verify/truncated", st.n_truncated)
        return list(samples)

    def _prefix(self, rows: Sequence[dict[str, Any]]) -> str:
        """The text before the generation prompt in these rows (e.g. a BOS token)."""
        r = rows[0]
        p = generation_prompt(r["question"], self._cfg.prompt_style, self.processing_class)  # type: ignore[arg-type]
        return r["prompt"][: -len(p)] if r["prompt"].endswith(p) else ""

    def _verify_rows(
        self, samples: Sequence[VerificationSample], prefix: str
    ) -> list[dict[str, Any]]:
        g = self.num_generations
        return [
            row_schema(
                prompt=prefix + s.prompt,
                task="verify",
                question=s.question,
                label=s.label,
                pass_rate=s.pass_rate,
                problem_id=s.problem_id,
            )
            for s in samples
            for _ in range(g)
        ]

    def _log_task_stats(self, output: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
        texts = self._decode(output)
        g = self.num_generations
        zero = {"gen": [], "verify": []}  # type: dict[str, list[float]]
        correct, yes, yes_on = [], [], {"Yes": [], "No": []}  # type: ignore[var-annotated]
        verdict_only = []
        for start in range(0, len(rows), g):
            grp = rows[start : start + g]
            kind = grp[0]["task"]
            if kind == "gen":
                rs = [
                    score_generation(t, r["answer"])[0]
                    for t, r in zip(texts[start : start + g], grp, strict=True)
                ]
            else:
                rs = []
                for t, r in zip(texts[start : start + g], grp, strict=True):
                    v = parse_verdict(t)
                    rs.append(float(v == r["label"]))
                    correct.append(rs[-1])
                    yes.append(float(v == "Yes"))
                    yes_on[r["label"]].append(float(v == "Yes"))
                    verdict_only.append(float(t.lstrip().startswith("\\boxed")))
            zero.setdefault(kind, []).append(float(max(rs) == min(rs)))
        for kind, vals in zero.items():
            if vals:
                self._metric(f"{kind}/frac_reward_zero_std", sum(vals) / len(vals))
        if correct:
            self._metric("verify/acc", sum(correct) / len(correct))
            self._metric("verify/yes_rate", sum(yes) / len(yes))
            self._metric("verify/verdict_only_rate", sum(verdict_only) / len(verdict_only))
            for lab, vals in yes_on.items():
                if vals:
                    self._metric(f"verify/yes_rate_label_{lab.lower()}", sum(vals) / len(vals))

    def _sample_rollouts(self, rows: Sequence[dict[str, Any]]) -> list[Rollout]:
        """Generation rollouts of ``rows`` from the current policy, without gradient and without
        touching trl's logged completion metrics."""
        import torch

        saved = {k: len(v) for k, v in self._metrics["train"].items()}
        tokens = self.state.num_input_tokens_seen
        t0 = time.perf_counter()
        with torch.no_grad():
            texts = self._generate([r["prompt"] for r in rows])[3]
        self.phase_seconds["sample_candidates"] += time.perf_counter() - t0
        for k in list(self._metrics["train"]):
            n = saved.get(k, 0)
            if n:
                del self._metrics["train"][k][n:]
            else:
                del self._metrics["train"][k]
        self.state.num_input_tokens_seen = tokens
        from selfverify_rl.rewards import _text

        return self._rollouts(rows, [_text(t) for t in texts])

    def _run(self, rows: list[dict[str, Any]], phase: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        out = super()._generate_and_score_completions(rows)
        self.phase_seconds[phase] += time.perf_counter() - t0
        self._log_task_stats(out, rows)
        return out

    # -- the one override -----------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        step = self._sv_round
        kind = self.schedule.kind(step)
        g = self.num_generations
        n_prompts = len(inputs) // g
        prefix = self._prefix(inputs)
        if kind == "verify" and self.schedule.mode in ("verify", "stagewise"):
            samples = self._build(self._sample_rollouts(inputs))[:n_prompts]
            if samples:
                self._last_samples = samples
            elif self._last_samples:
                log.warning("step %d: no verification candidates; reusing last step's", step)
                samples = self._last_samples
            if samples:
                out = self._run(self._verify_rows(samples, prefix), "verify_round")
            else:
                log.warning("step %d: no verification candidates yet; generation round", step)
                kind = "gen"
        elif kind == "verify":  # alternate: train on buffer chunks
            if len(self.buffer) == 0:
                log.warning("step %d: verification round with an empty buffer skipped", step)
                kind = "gen"
            else:
                self.buffer.shuffle(self._rng())
                target = min(n_prompts, len(self.buffer))
                out = self._run(
                    self._verify_rows(self.buffer.chunk(target), prefix), "verify_round"
                )
        elif kind == "mixed":
            want = max(1, round(self._cfg.mixed_verification_fraction * n_prompts))
            self.buffer.shuffle(self._rng())
            ver = self.buffer.chunk(min(want, len(self.buffer))) if len(self.buffer) else []
            n_gen = n_prompts - len(ver)
            rows = list(inputs[: n_gen * g]) + self._verify_rows(ver, prefix)
            out = self._run(rows, "gen_round")
            texts = self._decode(out, range(n_gen * g))
            self.buffer.append(self._build(self._rollouts(rows[: n_gen * g], texts)))
            self.buffer.items = self.buffer.items[-4 * n_prompts :]
        if kind == "gen":
            out = self._run(list(inputs), "gen_round")
            if self.schedule.mode == "alternate":
                self.buffer.append(self._build(self._rollouts(inputs, self._decode(out))))
        if self.schedule.flush_after(step) and kind == "verify":
            dropped = self.buffer.flush()
            self._metric("verify/flushed", dropped)
        self._metric("verify/buffer_size", len(self.buffer))
        self.round_log.append((step, kind, len(self.buffer)))
        self._sv_round += 1
        return out
