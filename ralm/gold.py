"""The gold-document upper bound (`ralm/rerank=gold`): every retrieval window gets the
evaluated text's own article as its only document.

This is a deliberate leak that no real run may have: it shows what the document-insertion
mechanism can do when the document is as related as possible, beside the oracle row (the best
of the retriever's k candidates). The document is the article body (title line removed, since
the document encoding adds the title back), truncated like any retrieved document.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from ragrepro.data.records import LMDoc
from ragrepro.errors import ConfigError

from .windows import Window


def article_starts(docs: Sequence[LMDoc]) -> list[int]:
    """Character offset of each document in the joined text ("".join of the texts)."""
    starts, pos = [], 0
    for d in docs:
        starts.append(pos)
        pos += len(d.text)
    return starts


def article_at(starts: Sequence[int], char_offset: int) -> int:
    """Index of the document holding `char_offset` of the joined text (the last one past
    the end)."""
    if not starts:
        raise ConfigError("the gold document needs at least one evaluated document.")
    return max(bisect.bisect_right(starts, char_offset) - 1, 0)


def gold_doc(d: LMDoc) -> dict[str, Any]:
    """The document dict of an evaluated article: its body, without the leading title line."""
    body = d.text
    if d.title and body.startswith(d.title):
        body = body[len(d.title):]
    return {"id": d.doc_id, "title": d.title, "text": body.strip(), "score": 1.0}


class GoldSource:
    """Documents for `ralm/rerank=gold`. joined stream: the article holding the window's
    first scored token (found by decoding the stream up to it); per_document streams: the
    stream's own document."""

    def __init__(self, docs: Sequence[LMDoc], streams: Sequence[Sequence[int]],
                 decode: Callable[[Sequence[int]], str], joined: bool):
        self.docs_, self.streams, self.decode, self.joined = list(docs), streams, decode, joined
        self.starts = article_starts(self.docs_)

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict[str, Any]]]:
        if not self.joined:
            return [[gold_doc(self.docs_[text_index])] for _ in windows]
        stream = self.streams[text_index]
        out = []
        for w in windows:
            at = len(self.decode(stream[:w.target_start]))
            out.append([gold_doc(self.docs_[article_at(self.starts, at)])])
        return out
