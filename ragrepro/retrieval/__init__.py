"""Shared retrieval: corpora, BM25 (pyserini/Lucene) and dense (HF encoder + FAISS) retrievers
behind one interface, with on-disk result caches.

    corpus = load_corpus("wiki-vital")
    retriever = build_retriever(cfg.retriever, corpus)
    hits = retriever.search(["opera in four acts by Georges Bizet"], k=4)
"""
from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
from .base import Hit, Retriever, fetch_count, filter_titles, index_row
from .corpus import Corpus, chunk_words, load_corpus


def build_retriever(cfg_retriever: Any, corpus: Corpus) -> Retriever:
    """Instantiate a retriever config (it has a `_target_`) over `corpus`."""
    if isinstance(cfg_retriever, dict):
        cfg_retriever = OmegaConf.create(cfg_retriever)
    if not isinstance(cfg_retriever, DictConfig) or "_target_" not in cfg_retriever:
        raise ConfigError("The retriever config needs a `_target_` (see conf/retriever/*.yaml), "
                          f"got {cfg_retriever!r}.")
    # _convert_="all": retrievers get plain dicts (e.g. `encoder`), not DictConfigs.
    return instantiate(cfg_retriever, corpus=corpus, _convert_="all")


def build_corpus(cfg_corpus: Any) -> Corpus:
    """Instantiate a corpus config (conf/corpus/*.yaml)."""
    return instantiate(cfg_corpus, _convert_="all")


def retriever_from_config(cfg: Any) -> Retriever:
    """The experiment's retriever (`cfg.retriever`) over its corpus (`cfg.corpus`)."""
    return build_retriever(cfg.retriever, build_corpus(cfg.corpus))


__all__ = [
    "Corpus",
    "Hit",
    "Retriever",
    "build_corpus",
    "build_retriever",
    "chunk_words",
    "fetch_count",
    "filter_titles",
    "index_row",
    "load_corpus",
    "retriever_from_config",
]
