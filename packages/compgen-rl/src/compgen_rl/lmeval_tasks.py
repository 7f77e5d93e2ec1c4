"""lm-evaluation-harness tasks ``compgen_{seen,unseen,ood}`` over a make-data directory.

Each task is ``generate_until`` on the split's JSONL (``doc_to_text`` = the prompt, target = the
answer), stops at a blank line, extracts the ``ans=`` line with a regex filter and scores exact
match (case-sensitive). Written through ``llmcore.lmeval.write_generate_until_task``.
"""

from __future__ import annotations

from pathlib import Path

TASKS = {"compgen_seen": "test_seen", "compgen_unseen": "test_unseen", "compgen_ood": "test_ood"}


def write_tasks(data_dir: str | Path, out_dir: str | Path, *, max_gen_toks: int = 64) -> list[Path]:
    """Write the three task YAMLs into ``out_dir`` (use it as lm-eval's ``--include_path``)."""
    from compgen_rl.errors import CompgenError
    from llmcore.lmeval import write_generate_until_task

    paths = []
    for task, split in TASKS.items():
        f = Path(data_dir) / f"{split}.jsonl"
        if not f.is_file():
            raise CompgenError(
                f"{f} is missing; write it with `compgen-rl make-data --out {data_dir}`"
            )
        paths.append(
            write_generate_until_task(
                out_dir,
                task=task,
                data_files=f,
                doc_to_text="{{prompt}}",
                doc_to_target="{{answer}}",
                generation_kwargs={
                    "until": ["\n\n"],
                    "max_gen_toks": max_gen_toks,
                    "do_sample": False,
                },
                ignore_case=False,
                target_delimiter="",
                filter_regex=r"ans=(\S*)",
            )
        )
    return paths
