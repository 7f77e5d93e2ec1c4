"""Selectors, pools, order files and embeddings (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest
from cds_icl.embed import Embedder, embed
from cds_icl.pool import Demo, DemoPool, OrderFile
from cds_icl.selectors import (
    CDSSelector,
    ComplexitySelector,
    DissimilarSelector,
    KATESelector,
    OriginalSelector,
    RandomSelector,
    complexity,
)
from cds_icl.synthetic import synthetic_split


@pytest.fixture(scope="module")
def pool():
    items, _ = synthetic_split()
    return DemoPool.from_dataset(items, n=64, seed=71)


def test_pool_semantics_first_n_then_seeded_shuffle():
    rows = [{"problem": f"p{i}", "solution": f"\\boxed{{{i}}}"} for i in range(100)]
    p = DemoPool.from_dataset(rows, n=16, seed=71)
    pos = list(range(16))
    np.random.default_rng(71).shuffle(pos)
    assert [d.problem for d in p] == [f"p{i}" for i in pos]
    assert [d.answer for d in p] == [str(i) for i in pos]
    assert p.texts()[0] == f"Problem:\np{pos[0]}\nSolution:\n\\boxed{{{pos[0]}}}"


def test_pool_jsonl_roundtrip(tmp_path, pool):
    pool.to_jsonl(tmp_path / "p.jsonl")
    back = DemoPool.from_jsonl(tmp_path / "p.jsonl")
    assert [(d.problem, d.solution, d.answer) for d in back] == [
        (d.problem, d.solution, d.answer) for d in pool
    ]
    assert back.ids == pool.ids


def test_order_file_roundtrip_and_official_layout(tmp_path):
    of = OrderFile([2, 0, 1, 3], 0.5, "cds", "bge-m3", 71, 4)
    of.save(tmp_path / "o.json")
    assert OrderFile.load(tmp_path / "o.json") == of
    assert of.official_name("geometry") == "geometry_r2_seed71_cds_bge-m3.json"
    import json

    (tmp_path / "off.json").write_text(
        json.dumps(
            {
                "order": [1, 0, 2, 3],
                "score": 0.4,
                "args": {"r": 2, "seed": 71, "strategy": "cds", "embed_model": "bge-m3"},
            }
        )
    )
    o = OrderFile.load(tmp_path / "off.json")
    assert (o.n, o.seed, o.order) == (4, 71, [1, 0, 2, 3])


def test_random_and_original(pool):
    r = RandomSelector()
    a, b = r.select(pool, None, 16, 71), r.select(pool, None, 16, 72)
    assert sorted(a) == list(range(16)) and a != b
    assert a == r.select(pool, None, 16, 71)
    assert OriginalSelector().select(pool, None, 5, 0) == [0, 1, 2, 3, 4]


def test_kate_puts_most_similar_last(pool):
    """Spec test 5: KATE's last demo is the query's nearest neighbour (a pool item itself)."""
    emb = Embedder("hash")
    kate = KATESelector(emb)
    q = pool[10].problem
    sel = kate.select(pool, q, 8, 0)
    sim = kate.similarities(pool, q)
    assert sel[-1] == int(np.argmax(sim))
    assert list(sim[sel]) == sorted(sim[sel])
    assert set(sel) == set(np.argsort(-sim, kind="stable")[:8].tolist())
    fwd = KATESelector(emb, reverse=False).select(pool, q, 8, 0)
    assert fwd == sel[::-1]
    far = DissimilarSelector(emb).select(pool, q, 8, 0)
    assert set(far) == set(np.argsort(sim, kind="stable")[:8].tolist())


def test_complexity_picks_longest_solutions(pool):
    """Spec test 5: the k most complex (most lines) demos, ascending."""
    sel = ComplexitySelector().select(pool, None, 10, 0)
    c = [complexity(d.solution) for d in pool]
    assert min(c[i] for i in sel) >= sorted(c, reverse=True)[9]
    assert [c[i] for i in sel] == sorted(c[i] for i in sel)
    assert ComplexitySelector("desc").select(pool, None, 10, 0) == sel[::-1]
    assert complexity("One. Two! Three?") == 3


def test_cds_selector_orders_first_k(pool):
    sel = CDSSelector(Embedder("hash"))
    o = sel.select(pool, None, 16, 0)
    assert sorted(o) == list(range(16)) and sel.last_score > 0


def test_hash_embeddings_deterministic_float64():
    E = embed(["a b c", "a b d", ""], "hash")
    assert E.dtype == np.float64 and E.shape == (3, 512)
    np.testing.assert_array_equal(E, embed(["a b c", "a b d", ""], "hash"))
    assert np.isclose(np.linalg.norm(E[0]), 1.0) and np.linalg.norm(E[2]) == 0


def test_demo_dataclass():
    d = Demo("p", "s", "1", {"idx": 3})
    assert DemoPool([d]).ids == [3]
