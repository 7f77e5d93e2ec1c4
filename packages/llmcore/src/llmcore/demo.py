"""The core's own demo: build (or load) the default zoo models and exercise the shared parts.

Used by the ``llmcore demo`` command (not by method packages, which register their own demos):
it is the first thing a new user runs and the quickest check that an install works."""

from __future__ import annotations

import math
import os
import random
import time
from typing import Any


def run(n_prompts: int = 32, progress: bool = True) -> dict[str, Any]:
    """Greedy worked-arithmetic accuracy and held-out perplexity of ``tiny-llama`` through the
    HF backend, and a masked-diffusion fill with ``tiny-mdlm``. Returns the results row."""
    from llmcore.runtime import num_threads

    with num_threads(int(os.environ.get("LLMCORE_ZOO_THREADS", "1"))):
        return _run(n_prompts, progress)


def _run(n_prompts: int, progress: bool) -> dict[str, Any]:
    import torch

    from llmcore import zoo
    from llmcore.diffusion import llada_generate
    from llmcore.generation import HFBackend, SamplingParams
    from llmcore.metrics import perplexity
    from llmcore.zoo.train import encode_documents

    t0 = time.perf_counter()
    entry = zoo.build("tiny-llama", progress=progress)
    model, tok = entry.load()
    rng = random.Random(123)
    pairs = [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(n_prompts)]
    backend = HFBackend(model, tok, batch_size=16, progress=False)
    outs = backend.generate(
        [f"{tok.bos_token}{a}+{b}:" for a, b in pairs], SamplingParams(max_new_tokens=40)
    )
    correct = sum(
        o[0].text.rsplit(";", 1)[-1].strip().split(" ")[0] == str(a + b)
        for o, (a, b) in zip(outs, pairs, strict=True)
    )
    # tiny-llama is trained on one document per row, so perplexity is taken per held-out
    # document and pooled over tokens (a packed stream would show it contexts it never saw).
    nll = n_tok = 0.0
    for row in encode_documents(tok, entry_eval_docs(), 96):
        r = perplexity(model, torch.tensor(row))
        nll, n_tok = nll + r.nll_sum, n_tok + r.n_tokens
    ppl = math.exp(nll / n_tok)

    mdlm = zoo.build("tiny-mdlm", progress=progress)
    dmodel, dtok = mdlm.load()
    prompt = torch.tensor(
        [[dtok.bos_token_id, *dtok("The river of", add_special_tokens=False).input_ids]]
    )
    filled = llada_generate(
        dmodel, prompt, dtok.mask_token_id, gen_length=8, steps=8, block_length=8
    )
    return {
        "arith_greedy_acc": correct / n_prompts,
        "heldout_ppl": ppl,
        "mdlm_masks_left": int((filled == dtok.mask_token_id).sum()),
        "mdlm_sample": dtok.decode(filled[0, prompt.shape[1] :]),
        "seconds": time.perf_counter() - t0,
    }


def entry_eval_docs() -> tuple[str, ...]:
    from llmcore import zoo

    return zoo.get_recipe("tiny-llama").corpus.eval
