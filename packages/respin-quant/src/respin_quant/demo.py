"""``llmcore demo respin-quant``: RTN vs QuaRot-style vs ReSpinQuant (r=32) at W4A4 on the
demo-size tiny outlier model (:data:`respin_quant.tiny.DEMO_SPEC`, far fewer pre-training
steps) with 20 Cayley steps; the claim tests run the full model and 100 steps."""

from __future__ import annotations

from typing import Any


def run(steps: int = 20) -> dict[str, Any]:
    import torch

    from respin_quant.baselines import quantized_arm
    from respin_quant.config import QuantConfig, RotationConfig
    from respin_quant.evaluate import perplexity
    from respin_quant.learn import learn_rotations
    from respin_quant.rotation import init_rotations
    from respin_quant.tiny import DEMO_SPEC, TinySpec, calib_ids, eval_ids, outlier_model

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        spec = DEMO_SPEC
        model = outlier_model(50.0, spec)
        ev, cal = eval_ids(spec, n=128), calib_ids(spec)
        q = QuantConfig(w_clip_grid=9, w_clip_min=0.6)  # the claim tests' clip search
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
            "fp_ppl": round(ppl(model), 4),
            "rtn_w4a4_ppl": round(ppl(quantized_arm(model, q, None)), 4),
            "quarot_w4a4_ppl": round(
                ppl(quantized_arm(model, q, init_rotations(model, "quarot", 11))), 4
            ),
            "respin_r32_w4a4_ppl": round(ppl(quantized_arm(model, q, rs, residual_rank=32)), 4),
            "respin_steps": steps,
            "fixture": (
                f"demo-size ({spec.steps} pre-training steps of batch {spec.batch}, not "
                f"{TinySpec().steps} of {TinySpec().batch}; {steps} Cayley steps, not 100); "
                "the claim runs on the full fixture"
            ),
        }
    finally:
        torch.set_num_threads(prev)
    return out
