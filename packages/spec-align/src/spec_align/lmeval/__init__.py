"""lm-evaluation-harness tasks (``lm_eval --include_path $(python -c 'import spec_align.lmeval as m;
print(m.TASK_DIR)') --tasks specbench_synth``). Needs the extra ``lm-eval``."""

from __future__ import annotations

from pathlib import Path

TASK_DIR = str(Path(__file__).parent)
TASKS = (
    "specbench_biochem",
    "specbench_child",
    "specbench_code",
    "specbench_health",
    "specbench_travel",
    "specbench_synth",
)
GROUP = "specbench"
