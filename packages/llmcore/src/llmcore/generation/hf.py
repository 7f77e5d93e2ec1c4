"""In-process generation with a transformers causal LM (``model.generate``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmcore.errors import BackendError, ConfigError
from llmcore.generation.base import Completion, FinishReason, SamplingParams, truncate_at_stop
from llmcore.models import load_causal_lm, load_tokenizer

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase


class HFBackend:
    """Batched generation with ``transformers`` ``generate`` on one device.

    Prompts are tokenized as-is (``add_special_tokens`` left at the tokenizer's default, no chat
    template) and batched with left padding. Sampling is fully defined by :class:`SamplingParams`:
    knobs it does not expose (min-p, typical-p, n-gram blocking, beams) are reset to neutral
    values, so a checkpoint's ``generation_config.json`` only contributes its
    special-token ids (eos/pad/bos).

    Seeding: with ``params.seed`` set, one ``generate`` call runs inside ``torch.random.fork_rng``
    seeded with it, so the global RNG is left untouched and equal (prompts, params, batch_size)
    give equal outputs. A sample still depends on its batch neighbours' position in the RNG
    stream, so changing ``batch_size`` changes sampled (not greedy) outputs. Without a seed the
    global torch RNG is used (and advanced).

    Greedy decoding with ``n > 1`` decodes once and repeats the result ``n`` times.

    Shared-prefix KV reuse (``prefix_cache=True``): in each batch, the longest run of prompt
    token ids common to every prompt (at most all but the last token of the shortest one) is
    run through the model once; its KV cache is copied to every row (each of the ``n`` samples
    too) and ``generate`` continues from it. Row ``i`` is laid out as
    ``prefix + [pad] * (D - d_i) + suffix_i`` with the padding masked and positions following
    the mask, so every token sees the same context and positions as without reuse, and the
    RNG stream is consumed identically: outputs equal those without reuse (greedy and seeded
    sampling, up to float rounding of the prefill). Reuse needs a prefix of at least
    ``prefix_cache_min_tokens`` tokens and a model whose cache is a ``DynamicCache`` of
    full-attention layers; otherwise that batch runs without it. Group prompts that share a
    prefix into the same batches (``batch_size``) to benefit. :attr:`last_prefix_lengths`
    records the reused length per batch of the last call (0: no reuse).
    """

    def __init__(
        self,
        model: str | Path | PreTrainedModel,
        tokenizer: str | PreTrainedTokenizerBase | None = None,
        *,
        batch_size: int = 8,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = "auto",
        trust_remote_code: bool = False,
        progress: bool = True,
        prefix_cache: bool = False,
        prefix_cache_min_tokens: int = 8,
    ) -> None:
        """Wrap a loaded model or load one.

        Args:
            model: a loaded ``PreTrainedModel`` or a local path / Hub id (safetensors weights).
            tokenizer: a tokenizer or its path; default: loaded from the model's path.
            batch_size: prompts per ``generate`` call (each expanded to ``n`` rows when sampling).
            device: where to run; default: the loaded model's device, else cuda if available.
            dtype: weight dtype when loading from a path (``"auto"``: as saved).
            trust_remote_code: allow custom modelling code from the checkpoint (off by default).
            progress: show a tqdm bar over batches.
            prefix_cache: compute the KV cache of a batch's shared prompt prefix once and
                continue every row from a copy of it (see the class docstring).
            prefix_cache_min_tokens: shortest shared prefix (in tokens) worth reusing.
        """
        import torch
        from transformers import PreTrainedModel

        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"HFBackend batch_size={batch_size!r} is invalid: expected int >= 1")
        if not isinstance(prefix_cache, bool):
            raise ConfigError(
                f"HFBackend prefix_cache={prefix_cache!r} is invalid: expected a bool"
            )
        if (
            not isinstance(prefix_cache_min_tokens, int)
            or isinstance(prefix_cache_min_tokens, bool)
            or prefix_cache_min_tokens < 1
        ):
            raise ConfigError(
                f"HFBackend prefix_cache_min_tokens={prefix_cache_min_tokens!r} is invalid: "
                "expected an int >= 1"
            )
        if isinstance(model, PreTrainedModel):
            loaded, tok = model, tokenizer
            if tok is None:
                source = getattr(model, "name_or_path", "") or ""
                if not source:
                    raise ConfigError(
                        "HFBackend got a model object without a tokenizer and the model has no "
                        "name_or_path to load one from; pass tokenizer="
                    )
                tok = load_tokenizer(source, trust_remote_code=trust_remote_code)
        elif isinstance(model, str | Path):
            loaded = load_causal_lm(
                model, dtype=dtype, device=device, trust_remote_code=trust_remote_code
            )
            tok = (
                load_tokenizer(model, trust_remote_code=trust_remote_code)
                if tokenizer is None
                else tokenizer
            )
        else:
            raise ConfigError(
                f"HFBackend model must be a PreTrainedModel or a path, got {type(model).__name__}"
            )
        if isinstance(tok, str | Path):
            tok = load_tokenizer(tok, trust_remote_code=trust_remote_code)

        if device is None:
            if isinstance(model, PreTrainedModel):
                device = loaded.device
            else:
                device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if getattr(loaded, "hf_device_map", None) is None:
            loaded = loaded.to(self.device)
        # else: already dispatched across devices by accelerate; inputs go to `device`.
        self.model = loaded.eval()
        self.tokenizer = tok
        if self.tokenizer.pad_token_id is None:
            if self.tokenizer.eos_token is None:
                raise BackendError("the tokenizer has neither a pad nor an eos token to pad with")
            # Standard fallback for decoder-only LMs; rows are left-padded and masked anyway.
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = batch_size
        self.progress = progress
        self.prefix_cache = prefix_cache
        self.prefix_cache_min_tokens = prefix_cache_min_tokens
        #: Shared-prefix tokens reused per batch in the last ``generate`` call (0: none).
        self.last_prefix_lengths: list[int] = []
        self._stop_strings_ok: bool | None = None

    def __repr__(self) -> str:
        name = getattr(self.model, "name_or_path", "") or type(self.model).__name__
        return f"HFBackend(model={name!r}, device='{self.device}', batch_size={self.batch_size})"

    @property
    def eos_token_ids(self) -> set[int]:
        """Token ids that end a sample (model generation config, else the tokenizer's eos)."""
        eos: Any = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if eos is None:
            return set()
        return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Generate ``params.n`` completions per prompt; ``result[i][j]`` is sample j of prompt i."""
        import torch
        from tqdm import tqdm

        if isinstance(prompts, str) or not all(isinstance(p, str) for p in prompts):
            raise ConfigError("HFBackend.generate expects a list of prompt strings")
        if not prompts:
            return []
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        starts = range(0, len(prompts), self.batch_size)
        results: list[list[Completion]] = []
        self.last_prefix_lengths = []
        with torch.random.fork_rng(devices=devices, enabled=params.seed is not None):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            for start in tqdm(starts, desc="generate", unit="batch", disable=not self.progress):
                batch = prompts[start : start + self.batch_size]
                results.extend(self._generate_batch(batch, start, params))
        return results

    def generation_config(self, params: SamplingParams) -> GenerationConfig:
        """The ``transformers.GenerationConfig`` this backend uses for ``params`` (every
        sampling field explicit, so the checkpoint's own generation config cannot leak in).

        Public for callers that drive ``model.generate`` themselves (e.g. continuing from a
        ``past_key_values`` cache) and want the same sampling; pair it with :meth:`finish`."""
        from transformers import GenerationConfig

        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "do_sample": not params.greedy,
            "num_beams": 1,
            "num_return_sequences": 1 if params.greedy else params.n,
            "repetition_penalty": params.repetition_penalty,
            "no_repeat_ngram_size": 0,
            "eos_token_id": sorted(self.eos_token_ids) or None,
            "pad_token_id": self.tokenizer.pad_token_id,
            "return_dict_in_generate": True,
            "output_logits": params.logprobs,
        }
        if not params.greedy:
            # Explicit neutral values: unset (None) fields would be filled from the checkpoint's
            # generation_config (and top_k from transformers' global default of 50).
            kwargs |= {
                "temperature": params.temperature,
                "top_p": params.top_p,
                "top_k": params.top_k,
                "min_p": 0.0,
                "typical_p": 1.0,
                "epsilon_cutoff": 0.0,
                "eta_cutoff": 0.0,
            }
        if params.stop and self._native_stop_strings():
            kwargs["stop_strings"] = list(params.stop)
        return GenerationConfig(**kwargs)

    def _native_stop_strings(self) -> bool:
        """Whether transformers' ``StopStringCriteria`` accepts this tokenizer.

        It fails on word-level vocabularies (e.g. the zoo's ``word_tokenizer``), whose tokens it
        cannot map back to text; such tokenizers get :class:`_DecodedStopCriteria` instead.
        """
        if self._stop_strings_ok is None:
            from transformers.generation.stopping_criteria import StopStringCriteria

            try:
                StopStringCriteria(tokenizer=self.tokenizer, stop_strings=["\n"])
                self._stop_strings_ok = True
            except (ValueError, KeyError, IndexError):
                self._stop_strings_ok = False
        return self._stop_strings_ok

    def score(
        self, pairs: Sequence[tuple[str, str]], *, add_bos: bool | None = None
    ) -> list[list[float]]:
        """Per-token log-probs of each completion given its prompt.

        :func:`llmcore.metrics.completion_logprobs` with this backend's model, tokenizer and
        ``batch_size``: ``result[i][t]`` is ``log p(completion token t | prompt, earlier
        completion tokens)`` for ``pairs[i]``; ``sum(result[i])`` is the log-likelihood.
        """
        from llmcore.metrics import completion_logprobs

        scores = completion_logprobs(
            self.model, self.tokenizer, pairs, batch_size=self.batch_size, add_bos=add_bos
        )
        return [t.tolist() for t in scores]  # type: ignore[union-attr]

    def _shared_prefix(self, ids: list[list[int]]) -> int:
        """Length of the common token prefix of all rows, leaving each row >= 1 token to run."""
        n = min(len(x) for x in ids) - 1
        first, common = ids[0], 0
        while common < n and all(x[common] == first[common] for x in ids):
            common += 1
        return common if common >= self.prefix_cache_min_tokens else 0

    def _prefix_kv(self, ids: list[int], rows: int) -> Any:
        """KV cache of ``ids`` (one forward pass) repeated for ``rows`` rows, or ``None`` when
        the model's cache is not a ``DynamicCache`` of full-attention layers."""
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        from llmcore.metrics import _accepts_kwarg

        with torch.inference_mode():
            # Only the KV is needed: keep one position's logits when the model allows it.
            trim = {"logits_to_keep": 1} if _accepts_kwarg(self.model, "logits_to_keep") else {}
            out = self.model(
                input_ids=torch.tensor([ids], device=self.device), use_cache=True, **trim
            )
        cache = out.past_key_values
        layers = getattr(cache, "layers", None)
        if not isinstance(cache, DynamicCache) or not layers:
            return None
        if not all(type(layer) is DynamicLayer for layer in layers):
            return None
        cache.batch_repeat_interleave(rows)
        return cache

    def _encode_batch(
        self, prompts: list[str], offset: int, params: SamplingParams
    ) -> dict[str, Any]:
        """``generate`` inputs for one batch: left-padded, or (with a reusable shared prefix)
        ``prefix + pad + suffix`` rows, expanded to one row per sample, with the prefix's KV."""
        import torch

        tok = self.tokenizer
        ids: list[list[int]] = tok(prompts)["input_ids"]
        empty = [offset + i for i, x in enumerate(ids) if not x]
        if empty:
            raise ConfigError(f"prompts at indices {empty} are empty after tokenization")
        rows_per_prompt = 1 if params.greedy else params.n
        shared = self._shared_prefix(ids) if self.prefix_cache else 0
        cache = self._prefix_kv(ids[0][:shared], len(ids) * rows_per_prompt) if shared else None
        self.last_prefix_lengths.append(shared if cache is not None else 0)
        if cache is None:
            enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left")
            return {"inputs": dict(enc.to(self.device)), "expanded": False}
        pad = tok.pad_token_id
        width = max(len(x) for x in ids) - shared
        rows, mask = [], []
        for x in ids:
            d = len(x) - shared
            rows.append(x[:shared] + [pad] * (width - d) + x[shared:])
            mask.append([1] * shared + [0] * (width - d) + [1] * d)
        # Expand to one row per sample here (as generate's num_return_sequences would: samples of
        # a prompt adjacent), since generate does not expand a user-supplied cache.
        input_ids = torch.tensor(rows, device=self.device).repeat_interleave(rows_per_prompt, 0)
        attention = torch.tensor(mask, device=self.device).repeat_interleave(rows_per_prompt, 0)
        inputs = {"input_ids": input_ids, "attention_mask": attention, "past_key_values": cache}
        return {"inputs": inputs, "expanded": True}

    def _generate_batch(
        self, prompts: list[str], offset: int, params: SamplingParams
    ) -> list[list[Completion]]:
        import torch

        tok = self.tokenizer
        batch = self._encode_batch(prompts, offset, params)
        config = self.generation_config(params)
        if batch["expanded"]:
            config.num_return_sequences = 1
        inputs = batch["inputs"]
        extra: dict[str, Any] = {}
        if params.stop and self._native_stop_strings():
            extra["tokenizer"] = tok
        elif params.stop:
            from transformers import StoppingCriteriaList

            start = inputs["input_ids"].shape[1]
            extra["stopping_criteria"] = StoppingCriteriaList(
                [_DecodedStopCriteria(tok, params.stop, start)]
            )
        with torch.inference_mode():
            out = self.model.generate(**inputs, generation_config=config, **extra)
        # sequences: [rows, prompt_len + steps] with rows = len(prompts) * (1 if greedy else n),
        # the n samples of a prompt adjacent.
        generated = out.sequences[:, inputs["input_ids"].shape[1] :]
        token_lp = None
        if params.logprobs:
            # out.logits: tuple over steps of raw logits [rows, vocab]; pick the chosen token's.
            token_lp = torch.stack(
                [
                    torch.log_softmax(step.float(), dim=-1).gather(1, generated[:, t : t + 1])[:, 0]
                    for t, step in enumerate(out.logits)
                ],
                dim=1,
            ).cpu()
        rows_per_prompt = 1 if params.greedy else params.n
        grouped: list[list[Completion]] = []
        for i in range(len(prompts)):
            samples = []
            for j in range(params.n):
                row = i * rows_per_prompt + (0 if params.greedy else j)
                ids, text, reason = self.finish(generated[row].tolist(), params)
                lps = token_lp[row, : len(ids)].tolist() if token_lp is not None else None
                samples.append(Completion(offset + i, j, text, ids, lps, reason))
            grouped.append(samples)
        return grouped

    def finish(self, ids: list[int], params: SamplingParams) -> tuple[list[int], str, FinishReason]:
        """Trim one row of newly generated ids at eos / padding / stop string, as
        :meth:`generate` does; return ``(ids, text, reason)``."""
        eos = self.eos_token_ids
        pad = self.tokenizer.pad_token_id
        stopped = False
        eos_at = next((t for t, tid in enumerate(ids) if tid in eos), None)
        if eos_at is not None:
            ids, stopped = ids[: eos_at + 1], True
        elif pad is not None:
            # A row finished by a stop string is padded while its neighbours continue.
            n = len(ids)
            while ids and ids[-1] == pad:
                ids = ids[:-1]
            stopped = len(ids) < n
        decode = self.tokenizer.decode
        text = decode(ids, skip_special_tokens=True)
        if params.stop:
            text, found = truncate_at_stop(text, params.stop)
            if found:
                stopped = True
                # Smallest prefix whose text contains a stop string: the token completing it.
                lo, hi = 1, len(ids)
                while lo < hi:
                    mid = (lo + hi) // 2
                    prefix = decode(ids[:mid], skip_special_tokens=True)
                    if truncate_at_stop(prefix, params.stop)[1]:
                        hi = mid
                    else:
                        lo = mid + 1
                ids = ids[:lo]
        return ids, text, "stop" if stopped else "length"


class _DecodedStopCriteria:
    """Stops a row once its decoded continuation contains a stop string.

    The fallback for tokenizers that transformers' ``StopStringCriteria`` rejects: it decodes
    the last ``max(len(stop)) + 1`` generated tokens of every row at each step (every token
    decodes to at least one character, so a stop string completed by the newest token lies in
    that window). The text is cut at the stop string afterwards, as with native stop strings.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str], start: int) -> None:
        self.tokenizer = tokenizer
        self.stop = list(stop)
        self.start = start
        self.window = max(len(s) for s in self.stop) + 1

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        import torch

        new = input_ids[:, self.start :][:, -self.window :]
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        done = [any(s in text for s in self.stop) for text in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]
