"""``llmcore demo respin-quant``: RTN vs QuaRot-style vs ReSpinQuant (r=32) at W4A4 on the tiny
outlier model, 30 Cayley steps (the claim test runs the full 100)."""

from __future__ import annotations

from typing import Any


def run(steps: int = 30) -> dict[str, Any]:
    import torch

    from respin_quant.baselines import quantized_arm
    from respin_quant.config import QuantConfig, RotationConfig
    from respin_quant.evaluate import perplexity
    from respin_quant.learn import learn_rotations
    from respin_quant.rotation import init_rotations
    from respin_quant.tiny import calib_ids, eval_ids, outlier_model

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, ev, cal = outlier_model(50.0), eval_ids(n=128), calib_ids()
        q = QuantConfig()
        ppl = lambda m: perplexity(m, ev, seqlen=ev.shape[1], batch_size=64)  # noqa: E731
        rot = RotationConfig(
            steps=steps,
            batch_size=16,
            calib_nsamples=cal.shape[0],
            calib_seqlen=cal.shape[1],
            rotation_seed=11,
        )
        rs = learn_rotations(model, cal, rot, q)
        out = {
            "fp_ppl": ppl(model),
            "rtn_w4a4_ppl": ppl(quantized_arm(model, q, None)),
            "quarot_w4a4_ppl": ppl(quantized_arm(model, q, init_rotations(model, "quarot", 11))),
            "respin_r32_w4a4_ppl": ppl(quantized_arm(model, q, rs, residual_rank=32)),
            "respin_steps": steps,
        }
    finally:
        torch.set_num_threads(prev)
    return out
