"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmcore.fixtures import Fixture

if TYPE_CHECKING:
    from llmcore.zoo import ZooEntry


def build_pretrained() -> ZooEntry:
    """The tiny masked-diffusion LM pre-trained on the chain task
    (:func:`nara_peft.tiny.pretrained_entry`)."""
    from nara_peft.tiny import pretrained_entry

    return pretrained_entry()


FIXTURES = [
    Fixture(
        name="nara-peft-pretrained",
        build="nara_peft.fixtures:build_pretrained",
        cold_seconds=70.0,
        entries=("nara-peft-tiny-mdlm",),
        description="tiny bidirectional Llama pre-trained on the synthetic chain task",
    ),
]
