"""Live smoke tests of the trainer subclass on the warm-up checkpoint (real trl GRPO steps)."""

from __future__ import annotations

import pytest
from conftest import small_trainer

pytestmark = pytest.mark.slow


def _losses(trainer):
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_alternate_interval1_is_deterministic_and_flushes(warm_entry):
    """Two seeded 3-step alternate runs at interval 1 (G, V, G) repeat their losses exactly."""
    runs = []
    for _ in range(2):
        tr = small_trainer(warm_entry, "alternate", 3, interval=1)
        tr.train()
        runs.append(tr)
    a, b = runs
    assert [k for _, k, _ in a.round_log] == ["gen", "verify", "gen"]
    assert a.round_log[1][2] == 0  # buffer flushed after the verification round
    assert a.round_log[0][2] > 0  # the generation round filled it
    assert len(_losses(a)) == 3
    assert _losses(a) == _losses(b)
    hist = [h for h in a.state.log_history if "loss" in h]
    assert "verify/acc" in hist[1] and "verify/yes_rate" in hist[1]
    assert "gen/frac_reward_zero_std" in hist[0] and "verify/buffer_size" in hist[0]


def test_verify_mode_two_steps(warm_entry):
    tr = small_trainer(warm_entry, "verify", 2)
    tr.train()
    assert [k for _, k, _ in tr.round_log] == ["verify", "verify"]
    hist = [h for h in tr.state.log_history if "loss" in h]
    assert all(h.get("rewards/gen_reward/mean") is None for h in hist)
    assert all(0.0 <= h["verify/acc"] <= 1.0 for h in hist)
    assert tr.phase_seconds["sample_candidates"] > 0


def test_mixed_and_stagewise_run(warm_entry):
    tr = small_trainer(warm_entry, "mixed", 2, mixed_verification_fraction=0.5)
    tr.train()
    assert [k for _, k, _ in tr.round_log] == ["mixed", "mixed"]
    tr = small_trainer(warm_entry, "stagewise", 2, stagewise_verify_steps=1)
    tr.train()
    assert [k for _, k, _ in tr.round_log] == ["verify", "gen"]


def test_empty_buffer_round_is_skipped_with_warning(warm_entry, caplog):
    """A verification round with nothing in the buffer trains generation instead and warns."""
    tr = small_trainer(warm_entry, "alternate", 1, interval=1)
    tr.schedule.interval = 0  # first round is a verification round, buffer still empty
    with caplog.at_level("WARNING", logger="selfverify_rl.trainer"):
        tr.train()
    assert tr.round_log[0][1] == "gen"
    assert "empty buffer" in caplog.text
