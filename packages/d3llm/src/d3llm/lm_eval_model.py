"""lm-evaluation-harness model ``d3llm`` (needs the ``lm-eval`` extra).

lm-eval has no plugin discovery for models, so the class registers when this module is
imported. From the shell::

    python -m d3llm.lm_eval_model run --model d3llm \\
        --model_args pretrained=d3LLM/d3LLM_LLaDA,trust_remote_code=True,method=multiblock,threshold=0.5 \\
        --tasks gsm8k --batch_size 1

``generate_until`` runs the chosen diffusion decoder (``method=vanilla|threshold|multiblock``)
one request at a time and accumulates ``tpf`` and ``nfe`` in ``self.decode_stats``.
Log-likelihood requests raise ``NotImplementedError`` (a masked diffusion LM has no
left-to-right likelihood).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
except ImportError as e:  # pragma: no cover - exercised only without the extra
    from llmcore.errors import MissingExtraError

    raise MissingExtraError("the d3llm lm-eval model", "lm-eval", package="d3llm") from e

log = logging.getLogger(__name__)


def _bool(v: Any) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")


@register_model("d3llm")
class D3LLMEvalLM(LM):
    """Masked diffusion LM decoded with vanilla, threshold or multi-block decoding."""

    def __init__(
        self,
        pretrained: Any,
        tokenizer: Any = None,
        method: str = "multiblock",
        gen_length: int = 256,
        block_size: int = 32,
        steps: int | None = None,
        threshold: float = 0.5,
        mode: str = "entropy",
        block_add_threshold: float = 0.1,
        decoded_token_threshold: float = 0.95,
        use_kv_cache: Any = False,
        cache_delay_iter: int = 2,
        refresh_interval: int = 3,
        mask_token_id: int | None = None,
        logits_shift: str | None = None,
        trust_remote_code: Any = False,
        device: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        from d3llm.errors import D3LLMConfigError
        from d3llm.model import MaskedDiffusionLM, load_mdlm

        if isinstance(pretrained, MaskedDiffusionLM):
            if tokenizer is None:
                raise D3LLMConfigError("pass tokenizer= with a MaskedDiffusionLM object")
            self.mdlm, self.tokenizer = pretrained, tokenizer
        else:
            self.mdlm, self.tokenizer = load_mdlm(
                str(pretrained),
                None if mask_token_id is None else int(mask_token_id),
                logits_shift,  # type: ignore[arg-type]
                trust_remote_code=_bool(trust_remote_code),
                device=device,
            )
        if method not in ("vanilla", "threshold", "multiblock"):
            raise D3LLMConfigError(
                f"method must be vanilla, threshold or multiblock, got {method!r}"
            )
        self.method = method
        self.opts = {
            "gen_length": int(gen_length),
            "block_size": int(block_size),
            "steps": int(steps) if steps is not None else int(gen_length),
            "threshold": float(threshold),
            "mode": mode,
            "block_add_threshold": float(block_add_threshold),
            "decoded_token_threshold": float(decoded_token_threshold),
            "use_kv_cache": _bool(use_kv_cache),
            "cache_delay_iter": int(cache_delay_iter),
            "refresh_interval": int(refresh_interval),
        }
        self.decode_stats: dict[str, float] = {"tokens": 0, "nfe": 0, "samples": 0}

    def _decode(self, ids: list[int]):
        from d3llm.decoding import decode_multiblock, decode_threshold, decode_vanilla

        o = self.opts
        if self.method == "vanilla":
            return decode_vanilla(self.mdlm, ids, o["gen_length"], o["steps"], o["block_size"])
        if self.method == "threshold":
            return decode_threshold(
                self.mdlm, ids, o["gen_length"], o["block_size"], o["mode"], o["threshold"]
            )
        return decode_multiblock(
            self.mdlm,
            ids,
            max_new_tokens=o["gen_length"],
            block_size=o["block_size"],
            threshold=o["threshold"],
            block_add_threshold=o["block_add_threshold"],
            decoded_token_threshold=o["decoded_token_threshold"],
            use_kv_cache=o["use_kv_cache"],
            cache_delay_iter=o["cache_delay_iter"],
            refresh_interval=o["refresh_interval"],
        )

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        out: list[str] = []
        bos = self.tokenizer.bos_token_id
        for req in requests:
            context, gen_kwargs = req.args
            until = (gen_kwargs or {}).get("until") or []
            if isinstance(until, str):
                until = [until]
            ids = self.tokenizer(context, add_special_tokens=False)["input_ids"]
            if bos is not None and (not ids or ids[0] != bos):
                ids = [bos, *ids]
            res = self._decode(ids)
            gen = res.generated[0].tolist()[: res.tokens[0]]
            text = self.tokenizer.decode(gen, skip_special_tokens=True)
            for stop in until:
                if stop and stop in text:
                    text = text.split(stop)[0]
            s = self.decode_stats
            s["tokens"] += res.tokens[0]
            s["nfe"] += res.nfe[0]
            s["samples"] += 1
            s["tpf"] = s["tokens"] / max(1, s["nfe"])
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, req.args[1]), text)
        log.info("d3llm decode stats: %s", self.decode_stats)
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False):
        raise NotImplementedError("d3llm: masked diffusion LMs have no loglikelihood here")

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False):
        raise NotImplementedError("d3llm: masked diffusion LMs have no loglikelihood here")


def main(argv: list[str] | None = None) -> None:
    """``python -m d3llm.lm_eval_model run ...``: lm-eval's CLI with ``d3llm`` registered."""
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_evaluate()


if __name__ == "__main__":  # pragma: no cover
    main()
