"""The registered fixture, the demo and the package metadata."""

from __future__ import annotations

from importlib.metadata import version

import pytest


def test_method_and_fixtures_registered():
    import ptdi
    from ptdi.fixtures import FIXTURES

    from llmcore.registry import MethodInfo

    assert isinstance(ptdi.METHOD, MethodInfo) and ptdi.METHOD.demo == "ptdi.demo:run"
    assert ptdi.__version__ == version("ptdi")
    assert [f.name for f in FIXTURES] == ["ptdi-members", "ptdi-demo"]
    from ptdi.tiny import DEMO_DOCS, DEMO_STEPS, recipe

    assert recipe().name in FIXTURES[0].entries
    assert recipe(DEMO_STEPS, n_docs=DEMO_DOCS).name in FIXTURES[1].entries


def test_language_is_seeded_and_balanced():
    from ptdi.tiny import make_language

    a, b = make_language(), make_language()
    assert a.docs == b.docs and (a.labels == b.labels).all()
    assert len(a.docs) == 600 and a.labels.sum() == 300
    assert all(len(d.split()) == 48 for d in a.docs)
    assert len(set(a.docs)) == 600 and not set(a.held_out) & set(a.docs)


@pytest.mark.slow
def test_demo_runs_and_ptdi_beats_bh():
    from ptdi.demo import run

    out = run(print_table=False, n_splits=50)
    assert out["loss_auc"] >= 0.8
    assert out["pi0.9_ptdi_power"] > out["pi0.9_bh_power"]
    assert out["pi0.5_ptdi_fir"] <= 0.1 + 0.05
