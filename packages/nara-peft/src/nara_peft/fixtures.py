"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from llmcore.fixtures import Built, Fixture


def build_pretrained() -> Built:
    """The tiny masked-diffusion LM pre-trained on the chain task
    (:func:`nara_peft.synth.pretrained_tiny`)."""
    from nara_peft.synth import pretrained_path, pretrained_tiny

    path = pretrained_path()
    cached = path.exists()
    pretrained_tiny()
    return Built(from_cache=cached, path=str(path))


FIXTURES = [
    Fixture(
        name="nara-peft-pretrained",
        build="nara_peft.fixtures:build_pretrained",
        cold_seconds=40.0,
        entries=("nara-peft-tiny-mdlm",),
        description="tiny bidirectional Llama pre-trained on the synthetic chain task",
    ),
]
