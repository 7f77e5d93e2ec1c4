"""Throughput of the pure-Python parts (``perf``: wall-clock assertions, never in parallel)."""

from __future__ import annotations

import random
import time

import pytest
from selfverify_rl.rewards import generation_reward, verification_reward
from selfverify_rl.sampling import Rollout, build_verification_samples

pytestmark = pytest.mark.perf


def _rollouts(n_groups: int, n: int = 8) -> list[Rollout]:
    rng = random.Random(0)
    out = []
    for g in range(n_groups):
        for j in range(n):
            ok = rng.random() < 0.5
            text = f"{g}+{j}=.. \\boxed{{{g + (0 if ok else 1)}}}"
            out.append(Rollout(str(g), f"{g}+0", text, float(ok), True))
    return out


def test_builder_at_least_100k_rollouts_per_second():
    rollouts = _rollouts(4000)  # 32k rollouts
    build_verification_samples(rollouts[:800], 8)  # warm-up
    t0 = time.perf_counter()
    out = build_verification_samples(rollouts, 8, rng=random.Random(0))
    rate = len(rollouts) / (time.perf_counter() - t0)
    assert len(out) > 0
    assert rate >= 100_000, f"{rate:.0f} rollouts/s"


def test_rewards_at_least_20k_per_second():
    n = 20_000
    comps = [f"7+9=16 c1|4+8+1=13 c1|c1|\\boxed{{{136 + (i % 2)}}}" for i in range(n)]
    t0 = time.perf_counter()
    g = generation_reward([""] * n, comps, task=["gen"] * n, answer=["136"] * n)
    rate_g = n / (time.perf_counter() - t0)
    verdicts = ["\\boxed{Yes}" if i % 3 else "\\boxed{No}" for i in range(n)]
    t0 = time.perf_counter()
    v = verification_reward([""] * n, verdicts, task=["verify"] * n, label=["Yes"] * n,
                            pass_rate=[0.5] * n)  # fmt: skip
    rate_v = n / (time.perf_counter() - t0)
    assert sum(g) == n / 2 and len(v) == n
    assert rate_g >= 20_000 and rate_v >= 20_000, (rate_g, rate_v)


@pytest.mark.slow
def test_alternate_interval5_costs_at_most_135x_gen(warm_entry):
    """``alternate`` at interval 5 costs <= 1.35 x ``gen``'s wall time at equal steps
    (the multi-task cost target): 12 steps each (``alternate``: 10 generation + 2 verification
    rounds, verification prompts from the buffer), 4 prompts x 4 generations, 48 new tokens,
    after one untimed step; each mode timed twice interleaved, the faster run kept."""
    from conftest import small_trainer

    small_trainer(warm_entry, "gen", 1).train()  # trl/accelerate's first-trainer setup
    best: dict[str, float] = {}
    for _ in range(2):
        for mode in ("gen", "alternate"):
            tr = small_trainer(warm_entry, mode, 12, interval=5)
            t0 = time.perf_counter()
            tr.train()
            best[mode] = min(best.get(mode, float("inf")), time.perf_counter() - t0)
            if mode == "alternate":
                assert [k for _, k, _ in tr.round_log].count("verify") == 2
    ratio = best["alternate"] / best["gen"]
    print(f"gen {best['gen']:.2f} s, alternate {best['alternate']:.2f} s, ratio {ratio:.3f}")
    assert ratio <= 1.35, best
