"""Retrieval tests share one cache folder (so the wiki-vital Lucene index is built once per
session) that is not the user's cache; its converted models are the session's (cache_links)."""
from __future__ import annotations

import pytest
from cache_links import private_cache


@pytest.fixture(scope="session")
def retrieval_cache(tmp_path_factory):
    return private_cache(tmp_path_factory.mktemp("retrieval-cache"))


@pytest.fixture(autouse=True)
def _isolated_cache(retrieval_cache, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(retrieval_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return retrieval_cache


@pytest.fixture(scope="session")
def vital():
    from ragrepro.retrieval import load_corpus

    return load_corpus("wiki-vital")
