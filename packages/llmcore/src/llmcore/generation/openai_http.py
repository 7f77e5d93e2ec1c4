"""Generation through an OpenAI-compatible HTTP server (optional extra ``openai``).

Works with vLLM's ``vllm serve``, ``transformers serve`` and the OpenAI API itself. The API key
is read from an environment variable and never appears in ``repr``, logs or error messages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llmcore.errors import BackendError, ConfigError, MissingExtraError
from llmcore.generation.base import Completion, FinishReason, SamplingParams, truncate_at_stop

#: Key sent when the named environment variable is unset (local servers ignore it).
DUMMY_API_KEY = "EMPTY"


class OpenAIBackend:
    """Client of an OpenAI-compatible ``/v1/completions`` (or ``/v1/chat/completions``) server.

    One request per prompt (``concurrency`` requests in flight). Behaviour that depends on the
    server, handled here:

    * ``n``: requested from the server; if it returns fewer choices (``transformers serve``
      ignores ``n``), further requests fill up the rest, the k-th extra request using seed
      ``seed + k`` when a seed is set. Greedy decoding (temperature 0) asks for one choice and
      repeats it ``n`` times.
    * ``stop``: sent to the server *and* applied to the returned text, since some servers
      (``transformers serve``) keep the stop string in the text.
    * ``top_k``: not part of the OpenAI API; sent as the ``top_k`` extra field only when > 0
      (vLLM accepts it; servers that do not fail with an HTTP error, raised as BackendError).
    * ``repetition_penalty``: not part of the OpenAI API; sent as the ``repetition_penalty``
      extra field (vLLM and TGI accept it) only when it is not 1.0.
    * ``logprobs``: the sampled tokens' log-probs as the server reports them (raw model
      distribution on vLLM); BackendError when the server returns none. If the server did not
      apply a stop string itself they cover the generation before client-side truncation.
    * ``token_ids`` of every :class:`Completion` are empty: the API returns text only.
    * ``finish_reason``: ``"length"`` as reported, anything else (``"stop"``, tool calls,
      content filter) becomes ``"stop"``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 2,
        chat: bool = False,
        concurrency: int = 1,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        """Create the client (no request is made).

        Args:
            base_url: server root including ``/v1``, e.g. ``http://127.0.0.1:8000/v1``.
            model: model name as the server knows it.
            api_key_env: environment variable holding the API key; ``"EMPTY"`` when unset.
            timeout: seconds per request.
            max_retries: retries of failed requests (connection errors, 429, 5xx).
            chat: use ``/v1/chat/completions`` with the prompt as one user message (the server
                applies the model's chat template) instead of raw-text ``/v1/completions``.
            concurrency: requests in flight at once.
            extra_body: extra JSON fields added to every request (server-specific options).
        """
        try:
            import openai
        except ImportError as exc:
            raise MissingExtraError("the OpenAI-compatible HTTP backend", "openai") from exc
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OpenAIBackend base_url={base_url!r} must start with http(s)://")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigError(f"OpenAIBackend concurrency={concurrency!r}: expected int >= 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.chat = chat
        self.concurrency = concurrency
        self.api_key_env = api_key_env
        self.extra_body = dict(extra_body or {})
        self._openai = openai
        # The key lives only inside the client (and here, to scrub it from error messages).
        self._api_key = os.environ.get(api_key_env) or DUMMY_API_KEY
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=self._api_key,
            timeout=timeout,
            max_retries=max_retries,
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, chat={self.chat}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Generate ``params.n`` completions per prompt; ``result[i][j]`` is sample j of prompt i."""
        if isinstance(prompts, str) or not all(isinstance(p, str) for p in prompts):
            raise ConfigError("OpenAIBackend.generate expects a list of prompt strings")
        jobs = list(enumerate(prompts))
        if self.concurrency == 1 or len(jobs) <= 1:
            return [self._samples(i, p, params) for i, p in jobs]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda job: self._samples(*job, params), jobs))

    def _samples(self, index: int, prompt: str, params: SamplingParams) -> list[Completion]:
        wanted = 1 if params.greedy else params.n
        choices: list[tuple[str, list[float] | None, str | None]] = []
        request = 0
        while len(choices) < wanted:
            seed = None if params.seed is None else params.seed + request
            got = self._request(prompt, params, wanted - len(choices), seed)
            if not got:
                raise BackendError(f"the server at {self.base_url} returned no choices")
            choices.extend(got)
            request += 1
        choices = choices[:wanted] * (params.n if params.greedy else 1)
        result = []
        for j, (raw_text, logprobs, reason) in enumerate(choices):
            text, cut = truncate_at_stop(raw_text, params.stop)
            finish: FinishReason = "length" if reason == "length" and not cut else "stop"
            result.append(Completion(index, j, text, [], logprobs, finish))
        return result

    def score(
        self, pairs: Sequence[tuple[str, str]], *, add_bos: bool | None = None
    ) -> list[list[float]]:
        """Not supported: raises :class:`BackendError`.

        The OpenAI API returns log-probs of generated tokens only (the chat API never scores
        the prompt), and servers that echo prompt log-probs tokenise prompt and completion
        together, so the scored tokens would not match the other backends'. Score with
        :class:`~llmcore.generation.hf.HFBackend` or
        :class:`~llmcore.generation.vllm_backend.VLLMBackend` instead.
        """
        raise BackendError(
            f"OpenAIBackend ({self.base_url}) cannot score completions: the OpenAI API has no "
            "prompt log-probs; use HFBackend.score or VLLMBackend.score (same tokenisation)"
        )

    def request_kwargs(self, params: SamplingParams, n: int, seed: int | None) -> dict[str, Any]:
        """Keyword arguments of one ``completions.create`` / ``chat.completions.create`` call
        (without ``prompt`` / ``messages``) asking for ``n`` choices with ``seed``."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if n > 1:
            kwargs["n"] = n
        if seed is not None:
            kwargs["seed"] = seed
        if params.stop:
            kwargs["stop"] = list(params.stop)
        extra_body = dict(self.extra_body)
        if params.top_k > 0:
            extra_body["top_k"] = params.top_k
        if params.repetition_penalty != 1.0:
            extra_body["repetition_penalty"] = params.repetition_penalty
        if extra_body:
            kwargs["extra_body"] = extra_body
        if params.logprobs:
            kwargs["logprobs"] = True if self.chat else 1
        return kwargs

    def _request(
        self, prompt: str, params: SamplingParams, n: int, seed: int | None
    ) -> list[tuple[str, list[float] | None, str | None]]:
        """One API call; returns (text, logprobs, finish_reason) per choice, in choice order."""
        kwargs = self.request_kwargs(params, n, seed)
        try:
            if self.chat:
                messages = [{"role": "user", "content": prompt}]
                resp = self._client.chat.completions.create(messages=messages, **kwargs)
            else:
                resp = self._client.completions.create(prompt=prompt, **kwargs)
        except self._openai.APIConnectionError as exc:
            raise self._error(f"could not reach the server at {self.base_url}: {exc}") from None
        except self._openai.APIStatusError as exc:
            detail = exc.body if exc.body is not None else exc.message
            raise self._error(
                f"the server at {self.base_url} answered HTTP {exc.status_code}: {detail}"
            ) from None
        except self._openai.OpenAIError as exc:
            raise self._error(f"request to {self.base_url} failed: {exc}") from None
        out = []
        for choice in sorted(resp.choices, key=lambda c: c.index):
            if self.chat:
                text = choice.message.content or ""
                content = choice.logprobs.content if choice.logprobs is not None else None
                logprobs = [float(t.logprob) for t in content] if content is not None else None
            else:
                text = choice.text
                lp = choice.logprobs.token_logprobs if choice.logprobs is not None else None
                logprobs = [float(x) for x in lp if x is not None] if lp is not None else None
            if params.logprobs and logprobs is None:
                raise BackendError(
                    f"the server at {self.base_url} returned no logprobs although they were "
                    "requested (transformers serve does not support them)"
                )
            out.append((text, logprobs if params.logprobs else None, choice.finish_reason))
        return out

    def _error(self, message: str) -> BackendError:
        """A BackendError whose message cannot leak the API key."""
        if self._api_key != DUMMY_API_KEY:
            message = message.replace(self._api_key, "***")
        return BackendError(message)
