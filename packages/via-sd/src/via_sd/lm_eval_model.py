"""lm-evaluation-harness model ``via-sd`` (needs the ``lm-eval`` extra).

lm-eval has no plugin discovery for models, so the class registers when this module is
imported. From the shell::

    python -m via_sd.lm_eval_model run --model via-sd \\
        --model_args pretrained=Qwen/Qwen2.5-7B-Instruct,drafter=Qwen/Qwen2.5-0.5B-Instruct \\
        --tasks gsm8k --device cuda

``generate_until`` runs VIA-SD one request at a time (batch size 1); log-likelihood
requests use the plain target (HFLM). Decode statistics accumulate in ``self.via_stats``
and are logged at the end of each ``generate_until`` call.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

try:
    from lm_eval.api.registry import register_model
    from lm_eval.models.huggingface import HFLM
except ImportError as e:  # pragma: no cover - exercised only without the extra
    from llmcore.errors import MissingExtraError

    raise MissingExtraError("the via-sd lm-eval model", "lm-eval", package="via-sd") from e

log = logging.getLogger(__name__)


@register_model("via-sd")
class ViaSDLM(HFLM):
    """HFLM whose generation runs VIA-SD with a drafter and a slim verifier of the target."""

    def __init__(
        self,
        pretrained: Any,
        drafter: Any = None,
        skip_ratio: float = 0.45,
        mask: str | None = None,
        tau_accept: float = 0.7,
        tau_escalate: float = 0.5,
        gamma: int = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(pretrained=pretrained, **kwargs)
        from llmcore.models import load_causal_lm
        from via_sd.config import ViaSDConfig
        from via_sd.errors import ViaSDInputError
        from via_sd.slim import SlimVerifier, load_mask

        if drafter is None:
            raise ViaSDInputError("model_args need drafter=<hub id or path>")
        target = self.model
        p = next(target.parameters())
        self.drafter = (
            drafter
            if not isinstance(drafter, str)
            else load_causal_lm(drafter, dtype=p.dtype, device=str(p.device))
        )
        self.slim = (
            load_mask(mask, target) if mask else SlimVerifier(target, skip_ratio=float(skip_ratio))
        )
        self.via_config = ViaSDConfig(
            gamma=int(gamma), tau_accept=float(tau_accept), tau_escalate=float(tau_escalate)
        )
        self.via_stats: dict[str, float] = {}

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        from dataclasses import replace

        from tqdm.auto import tqdm

        from via_sd.decoding import via_sd_generate

        out: list[str] = []
        keys = (
            "tokens",
            "target_forwards",
            "slim_forwards",
            "draft_forwards",
            "drafted",
            "tier_a",
            "tier_b",
            "tier_c",
            "rejections",
        )
        for req in tqdm(requests, disable=disable_tqdm, desc="via-sd generate_until"):
            context, gen_kwargs = req.args
            gen_kwargs = dict(gen_kwargs or {})
            until = gen_kwargs.pop("until", None) or []
            if isinstance(until, str):
                until = [until]
            max_new = int(gen_kwargs.pop("max_gen_toks", self.max_gen_toks))
            temp = float(gen_kwargs.get("temperature", 0.0) or 0.0)
            if not gen_kwargs.get("do_sample", temp > 0):
                temp = 0.0
            cfg = replace(
                self.via_config,
                max_new_tokens=max_new,
                temperature=temp,
                eos_token_id=self.tokenizer.eos_token_id,
            )
            ids = self.tok_encode(context)[-(self.max_length - max_new) :]
            res = via_sd_generate(self.model, self.drafter, self.slim, ids, cfg)
            text = self.tok_decode(res.new_tokens, skip_special_tokens=True)
            for stop in until:
                if stop and stop in text:
                    text = text.split(stop)[0]
            for k in keys:
                self.via_stats[k] = self.via_stats.get(k, 0) + getattr(res.stats, k)
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, req.args[1]), text)
        s = self.via_stats
        if s.get("drafted"):
            s["rejection_rate"] = s["rejections"] / s["drafted"]
            s["tokens_per_target_forward"] = s["tokens"] / max(s["target_forwards"], 1)
        log.info("via-sd decode stats: %s", s)
        return out


def main(argv: list[str] | None = None) -> None:
    """``python -m via_sd.lm_eval_model run ...``: lm-eval's CLI with ``via-sd`` registered."""
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_evaluate()


if __name__ == "__main__":  # pragma: no cover
    main()
