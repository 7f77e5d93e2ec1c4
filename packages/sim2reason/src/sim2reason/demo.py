"""The ``llmcore demo`` entry: generate scenes, simulate, make and filter QA, check answers.

No training and no model: the data pipeline and the checker only (a few seconds on CPU).
"""

from __future__ import annotations

import time
from typing import Any


def run() -> dict[str, Any]:
    """Run the pipeline on 5 scenes per CPU scene type and grade a few answers."""
    from sim2reason.data import split_train_test
    from sim2reason.filters import dedup
    from sim2reason.generate import generate_scenes
    from sim2reason.pipeline import scenes_to_qa
    from sim2reason.rewards import check_answer

    t0 = time.perf_counter()
    scenes = generate_scenes("analytic", 5, seed=0)
    res = scenes_to_qa(scenes, kinds=("numeric", "reverse", "symbolic"), per_scene=4, workers=1)
    qas = dedup(res.qas)
    train, test = split_train_test(qas)
    q = next(x for x in qas if x.kind == "numeric" and x.answer > 1.0)
    graded = {
        "exact": check_answer(f"\\boxed{{{q.answer:.4g}}}", q.answer)["reward"],
        "4% off": check_answer(f"\\boxed{{{q.answer * 1.04:.4g}}}", q.answer)["reward"],
        "10% off": check_answer(f"\\boxed{{{q.answer * 1.10:.4g}}}", q.answer)["reward"],
        "no box": check_answer(f"so it is {q.answer:.4g} m/s", q.answer)["reward"],
    }
    return {
        "scenes": len(scenes),
        "questions_generated": res.generated,
        "questions_after_filter_and_dedup": len(qas),
        "dropped_scenes": len(res.dropped),
        "train/test": [len(train), len(test)],
        "example_question": q.text[-160:],
        "example_answer": round(q.answer, 4),
        "rewards": graded,
        "seconds": round(time.perf_counter() - t0, 2),
    }


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(run(), indent=2))
