"""Probe prompts (method section 2.2): confident prompts grouped into families that share
an intermediate concept, each with its role positions (subject token, last token)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from circuitprint.errors import ProbeError


@dataclass(frozen=True)
class ProbeItem:
    """One probe: prompt text (as the model reads it), first answer token text, family and
    role positions in the prompt's token ids."""

    prompt: str
    answer: str
    family: str
    roles: Mapping[str, int] = field(default_factory=dict)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` exactly as a text-based suspect tokenises it."""
    return list(tokenizer(text)["input_ids"])


def with_bos(tokenizer: Any, body: str) -> str:
    """Prompt text that tokenises to BOS + ``body`` (writes the BOS out when the tokenizer
    does not add it by itself)."""
    bos = tokenizer.bos_token_id
    if bos is None or encode(tokenizer, body)[:1] == [bos]:
        return body
    return f"{tokenizer.bos_token} {body}"


def answer_token(tokenizer: Any, answer: str) -> int:
    """Id of the first token of the answer as it follows a prompt (with a leading space)."""
    ids = tokenizer(" " + answer.strip(), add_special_tokens=False)["input_ids"]
    if not ids:
        raise ProbeError(f"answer {answer!r} tokenises to nothing")
    return int(ids[0])


def token_text(tokenizer: Any, tid: int) -> str:
    """Decoded text of one token, stripped (how answers are compared)."""
    return tokenizer.decode([int(tid)]).strip()


class ProbeSet:
    """A list of :class:`ProbeItem` with constructors and the confidence filter."""

    def __init__(self, items: Sequence[ProbeItem | Mapping[str, Any]]) -> None:
        self.items = [i if isinstance(i, ProbeItem) else ProbeItem(**i) for i in items]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, i: int) -> ProbeItem:
        return self.items[i]

    @property
    def families(self) -> list[str]:
        return sorted({i.family for i in self.items})

    @classmethod
    def from_templates(
        cls,
        templates: Sequence[str],
        entities: Mapping[str, Sequence[tuple[str, str]]],
        tokenizer: Any,
    ) -> ProbeSet:
        """Two-hop template probes: each template has a ``{subject}`` slot; ``entities`` maps
        a family (the intermediate concept, e.g. a state) to ``(subject, answer)`` pairs.
        Roles: ``subject`` = last token of the subject, ``last`` = final prompt token."""
        items = []
        for t in templates:
            if "{subject}" not in t:
                raise ProbeError(f"template {t!r} has no {{subject}} slot")
            head = t.split("{subject}")[0]
            for fam, pairs in entities.items():
                for subj, ans in pairs:
                    text = t.format(subject=subj)
                    n_head = len(encode(tokenizer, head + subj))
                    items.append(
                        ProbeItem(
                            text,
                            token_text(tokenizer, answer_token(tokenizer, ans)),
                            fam,
                            {"subject": n_head - 1, "last": len(encode(tokenizer, text)) - 1},
                        )
                    )
        return cls(items)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> ProbeSet:
        """Read ``{prompt, answer, family, roles}`` rows."""
        from llmcore.data import read_jsonl

        rows = read_jsonl(path)
        for k, r in enumerate(rows):
            missing = {"prompt", "answer", "family", "roles"} - set(r)
            if missing:
                raise ProbeError(f"{path}: row {k + 1} lacks {sorted(missing)}")
        return cls(rows)

    def to_jsonl(self, path: str | Path) -> None:
        from llmcore.data import write_jsonl

        write_jsonl(path, [asdict(i) | {"roles": dict(i.roles)} for i in self.items])

    def filter_confident(
        self,
        model: Any,
        tokenizer: Any,
        *,
        min_p: float = 0.5,
        min_families: int = 2,
        min_per_family: int = 8,
    ) -> tuple[ProbeSet, dict[str, int]]:
        """Keep prompts with p(answer | prompt) >= ``min_p`` and families with at least
        ``min_per_family`` of them. Returns (kept, counts); too few is a :class:`ProbeError`."""
        import torch

        probs = []
        with torch.no_grad():
            for it in self.items:
                ids = torch.tensor([encode(tokenizer, it.prompt)])
                lp = model(input_ids=ids).logits[0, -1].float().log_softmax(-1)
                probs.append(lp[answer_token(tokenizer, it.answer)].exp().item())
        keep = [it for it, p in zip(self.items, probs, strict=True) if p >= min_p]
        per = Counter(it.family for it in keep)
        fams = {f for f, n in per.items() if n >= min_per_family}
        kept = [it for it in keep if it.family in fams]
        counts = {"total": len(self.items), "confident": len(keep), "kept": len(kept),
                  "families": len(fams)}  # fmt: skip
        if len(fams) < min_families:
            raise ProbeError(
                f"only {len(fams)} famil(ies) keep >= {min_per_family} prompts answered with "
                f"p >= {min_p} ({len(keep)} of {len(self.items)} prompts confident; per family: "
                f"{dict(per)}); need >= {min_families}. Use prompts the model knows, or more"
            )
        return ProbeSet(kept), counts
