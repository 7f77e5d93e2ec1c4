"""sink-probe's default-tier fixtures, registered for llmcore's fixture phase.

The two trained variants of the value-removal claim (``suppress_massive`` and
``suppress_massive+zero_sink_value``, identical data, steps and seed). ``build`` is called with
no arguments in a fresh single-thread worker and returns the ``ZooEntry``. ``cold_seconds`` was
measured from an empty cache on one torch thread on this project's shared 2-core machine.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_suppress_massive() -> Any:
    from sink_probe.variants import CLAIM_SPEC, train_variant

    return train_variant("suppress_massive", CLAIM_SPEC)


def build_suppress_massive_zero_value() -> Any:
    from sink_probe.variants import CLAIM_SPEC, train_variant

    return train_variant("suppress_massive+zero_sink_value", CLAIM_SPEC)


FIXTURES = [
    Fixture(
        name="sink-probe-suppress-massive",
        build="sink_probe.fixtures:build_suppress_massive",
        cold_seconds=300.0,
        entries=("sink-probe-suppress_massive",),
        description="Llama 3 x 64 on the synthetic streams, sink residual clamped at 10x median",
    ),
    Fixture(
        name="sink-probe-suppress-massive-zero-value",
        build="sink_probe.fixtures:build_suppress_massive_zero_value",
        cold_seconds=300.0,
        entries=("sink-probe-suppress_massive-plus-zero_sink_value",),
        description="as sink-probe-suppress-massive, plus the sink's value zeroed in every layer",
    ),
]
