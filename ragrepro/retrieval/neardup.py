"""Near-duplicate exclusion: drop retrieved documents that largely repeat the evaluated text.

A small corpus can hold near copies of an evaluated text under another title (FOLDOC's alias
entries: "computer cookie" for "http cookie"), which the title filter cannot catch and which
turn a perplexity gain into a leak. A candidate is dropped when its word n-gram containment
in the evaluated text, |ngrams(doc) & ngrams(text)| / |ngrams(doc)|, exceeds a threshold.
Off for the paper protocol (the official code has no such filter), on for mini corpora;
the threshold and the number of documents removed are recorded in the results row.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

_WORD = re.compile(r"\w+")


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """Lower-cased word n-grams (words = runs of letters/digits/underscore)."""
    if n < 1:
        raise ConfigError(f"near-duplicate n-gram size must be >= 1, got {n}.")
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def containment(doc: str, reference: set[tuple[str, ...]], n: int) -> float:
    """Share of the document's n-grams found in the reference set; 0.0 for a document
    shorter than n words (it has no n-gram to repeat)."""
    grams = word_ngrams(doc, n)
    return len(grams & reference) / len(grams) if grams else 0.0


@dataclass
class NearDupFilter:
    """Drops documents whose containment in `reference_texts` exceeds `threshold`; remembers
    which document ids it removed (each counted once however often it was retrieved)."""

    reference_texts: Iterable[str]
    n: int = 8
    threshold: float = 0.05
    removed: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold < 1.0:
            raise ConfigError(f"near-duplicate threshold must be in [0, 1), got "
                              f"{self.threshold}.")
        ref: set[tuple[str, ...]] = set()
        for t in self.reference_texts:
            ref |= word_ngrams(t, self.n)
        self.reference = ref

    def keep(self, docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for d in docs:
            c = containment(str(d.get("text", "")), self.reference, self.n)
            if c > self.threshold:
                self.removed[str(d.get("id"))] = round(c, 4)
            else:
                out.append(d)
        return out

    def settings(self) -> dict[str, Any]:
        return {"near_dup_ngram": self.n, "near_dup_threshold": self.threshold,
                "near_dup_removed": len(self.removed)}
