"""The record types every loader returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Passage:
    """A retrieval unit. `pid` is unique within its corpus."""

    pid: str
    title: str
    text: str

    def as_text(self, with_title: bool = True) -> str:
        return f"{self.title}\n{self.text}" if with_title and self.title else self.text


@dataclass(frozen=True)
class LMDoc:
    """A text evaluated for perplexity."""

    doc_id: str
    text: str
    title: str = ""


@dataclass
class QARecord:
    """Question answering, fact checking (FEVER: question=claim) and dialogue (WoW)."""

    qid: str
    question: str
    answers: list[str]
    gold_titles: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)  # retrieved contexts, score order
    task: str = "qa"
    hops: int = 1
    split: str = "test"
    meta: dict[str, Any] = field(default_factory=dict)
