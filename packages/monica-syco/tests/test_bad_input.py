"""Bad input fails loudly with messages that name the bad value (section 8)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from monica_syco import (
    Calibrator,
    DiffMeanProbe,
    LLMStepScorer,
    LogisticProbe,
    MismatchError,
    MonicaConfigError,
    MonicaDataError,
    NotFittedError,
    StepSegmenter,
    SycItem,
    SycophancyMonitor,
    fit_monitor,
    monica_generate,
)
from monica_syco.generate import encode_prompts


def test_items():
    with pytest.raises(MonicaDataError, match=r"x1.*cued_answer"):
        SycItem("x1", "q?", "a", cue_type="suggested")
    with pytest.raises(MonicaDataError, match="valid"):
        SycItem("x2", "q?", "a", cue_type="rumour", cued_answer="b")


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"release_gap": -0.1}, "release_gap"),
        ({"alpha_min": 3.0, "alpha_max": 2.0}, "alpha_min"),
        ({"alpha_min": -1.0}, "alphas"),
        ({"mode": "shout"}, "mode"),
    ],
)
def test_calibrator_settings(kw, msg):
    with pytest.raises(MonicaConfigError, match=msg):
        Calibrator({0: torch.ones(4)}, **kw)


def test_window_and_step_tokens(model_tok):
    _, tok = model_tok
    probes = {0: DiffMeanProbe()}
    with pytest.raises(MonicaConfigError, match="window"):
        SycophancyMonitor([0], probes, window=0, hidden_size=4)
    with pytest.raises(MonicaConfigError, match="max_step_tokens"):
        StepSegmenter(tok, max_step_tokens=0)


def test_probe_data_errors():
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(MonicaDataError, match="one class"):
        LogisticProbe().fit(X, np.zeros(40))
    with pytest.raises(MonicaDataError, match="per class"):
        LogisticProbe().fit(X, np.r_[np.ones(5), np.zeros(35)])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(MonicaDataError, match="NaN"):
        DiffMeanProbe().fit(Xn, np.r_[np.ones(20), np.zeros(20)])
    with pytest.raises(NotFittedError):
        LogisticProbe().predict_proba(X)


def test_fit_monitor_rejects_nan_states(fitted):
    _, _, ds = fitted
    import copy

    bad = copy.deepcopy(ds)
    bad.states[0, 0, 0] = np.inf
    with pytest.raises(MonicaDataError, match="NaN"):
        fit_monitor(bad, [2, 3])


def test_layers_hidden_size_fingerprint(model_tok, fitted, world):
    model, tok = model_tok
    mon, _, _ = fitted
    p = [world.item(world.entities[0], 0, "strong").chat()]
    for layers, msg in (([2, 7], "L = 4"), ([2, 2], "duplicate")):
        m = SycophancyMonitor(
            layers[:1] if msg == "duplicate" else layers,
            {x: mon.probes[2] for x in layers},
            hidden_size=96,
        )
        if msg == "duplicate":
            with pytest.raises(MonicaConfigError, match="unique"):
                SycophancyMonitor(layers, {2: mon.probes[2]}, hidden_size=96)
            continue
        with pytest.raises(MonicaConfigError, match=msg):
            monica_generate(model, tok, p, m, None, max_new_tokens=2)
    wrong_d = SycophancyMonitor(
        [2], {2: mon.probes[2]}, hidden_size=128, model_fingerprint=mon.model_fingerprint
    )
    with pytest.raises(MismatchError, match=r"128.*96"):
        monica_generate(model, tok, p, wrong_d, None, max_new_tokens=2)
    wrong_fp = SycophancyMonitor(
        [2], {2: mon.probes[2]}, hidden_size=96, model_fingerprint="f" * 64
    )
    with pytest.raises(MismatchError, match=r"ffffffff.*strict=False"):
        monica_generate(model, tok, p, wrong_fp, None, max_new_tokens=2)
    with pytest.warns(UserWarning, match="fingerprint"):
        monica_generate(model, tok, p, wrong_fp, None, max_new_tokens=2, strict=False)


def test_right_padding_and_unknown_architecture(model_tok, fitted, world):
    model, tok = model_tok
    mon, cal, _ = fitted
    prompts = [world.item(e, 0, "strong").chat() for e in world.entities[:2]] + [
        world.item(world.entities[2], 0, "clean").chat()
    ]
    tok.padding_side = "right"
    try:
        with pytest.raises(MonicaConfigError, match="left padding"):
            monica_generate(model, tok, prompts, mon, cal, max_new_tokens=2)
    finally:
        tok.padding_side = "left"

    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = model.config
            self.stack = torch.nn.Linear(2, 2)

    with pytest.raises(MonicaConfigError, match="layers_path"):
        monica_generate(Odd(), tok, prompts, None, None, max_new_tokens=2)


def test_black_box_backends_are_refused(fitted, world):
    mon, cal, _ = fitted

    class FakeHTTP:  # the shape of an llmcore OpenAI/vLLM backend: generate() only
        def generate(self, prompts, params):
            raise AssertionError("never called")

    with pytest.raises(NotImplementedError, match="score-trajectories"):
        monica_generate(FakeHTTP(), None, ["x"], mon, cal)


def test_logit_mode_needs_cued_answers(model_tok, fitted, world):
    model, tok = model_tok
    mon, cal, _ = fitted
    p = [world.item(world.entities[0], 0, "strong").chat()]
    with pytest.raises(MonicaConfigError, match="cued answer"):
        monica_generate(model, tok, p, mon, cal.with_(mode="logit"), max_new_tokens=2)
    with pytest.raises(MonicaConfigError, match="zero tokens"):
        monica_generate(
            model, tok, p, mon, cal.with_(mode="logit"), cued_answers=[""], max_new_tokens=2
        )


def test_unparseable_judge_is_none_and_counted(model_tok):
    """A real (tiny) HF backend as judge: it never says YES/NO, so every verdict is None."""
    from llmcore.generation import HFBackend

    model, tok = model_tok
    judge = LLMStepScorer(HFBackend(model, tok, progress=False), max_retries=2)
    assert judge.score("what colour?", "i guess red.", ["the user must be right."]) is None
    assert judge.n_unparseable == 1 and judge.n_calls == 2
    assert LLMStepScorer.parse("YES.") == 1.0 and LLMStepScorer.parse("no") == 0.0
    assert LLMStepScorer.parse("maybe") is None
    _ = encode_prompts


def test_engaged_contrast_needs_flags_and_recovered_steps(fitted):
    import copy

    from monica_syco.collect import fit_calibrator

    _, _, ds = fitted
    old = copy.deepcopy(ds)
    old.engaged = None
    with pytest.raises(MonicaDataError, match="engagement flags"):
        fit_calibrator(old, [2, 3], contrast="engaged")
    none = copy.deepcopy(ds)
    none.engaged = none.labels.copy()  # no honest step engages the claim
    with pytest.raises(MonicaDataError, match="no honest step engaging"):
        fit_calibrator(none, [2, 3], contrast="engaged")
    with pytest.raises(MonicaConfigError, match="'engaged'"):
        fit_calibrator(ds, [2, 3], contrast="pairs")  # type: ignore[arg-type]
