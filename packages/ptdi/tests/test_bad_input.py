"""Bad input gets clear errors naming the value and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ptdi.errors import PTDIConfigError, PTDIInputError
from ptdi.io import read_scores, validate_rows
from ptdi.stats import (
    bh_select,
    check_split_ratios,
    conformal_pvalues,
    jkbb_pi0,
    ptdi_select,
    simulate,
    split_protocol,
    storey_pi0,
)

RNG = np.random.default_rng(0)
CAL, TEST = RNG.standard_normal(50), RNG.standard_normal(40)


def test_calibration_too_small_names_minimum():
    with pytest.raises(PTDIInputError, match="at least n=9"):
        ptdi_select(CAL[:8], TEST, 0.1)
    with pytest.raises(PTDIInputError, match="at least n=19"):
        ptdi_select(CAL[:10], TEST, [0.2, 0.05])
    ptdi_select(CAL[:9], TEST, 0.1)  # n + 1 = 1/alpha is allowed


def test_nonfinite_scores_list_positions():
    bad = TEST.copy()
    bad[[3, 7]] = [np.nan, np.inf]
    with pytest.raises(PTDIInputError, match=r"2 NaN or infinite value\(s\) at \[3, 7\]"):
        conformal_pvalues(CAL, bad)
    with pytest.raises(PTDIInputError, match="empty"):
        ptdi_select(CAL, [], 0.1)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, [0.1, 1.2], float("nan")])
def test_alpha_out_of_range(alpha):
    with pytest.raises(PTDIConfigError, match="alpha"):
        ptdi_select(CAL, TEST, alpha)
    with pytest.raises(PTDIConfigError, match="alpha"):
        bh_select(np.full(5, 0.5), alpha)


def test_lambda_gamma_z_out_of_range():
    p = conformal_pvalues(CAL, TEST)
    for lam in (0.0, 1.0, 2.0):
        with pytest.raises(PTDIConfigError, match="lambda"):
            storey_pi0(p, lam=lam)
        with pytest.raises(PTDIConfigError, match="lambda"):
            ptdi_select(CAL, TEST, 0.1, lam=lam)
    for g in (0.0, -1.0):
        with pytest.raises(PTDIConfigError, match="gamma"):
            jkbb_pi0(p, gamma=g)
    with pytest.raises(PTDIConfigError, match="z must be >= 0"):
        ptdi_select(CAL, TEST, 0.1, jkbb_z=-1)
    with pytest.raises(PTDIConfigError, match="unknown pi_estimator"):
        ptdi_select(CAL, TEST, 0.1, pi_estimator="magic")
    with pytest.raises(PTDIConfigError, match="labels"):
        ptdi_select(CAL, TEST, 0.1, pi_estimator="oracle")
    with pytest.raises(PTDIConfigError, match="unknown estimator"):
        simulate(50, 40, 0.5, 2.0, estimators=("bogus",))


def _row(i, text, role, label):
    return {"id": i, "text": text, "role": role, "label": label}


def test_rows_validation():
    with pytest.raises(PTDIInputError, match=r"calibration rows labelled 1.*\['c1'\]"):
        validate_rows([_row("c1", "a", "calibration", 1), _row("t1", "b", "test", None)])
    with pytest.raises(PTDIInputError, match="duplicate id 'x'"):
        validate_rows([_row("x", "a", "calibration", 0), _row("x", "b", "test", 1)])
    with pytest.raises(PTDIInputError, match=r"identical text.*\('c', 't'\)"):
        validate_rows([_row("c", "same text", "calibration", 0), _row("t", "same text", "test", 1)])
    with pytest.raises(PTDIInputError, match="label must be 0, 1 or null"):
        validate_rows([_row("a", "a", "test", 2)])
    with pytest.raises(PTDIInputError, match="role"):
        validate_rows([_row("a", "a", "train", 0)])


def test_scores_file_needs_orientation_and_column(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"id": 1, "role": "test", "label": null, "mink": -2.0}\n')
    with pytest.raises(PTDIInputError, match="orientation is unknown"):
        read_scores(path, "mink")
    (tmp_path / "scores.meta.json").write_text(json.dumps({"scores": ["mink"]}))
    with pytest.raises(PTDIInputError, match="no orientation for score 'mink'"):
        read_scores(path, "mink")
    meta = {"orientation": {"mink": "higher_is_member", "loss": "higher_is_member"}}
    (tmp_path / "scores.meta.json").write_text(json.dumps(meta))
    with pytest.raises(PTDIInputError, match="score column 'loss' missing"):
        read_scores(path, "loss")
    path.write_text(
        '{"id": "a", "role": "test", "label": null, "mink": NaN}\n'
        '{"id": "b", "role": "test", "label": null, "mink": 1.0}\n'
    )
    with pytest.raises(PTDIInputError, match=r"ids \['a'\]"):
        read_scores(path, "mink")
    meta["orientation"]["mink"] = "lower_is_member"
    (tmp_path / "scores.meta.json").write_text(json.dumps(meta))
    path.write_text('{"id": "b", "role": "test", "label": null, "mink": 1.5}\n')
    assert read_scores(path, "mink")[1].tolist() == [-1.5]


def test_split_ratios_that_empty_a_side():
    with pytest.raises(PTDIConfigError, match="> 1"):
        check_split_ratios(100, 100, 0.9, 0.5, 0.6)
    with pytest.raises(PTDIConfigError, match="0 test non-members"):
        check_split_ratios(100, 10, 0.9, 0.06, 0.9)
    with pytest.raises(PTDIConfigError, match="cal_ratio must lie"):
        split_protocol(TEST, CAL, cal_ratio=0.0)
    with pytest.raises(PTDIConfigError, match="0 test members"):
        split_protocol(TEST[:1], CAL, test_member_ratio=0.5)
