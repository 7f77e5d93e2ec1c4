"""The synthetic fictitious-author world (forget values unique to the forget authors)."""

from __future__ import annotations

import random

from unlearn_leakk.world import ATTRIBUTES, make_world, world_recipe


def test_world_is_deterministic_and_forget_values_unique():
    a, b = make_world(0), make_world(0)
    assert a == b and len(a.authors) == 20
    assert len(a.documents()) == 300 and len(a.qa_items()) == 100
    for pair in range(3):
        f, r = a.forget_authors(pair), a.retain_authors(pair)
        assert len(f) == 2 and len(r) == 18 and not set(f) & set(r)
        for attr in ATTRIBUTES:
            forget_vals = {a.authors[i].values[attr] for i in f}
            retain_vals = {a.authors[i].values[attr] for i in r}
            assert not forget_vals & retain_vals


def test_wrong_value_and_recipe(world):
    rng = random.Random(0)
    item = world.qa_items([0])[0]
    for _ in range(20):
        v = world.wrong_value(item.id, rng)
        assert v != item.answer and v in world.pools["city"]
    r = world_recipe()
    assert r.model.num_layers == 4 and r.model.hidden_size == 128 and r.tokenizer.vocab_size == 512
    assert world_recipe(authors="retain").corpus.fingerprint != r.corpus.fingerprint
