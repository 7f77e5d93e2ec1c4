"""Chat backends with assistant prefill, built on llmcore.

Every backend offers ``chat(messages)`` and ``continue_assistant(messages, prefix, stop)``:
continue the assistant turn from the raw text ``prefix`` (no end-of-turn token after it), with
``stop`` strings excluded from the output. The ``*_many`` variants batch (HF) or run concurrently
(HTTP). ``calls`` counts model calls (one per conversation per call), so call budgets of the TTD
methods are measured on the real backend.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spec_align.errors import BackendCapabilityError, SpecBackendError, SpecConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Messages = list[dict[str, str]]
BACKEND_PREFIXES = ("hf:", "openai:", "vllm:", "tiny")


@dataclass
class Completion:
    """One model reply (``text`` excludes any stop string).

    ``prompt_tokens`` is the length of the whole prompt; ``prefill_tokens`` the prompt tokens the
    model actually ran in prefill (fewer when a cached KV prefix was reused; ``None``: all).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    prefill_tokens: int | None = None

    @property
    def prefilled(self) -> int:
        """Prompt tokens processed in prefill (``prompt_tokens`` unless a prefix was reused)."""
        return self.prompt_tokens if self.prefill_tokens is None else self.prefill_tokens


@dataclass(frozen=True)
class GenParams:
    """Decoding parameters shared by every backend (temperature 0 = greedy)."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = 0
    repetition_penalty: float = 1.0
    """CTRL repetition penalty (1 disables it); HTTP servers get vLLM's extra field."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise SpecConfigError(f"max_new_tokens={self.max_new_tokens} must be >= 1")
        if self.temperature < 0:
            raise SpecConfigError(f"temperature={self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise SpecConfigError(f"top_p={self.top_p} must be in (0, 1]")
        if not self.repetition_penalty > 0:
            raise SpecConfigError(f"repetition_penalty={self.repetition_penalty} must be > 0")


class Backend(ABC):
    """A chat model that can also continue a prefilled assistant turn."""

    name: str = "backend"

    def __init__(self, **default_gen: Any) -> None:
        self.default_gen = GenParams(**default_gen)
        self.calls = 0
        self._lock = threading.Lock()

    def _params(self, gen: dict[str, Any]) -> GenParams:
        return replace(self.default_gen, **gen) if gen else self.default_gen

    def _count(self, n: int) -> None:
        with self._lock:
            self.calls += n

    def chat(self, messages: Messages, **gen: Any) -> Completion:
        """One assistant reply to ``messages``."""
        return self.chat_many([messages], **gen)[0]

    def continue_assistant(
        self, messages: Messages, prefix: str, stop: list[str] | None = None, **gen: Any
    ) -> Completion:
        """Continue the assistant turn that starts with the raw text ``prefix``."""
        return self.continue_many([messages], [prefix], stop, **gen)[0]

    def chat_many(self, batch: list[Messages], **gen: Any) -> list[Completion]:
        self._count(len(batch))
        return self._chat_many(batch, self._params(gen))

    def continue_many(
        self,
        batch: list[Messages],
        prefixes: list[str],
        stop: list[str] | None = None,
        **gen: Any,
    ) -> list[Completion]:
        if len(batch) != len(prefixes):
            raise SpecConfigError(f"{len(batch)} conversations but {len(prefixes)} prefixes")
        self._count(len(batch))
        return self._continue_many(batch, prefixes, list(stop or []), self._params(gen))

    def release(self, batch: list[Messages]) -> None:
        """Forget any per-conversation state kept for ``batch`` (a finished item); no-op here."""
        del batch

    @abstractmethod
    def _chat_many(self, batch: list[Messages], p: GenParams) -> list[Completion]: ...

    @abstractmethod
    def _continue_many(
        self, batch: list[Messages], prefixes: list[str], stop: list[str], p: GenParams
    ) -> list[Completion]: ...


def _strip_empty_think(rendered: str) -> str:
    """Drop the empty think block some templates (Qwen3, thinking off) append to the prompt."""
    for block in ("<think>\n\n</think>\n\n", "<think>\n</think>\n\n", "<think></think>"):
        if rendered.endswith(block):
            return rendered[: -len(block)]
    return rendered


def _plain_dynamic(cache: Any) -> bool:
    """A ``DynamicCache`` of full-attention layers only (so ``crop`` is exact)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class HFBackend(Backend):
    """In-process transformers model via :class:`llmcore.generation.HFBackend` (batched)."""

    name = "hf"

    def __init__(
        self,
        model: str | Path | PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase | str | None = None,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        batch_size: int = 16,
        prepend_bos: bool = False,
        system_prompt: str | None = None,
        prefix_cache: bool = True,
        prefix_cache_size: int = 64,
        **default_gen: Any,
    ) -> None:
        """``prepend_bos``: put the tokenizer's bos before the rendered chat (for templates that
        do not add it themselves, like the llmcore zoo template).

        ``prefix_cache``: keep, per conversation, the KV cache (``DynamicCache``) of the last
        prompt + completion of a ``continue_*`` call; a later continuation whose token ids
        start with it (Align3 stages 2-3, MoreThink's ``Wait,`` rounds) runs the model on the
        uncached suffix only (``Completion.prefill_tokens``). Continuations stay batched
        (``batch_size``): each row is its cached prefix and its new tokens, padding masked, so
        greedy outputs equal those without reuse (tested token for token). At most
        ``prefix_cache_size`` conversations are kept (least recently used dropped first; each
        holds ``prompt + completion`` tokens of KV on ``device``); methods call
        :meth:`release` when an item is finished. ``chat`` calls never use it.
        """
        from llmcore.generation.hf import HFBackend as CoreHF

        super().__init__(**default_gen)
        # llmcore's shared-prefix reuse (a batch's common prompt prefix prefilled once) serves
        # chat calls; the per-conversation reuse across calls below is this package's own.
        self.core = CoreHF(
            model,
            tokenizer,
            batch_size=batch_size,
            device=device,
            dtype=dtype or "auto",
            progress=False,
            prefix_cache=bool(prefix_cache),
        )
        self.tokenizer = self.core.tokenizer
        self.prepend_bos = prepend_bos
        self.system_prompt = system_prompt
        if not isinstance(prefix_cache_size, int) or prefix_cache_size < 1:
            raise SpecConfigError(f"prefix_cache_size={prefix_cache_size!r} must be an int >= 1")
        self.prefix_cache = prefix_cache
        self.prefix_cache_size = prefix_cache_size
        # serial -> (rendered conversation, token ids whose KV is in the cache, DynamicCache);
        # a conversation may have several entries (the same prompt twice in a batch).
        self._kv: OrderedDict[int, tuple[str, list[int], Any]] = OrderedDict()
        self._serial = 0
        self.name = f"hf:{getattr(self.core.model, 'name_or_path', '') or 'model'}"

    def render(self, messages: Messages, prefix: str | None = None) -> str:
        """The prompt text: chat template with generation prompt (+ raw assistant prefix)."""
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            raise BackendCapabilityError(
                f"{self.name}: the tokenizer has no chat template, so neither chat nor an "
                "assistant prefill can be rendered; set tokenizer.chat_template or use a chat model"
            )
        if self.system_prompt and (not messages or messages[0]["role"] != "system"):
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        if prefix is not None:
            text = _strip_empty_think(text) + prefix
        if self.prepend_bos and tok.bos_token and not text.startswith(tok.bos_token):
            text = tok.bos_token + text
        return text

    @staticmethod
    def _sampling(stop: list[str], p: GenParams) -> Any:
        from llmcore.generation import SamplingParams

        return SamplingParams(
            temperature=p.temperature,
            top_p=p.top_p,
            top_k=p.top_k,
            max_new_tokens=p.max_new_tokens,
            seed=p.seed,
            stop=stop,
            repetition_penalty=p.repetition_penalty,
        )

    def _run(self, prompts: list[str], stop: list[str], p: GenParams) -> list[Completion]:
        """Plain batched generation through llmcore (with its shared-prefix reuse when on)."""
        core = self.core
        outs = core.generate(prompts, self._sampling(stop, p))
        n_prompt = [len(x) for x in self.tokenizer(prompts, add_special_tokens=False)["input_ids"]]
        shared = core.last_prefix_lengths or [0] * len(range(0, len(prompts), core.batch_size))
        return [
            Completion(
                o[0].text,
                n,
                len(o[0].token_ids),
                o[0].finish_reason,
                prefill_tokens=max(n - shared[i // core.batch_size], 0)
                if shared[i // core.batch_size]
                else None,
            )
            for i, (o, n) in enumerate(zip(outs, n_prompt, strict=True))
        ]

    def _chat_many(self, batch: list[Messages], p: GenParams) -> list[Completion]:
        return self._run([self.render(m) for m in batch], [], p)

    def _continue_many(
        self, batch: list[Messages], prefixes: list[str], stop: list[str], p: GenParams
    ) -> list[Completion]:
        prompts = [self.render(m, x) for m, x in zip(batch, prefixes, strict=True)]
        if not self.prefix_cache:
            return self._run(prompts, stop, p)
        import torch

        sp = self._sampling(stop, p)
        keys = [self.render(m) for m in batch]
        step = self.core.batch_size
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        out: list[Completion] = []
        with torch.random.fork_rng(devices=cuda, enabled=p.seed is not None):
            if p.seed is not None:
                torch.manual_seed(p.seed)
            for i in range(0, len(prompts), step):
                out += self._continue_cached(keys[i : i + step], prompts[i : i + step], sp)
        return out

    def _lookup(self, key: str, ids: list[int]) -> tuple[int, Any]:
        """``(reused, cache)``: the entry of conversation ``key`` sharing the longest token prefix
        with ``ids``, taken out of the store and cropped to that prefix (at least one token of
        ``ids`` is left to run); ``(0, None)`` when nothing is reusable."""
        best, reused = None, 0
        for serial, (k, cached_ids, _) in self._kv.items():
            if k != key:
                continue
            n, common = min(len(cached_ids), len(ids) - 1), 0
            while common < n and cached_ids[common] == ids[common]:
                common += 1
            if best is None or common > reused:
                best, reused = serial, common
        if best is None:
            return 0, None
        cache = self._kv.pop(best)[2]
        if not reused or not _plain_dynamic(cache):
            return 0, None  # sliding-window / linear layers cannot be cropped back exactly
        cache.crop(reused - cache.get_seq_length())  # drop tokens past the common prefix
        return reused, cache

    def _continue_cached(self, keys: list[str], prompts: list[str], sp: Any) -> list[Completion]:
        """One batched continuation that reuses each conversation's longest cached KV prefix.

        Layout of row ``i`` (``r`` reused tokens, ``d`` new ones; ``C``/``D`` the batch maxima):
        ``[pad]*(C-r) + cached + [pad]*(D-d) + new``, masked where padded; positions follow the
        mask (as in a left-padded batch), so every real token sees the same context.
        """
        import torch
        from transformers import DynamicCache

        tok, core = self.tokenizer, self.core
        dev = core.device
        all_ids: list[list[int]] = tok(prompts)["input_ids"]  # as llmcore tokenizes
        if any(not x for x in all_ids):
            raise SpecBackendError("a rendered prompt is empty after tokenization")
        found = [self._lookup(k, x) for k, x in zip(keys, all_ids, strict=True)]
        reused = [r for r, _ in found]
        big_c = max(reused)
        big_d = max(len(x) - r for x, r in zip(all_ids, reused, strict=True))
        pad = tok.pad_token_id
        rows, mask = [], []
        for x, r in zip(all_ids, reused, strict=True):
            d = len(x) - r
            rows.append([pad] * (big_c - r) + x[:r] + [pad] * (big_d - d) + x[r:])
            mask.append([0] * (big_c - r) + [1] * r + [0] * (big_d - d) + [1] * d)
        input_ids = torch.tensor(rows, device=dev)
        attention = torch.tensor(mask, device=dev)
        past = None
        if big_c:
            layers = []
            ref = next(c for _, c in found if c is not None)
            for li, layer in enumerate(ref.layers):
                ks, vs = [], []
                for r, c in found:
                    k0 = layer.keys if c is None else c.layers[li].keys
                    v0 = layer.values if c is None else c.layers[li].values
                    k1 = k0.new_zeros((1, k0.shape[1], big_c - r, k0.shape[3]))
                    ks.append(torch.cat([k1, k0[:, :, :r]], dim=2))
                    vs.append(
                        torch.cat([v0.new_zeros(k1.shape[:3] + v0.shape[3:]), v0[:, :, :r]], 2)
                    )
                layers.append((torch.cat(ks), torch.cat(vs)))
            past = DynamicCache(ddp_cache_data=layers)
        extra = {"tokenizer": tok} if sp.stop else {}
        with torch.inference_mode():
            res = core.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                past_key_values=past,
                generation_config=core.generation_config(sp),
                **extra,
            )
        width = input_ids.shape[1]
        steps = res.sequences.shape[1] - width
        cache = res.past_key_values
        keep = _plain_dynamic(cache)
        n_prompt = [len(t) for t in tok(prompts, add_special_tokens=False)["input_ids"]]
        comps = []
        for i, (key, x) in enumerate(zip(keys, all_ids, strict=True)):
            gen_ids, text, reason = core.finish(res.sequences[i, width:].tolist(), sp)
            if keep:
                fed = min(len(gen_ids), steps - 1)  # the last sampled token is never fed back
                sel = torch.cat(
                    [attention[i].nonzero()[:, 0], torch.arange(width, width + fed, device=dev)]
                )
                kv = [
                    (layer.keys[i : i + 1, :, sel], layer.values[i : i + 1, :, sel])
                    for layer in cache.layers
                ]
                self._serial += 1
                self._kv[self._serial] = (key, x + gen_ids[:fed], DynamicCache(ddp_cache_data=kv))
            comps.append(
                Completion(
                    text, n_prompt[i], len(gen_ids), reason, prefill_tokens=len(x) - reused[i]
                )
            )
        while len(self._kv) > self.prefix_cache_size:
            self._kv.popitem(last=False)
        return comps

    def release(self, batch: list[Messages]) -> None:
        """Drop the cached KV of these conversations (call when their item is finished)."""
        keys = {self.render(m) for m in batch}
        for serial in [s for s, (k, _, _) in self._kv.items() if k in keys]:
            del self._kv[serial]

    def clear_prefix_cache(self) -> None:
        """Drop every cached KV prefix."""
        self._kv.clear()


class OpenAICompatBackend(Backend):
    """Any OpenAI-compatible server (vLLM, SGLang, ``transformers serve``, ``serve-judge``).

    ``prefill="continue_final_message"`` sends the prefix as a final assistant message with
    ``continue_final_message=True, add_generation_prompt=False`` (vLLM/SGLang);
    ``prefill="completions"`` renders the chat locally with ``tokenizer`` and calls
    ``/v1/completions``. Failures retry with exponential backoff, at most ``max_retries`` times.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 600.0,
        max_retries: int = 5,
        prefill: str = "continue_final_message",
        tokenizer: PreTrainedTokenizerBase | str | None = None,
        num_threads: int = 8,
        backoff: float = 0.5,
        **default_gen: Any,
    ) -> None:
        import httpx

        super().__init__(**default_gen)
        if not base_url.startswith(("http://", "https://")):
            raise SpecConfigError(f"base_url={base_url!r} must start with http:// or https://")
        if prefill not in ("continue_final_message", "completions"):
            raise SpecConfigError(
                f"prefill={prefill!r}: valid values are 'continue_final_message', 'completions'"
            )
        if max_retries < 0 or num_threads < 1:
            raise SpecConfigError("max_retries must be >= 0 and num_threads >= 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.max_retries = max_retries
        self.prefill = prefill
        self.num_threads = num_threads
        self.backoff = backoff
        if isinstance(tokenizer, str):
            from llmcore.models import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        key = (os.environ.get(api_key_env) if api_key_env else None) or "EMPTY"
        self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"})
        self.name = f"openai:{model}@{self.base_url}"

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(base_url={self.base_url!r}, model={self.model!r})"

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                r = self._client.post(url, json=body)
            except httpx.HTTPError as exc:  # connection refused, timeout, ...
                last = f"{type(exc).__name__}: {exc}"
            else:
                if r.status_code in (401, 403):
                    raise SpecBackendError(
                        f"{url} answered HTTP {r.status_code} (not authorised): set the API key in "
                        f"the environment variable {self.api_key_env!r}"
                    )
                if r.status_code == 200:
                    return r.json()
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code < 500 and r.status_code != 429:
                    raise SpecBackendError(f"{url} answered {last}")
            if attempt < self.max_retries:
                time.sleep(min(self.backoff * 2**attempt, 30.0))
        raise SpecBackendError(f"{url} failed after {self.max_retries + 1} attempts ({last})")

    def _gen_body(self, p: GenParams, stop: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": p.max_new_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.top_k > 0:
            body["top_k"] = p.top_k
        if p.seed is not None:
            body["seed"] = p.seed
        if p.repetition_penalty != 1.0:
            body["repetition_penalty"] = p.repetition_penalty  # vLLM/SGLang/TGI extra field
        if stop:
            body["stop"] = stop
        return body

    @staticmethod
    def _completion(data: dict[str, Any], chat: bool, stop: list[str]) -> Completion:
        from llmcore.generation.base import truncate_at_stop

        choice = data["choices"][0]
        text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
        text, _ = truncate_at_stop(text or "", stop)  # some servers keep the stop string
        usage = data.get("usage") or {}
        return Completion(
            text,
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
            str(choice.get("finish_reason") or "stop"),
        )

    def _one_chat(self, messages: Messages, p: GenParams) -> Completion:
        body = {**self._gen_body(p, []), "messages": messages}
        return self._completion(self._post("/chat/completions", body), True, [])

    def _one_continue(
        self, messages: Messages, prefix: str, stop: list[str], p: GenParams
    ) -> Completion:
        if self.prefill == "completions":
            if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
                raise BackendCapabilityError(
                    "prefill='completions' renders the chat locally: pass tokenizer= (a tokenizer "
                    "with the served model's chat template)"
                )
            prompt = (
                _strip_empty_think(
                    self.tokenizer.apply_chat_template(
                        messages, add_generation_prompt=True, tokenize=False
                    )
                )
                + prefix
            )
            body = {**self._gen_body(p, stop), "prompt": prompt}
            return self._completion(self._post("/completions", body), False, stop)
        body = {
            **self._gen_body(p, stop),
            "messages": [*messages, {"role": "assistant", "content": prefix}],
            "continue_final_message": True,
            "add_generation_prompt": False,
        }
        return self._completion(self._post("/chat/completions", body), True, stop)

    def _map(self, fn: Any, jobs: list[tuple]) -> list[Completion]:
        if self.num_threads == 1 or len(jobs) <= 1:
            return [fn(*j) for j in jobs]
        with ThreadPoolExecutor(self.num_threads) as pool:
            return list(pool.map(lambda j: fn(*j), jobs))

    def _chat_many(self, batch: list[Messages], p: GenParams) -> list[Completion]:
        return self._map(self._one_chat, [(m, p) for m in batch])

    def _continue_many(
        self, batch: list[Messages], prefixes: list[str], stop: list[str], p: GenParams
    ) -> list[Completion]:
        jobs = [(m, x, stop, p) for m, x in zip(batch, prefixes, strict=True)]
        return self._map(self._one_continue, jobs)


class VLLMBackend(Backend):
    """Offline vLLM (``pip install 'spec-align[vllm]'``); prefill via ``continue_final_message``."""

    name = "vllm"

    def __init__(self, model: str, **kwargs: Any) -> None:
        gen_keys = set(GenParams.__dataclass_fields__)
        super().__init__(**{k: v for k, v in kwargs.items() if k in gen_keys})
        try:
            import vllm
        except ImportError as exc:
            from llmcore.errors import MissingExtraError

            raise MissingExtraError("the vLLM backend", "vllm", "spec-align") from exc
        self._vllm = vllm
        self.llm = vllm.LLM(model, **{k: v for k, v in kwargs.items() if k not in gen_keys})
        self.name = f"vllm:{model}"

    def _sampling(self, p: GenParams, stop: list[str]) -> Any:
        return self._vllm.SamplingParams(
            max_tokens=p.max_new_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            top_k=p.top_k if p.top_k > 0 else -1,
            seed=p.seed,
            stop=stop or None,
            repetition_penalty=p.repetition_penalty,
        )

    def _convert(self, outs: Any) -> list[Completion]:
        return [
            Completion(
                o.outputs[0].text,
                len(o.prompt_token_ids),
                len(o.outputs[0].token_ids),
                str(o.outputs[0].finish_reason),
            )
            for o in outs
        ]

    def _chat_many(self, batch: list[Messages], p: GenParams) -> list[Completion]:
        return self._convert(self.llm.chat(batch, self._sampling(p, []), use_tqdm=False))

    def _continue_many(
        self, batch: list[Messages], prefixes: list[str], stop: list[str], p: GenParams
    ) -> list[Completion]:
        convs = [
            [*m, {"role": "assistant", "content": x}] for m, x in zip(batch, prefixes, strict=True)
        ]
        outs = self.llm.chat(
            convs,
            self._sampling(p, stop),
            add_generation_prompt=False,
            continue_final_message=True,
            use_tqdm=False,
        )
        return self._convert(outs)


def tiny_backend(*, progress: bool = True, **kw: Any) -> HFBackend:
    """The tiny CPU test model (built once, cached by llmcore's zoo) as an :class:`HFBackend`
    (``progress``: show a cold build's progress on stderr)."""
    from spec_align.tiny import build_tiny_model

    model, tok = build_tiny_model(progress=progress).load()
    b = HFBackend(model, tok, prepend_bos=True, **kw)
    b.name = "tiny"
    return b


def get_backend(spec: str, **kw: Any) -> Backend:
    """``hf:<id|path>``, ``openai:<model>@<base_url>``, ``vllm:<id|path>`` or ``tiny``."""
    if spec == "tiny":
        return tiny_backend(**kw)
    if spec.startswith("hf:"):
        return HFBackend(spec[3:], **kw)
    if spec.startswith("vllm:"):
        return VLLMBackend(spec[5:], **kw)
    if spec.startswith("openai:"):
        model, sep, url = spec[7:].partition("@")
        if not sep or not model or not url:
            raise SpecConfigError(
                f"backend {spec!r}: expected openai:MODEL@BASE_URL, e.g. "
                "openai:Qwen/Qwen3-32B@http://127.0.0.1:8000/v1"
            )
        return OpenAICompatBackend(url, model, **kw)
    raise SpecConfigError(
        f"unknown backend {spec!r}; valid: hf:<id|path>, openai:<model>@<base_url>, "
        "vllm:<id|path>, tiny"
    )
