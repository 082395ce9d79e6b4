"""Sentence splitting, offline. The paper splits with spaCy, the official code with NLTK's
`sent_tokenize` (its `punkt_tab` model cannot be downloaded here); we default to pysbd, a
rule-based splitter on PyPI, and keep a dependency-free regex splitter."""
from __future__ import annotations

import re
from functools import lru_cache

import pysbd

from ragrepro.errors import ConfigError

SPLITTERS = ("pysbd", "regex")
# End of sentence: . ! or ? (optionally followed by a closing quote/bracket), then space and an
# upper-case letter, digit or quote. Keeps "U.S. president" together only when lower-case follows.
_REGEX_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")


@lru_cache(maxsize=1)
def _pysbd():
    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str, splitter: str = "pysbd") -> list[str]:
    """Sentences of `text`, stripped, empty ones dropped, order kept."""
    if splitter not in SPLITTERS:
        raise ConfigError(f"filco.splitter={splitter!r}; use one of {SPLITTERS}.")
    text = text.strip()
    if not text:
        return []
    if splitter == "pysbd":
        parts = _pysbd().segment(text)
    else:
        parts = _REGEX_BOUNDARY.split(text)
    return [p.strip() for p in parts if p and p.strip()]
