"""Dense retrieval: pooling arithmetic and the embedded MiniLM on a 200-passage corpus."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.retrieval.base import cache_path_of
from ragrepro.retrieval.corpus import Corpus
from ragrepro.retrieval.dense import DenseRetriever, doc_inputs, mean_pool, pool

MINILM = {"name": "minilm-l6", "source": "embedded:minilm", "pooling": "mean"}


def test_mean_pool_by_hand():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                           [[2.0, 0.0], [0.0, 0.0], [4.0, 6.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    # row 0: mean of (1,2),(3,4) = (2,3); row 1: mean of (2,0),(4,6) = (3,3); padding ignored
    assert torch.allclose(mean_pool(hidden, mask), torch.tensor([[2.0, 3.0], [3.0, 3.0]]))


def test_cls_and_pooler_pooling():
    class Out:
        last_hidden_state = torch.tensor([[[1.0, 2.0], [9.0, 9.0]]])
        pooler_output = torch.tensor([[7.0, 7.0]])

    mask = torch.tensor([[1, 1]])
    assert pool(Out(), mask, "cls").tolist() == [[1.0, 2.0]]
    assert pool(Out(), mask, "pooler").tolist() == [[7.0, 7.0]]

    class DprOut:  # DPR encoders return only the [CLS] vector as pooler_output
        pooler_output = torch.tensor([[5.0, 5.0]])

    assert pool(DprOut(), mask, "cls").tolist() == [[5.0, 5.0]]
    with pytest.raises(ConfigError):
        pool(DprOut(), mask, "mean")


def test_doc_inputs_formats():
    assert doc_inputs(["T"], ["x"], "{title} {text}", "passage: ") == (["passage: T x"], None)
    assert doc_inputs(["T"], ["x"], "pair") == (["T"], ["x"])
    with pytest.raises(ConfigError):
        doc_inputs(["T"], ["x"], "{body}")


def test_bad_encoder_config():
    corpus = Corpus("c", [Passage("1", "A", "a")])
    with pytest.raises(ConfigError, match="pooling"):
        DenseRetriever(corpus, {"source": "embedded:minilm", "pooling": "max"})
    with pytest.raises(ConfigError, match="Unknown encoder key"):
        DenseRetriever(corpus, {"source": "embedded:minilm", "polling": "mean"})
    r = DenseRetriever(corpus, MINILM, index_path="/no/such.faiss")
    with pytest.raises(ConfigError, match="build_index"):
        r.search(["q"], k=1)


@pytest.fixture(scope="module")
def small(vital):
    return Corpus("vital-small", vital.passages[::49])  # 201 passages


@pytest.fixture(scope="module")
def minilm(small, retrieval_cache):
    with pytest.MonkeyPatch.context() as mp:  # the build only: later tests keep their cache
        mp.setenv("RAGREPRO_CACHE", str(retrieval_cache))
        return DenseRetriever(small, MINILM, name="dense-minilm", normalize=True,
                              batch_size=32)


@pytest.mark.slow  # the real embedded MiniLM
@pytest.mark.parametrize("query, title", [
    ("the undersea railway link between England and France", "Channel Tunnel"),
    ("the plague pandemic that killed a large part of Europe's population in the 1300s",
     "Black Death"),
    ("a bird from Australia that lives on the ground and imitates noises it hears", "Lyrebird"),
])
def test_minilm_finds_article_for_paraphrase(minilm, query, title):
    [hits] = minilm.search([query], k=3)
    assert hits[0].title == title
    assert hits[0].score >= hits[1].score >= hits[2].score
    assert -1.0 <= hits[2].score <= hits[0].score <= 1.0  # cosine similarity


@pytest.mark.slow  # the real embedded MiniLM
def test_embeddings_cached_and_index_round_trip(minilm, small, tmp_path):
    shards = minilm.corpus_embeddings()
    vec = np.concatenate([np.load(p) for p in shards])
    assert vec.shape == (len(small), 384)
    assert np.allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-5)
    query = "the undersea railway link between England and France"
    path = minilm.save_index(tmp_path / "small.faiss")
    loaded = DenseRetriever(small, MINILM, name="dense-minilm", normalize=True,
                            index_path=str(path), cache=False)
    assert loaded.search([query], k=3) == minilm.search([query], k=3)
    assert cache_path_of(minilm, 3).exists()
    other = DenseRetriever(small, {**MINILM, "pooling": "cls"}, normalize=True)
    assert other.embeddings_key() != minilm.embeddings_key()
    assert other.query_key(query, 3) != minilm.query_key(query, 3)


@pytest.mark.slow  # the real embedded MiniLM
def test_encoding_matches_sentence_transformers(minilm):
    """all-MiniLM-L6-v2's reference pipeline (sentence-transformers: mean pooling, then L2
    normalisation) gives the same vectors as ours."""
    from sentence_transformers import SentenceTransformer

    from ragrepro.assets import minilm_dir

    queries = ["tiny birds that can hover", "the history of the French Revolution " * 20]
    ref = SentenceTransformer(str(minilm_dir()), device="cpu").encode(
        queries, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(minilm.encode_queries(queries) - ref).max() < 1e-5


@pytest.mark.slow  # the real embedded MiniLM
def test_separate_doc_encoder_is_used_for_passages():
    """encoder.doc_source (DPR's context encoder) encodes passages; queries use source."""
    from ragrepro.assets import minilm_dir

    tiny = Corpus("tiny-dense", [Passage("1", "Paris", "Paris is the capital of France."),
                                 Passage("2", "Nile", "The Nile is a river in Africa.")])
    shared = DenseRetriever(tiny, MINILM, normalize=True, cache=False)
    split = DenseRetriever(tiny, {**MINILM, "doc_source": str(minilm_dir())}, normalize=True,
                           cache=False)
    assert split.embeddings_key() != shared.embeddings_key()
    a = split.encode_passages(tiny.passages)
    assert split._d_encoder is not None and split._d_encoder is not split._q_encoder
    assert np.allclose(a, shared.encode_passages(tiny.passages), atol=1e-6)
    [hits] = split.search(["Which river flows through Africa?"], k=2)
    assert [h.pid for h in hits] == ["2", "1"]


@pytest.mark.slow  # the real embedded MiniLM
def test_token_type_ids_switch_and_model_class_check():
    from ragrepro.assets import minilm_dir
    from ragrepro.retrieval.dense import Encoder

    with_ids = Encoder(str(minilm_dir()), "mean", 64, "cpu")
    without = Encoder(str(minilm_dir()), "mean", 64, "cpu", token_type_ids=False)
    a = with_ids.encode(["Paris"], ["Paris is the capital of France."])
    b = without.encode(["Paris"], ["Paris is the capital of France."])
    assert a.shape == b.shape == (1, 384)
    assert not np.allclose(a, b)  # segment ids of the text half matter unless zeroed
    with pytest.raises(ConfigError, match="model_class"):
        Encoder(str(minilm_dir()), "mean", 64, "cpu", model_class="NoSuchModel")
