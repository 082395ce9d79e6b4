"""Every retriever config instantiates through Hydra with the settings the papers use."""
from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragrepro.data.records import Passage
from ragrepro.errors import OfflineError
from ragrepro.paths import CONF_DIR
from ragrepro.retrieval import build_corpus, build_retriever
from ragrepro.retrieval.bm25 import BM25Retriever
from ragrepro.retrieval.corpus import Corpus
from ragrepro.retrieval.dense import DenseRetriever

TINY = Corpus("tiny", [Passage("1", "A", "alpha text")])
CONFIGS = sorted(p.stem for p in (CONF_DIR / "retriever").glob("*.yaml"))

EXPECTED = {  # name: (class, pooling, normalize) -- pooling/normalize only for dense
    "bm25": (BM25Retriever, None, None),
    "bm25-wikipedia-dpr": (BM25Retriever, None, None),
    "dense-minilm": (DenseRetriever, "mean", True),
    "dense-bert-base": (DenseRetriever, "mean", False),
    "contriever": (DenseRetriever, "mean", False),
    "spider": (DenseRetriever, "cls", False),
    "dpr-nq": (DenseRetriever, "cls", False),
}


def test_every_config_is_covered():
    assert set(CONFIGS) == set(EXPECTED)


@pytest.mark.parametrize("name", CONFIGS)
def test_config_instantiates(name):
    cfg = OmegaConf.load(CONF_DIR / "retriever" / f"{name}.yaml")
    r = build_retriever(cfg, TINY)
    cls, pooling, normalize = EXPECTED[name]
    assert isinstance(r, cls) and r.name == name and r.corpus is TINY
    if cls is BM25Retriever:
        assert (r.k1, r.b) == (0.9, 0.4)  # pyserini defaults, kept by the official RALM code
    else:
        assert r.encoder_cfg["pooling"] == pooling and r.normalize is normalize
        assert isinstance(r.encoder_cfg, dict)


def test_prebuilt_config_references_wikipedia_dpr_by_name():
    cfg = OmegaConf.load(CONF_DIR / "retriever" / "bm25-wikipedia-dpr.yaml")
    assert cfg.index == "wikipedia-dpr"


def test_dpr_has_separate_encoders():
    cfg = OmegaConf.load(CONF_DIR / "retriever" / "dpr-nq.yaml")
    assert cfg.encoder.source != cfg.encoder.doc_source
    assert "ctx_encoder" in cfg.encoder.doc_source


def test_hub_encoder_offline_is_an_offline_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty HF cache: nothing downloaded
    cfg = OmegaConf.load(CONF_DIR / "retriever" / "contriever.yaml")
    r = build_retriever(cfg, TINY)
    with pytest.raises(OfflineError, match="facebook/contriever"):
        r.encode_queries(["q"])


def test_corpus_configs_instantiate():
    c = build_corpus(OmegaConf.load(CONF_DIR / "corpus" / "wikipedia-dpr.yaml"))
    assert c.name == "wikipedia-dpr" and not c.loaded
    assert Path(CONF_DIR / "corpus" / "wiki-vital.yaml").exists()


def test_misspelt_retriever_keys_are_rejected():
    from ragrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="k_1"):
        BM25Retriever(TINY, k_1=1.2)
    with pytest.raises(ConfigError, match="normalise"):
        DenseRetriever(TINY, {"source": "embedded:minilm"}, normalise=True)
