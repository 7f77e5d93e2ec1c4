"""Pipeline 4, noise-aware adapters under fast decoding (nara-peft + d3llm; recipe:
docs/recipes/noise-aware-adapters-fast-decoding.md).

d3llm's registered parity teacher (a 4 x 64 masked-diffusion Llama: prompt ``"3,9,8,2="``, answer
each digit followed by the running parity of the odd digits) is adapted to a new rule, the
*flipped* running parity (``"30918121"``), with NaRA (r 4 on q/k/v/o, its mapper reading the
noise level lambda from the mask fraction of the canvas) and with LoRA (r 5, the nearest
parameter count: 10,240 vs 10,320), both trained with nara-peft's LLaDA SFT loss. Each adapted
model is decoded by d3llm's vanilla decoder (one token per forward) and its entropy-based
multi-block decoder, on 128 held-out prompts.

Default tier (the plumbing, exact): a NaRA-wrapped teacher at initialisation decodes exactly as
the teacher under both decoders (NaRA's update is zero at init whatever lambda it reads; the
test fails if lambda cannot be resolved inside d3llm's decoders or if the wrapper changes the
forward). Extended tier (report only): NaRA's exact match and TPF against LoRA's at both
decoders, one seed, 400 steps (batch 32, AdamW 3e-3). Measured 2026-12-01 (128 prompts) on the
d3llm 0.1.1 teacher (1,000 steps, vanilla exact match 0.89; multi-block over one 12-position
block, threshold 0.5): LoRA 0.391 vanilla / 0.406 multi-block (TPF 2.32), NaRA 0.359 / 0.359
(TPF 2.30), teacher 0.000 on the new rule: NaRA is 0.03 / 0.05 below LoRA, so no gain is
asserted (a static rule change gives the noise-conditioned core nothing to exploit). On the
0.1.0 teacher (1,200 steps, exact match 1.00, blocks of 4) LoRA reached 0.961 / 0.891 and NaRA
0.844 / 0.742. Asserted there: training lowered each adapter's loss and lifted its vanilla exact
match above the teacher's, and multi-block decoding kept a higher TPF than vanilla.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
STEPS = 400


def _flipped_task():
    from d3llm.task import ParityTask
    from d3llm.tiny import TASK

    @dataclasses.dataclass(frozen=True)
    class FlippedParity(ParityTask):
        """Each digit followed by 1 minus the running parity of the odd digits."""

        def answer(self, x: str) -> str:
            out, parity = [], 0
            for c in x:
                parity ^= int(c) % 2
                out.append(f"{c}{1 - parity}")
            return "".join(out)

    return FlippedParity(n_digits=TASK.n_digits, gen_length=TASK.gen_length)


def _nara(model, tok):
    from nara_peft import NaraConfig, get_nara_model

    cfg = NaraConfig(
        r=4,
        target_modules=TARGETS,
        noise_source="mask_fraction",  # lambda from the canvas: no decoder has to pass it
        mask_token_id=tok.mask_token_id,
        c_scale=0.1,
        embedding_dim=16,
        fnn_hidden_size_1=32,
        fnn_hidden_size_2=32,
    )
    return get_nara_model(model, cfg)


def _mdlm(model, tok):
    from d3llm import MaskedDiffusionLM

    return MaskedDiffusionLM(model.eval(), tok.mask_token_id, "none", tok.eos_token_id)


def _decode(model, tok, task, inputs) -> dict[str, dict]:
    from d3llm.tiny import evaluate

    m = _mdlm(model, tok)
    return {
        "vanilla": evaluate(m, tok, "vanilla", task=task, inputs=inputs),
        "multiblock": evaluate(m, tok, "multiblock", task=task, inputs=inputs, threshold=0.5),
    }


@pytest.fixture(scope="module")
def teacher():
    import torch
    from d3llm import fixtures

    torch.manual_seed(0)
    return fixtures.build_teacher().load()


def test_nara_at_init_decodes_exactly_as_the_teacher(teacher):
    from d3llm.tiny import TASK

    base, tok = teacher
    inputs = TASK.eval_inputs(32)
    plain = _decode(base, tok, TASK, inputs)
    wrapped = _decode(_nara(copy.deepcopy(base), tok), tok, TASK, inputs)
    for method in ("vanilla", "multiblock"):
        assert wrapped[method]["texts"] == plain[method]["texts"], method
        assert wrapped[method]["nfe_mean"] == plain[method]["nfe_mean"], method
    assert plain["vanilla"]["accuracy"] >= 0.85  # the teacher's own gate


@pytest.mark.extended
def test_extended_nara_vs_lora_at_vanilla_and_multiblock(teacher):
    import torch
    from nara_peft import diffusion_sft_loss
    from peft import LoraConfig, get_peft_model

    base, tok = teacher
    task = _flipped_task()
    docs = []
    for x in task.inputs(4000, seed=3):
        doc = tok(task.document(x), add_special_tokens=False)["input_ids"]
        prompt = tok(task.prompt(x), add_special_tokens=False)["input_ids"]
        docs.append(([tok.bos_token_id, *doc, tok.eos_token_id], 1 + len(prompt)))
    ids = torch.tensor([d[0] for d in docs])
    prompt_lengths = torch.tensor([d[1] for d in docs])
    inputs = task.eval_inputs(128)
    report = {"teacher": _decode(base, tok, task, inputs)}
    for arm in ("lora_r5", "nara_r4"):
        torch.manual_seed(0)
        if arm == "nara_r4":
            model, pass_noise = _nara(copy.deepcopy(base), tok), True
        else:
            lora = LoraConfig(r=5, lora_alpha=5, target_modules=TARGETS)
            model, pass_noise = get_peft_model(copy.deepcopy(base), lora), False
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
        batches, masks = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
        model.train()
        losses = []
        for _ in range(STEPS):
            idx = torch.randint(0, len(docs), (32,), generator=batches)
            loss, _ = diffusion_sft_loss(
                model,
                ids[idx],
                prompt_lengths[idx],
                tok.mask_token_id,
                masks,
                direct_noise_level=False,  # lambda = mask fraction, as at decoding time
                pass_noise=pass_noise,
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        report[arm] = _decode(model, tok, task, inputs)
        report[arm]["params"] = sum(p.numel() for p in params)
        report[arm]["loss_first_last"] = (losses[0], sum(losses[-20:]) / 20)
    print(f"\nnoise-aware adapters under fast decoding ({STEPS} steps, 128 prompts):")
    for arm, r in report.items():
        extra = {k: r[k] for k in ("params", "loss_first_last") if k in r}
        for method in ("vanilla", "multiblock"):
            print(
                f"  {arm} {method}: exact match {r[method]['accuracy']:.3f} "
                f"TPF {r[method]['tpf']:.3f} NFE {r[method]['nfe_mean']:.2f} {extra}"
            )
    for method in ("vanilla", "multiblock"):
        gain = report["nara_r4"][method]["accuracy"] - report["lora_r5"][method]["accuracy"]
        print(f"  NaRA - LoRA exact match at {method}: {gain:+.3f}")
    for arm in ("lora_r5", "nara_r4"):
        r = report[arm]
        assert r["loss_first_last"][1] < r["loss_first_last"][0]
        assert r["vanilla"]["accuracy"] > report["teacher"]["vanilla"]["accuracy"]
        assert r["multiblock"]["tpf"] > r["vanilla"]["tpf"]
