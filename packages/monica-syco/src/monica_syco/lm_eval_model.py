"""lm-evaluation-harness model ``monica-hf`` (needs the ``lm-eval`` extra).

lm-eval has no plugin discovery for models, so the class registers when this module is
imported; run lm-eval through this module::

    python -m monica_syco.lm_eval_model run --model monica-hf \\
        --model_args pretrained=MODEL,monitor=run/,calibrator=run/,threshold=0.5,mode=add \\
        --tasks monica_synth --include_path "$(python -c 'from llmcore.lmeval import task_path; print(task_path("monica_syco"))')"

``generate_until`` requests run through :func:`monica_syco.monica_generate` (calibrated);
log-likelihood requests (e.g. the ``sycophancy_*`` multiple-choice tasks) have no reasoning
steps and run uncalibrated, with a one-time warning.
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

    raise MissingExtraError("the monica-hf lm-eval model", "lm-eval", package="monica-syco") from e

log = logging.getLogger(__name__)


@register_model("monica-hf")
class MonicaHFLM(HFLM):
    """HFLM whose ``generate_until`` runs MONICA (monitor + optional calibrator)."""

    def __init__(
        self,
        pretrained: Any,
        monitor: Any = None,
        calibrator: Any = None,
        threshold: float | None = None,
        mode: str | None = None,
        alpha_max: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(pretrained=pretrained, **kwargs)
        from monica_syco.calibrator import Calibrator
        from monica_syco.errors import MonicaConfigError
        from monica_syco.monitor import SycophancyMonitor

        if monitor is None:
            raise MonicaConfigError("model_args need monitor=<folder with monitor.json>")
        self.monica_monitor = (
            monitor if not isinstance(monitor, str) else SycophancyMonitor.load(monitor)
        )
        self.monica_calibrator = (
            Calibrator.load(
                calibrator,
                threshold=None if threshold is None else float(threshold),
                mode=mode,
                alpha_max=None if alpha_max is None else float(alpha_max),
            )
            if isinstance(calibrator, str)
            else calibrator
        )
        self.monica_warned = False
        self.monica_stats: dict[str, float] = {"requests": 0, "interventions": 0}

    def _warn_uncalibrated(self) -> None:
        if not self.monica_warned:
            self.monica_warned = True
            log.warning(
                "monica-hf: log-likelihood requests have no reasoning steps; they run "
                "uncalibrated (MONICA acts on generate_until only)"
            )

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        self._warn_uncalibrated()
        return super().loglikelihood(requests, disable_tqdm=disable_tqdm)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        self._warn_uncalibrated()
        return super().loglikelihood_rolling(requests, disable_tqdm=disable_tqdm)

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        from tqdm.auto import tqdm

        from monica_syco.generate import monica_generate

        out: list[str] = []
        for req in tqdm(requests, disable=disable_tqdm, desc="monica-hf generate_until"):
            context, gen_kwargs = req.args
            gen_kwargs = dict(gen_kwargs or {})
            until = gen_kwargs.pop("until", None) or []
            if isinstance(until, str):
                until = [until]
            max_new = int(gen_kwargs.pop("max_gen_toks", self.max_gen_toks))
            temp = float(gen_kwargs.pop("temperature", 0.0) or 0.0)
            do_sample = bool(gen_kwargs.pop("do_sample", temp > 0))
            kw: dict[str, Any] = {"max_new_tokens": max_new, "do_sample": do_sample}
            if do_sample:
                kw["temperature"] = temp
            res = monica_generate(
                self.model,
                self.tokenizer,
                [context],
                self.monica_monitor,
                self.monica_calibrator,
                **kw,
            )
            text = res.texts[0]
            for stop in until:
                if stop and stop in text:
                    text = text.split(stop)[0]
            self.monica_stats["requests"] += 1
            self.monica_stats["interventions"] += len(res.interventions[0])
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, req.args[1]), text)
        log.info("monica-hf stats: %s", self.monica_stats)
        return out


def main(argv: list[str] | None = None) -> int:
    """``python -m monica_syco.lm_eval_model run ...``: lm-eval's CLI with monica-hf registered."""
    from lm_eval.__main__ import cli_evaluate

    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        args = args[1:]
    sys.argv = ["lm_eval", *args]
    cli_evaluate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
