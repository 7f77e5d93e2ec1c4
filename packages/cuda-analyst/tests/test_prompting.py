"""Masks, mode bits, decision block format and injection (exactness)."""

from __future__ import annotations

import pytest
from cuda_analyst.masks import AnalysisMask, coalition_masks, parse_masks
from cuda_analyst.prompting import ANCHOR, Report, decision_block, extract_code, inject


def test_mask_round_trip_and_mode_bits():
    for s in ["p7-d3-a3-p3", "p0-d0-a0-p0", "p7-d0-a3-p0", "p3-d7-a1-p3-r3"]:
        assert str(AnalysisMask.parse(s)) == s
    masks = coalition_masks()
    assert len(masks) == 8 and len({str(m) for m in masks}) == 8
    assert {str(m) for m in masks} == {
        f"p7-d{d}-a{a}-p{p}" for d in (0, 3) for a in (0, 3) for p in (0, 3)
    }
    assert AnalysisMask.parse("p7-d3-a0-p3").players() == {"d", "p"}
    assert [str(m) for m in parse_masks("all8")] == [str(m) for m in masks]
    for bad in ["p7-d2-a3-p3", "p7-d3-a3", "x7-d3-a3-p3", "p7-d3-a3-p9"]:
        with pytest.raises(ValueError):
            AnalysisMask.parse(bad)
    with pytest.raises(ValueError, match="mode bits"):
        AnalysisMask(d=5)


def test_decision_block_and_injection():
    reps = [Report("Planner", "", "do X"), Report("Debugger", "raw text")]
    block = decision_block(reps)
    assert (
        block
        == "# Plan Decision\n\n## Planner\nPlan decision: do X\n\n## Debugger\nPlan decision: raw text\n"
    )
    prompt = f"# Current Program\ncode\n\n{ANCHOR}\nhistory\n"
    out = inject(prompt, block)
    assert out.index("# Plan Decision") < out.index(ANCHOR)
    assert out.replace(block + "\n", "") == prompt
    no_anchor = "just a prompt"
    assert inject(no_anchor, block).startswith(no_anchor) and inject(
        no_anchor, block
    ).rstrip().endswith("raw text")
    assert inject(prompt, "") == prompt  # byte-identical
    assert decision_block([]) == ""


def test_extract_code():
    assert extract_code("x\n```c\nint a;\n```\n```c\nint b;\n```") == "int a;\n"
    assert extract_code("no code here") is None
