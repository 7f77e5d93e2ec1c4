"""excess-dl's default-tier test fixture, registered for llmcore's fixture phase.

``build`` runs with no arguments in a fresh one-thread worker and returns the ``ZooEntry``.
``cold_seconds`` is the measured cold build on one torch thread (shared 2-core machine; see the
README's "Tests and fixtures"). The EDL curves themselves run live in the tests.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_toy_base() -> Any:
    from excess_dl.toy import build_toy_base as _build

    return _build()


FIXTURES = [
    Fixture(
        name="excess-dl-toy-base",
        build="excess_dl.fixtures:build_toy_base",
        cold_seconds=97.0,
        entries=("excess-dl-toy-base",),
        description="84k-param Llama, '>' applies pi_A and '=' copies (capability behind a lock)",
    ),
]
