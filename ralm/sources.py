"""Where each evaluation window's documents come from: the evaluated articles themselves
(a variant that retrieves without searching: `rerank=gold`), an official-format retrieval file, or a retriever over the corpus (with the
near-duplicate filter); and the zero-shot ranking by a second LM (paper Table 3)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ragrepro.data.records import LMDoc
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError
from ragrepro.retrieval.base import Retriever
from ragrepro.retrieval.neardup import NearDupFilter
from ragrepro.tracking import Run

from . import candidates
from . import official_format as off
from .documents import hit_dict
from .engine import DocSource
from .gold import GoldSource
from .settings import RunSettings
from .windows import Window, make_windows

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)


class RetrieverSource:
    """Top-k hits per query; with a near-duplicate filter, 4k are fetched so that k usually
    remain after it (fewer when the filter removes more)."""

    def __init__(self, retriever: Retriever, k: int, exclude: Sequence[str],
                 near_dup: Any = None):
        self.retriever, self.k, self.exclude = retriever, k, list(exclude)
        self.near_dup = near_dup

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict]]:
        fetch = self.k * 4 if self.near_dup is not None else self.k
        hits = candidates.search(self.retriever, queries, fetch, self.exclude)
        out = [[hit_dict(h) for h in hs] for hs in hits]
        if self.near_dup is not None:
            out = [self.near_dup.keep(ds)[: self.k] for ds in out]
        return out


class FileSource:
    """Documents of an official-format retrieval file, by window index."""

    def __init__(self, path: str, texts: list[list[dict]]):
        self.path, self.texts = path, texts

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict]]:
        return [off.docs_of(self.texts[text_index][w.index]) for w in windows]


@dataclass
class Documents:
    """The chosen source and what the results row records about it."""

    source: DocSource | None = None
    retriever_settings: dict | None = None
    near_dup: Any = None
    exclude: list[str] = field(default_factory=list)


def file_source(rfile: str, s: RunSettings, streams: list[list[int]],
                stream_mode: str) -> FileSource:
    """An official retrieval file, checked against this run's texts and windows."""
    entries = off.read_file(rfile)
    if len(entries) != len(streams):
        raise ConfigError(f"retrieval file {rfile} holds {len(entries)} texts, this run "
                          f"{len(streams)} (ralm.stream={stream_mode}, and `limit`).")
    for i, (st, ent) in enumerate(zip(streams, entries)):
        r = s.ralm
        off.check_windows(rfile, ent, make_windows(len(st), r.max_length, r.stride),
                          r.stride, r.max_length, len(st), i)
    return FileSource(rfile, entries)


def near_dup_filter(on: bool, ngram: int, threshold: float, texts: Sequence[str]) -> Any:
    """`ralm.near_dup=true`: drop candidates whose word n-gram containment in the evaluated
    texts exceeds ralm.near_dup_threshold (ragrepro/retrieval/neardup.py)."""
    if not on:
        return None
    return NearDupFilter(texts, n=int(ngram), threshold=float(threshold))


def build_retriever(retriever: Deferred, corpus: Deferred) -> Retriever:
    """The configured retriever over the configured corpus (neither opens anything yet)."""
    return retriever.build(corpus=corpus.build())


def document_source(run: Run, s: RunSettings, docs: list[LMDoc], streams: list[list[int]],
                    decode: Callable[[list[int]], str],
                    search: Callable[[], tuple[Retriever, Any]],
                    exclude: list[str]) -> Documents:
    """Gold articles, an official retrieval file or a retriever (`search()` builds it and the
    near-duplicate filter; it is not called for a variant that does not search, so nothing is
    indexed)."""
    v, rfile, stream_mode = s.rerank, s.retrieval_file, s.ralm.stream
    if not v.retrieves:
        return Documents()
    if not v.searches:
        if rfile:
            raise ConfigError(f"ralm/rerank={v.name} uses the evaluated articles as documents; "
                              "drop retrieval.from_file / ralm.retrieval_file.")
        return Documents(GoldSource(docs, streams, decode, joined=stream_mode == "joined"),
                         {"name": "gold"})
    with run.timed("retriever"):
        if rfile:
            return Documents(file_source(rfile, s, streams, stream_mode),
                             {"from_file": str(rfile)}, exclude=exclude)
        retriever, near_dup = search()
        return Documents(RetrieverSource(retriever, s.ralm.k, exclude, near_dup),
                         retriever.settings(), near_dup, exclude)


def other_zeroshot(scorer: LM, lm: LM, s: RunSettings,
                   encode_doc_scorer: Callable[[dict], list[int]]):
    """Zero-shot ranking with a scoring LM that is not the evaluated one (paper Table 3):
    the window's prefix is decoded and re-encoded with the scorer's tokenizer, the document
    overwrites its first positions, and the last s' scorer tokens are scored."""
    tokens = s.ralm.rerank_tokens

    def nlls(stream: Sequence[int], window: Window, docs: list[dict]) -> list[float]:
        ctx = scorer.encode(lm.decode(stream[window.begin:window.target_start]), add_bos=False)
        rows, starts = [], []
        for d in docs:
            dt = encode_doc_scorer(d)
            if len(dt) + tokens > len(ctx):
                raise ConfigError("the scorer's document covers the tokens it should rank; "
                                  "lower ralm.doc_max_tokens or ralm.rerank_tokens.")
            rows.append(list(dt) + list(ctx[len(dt):]))
            starts.append(len(ctx) - tokens)
        return [-float(np.sum(lp)) for lp in scorer.score_targets(rows, starts, s.batch_size)]

    return nlls
