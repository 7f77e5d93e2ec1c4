"""Offline generation with vLLM (optional extra ``vllm``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmcore.errors import BackendError, ConfigError, MissingExtraError
from llmcore.generation.base import Completion, SamplingParams


def vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` equivalent to ``params``.

    ``top_k`` 0 (off) becomes -1, vLLM's "consider all tokens"; ``logprobs=True`` becomes
    ``logprobs=0``, which makes vLLM return only the sampled token's log-prob (raw model
    distribution under vLLM's default ``logprobs_mode``). ``repetition_penalty`` has the same
    (CTRL, Keskar et al. 2019) meaning in vLLM and transformers.
    """
    return {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "max_tokens": params.max_new_tokens,
        "seed": params.seed,
        "stop": list(params.stop),
        "logprobs": 0 if params.logprobs else None,
        "repetition_penalty": params.repetition_penalty,
    }


def logprobs_from_prompt_output(
    output: Any, context_len: int, target: Sequence[int]
) -> list[float]:
    """The log-probs of the last ``len(target)`` prompt tokens from one ``vllm.RequestOutput``.

    ``output.prompt_logprobs`` (requested with ``prompt_logprobs=0``) holds one entry per prompt
    token: ``None`` for the first token (nothing predicts it), else a mapping
    ``{token_id: Logprob}`` that always contains the actual prompt token (plus the top-k
    alternatives when k > 0). The prompt was ``context + target`` token ids with
    ``len(context) == context_len``, so the completion's entries are ``[context_len:]``.
    """
    entries = getattr(output, "prompt_logprobs", None)
    if entries is None:
        raise BackendError("vLLM returned no prompt_logprobs although they were requested")
    entries = list(entries)
    if len(entries) != context_len + len(target):
        raise BackendError(
            f"vLLM returned {len(entries)} prompt log-probs for a prompt of "
            f"{context_len + len(target)} tokens"
        )
    if context_len < 1:
        raise BackendError("the scored context must hold at least one token")
    result = []
    for pos, tok in zip(entries[context_len:], target, strict=True):
        entry = None if pos is None else pos.get(int(tok))
        if entry is None:
            raise BackendError(f"vLLM's prompt log-probs lack the prompt token {tok}")
        result.append(float(getattr(entry, "logprob", entry)))
    return result


def completions_from_request_output(
    prompt_index: int, output: Any, params: SamplingParams
) -> list[Completion]:
    """Convert one ``vllm.RequestOutput`` into :class:`Completion` objects ordered by index."""
    samples = sorted(output.outputs, key=lambda o: o.index)
    if len(samples) != params.n:
        raise BackendError(
            f"vLLM returned {len(samples)} samples for prompt {prompt_index}, expected {params.n}"
        )
    result = []
    for j, sample in enumerate(samples):
        if sample.finish_reason not in ("stop", "length"):
            raise BackendError(
                f"vLLM sample {j} of prompt {prompt_index} ended with "
                f"finish_reason={sample.finish_reason!r}"
            )
        token_ids = [int(t) for t in sample.token_ids]
        logprobs = None
        if params.logprobs:
            if sample.logprobs is None:
                raise BackendError("vLLM returned no logprobs although they were requested")
            # sample.logprobs: one {token_id: Logprob} dict per generated position.
            positions = zip(sample.logprobs, token_ids, strict=True)
            logprobs = [float(pos[t].logprob) for pos, t in positions]
        result.append(
            Completion(
                prompt_index=prompt_index,
                sample_index=j,
                text=sample.text,
                token_ids=token_ids,
                logprobs=logprobs,
                finish_reason=sample.finish_reason,
            )
        )
    return result


class VLLMBackend:
    """Generation with ``vllm.LLM`` (one engine per backend; prompts are sent as raw text).

    vLLM excludes stop strings from the text (as :class:`SamplingParams` specifies) and reports
    log-probs from the raw model distribution by default, matching the other backends.
    """

    def __init__(self, model: str, *, progress: bool = True, **engine_kwargs: Any) -> None:
        """Start a vLLM engine.

        Args:
            model: model name or path.
            progress: show vLLM's progress bar.
            **engine_kwargs: passed to ``vllm.LLM`` (e.g. ``dtype``, ``tensor_parallel_size``,
                ``gpu_memory_utilization``); ``trust_remote_code`` stays vLLM's default (False)
                unless given.
        """
        try:
            import vllm
        except ImportError as exc:
            raise MissingExtraError("the vLLM backend", "vllm") from exc
        self.model_name = model
        self.progress = progress
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, **engine_kwargs)

    def __repr__(self) -> str:
        return f"VLLMBackend(model={self.model_name!r})"

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Generate ``params.n`` completions per prompt; ``result[i][j]`` is sample j of prompt i."""
        if isinstance(prompts, str) or not all(isinstance(p, str) for p in prompts):
            raise ConfigError("VLLMBackend.generate expects a list of prompt strings")
        if not prompts:
            return []
        sampling = self._vllm.SamplingParams(**vllm_sampling_kwargs(params))
        outputs = self.llm.generate(prompts, sampling, use_tqdm=self.progress)
        # LLM.generate returns outputs in prompt order.
        return [completions_from_request_output(i, out, params) for i, out in enumerate(outputs)]

    def score(
        self,
        pairs: Sequence[tuple[str, str]],
        *,
        add_bos: bool | None = None,
    ) -> list[list[float]]:
        """Per-token log-probs of each completion given its prompt (see :meth:`HFBackend.score`).

        Tokenised exactly as :func:`llmcore.metrics.completion_token_ids` (with vLLM's tokenizer)
        and sent as token ids, so the scored tokens match the HF backend's; the log-probs are
        vLLM's prompt log-probs (``prompt_logprobs=0``, one throw-away generated token).
        """
        from llmcore.metrics import completion_token_ids

        encoded = completion_token_ids(self.llm.get_tokenizer(), pairs, add_bos=add_bos)
        if not encoded:
            return []
        sampling = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        prompts = [{"prompt_token_ids": ctx + tgt} for ctx, tgt in encoded]
        outputs = self.llm.generate(prompts, sampling, use_tqdm=self.progress)
        return [
            logprobs_from_prompt_output(out, len(ctx), tgt)
            for out, (ctx, tgt) in zip(outputs, encoded, strict=True)
        ]
