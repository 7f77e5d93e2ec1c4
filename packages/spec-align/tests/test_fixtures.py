"""The registered fixture builder (it returns the zoo entry); the demo model's own cache key."""

from __future__ import annotations

import hashlib
import json

from spec_align.fixtures import FIXTURES, build_tiny
from spec_align.tiny import DEMO_CONFIG, TinyConfig, build_tiny_model, tiny_material

from llmcore import zoo

#: sha256 of the claim model's key material (recipe + loss/gate description): changing it
#: rebuilds the model (minutes), so a change must be deliberate. The zoo key adds the library
#: versions and the machine's CPU kernels to this, so it is not pinned here.
TINY_MATERIAL_PREFIX = "1081901f55b7123d"


def test_fixture_is_registered_with_a_measured_cost():
    (fx,) = FIXTURES
    assert fx.entries == (TinyConfig().name,)
    assert fx.load_builder() is build_tiny
    assert fx.cold_seconds > 0


def test_builder_returns_the_zoo_entry():
    """The fixture phase accepts only zoo entries; a warm cache loads without building."""
    built = zoo.lookup(TinyConfig().name, tiny_material(TinyConfig()))
    entry = build_tiny()  # builds when cold (the fixture phase does that first in CI)
    assert isinstance(entry, zoo.ZooEntry) and entry.name == "spec-align-tiny"
    assert (entry.path / "zoo.json").exists()
    assert entry.from_cache == (built is not None)
    material = json.dumps(tiny_material(TinyConfig()), sort_keys=True).encode()
    assert hashlib.sha256(material).hexdigest().startswith(TINY_MATERIAL_PREFIX), (
        "the claim model's recipe changed"
    )
    again = build_tiny_model()
    assert again.from_cache and again.path == entry.path and again.key == entry.key
    assert zoo.lookup(entry.name, tiny_material(TinyConfig())).path == entry.path


def test_demo_model_has_its_own_cache_entry():
    assert DEMO_CONFIG.steps < TinyConfig().steps
    full, demo = tiny_material(TinyConfig()), tiny_material(DEMO_CONFIG)
    assert full != demo
    assert full["name"] == "spec-align-tiny" and demo["name"] == "spec-align-demo"
