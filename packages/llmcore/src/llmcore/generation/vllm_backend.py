"""Offline generation with vLLM (optional extra ``vllm``)."""

from __future__ import annotations

from typing import Any

from llmcore.errors import BackendError, ConfigError, MissingExtraError
from llmcore.generation.base import Completion, SamplingParams


def vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` equivalent to ``params``.

    ``top_k`` 0 (off) becomes -1, vLLM's "consider all tokens"; ``logprobs=True`` becomes
    ``logprobs=0``, which makes vLLM return only the sampled token's log-prob (raw model
    distribution under vLLM's default ``logprobs_mode``).
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
    }


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
