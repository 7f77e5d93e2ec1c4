"""The target fixture's gate policy: train in extra chunks only while the exact-match gate is
missed, at most a fixed number of times (via_sd.tiny.train_to_gate)."""

from __future__ import annotations

import pytest
from via_sd.tiny import MAX_EXTENSIONS, train_to_gate


def _run(scores: list[float], gate: float = 0.9, max_ext: int = MAX_EXTENSIONS):
    seen: list[int] = []
    it = iter(scores)
    value, k = train_to_gate(lambda: next(it), seen.append, gate, max_ext)
    return value, k, seen


def test_no_extension_when_the_gate_passes_at_once():
    # the usual case: the weights are those of the recipe without extension chunks
    assert _run([0.922]) == (0.922, 0, [])


def test_extends_until_the_gate_passes():
    assert _run([0.844, 0.88, 0.91]) == (0.91, 2, [1, 2])


@pytest.mark.parametrize("max_ext", [0, 1, 4])
def test_gives_up_after_max_extensions(max_ext):
    value, k, seen = _run([0.5] * (max_ext + 1), max_ext=max_ext)
    assert (value, k, seen) == (0.5, max_ext, list(range(1, max_ext + 1)))


def test_drafter_steps_option(monkeypatch):
    """``drafter_steps`` builds another drafter (the README's agreement/γ map); the default
        recipe (and so its zoo cache key) is unchanged, and the agreement gate is enforced for
        the default drafter only (checked with an impossible gate, 1.01-1.02). Uses the registered 1,200-step
    drafter of the strong-drafter claim, so no extra fixture is built here."""
    import via_sd.tiny as tiny
    from via_sd.errors import ViaSDConfigError

    from llmcore.errors import QualityGateError

    assert tiny.drafter_recipe() == tiny.drafter_recipe(tiny.DRAFTER_STEPS)
    assert tiny.drafter_recipe().train.steps == 300
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ViaSDConfigError):
            tiny.drafter_recipe(bad)
    monkeypatch.setattr(tiny, "AGREEMENT_GATE", (1.01, 1.02))
    fx = tiny.build_fixtures(progress=False, drafter_steps=1200)
    assert fx.info["drafter_steps"] == 1200 and 0.0 < fx.info["agreement"] <= 1.0
    with pytest.raises(QualityGateError, match="agreement"):
        tiny.build_fixtures(progress=False)


def test_target_is_an_ordinary_zoo_entry(fx):
    """The target's gate-driven build goes through ``llmcore.zoo.cached``: ``zoo.lookup`` finds
    the entry the fixtures loaded under the key of :func:`target_key_material` (so ``llmcore zoo
    list`` shows it and ``zoo clear`` removes it), with its recorded gate metrics."""
    from via_sd.tiny import TARGET_GATE, target_key_material, target_recipe

    from llmcore import zoo

    entry = zoo.lookup("via-sd-target", target_key_material(target_recipe()))
    assert entry is not None and str(entry.path) == fx.info["target_path"]
    assert entry.metrics["exact_match"] >= TARGET_GATE
    assert entry.metrics["answer_eval_loss"] <= target_recipe().max_eval_loss
    assert entry.path.name == f"via-sd-target-{entry.key[:16]}"
    assert any(e["path"] == str(entry.path) for e in zoo.list_entries())
