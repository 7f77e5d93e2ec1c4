"""The CPU demonstration arm: simulator QA alone, GRPO on a tiny warm-started model.

The paper's claim (Sec. 4) is that RL on simulator-generated QA improves accuracy on
differently-sourced physics problems. At CPU scale that is shown on three families
(``constant_force``, ``atwood``, ``projectile``) with small parameter grids:

* **synthetic QA**: scenes built in the DSL, simulated by the analytic engine, turned into
  compact templated questions (answers only, no worked solutions), shortcut-filtered and
  deduplicated; a held-out part is the synthetic test set;
* **textbook proxy**: a separate template bank (other wording, object names, sentence order,
  same physics) whose answers are closed forms; one half of its parameter combinations is the
  *prior* corpus of worked solutions used for the supervised warm start, the other half the
  held-out proxy set;
* a 2-layer, d=128 character-level Llama warm-started on the prior (its proxy accuracy is
  gated to a window, so RL has room and something to reinforce), then GRPO with the 5 % rule
  reward on synthetic prompts kept by a pass-rate prefilter.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim2reason.dsl import Entity, Scene, Tendon, TendonEnd
from sim2reason.engines import AnalyticEngine, G
from sim2reason.errors import QAError
from sim2reason.filters import dedup, shortcut_filter
from sim2reason.qa import QAPair, generate_qa

__all__ = [
    "ArmConfig",
    "ClaimData",
    "arm_material",
    "build_arm",
    "build_warm_start",
    "claim_data",
    "claim_scenes",
    "evaluate_items",
    "run_arm",
    "sim_worked_solution",
    "synthetic_qa",
    "textbook_items",
]

FAMILIES = ("constant_force", "atwood", "projectile")
TIMES = (1.0, 1.5, 2.0)
SIM_QUANTITIES = ("acceleration", "velocity", "displacement", "tension")
MARK = "\n"
"""Separates prompt and completion (prompts are one line)."""


def _f(x: float) -> str:
    """Three significant digits: what the worked solutions write."""
    s = f"{x:.3g}"
    return s if "e" not in s else f"{x:.1f}"


# -- parameter grids ----------------------------------------------------------------------------
def _cf_grid() -> list[dict[str, float]]:
    return [{"mass": m, "force": m * a} for m in (1, 2, 3, 4, 5) for a in (1, 2, 3, 4, 5, 6)]


def _atwood_grid() -> list[dict[str, float]]:
    return [{"m1": a, "m2": b} for a in range(1, 6) for b in range(1, 6) if a != b]


def _proj_grid() -> list[dict[str, float]]:
    return [{"speed": v, "height": h, "mass": m} for v in range(1, 7) for h in (30, 40, 50)
            for m in (1, 2)]  # fmt: skip


def claim_scenes() -> list[Scene]:
    """One DSL scene per grid point of the three families (the simulator's input)."""
    out = []
    for i, p in enumerate(_cf_grid()):
        out.append(Scene(f"cf_{i}", [Entity("block0", "DirectedMass", parameters=dict(p))],
                         tag="ConstantForce/claim"))  # fmt: skip
    for i, p in enumerate(_atwood_grid()):
        out.append(Scene(f"atwood_{i}",
                         [Entity("mass0", "HangingMass", parameters={"mass": p["m1"]}),
                          Entity("mass1", "HangingMass", (0.0, 10.0, 0.0), {"mass": p["m2"]})],
                         [Tendon([TendonEnd("mass0"), TendonEnd("mass1")])],
                         tag="Atwood/claim"))  # fmt: skip
    for i, p in enumerate(_proj_grid()):
        out.append(Scene(f"proj_{i}", [Entity("ball0", "ThrowingMotionEntity", parameters={
            "mass": p["mass"], "height": p["height"], "speed": p["speed"], "angle": 0.0})],
            tag="Projectile/claim"))  # fmt: skip
    return out


def synthetic_qa(per_scene: int = 40, seed: int = 0) -> list[QAPair]:
    """Simulator QA on the grid: analytic engine, compact numeric questions at t in 1..2 s
    (0.5 s grid), shortcut filter, dedup."""
    eng = AnalyticEngine()
    out: list[QAPair] = []
    for scene in claim_scenes():
        rec = eng.simulate(scene)
        qas = generate_qa(scene, rec, "numeric", per_scene, random.Random(f"{seed}:{scene.name}"),
                          time_grid=0.5, quantities=SIM_QUANTITIES, style="compact")  # fmt: skip
        for q in qas:
            q.scene_type = scene.tag.split("/")[0]
        out += shortcut_filter(qas, scene, eng)
    return dedup(out)


# -- the textbook bank ---------------------------------------------------------------------------
def _cf_text(p: dict[str, float], q: str, t: float, v: int) -> tuple[str, str, float]:
    m, F = int(p["mass"]), int(p["force"])
    a = F / m
    name = {"acceleration": "acceleration", "velocity": "velocity", "displacement": "displacement"}[
        q
    ]
    prompt = (
        f"A {m} kg crate on ice is pushed by {F} N. Its {name} after {t:.2f} s?"
        if v == 0
        else f"{F} N pushes a {m} kg sled on ice. Find its {name} at {t:.2f} s."
    )
    head = f"a={F}/{m}={_f(a)}"
    if q == "acceleration":
        ans = a
        sol = head
    elif q == "velocity":
        ans = a * t
        sol = f"{head} v={_f(a)}*{t:g}={_f(ans)}"
    else:
        ans = a * t * t / 2
        sol = f"{head} x={_f(a)}*{t:g}^2/2={_f(ans)}"
    return prompt, f"{sol} \\boxed{{{_f(ans)}}}", ans


def _atwood_text(p: dict[str, float], q: str, t: float, v: int) -> tuple[str, str, float]:
    m1, m2 = int(p["m1"]), int(p["m2"])
    a = G * abs(m1 - m2) / (m1 + m2)
    name = {"acceleration": f"acceleration of the {m1} kg one",
            "velocity": f"velocity of the {m1} kg one", "tension": "cord tension"}[q]  # fmt: skip
    prompt = (
        f"Weights of {m1} kg and {m2} kg hang over a pulley. The {name} after {t:.2f} s?"
        if v == 0
        else f"Atwood machine, {m1} kg and {m2} kg. Find the {name} at {t:.2f} s."
    )
    head = f"a=9.81*{abs(m1 - m2)}/{m1 + m2}={_f(a)}"
    if q == "acceleration":
        ans, sol = a, head
    elif q == "velocity":
        ans = a * t
        sol = f"{head} v={_f(a)}*{t:g}={_f(ans)}"
    else:
        ans = 2 * G * m1 * m2 / (m1 + m2)
        sol = f"T=19.62*{m1}*{m2}/{m1 + m2}={_f(ans)}"
    return prompt, f"{sol} \\boxed{{{_f(ans)}}}", ans


def _proj_text(p: dict[str, float], q: str, t: float, v: int) -> tuple[str, str, float]:
    v0, h = int(p["speed"]), int(p["height"])
    vy = G * t
    ans = (v0 * v0 + vy * vy) ** 0.5
    prompt = (
        f"A stone is thrown flat at {v0} m/s off a {h} m cliff. Its velocity after {t:.2f} s?"
        if v == 0
        else f"Ball launched level at {v0} m/s from {h} m up. Find its velocity at {t:.2f} s."
    )
    sol = f"vy={_f(vy)} v=sqrt({v0}^2+{_f(vy)}^2)={_f(ans)}"
    return prompt, f"{sol} \\boxed{{{_f(ans)}}}", ans


_BANK = {
    "constant_force": (_cf_grid, ("acceleration", "velocity", "displacement"), _cf_text),
    "atwood": (_atwood_grid, ("acceleration", "velocity", "tension"), _atwood_text),
    "projectile": (lambda: [p for p in _proj_grid() if p["mass"] == 1], ("velocity",), _proj_text),
}


def textbook_items() -> list[dict[str, Any]]:
    """Every textbook-bank problem: ``{prompt, completion, answer, family, quantity, combo}``;
    ``combo`` identifies the physics (family, parameters, quantity, time) across wordings."""
    out = []
    for fam, (grid, quantities, make) in _BANK.items():
        for p, q, t in itertools.product(grid(), quantities, TIMES):
            combo = json.dumps([fam, p, q, t], sort_keys=True)
            for v in (0, 1):
                prompt, completion, ans = make(p, q, t, v)
                out.append({"prompt": prompt, "completion": completion, "answer": ans,
                            "family": fam, "quantity": q, "combo": combo})  # fmt: skip
    return out


def _sim_params(q: QAPair) -> tuple[str, dict[str, float]]:
    """The family and grid parameters of a simulator question (from its scene name)."""
    prefix, _, idx = q.reference.rpartition("_")
    fam, grid = {"cf": ("constant_force", _cf_grid), "atwood": ("atwood", _atwood_grid),
                 "proj": ("projectile", _proj_grid)}[prefix]  # fmt: skip
    return fam, grid()[int(idx)]


def sim_worked_solution(q: QAPair) -> tuple[str, str] | None:
    """A worked solution for a simulator-phrased question of the claim's grid, in the textbook
    bank's solution style: ``(completion, combo)``, where ``combo`` names the physics as
    :func:`textbook_items` does (``None`` if the closed form does not reproduce the recorded
    answer to 1e-6 relative)."""
    fam, p = _sim_params(q)
    quantity = q.simulation_mapping["attribute"].rsplit(".", 1)[-1]
    t = float(q.simulation_mapping["time"])
    if fam == "constant_force":
        m, F = int(p["mass"]), int(p["force"])
        a = F / m
        head = f"a={F}/{m}={_f(a)}"
    elif fam == "atwood":
        m1, m2 = int(p["m1"]), int(p["m2"])
        a = G * abs(m1 - m2) / (m1 + m2)
        head = f"a=9.81*{abs(m1 - m2)}/{m1 + m2}={_f(a)}"
    if fam != "projectile":
        if quantity == "acceleration":
            ans, sol = a, head
        elif quantity == "velocity":
            ans = a * t
            sol = f"{head} v={_f(a)}*{t:g}={_f(ans)}"
        elif quantity == "displacement":
            ans = a * t * t / 2
            sol = f"{head} x={_f(a)}*{t:g}^2/2={_f(ans)}"
        elif quantity == "tension" and fam == "atwood":
            ans = 2 * G * m1 * m2 / (m1 + m2)
            sol = f"T=19.62*{m1}*{m2}/{m1 + m2}={_f(ans)}"
        else:
            return None
    else:
        v0 = int(p["speed"])
        p = dict(p, mass=1)  # the bank's projectile problems are the mass-1 ones
        if quantity == "acceleration":
            ans, sol = G, "a=9.81"
        elif quantity == "velocity":
            vy = G * t
            ans = (v0 * v0 + vy * vy) ** 0.5
            sol = f"vy={_f(vy)} v=sqrt({v0}^2+{_f(vy)}^2)={_f(ans)}"
        elif quantity == "displacement":
            x, y = v0 * t, G * t * t / 2
            ans = (x * x + y * y) ** 0.5
            sol = f"x={_f(x)} y={_f(y)} d=sqrt({_f(x)}^2+{_f(y)}^2)={_f(ans)}"
        else:
            return None
    if abs(ans - q.answer) > 1e-6 * max(1.0, abs(q.answer)):
        return None
    return f"{sol} \\boxed{{{_f(ans)}}}", json.dumps([fam, p, quantity, t], sort_keys=True)


# -- data splits -------------------------------------------------------------------------------
@dataclass
class ClaimData:
    prior: list[dict[str, Any]]
    """Worked textbook solutions for the warm start."""
    proxy: list[dict[str, Any]]
    """Held-out textbook problems (parameter combinations disjoint from the prior)."""
    rl: list[QAPair]
    """Simulator QA for RL."""
    synthetic_test: list[QAPair]
    """Held-out simulator QA (texts disjoint from the RL set)."""


def claim_data(seed: int = 0, prior_fraction: float = 0.5, n_proxy: int = 500,
               n_synthetic_test: int = 500, prior_sim_phrased: bool = False) -> ClaimData:  # fmt: skip
    """Split the textbook bank by parameter combination into prior / proxy, and the simulator
    QA into RL / synthetic test.

    ``prior_sim_phrased`` adds to the prior worked solutions (:func:`sim_worked_solution`) for
    the RL questions whose physics is not one of the proxy's combinations: the prior then also
    shows the solution steps in the simulator's phrasing, never for a proxy problem's physics
    and never for a synthetic test question's text."""
    rng = random.Random(seed)
    items = textbook_items()
    combos = sorted({it["combo"] for it in items})
    rng.shuffle(combos)
    prior_combos = set(combos[: round(len(combos) * prior_fraction)])
    prior = [it for it in items if it["combo"] in prior_combos]
    proxy = [it for it in items if it["combo"] not in prior_combos]
    rng.shuffle(proxy)
    sim = synthetic_qa(seed=seed)
    rng.shuffle(sim)
    rl, synthetic_test = sim[n_synthetic_test:], sim[:n_synthetic_test]
    if prior_sim_phrased:
        proxy_combos = {it["combo"] for it in proxy[:n_proxy]}
        for q in rl:
            worked = sim_worked_solution(q)
            if worked is not None and worked[1] not in proxy_combos:
                fam, _, quantity = json.loads(worked[1])[:3]
                prior.append({"prompt": q.text, "completion": worked[0], "answer": q.answer,
                              "family": fam, "quantity": quantity, "combo": worked[1]})  # fmt: skip
    return ClaimData(prior=prior, proxy=proxy[:n_proxy], rl=rl,
                     synthetic_test=synthetic_test)  # fmt: skip


# -- evaluation --------------------------------------------------------------------------------
def generate_greedy(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int = 48,
                    batch_size: int = 128) -> list[str]:  # fmt: skip
    from llmcore.zoo.train import greedy_completions

    return greedy_completions(model, tokenizer, [p + MARK for p in prompts],
                              max_new_tokens=max_new_tokens, batch_size=batch_size)  # fmt: skip


def evaluate_items(model: Any, tokenizer: Any, prompts: Sequence[str], answers: Sequence[float],
                   rel: float = 0.05) -> dict[str, Any]:  # fmt: skip
    """Greedy accuracy under the 5 % rule (the training reward), with per-item hits."""
    from sim2reason.rewards import sim2reason_reward

    outs = generate_greedy(model, tokenizer, prompts)
    hits = sim2reason_reward(outs, list(answers), rel=rel)
    return {"accuracy": sum(hits) / len(hits), "hits": hits, "n": len(hits), "samples": outs[:3]}


@dataclass(frozen=True)
class ArmConfig:
    """The CPU arm: warm start, prefilter and GRPO sizes (see the test docstring for the
    calibration behind the defaults)."""

    sft_steps: int = 200
    """Warm-start steps (batch ``sft_batch``) on the prior corpus."""
    sft_batch: int = 32
    sft_lr: float = 3e-3
    prior_sim_phrased: bool = False
    """Also warm-start on worked solutions of simulator-phrased RL questions whose physics is
    not a proxy problem's (see :func:`claim_data`)."""
    gate_lo: float = 0.10
    """The warm start's proxy accuracy must lie in [gate_lo, gate_hi] (else no cache entry)."""
    gate_hi: float = 0.40
    n_prefilter: int = 512
    """RL prompts sampled ``prefilter_k`` times at T=1 for the pass-rate prefilter (all of
    the 431 simulator prompts of the default grid)."""
    prefilter_k: int = 8
    grpo_steps: int = 60
    prompts_per_step: int = 8
    num_generations: int = 8
    lr: float = 3e-5
    beta: float = 0.0
    temperature: float = 1.0
    max_completion_length: int = 48
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _recipe(cfg: ArmConfig, data: ClaimData) -> Any:
    from llmcore import zoo

    docs = [it["prompt"] + MARK + it["completion"] for it in data.prior]
    corpus = zoo.Corpus.from_texts("sim2reason-prior", docs, eval_fraction=0.05, seed=cfg.seed)
    return zoo.Recipe(
        "sim2reason-warm",
        corpus,
        tokenizer=zoo.TokenizerSpec(vocab_size=264),
        model=zoo.ModelSpec(
            hidden_size=128,
            num_layers=2,
            num_heads=4,
            intermediate_size=512,
            max_position_embeddings=160,
            tie_word_embeddings=True,
        ),
        train=zoo.TrainSpec(
            steps=cfg.sft_steps,
            batch_size=cfg.sft_batch,
            lr=cfg.sft_lr,
            warmup_steps=50,
            max_length=144,  # the longest prior document (bos + 133 characters + eos)
            seed=cfg.seed,
        ),
        max_eval_loss=20.0,  # held-out loss covers the (untrained) prompt tokens too
        description="2x128 char Llama warm-started on textbook worked solutions",
    )


def build_warm_start(cfg: ArmConfig | None = None, *, progress: bool = False,
                     gate: bool = True) -> Any:  # fmt: skip
    """The warm start (``zoo.build``): completion-only SFT on the prior corpus, gated to proxy
    accuracy in ``[gate_lo, gate_hi]`` (5 % rule, greedy, 200 proxy problems)."""
    import sim2reason.arm as me
    from llmcore import zoo
    from llmcore.zoo.train import completion_loss
    from sim2reason.rewards import sim2reason_reward

    cfg = cfg or ArmConfig()
    data = claim_data(cfg.seed, prior_sim_phrased=cfg.prior_sim_phrased)
    recipe = _recipe(cfg, data)
    tok = zoo.recipe_tokenizer(recipe)
    marker = tok.convert_tokens_to_ids(tok.tokenize(MARK))[0]
    gate_fn = None
    if gate:
        probe = data.proxy[:200]
        gate_fn = zoo.accuracy_gate(
            [p["prompt"] + MARK for p in probe], [repr(p["answer"]) for p in probe],
            lo=cfg.gate_lo, hi=cfg.gate_hi, max_new_tokens=cfg.max_completion_length,
            match=lambda pred, ans: sim2reason_reward([pred], [float(ans)])[0] == 1.0,
            name="proxy_accuracy",
        )  # fmt: skip
    return zoo.build(recipe, progress=progress, loss_fn=completion_loss(marker), gate=gate_fn,
                     key_extra={"loss": "completion-only after newline", "gate": [cfg.gate_lo, cfg.gate_hi] if gate else None,
                                "code": zoo.code_digest(me)})  # fmt: skip


def _rl_dataset(tok: Any, qas: Sequence[QAPair]) -> Any:
    from datasets import Dataset

    return Dataset.from_list(
        [{"prompt": (tok.bos_token or "") + q.text + MARK, "answer": float(q.answer)} for q in qas]
    )


def _log_stats(history: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [h for h in history if "reward" in h]
    keys = ("reward", "frac_reward_zero_std", "loss")
    out: dict[str, Any] = {}
    for k in keys:
        vals = [float(h[k]) for h in rows if k in h]
        if vals:
            n = max(1, len(vals) // 5)
            out[f"{k}_first"] = sum(vals[:n]) / n
            out[f"{k}_last"] = sum(vals[-n:]) / n
    return out


def arm_material(cfg: ArmConfig, warm_key: str) -> dict[str, Any]:
    """Everything that determines the arm: the warm start, the config and the code."""
    import sim2reason.arm
    import sim2reason.dsl
    import sim2reason.engines
    import sim2reason.filters
    import sim2reason.qa
    import sim2reason.recording
    import sim2reason.rewards
    import sim2reason.train
    from llmcore import zoo

    return {"warm": warm_key, "cfg": cfg.to_dict(),
            "code": zoo.code_digest(sim2reason.arm, sim2reason.train, sim2reason.rewards,
                                    sim2reason.qa, sim2reason.engines, sim2reason.filters,
                                    sim2reason.dsl, sim2reason.recording)}  # fmt: skip


def run_arm(model: Any, tok: Any, cfg: ArmConfig, data: ClaimData) -> tuple[Any, dict[str, Any]]:
    """Evaluate, prefilter, GRPO, evaluate again; returns the trained model and the numbers."""
    import torch

    from sim2reason.train import grpo_config, prefilter_by_pass_rate, train_grpo

    proxy_p = [p["prompt"] for p in data.proxy]
    proxy_a = [p["answer"] for p in data.proxy]
    syn_p = [q.text for q in data.synthetic_test]
    syn_a = [q.answer for q in data.synthetic_test]
    m: dict[str, Any] = {}
    t0 = _time()
    with torch.no_grad():
        bp = evaluate_items(model, tok, proxy_p, proxy_a)
        bs = evaluate_items(model, tok, syn_p, syn_a)
    m["eval_seconds"] = _time() - t0
    t0 = _time()
    ds = _rl_dataset(tok, data.rl[: cfg.n_prefilter])
    kept, res = prefilter_by_pass_rate(model, tok, ds, k=cfg.prefilter_k, seed=cfg.seed,
                                       max_new_tokens=cfg.max_completion_length,
                                       temperature=cfg.temperature)  # fmt: skip
    m["prefilter_seconds"] = _time() - t0
    m["prefilter_mean_pass_all"] = sum(res.rates) / len(res.rates)
    m["prefilter_kept"] = len(res.kept_indices)
    m["prefilter_mean_pass_kept"] = sum(res.kept_rates) / max(1, len(res.kept_rates))
    if len(kept) < cfg.prompts_per_step:
        raise QAError(
            f"the pass-rate prefilter kept {len(kept)} prompts, fewer than one GRPO step's "
            f"{cfg.prompts_per_step}: raise n_prefilter or lower prompts_per_step"
        )
    gcfg = grpo_config(
        "tiny", max_steps=cfg.grpo_steps, num_generations=cfg.num_generations,
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        learning_rate=cfg.lr, beta=cfg.beta, temperature=cfg.temperature,
        max_completion_length=cfg.max_completion_length, seed=cfg.seed,
    )  # fmt: skip
    t0 = _time()
    model = train_grpo(model, tok, kept, None, gcfg)
    m["grpo_seconds"] = _time() - t0
    m.update(_log_stats(model.sim2reason_log_history))
    model.eval()
    with torch.no_grad():
        ap = evaluate_items(model, tok, proxy_p, proxy_a)
        as_ = evaluate_items(model, tok, syn_p, syn_a)
    m.update({"proxy_before": bp["accuracy"], "proxy_after": ap["accuracy"],
              "synthetic_before": bs["accuracy"], "synthetic_after": as_["accuracy"],
              "n_proxy": bp["n"], "n_synthetic": bs["n"]})  # fmt: skip
    return model, m


def build_arm(cfg: ArmConfig | None = None, *, progress: bool = False) -> Any:
    """The RL arm (``zoo.cached``): prefilter + GRPO from the warm start; its metrics hold the
    before/after greedy accuracies on the proxy and synthetic test sets."""
    from llmcore import zoo

    cfg = cfg or ArmConfig()
    warm = build_warm_start(cfg, progress=progress)

    def make(out: Path) -> dict[str, Any]:
        model, tok = warm.load()
        model, metrics = run_arm(model, tok, cfg, claim_data(cfg.seed))
        model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        return metrics

    return zoo.cached("sim2reason-grpo-arm", arm_material(cfg, warm.key), make,
                      progress=progress, description="GRPO on simulator QA from the warm start")  # fmt: skip


def _time() -> float:
    return time.perf_counter()
