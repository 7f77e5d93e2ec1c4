"""Streaming step segmentation of a reasoning trace (section 2.1): a step ends at the token whose
decoding completes the delimiter (a blank line by default), at the ``max_step_tokens``-th token,
or at the think-close tag. Detection runs on the decoded text of the current step, since
tokenisers merge newlines with neighbouring characters."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

from monica_syco.errors import MonicaConfigError

EventKind = Literal["token", "boundary", "close", "reset", "end", "answer", "ignored"]


@dataclass
class StepEvent:
    """What one fed token did: ``pooled`` says whether its states join the current step's
    pool (boundary, tag and post-answer tokens never do)."""

    kind: EventKind
    pooled: bool = False
    step_text: str = ""


@dataclass
class RowState:
    """Per-row segmentation state (one sequence of a batch)."""

    phase: Literal["pre", "reason", "answer", "done"] = "pre"
    step_ids: list[int] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    saw_open: bool = False
    saw_delimiter: bool = False
    forced: int = 0

    @property
    def no_think_tags(self) -> bool:
        return not self.saw_open


class StepSegmenter:
    """Split generated tokens into reasoning steps (section 2.1).

    ``scope="reasoning"`` segments only the span between the think tags (text after the
    think-close tag is the answer, not a step); ``scope="all"`` keeps segmenting after it.
    When the prompt already ends with the think-open tag the span starts at the first
    generated token; when no tag is ever produced the whole generation is reasoning.
    """

    def __init__(
        self,
        tokenizer: Any,
        delimiter: str = r"\n\s*\n",
        max_step_tokens: int = 64,
        think_open: str | None = "<think>",
        think_close: str | None = "</think>",
        scope: Literal["reasoning", "all"] = "reasoning",
    ) -> None:
        if max_step_tokens < 1:
            raise MonicaConfigError(f"max_step_tokens must be >= 1, got {max_step_tokens}")
        if scope not in ("reasoning", "all"):
            raise MonicaConfigError(f"scope must be 'reasoning' or 'all', got {scope!r}")
        try:
            self.pattern = re.compile(delimiter)
        except re.error as e:
            raise MonicaConfigError(f"delimiter {delimiter!r} is not a valid regex: {e}") from e
        self.tokenizer = tokenizer
        self.delimiter = delimiter
        self.max_step_tokens = max_step_tokens
        self.think_open = think_open
        self.think_close = think_close
        self.scope = scope
        eos = getattr(tokenizer, "eos_token_id", None)
        self.stop_ids: set[int] = (
            set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
        )
        self._warned = False

    def new_row(self, prompt_text: str = "") -> RowState:
        """A fresh row; reasoning has begun if the prompt ends with the think-open tag."""
        st = RowState()
        if self.think_open and prompt_text.rstrip().endswith(self.think_open):
            st.phase, st.saw_open = "reason", True
        return st

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def push(self, st: RowState, token_id: int) -> StepEvent:
        """Feed one generated token (the one being fed back to the model)."""
        if st.phase == "done":
            return StepEvent("ignored")
        if token_id in self.stop_ids:
            st.phase = "done"
            text = self._decode(st.step_ids).strip()
            return StepEvent("end", step_text=text)
        if st.phase == "answer" and self.scope == "reasoning":
            return StepEvent("answer")
        st.step_ids.append(token_id)
        text = self._decode(st.step_ids)
        if st.phase == "pre" and self.think_open and self.think_open in text:
            st.phase, st.saw_open = "reason", True
            st.step_ids = []
            return StepEvent("reset")
        if st.phase != "answer" and self.think_close and self.think_close in text:
            st.phase = "answer"
            st.step_ids = []
            step = text.split(self.think_close)[0].strip()
            st.steps.append(step)
            return StepEvent("close", step_text=step)
        if self.pattern.search(text):
            st.saw_delimiter = True
            st.step_ids = []
            st.steps.append(text.strip())
            return StepEvent("boundary", step_text=text.strip())
        if len(st.step_ids) >= self.max_step_tokens:
            st.forced += 1
            st.step_ids = []
            st.steps.append(text.strip())
            return StepEvent("boundary", step_text=text.strip())
        return StepEvent("token", pooled=True)

    def finish(self, st: RowState) -> None:
        """End of generation: warn once when steps were only ever cut by length."""
        if st.forced and not st.saw_delimiter and not self._warned:
            self._warned = True
            warnings.warn(
                f"the delimiter {self.delimiter!r} was never produced; steps were cut every "
                f"{self.max_step_tokens} tokens (set delimiter= to the model's step separator)",
                stacklevel=2,
            )

    def segment(
        self, token_ids: list[int], prompt_text: str = ""
    ) -> tuple[list[StepEvent], RowState]:
        """Offline segmentation of generated ``token_ids``: one event per token."""
        st = self.new_row(prompt_text)
        return [self.push(st, int(t)) for t in token_ids], st
