"""Retrieval-key types (§3.4, §6.1): what the index stores and how a decoded key maps back.

Each key type turns the corpus into (key text, document index) pairs:
- title: the document title (and section, when the corpus has one: "Title | Section");
  evidence is the best document under that title, ranked by TF-IDF against the question.
- title_paragraph: "Title | paragraph".
- paragraph: the paragraph text.
- sentence: each sentence (pysbd).
- proposition: atomic decontextualised facts (Factoid-Wiki at paper scale; LM-derived at
  mini scale, see riches/propositions.py).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import pysbd

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError, unknown_name

KEY_TYPES = ("title", "title_paragraph", "paragraph", "sentence", "proposition")


@dataclass(frozen=True)
class KeyCorpus:
    """Keys and the documents they point to (key_doc[i] indexes `docs`)."""

    key_type: str
    keys: list[str]
    key_doc: list[int]
    docs: list[Passage]


@lru_cache(maxsize=1)
def _segmenter():
    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str) -> list[str]:
    """Sentences as verbatim substrings of `text` (whitespace around them dropped)."""
    out = []
    for s in _segmenter().segment(text):
        s = s.strip()
        if s and s in text:  # pysbd with clean=False keeps the text; guard anyway
            out.append(s)
    return out


def title_key(p: Passage, section_sep: str = " | ") -> str:
    section = getattr(p, "section", None)
    return f"{p.title}{section_sep}{section}" if section else p.title


def build_keys(key_type: str, docs: Sequence[Passage], title_sep: str = " | ",
               propositions: Sequence[tuple[str, int]] | None = None) -> KeyCorpus:
    docs = list(docs)
    keys: list[str] = []
    key_doc: list[int] = []

    def add(text: str, doc: int) -> None:
        text = text.strip()
        if text:
            keys.append(text)
            key_doc.append(doc)

    if key_type == "title":
        for i, p in enumerate(docs):
            add(title_key(p, title_sep), i)
    elif key_type == "title_paragraph":
        for i, p in enumerate(docs):
            add(f"{p.title}{title_sep}{p.text}", i)
    elif key_type == "paragraph":
        for i, p in enumerate(docs):
            add(p.text, i)
    elif key_type == "sentence":
        for i, p in enumerate(docs):
            for s in split_sentences(p.text):
                add(s, i)
    elif key_type == "proposition":
        if propositions is None:
            raise ConfigError("key type 'proposition' needs propositions: set riches.key."
                              "paths (see riches/conf/riches/keys/proposition.yaml).")
        for text, doc in propositions:
            add(text, doc)
    else:
        raise unknown_name("RICHES key type", key_type, KEY_TYPES)
    return KeyCorpus(key_type, keys, key_doc, docs)


# -- evidence for a decoded key ----------------------------------------------------------
_WORD = re.compile(r"\w+", re.UNICODE)


def _terms(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tfidf_rank(query: str, candidates: Sequence[str], df: Counter, n_docs: int) -> list[int]:
    """Candidate indices by TF-IDF cosine-free dot product with the query (ties: order)."""
    q = Counter(_terms(query))

    def score(text: str) -> float:
        tf = Counter(_terms(text))
        return sum(qc * tf[w] * math.log((n_docs + 1) / (df[w] + 1)) for w, qc in q.items())

    return sorted(range(len(candidates)), key=lambda i: -score(candidates[i]))


def document_frequencies(docs: Sequence[Passage]) -> Counter:
    df: Counter = Counter()
    for p in docs:
        df.update(set(_terms(p.text)))
    return df
