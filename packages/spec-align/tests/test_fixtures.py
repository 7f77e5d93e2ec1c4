"""The registered fixture and the demo-size model's own cache key (no training here)."""

from __future__ import annotations

from spec_align.fixtures import FIXTURES
from spec_align.tiny import DEMO_CONFIG, TinyConfig, _key_extra, tiny_recipe


def _entry(cfg: TinyConfig):
    from llmcore.zoo.cache import entry_dir, recipe_key

    recipe = tiny_recipe(cfg)
    material = recipe.key_material()
    material["extra"] = _key_extra(cfg)
    return entry_dir(recipe.name, recipe_key(material))


def test_fixture_is_registered_with_a_measured_cost():
    (fx,) = FIXTURES
    assert fx.entries == (TinyConfig().name,)
    assert fx.load_builder().__name__ == "build_tiny"
    assert fx.cold_seconds > 0


def test_demo_model_has_its_own_cache_entry():
    assert DEMO_CONFIG.steps < TinyConfig().steps
    full, demo = _entry(TinyConfig()), _entry(DEMO_CONFIG)
    assert full != demo
    assert full.name.startswith("spec-align-tiny-") and demo.name.startswith("spec-align-demo-")
