"""Exact re-ranking of compressed FAISS indexes (`retriever.faiss.refine`), the memory-mapped
float store it reads, the recall probe recorded on every dense row, and the `auto` defaults
per corpus size; on hand-made and random vectors (no model)."""
from __future__ import annotations

import json
from contextlib import contextmanager

import numpy as np
import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.retrieval import faiss_index as fi
from ragrepro.retrieval import index_row
from ragrepro.retrieval.corpus import Corpus
from ragrepro.retrieval.dense import DenseRetriever

MINILM = {"name": "minilm-l6", "source": "embedded:minilm", "pooling": "mean"}


def _store(tmp_path, x: np.ndarray, rows: int) -> fi.FloatStore:
    """x written as .npy shards of `rows` vectors."""
    paths = []
    for i, start in enumerate(range(0, len(x), rows)):
        path = tmp_path / f"shard-{i:05d}.npy"
        np.save(path, x[start:start + rows])
        paths.append(path)
    return fi.FloatStore(paths)


def _clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(16, dim))[rng.integers(0, 16, n)] + 0.5 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _retriever(tmp_path, monkeypatch, x: np.ndarray, faiss: dict | None) -> DenseRetriever:
    """A dense retriever whose corpus embeddings are already 'cached' (the vectors x)."""
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))
    corpus = Corpus("rand", [Passage(str(i), f"t{i}", f"p{i}") for i in range(len(x))])
    r = DenseRetriever(corpus, MINILM, faiss=faiss, shard_size=300)
    r.embeddings_dir().mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(r.shard_paths()):
        np.save(path, x[i * 300:(i + 1) * 300])
    r.encode_queries = lambda qs: x[[int(q) for q in qs]]  # query "i": corpus vector i
    return r


# ---- re-ranking ------------------------------------------------------------------------------
def test_refine_by_hand(tmp_path):
    # five 2-d vectors; the query (1, 0) scores rows 0..4: 0, 1, -1, 0.8, -0.6
    x = np.array([[0, 1], [1, 0], [-1, 0], [0.8, 0.6], [-0.6, 0.8]], dtype=np.float32)
    store = _store(tmp_path, x, rows=2)  # three shards: rows 0-1, 2-3, 4
    q = np.array([[1, 0]], dtype=np.float32)
    # the candidates in the wrong order, with a missing slot (-1) as FAISS pads them
    scores, ids = fi.refine(store, q, np.array([[2, 4, -1, 3, 1]]), 3)
    assert ids.tolist() == [[1, 3, 4]]
    assert scores[0] == pytest.approx([1.0, 0.8, -0.6])
    # fewer candidates than k: padded with -1 / -inf
    scores, ids = fi.refine(store, q, np.array([[2, -1]]), 3)
    assert ids.tolist() == [[2, -1, -1]] and scores[0, 0] == -1.0 and np.isinf(scores[0, 1])


def test_exact_search_and_rows_across_shards(tmp_path):
    import faiss

    x = _clustered(1_000, 16)
    store = _store(tmp_path, x, rows=300)
    q = _clustered(20, 16, seed=1)
    flat = faiss.IndexFlatIP(16)
    flat.add(x)
    want_s, want_i = flat.search(q, 10)
    got_s, got_i = fi.exact_search(store, q, 10)
    assert np.array_equal(got_i, want_i) and np.allclose(got_s, want_s, atol=1e-5)
    ids = np.array([999, 0, 299, 300, 299])  # shard edges, any order, a repeat
    assert np.array_equal(store.rows(ids), x[ids]) and len(store) == 1_000
    with pytest.raises(IndexError, match="outside the store's 1000 vectors"):
        store.rows(np.array([1_000]))


def test_refine_returns_the_flat_top_k_when_its_candidates_cover_the_corpus(tmp_path,
                                                                           monkeypatch):
    """ivfpq over 600 vectors, every list probed, refine 120 x k=5 = 600 candidates: the
    whole corpus is re-scored exactly, so the hits are the flat index's, score for score;
    without refine the 6-byte PQ codes get the order wrong."""
    x = _clustered(600, 24)
    queries = [str(i) for i in range(0, 600, 7)]
    flat = _retriever(tmp_path / "flat", monkeypatch, x, None)
    base = {"type": "ivfpq", "nlist": 4, "nprobe": 4, "m": 6, "nbits": 4}
    plain = _retriever(tmp_path / "pq", monkeypatch, x, base)
    refined = _retriever(tmp_path / "pq", monkeypatch, x, {**base, "refine": 120})
    want = flat._search(queries, 5)
    got = refined._search(queries, 5)
    assert [[h.pid for h in hs] for hs in got] == [[h.pid for h in hs] for hs in want]
    assert [h.score for h in got[3]] == pytest.approx([h.score for h in want[3]], abs=1e-5)
    assert [[h.pid for h in hs] for hs in plain._search(queries, 5)] != \
        [[h.pid for h in hs] for hs in want]
    # re-ranking is a search-time stage: one trained index file serves both
    assert len(list(refined.embeddings_dir().glob("index-ivfpq-*.faiss"))) == 1
    assert refined.settings()["faiss"]["refine"] == 120 and "refine" not in plain.settings()["faiss"]


def test_the_float_store_is_memory_mapped_never_loaded_whole(tmp_path, monkeypatch):
    x = _clustered(900, 16)
    r = _retriever(tmp_path, monkeypatch, x, {"type": "ivfpq", "nlist": 4, "m": 4, "nbits": 4,
                                              "refine": 4})
    r._open()  # trains and adds (reads each shard once, as before)
    modes = []
    real_load = np.load

    def load(path, *args, **kwargs):
        modes.append(kwargs.get("mmap_mode"))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", load)
    hits = r._search(["5", "600"], 3)  # re-ranks: gathers candidate rows from the store
    assert hits[0][0].pid == "5" and hits[1][0].pid == "600"
    fi.exact_search(r.float_store(), x[:2], 3)
    assert modes and set(modes) == {"r"}  # every file opened as a read-only memory map
    assert all(isinstance(m, np.memmap) for m in r.float_store()._maps.values())


def test_only_the_most_recent_memory_maps_stay_open(tmp_path, monkeypatch):
    monkeypatch.setattr(fi, "MAX_OPEN_MAPS", 2)
    x = _clustered(50, 4)
    store = _store(tmp_path, x, rows=10)  # five shards
    assert np.array_equal(store.rows(np.arange(50)), x)
    assert list(store._maps) == [3, 4]


# ---- recall probe ----------------------------------------------------------------------------
def test_probe_recall_by_hand(tmp_path):
    # exact neighbours (inner product) of row 0: itself, 1, 2; of row 3: itself, 2, 1
    x = np.array([[1, 0], [0.9, 0.3], [0.6, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    store = _store(tmp_path, x, rows=5)
    probe = np.array([0, 3])
    _, exact = fi.exact_search(store, store.rows(probe), 3)
    assert exact.tolist() == [[0, 1, 2], [3, 2, 1]]

    def search(vectors, n):  # a "compressed index": misses row 1 for probe 0
        assert n == 3 and np.array_equal(vectors, x[probe])
        return np.array([[0, 2, 4], [2, 3, 1]])

    # leave-one-out, k = 2: probe 0 finds {2, 4} of {1, 2}: 1/2; probe 3 finds {2, 1}: 2/2
    assert fi.probe_recall(search, store, probe, exact, 2) == pytest.approx(0.75)
    assert fi.leave_one_out(np.array([[3, 2, 1]]), np.array([3]), 2).tolist() == [[2, 1]]
    assert fi.leave_one_out(np.array([[2, 1]]), np.array([3]), 3).tolist() == [[2, 1, -1]]


def test_recall_is_measured_once_and_cached_beside_the_index(tmp_path):
    x = _clustered(500, 8)
    store = _store(tmp_path, x, rows=500)
    calls = []

    def perfect(vectors, n):
        calls.append(n)
        return fi.exact_search(store, vectors, n)[1]

    rec = fi.cached_recall(tmp_path, "abc", store, perfect, 10, size=50)
    assert rec == fi.Recall(10, 1.0, 50) and calls == [11]
    assert rec.row() == {"faiss_recall_at_k": 1.0, "faiss_recall_k": 10, "faiss_recall_probe": 50}
    again = fi.cached_recall(tmp_path, "abc", store, lambda v, n: pytest.fail("re-measured"), 10,
                             size=50)
    assert again == rec
    table = json.loads((tmp_path / "recall-abc.json").read_text())
    assert table == {"recall": {"10": 1.0}, "probe": 50, "seed": 0}
    assert np.load(tmp_path / "probe-50-exact.npy").shape == (50, 101)  # reused for any k <= 100
    assert fi.probe_ids(500, 50).tolist() == sorted(set(fi.probe_ids(500, 50).tolist()))


# ---- defaults per corpus size ----------------------------------------------------------------
@pytest.mark.parametrize("n, dim, label", [
    # flat while 4 N d <= 4 GiB: wiki-vital, and 1M 384-d vectors (1.43 GiB)
    (9_828, 384, "flat"),
    (1_000_000, 384, "flat"),
    (1_398_101, 768, "flat"),  # 4,294,966,272 bytes: just under 4 GiB
    # above: ivfpq with re-ranking; nprobe = max(ceil(nlist / 4), ceil(2500 nlist / N))
    (1_398_102, 768, "ivfpq(nlist=4730,m=96,nbits=8,nprobe=1183,train_size=302720,refine=8)"),
    (21_015_324, 768,  # DPR: ceil(18337 / 4) = 4585 lists
     "ivfpq(nlist=18337,m=96,nbits=8,nprobe=4585,train_size=1173568,refine=8)")])
def test_auto_type_per_corpus_size(n, dim, label):
    assert fi.resolve_spec({"type": "auto"}, n, dim).label() == label


@pytest.mark.parametrize("n, dim, nprobe", [
    (9_828, 384, 65),        # 252 lists of 39: ceil(2500 x 252 / 9828) = 65 (64.1) > 63
    (1_000_000, 384, 1000),  # 4000 lists: 4000 / 4
    (21_015_324, 768, 4585)])
def test_refine_auto_per_corpus_size(n, dim, nprobe):
    spec = fi.resolve_spec({"type": "ivfpq", "refine": "auto"}, n, dim)
    assert (spec.refine, spec.nprobe) == (fi.AUTO_REFINE, nprobe) == (8, nprobe)
    # without re-ranking the auto nprobe is what it always was
    assert fi.resolve_spec({"type": "ivfpq"}, n, dim).nprobe == fi.auto_nprobe(spec.nlist)
    # an explicit nprobe is kept
    assert fi.resolve_spec({"type": "ivfpq", "refine": 4, "nprobe": 9}, n, dim).nprobe == 9


def test_candidates_fetched_for_re_ranking():
    spec = fi.IndexSpec("ivfpq", refine=8)
    assert fi.refine_candidates(spec, 1, 10_000) == 64      # at least 64, even for k = 1
    assert fi.refine_candidates(spec, 100, 10_000) == 800
    assert fi.refine_candidates(spec, 100, 500) == 500      # never more than the index holds
    assert fi.refine_candidates(spec, 400, 10**6, gpu=True) == 2048  # GPU FAISS's limit
    assert fi.refine_candidates(fi.IndexSpec("ivfpq"), 7, 10_000) == 7


@pytest.mark.parametrize("raw, match", [
    ({"type": "ivfpq", "refine": 0}, "refine=0: use an integer from 1 to 256"),
    ({"type": "ivfpq", "refine": 257}, "refine=257"),
    ({"type": "ivfpq", "refine": 2.5}, "refine=2.5"),
    ({"type": "ivfpq", "refine": True}, "refine=True"),
    ({"type": "flat", "refine": 8}, "flat scores every vector exactly"),
    ({"type": "hnsw", "refine": "auto"}, "raise ef_search"),
    ({"type": "ivfpqr"}, "use one of .*'auto'")])
def test_refine_refusals_name_the_value_and_the_fix(raw, match):
    with pytest.raises(ConfigError, match=match):
        fi.resolve_spec(raw, 10_000, 384)


def test_labels_and_keys_change_only_when_refine_is_set():
    spec = fi.resolve_spec({"type": "ivfpq", "refine": None}, 9_828, 384)
    assert spec.label() == "ivfpq(nlist=252,m=48,nbits=8,nprobe=8,train_size=9828)"
    refined = fi.resolve_spec({"type": "ivfpq", "refine": 8, "nprobe": 8}, 9_828, 384)
    assert refined.label() == "ivfpq(nlist=252,m=48,nbits=8,nprobe=8,train_size=9828,refine=8)"
    assert refined.build_params() == spec.build_params()  # the same index file
    assert fi.config_label({"type": "ivfpq", "refine": None}) == \
        "ivfpq(nlist=auto,m=auto,nbits=8,nprobe=auto,train_size=auto)"
    assert fi.config_label({"type": "ivfpq", "refine": "auto"}) == \
        "ivfpq(nlist=auto,m=auto,nbits=8,nprobe=auto,train_size=auto,refine=auto)"
    assert fi.config_label({"type": "auto", "refine": None}) == "auto"


def test_refine_null_in_the_configs_leaves_run_ids_unchanged():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ragrepro.paths import CONF_DIR
    from ragrepro.tracking import run_id_of

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for retriever in ("dense-minilm", "dense-bert-base", "contriever", "dpr-nq", "spider"):
            cfg = OmegaConf.to_container(compose("config", overrides=[
                "experiment=ralm/fig9", f"retriever={retriever}"]), resolve=True)
            assert cfg["retriever"]["faiss"]["refine"] is None
            with_null = run_id_of(cfg)
            del cfg["retriever"]["faiss"]["refine"]  # the configs before the key existed
            assert run_id_of(cfg) == with_null
            cfg["retriever"]["faiss"]["refine"] = 8
            assert run_id_of(cfg) != with_null  # set, it is part of the id


# ---- the row fields --------------------------------------------------------------------------
def test_dense_rows_record_the_index_and_its_probe_recall(tmp_path, monkeypatch):
    x = _clustered(900, 16)
    raw = {"type": "ivfpq", "nlist": 4, "nprobe": 2, "m": 4, "nbits": 4, "refine": 2}
    r = _retriever(tmp_path, monkeypatch, x, raw)
    r.cache = False
    r.search(["1", "2"], k=5)
    r.search(["3"], k=20)  # the row's k: the most hits asked for
    row = r.row_settings()
    spec = r.index_spec()
    probe = fi.probe_ids(900)
    _, exact = fi.exact_search(r.float_store(), x[probe], 21)
    want = fi.probe_recall(lambda q, n: r.search_vectors(q, n)[1], r.float_store(), probe,
                           exact, 20)
    assert row == {"faiss_index_resolved": spec.label(), "faiss_recall_at_k": want,
                   "faiss_recall_k": 20, "faiss_recall_probe": 200}
    assert 0.0 < want < 1.0  # 2 of 4 lists, 4-byte codes: an approximate index
    assert index_row(r) == row and len(list(r.embeddings_dir().glob("recall-*.json"))) == 1
    # flat: exact by construction, nothing measured or written
    flat = _retriever(tmp_path / "flat", monkeypatch, x, {"type": "flat"})
    assert flat.row_settings() == {"faiss_index_resolved": "flat", "faiss_recall_at_k": 1.0,
                                   "faiss_recall_k": 100, "faiss_recall_probe": 0}
    assert not list(flat.embeddings_dir().glob("recall-*"))
    assert index_row(None) == {} and index_row(object()) == {}  # no retriever, or not ours


def test_qa_rows_carry_the_index_fields():
    from ragrepro.data.records import QARecord
    from ragrepro.retrieval.base import Hit
    from ralm.qa import retrieve_docs

    class Searched:
        def search(self, queries, k):
            return [[Hit("p1", "T", "text", 1.0)] for _ in queries]

        def row_settings(self):
            return {"faiss_index_resolved": "flat", "faiss_recall_at_k": 1.0}

    class Run:
        @contextmanager
        def timed(self, name):
            yield

    records = [QARecord(qid="q1", question="who?", answers=["x"])]
    _, settings = retrieve_docs(Searched(), records, 1, Run(), {"name": "dense-minilm"}, "c")
    assert settings["faiss_recall_at_k"] == 1.0 and settings["retriever"] == "dense-minilm"


def test_ralm_rows_carry_the_index_fields_of_the_retriever_searched():
    from ralm.lm_eval import record_sources
    from ralm.sources import Documents, RetrieverSource

    class Searched:
        def row_settings(self):
            return {"faiss_recall_at_k": 0.97, "faiss_recall_k": 100}

    row: dict = {}
    docs = Documents(RetrieverSource(Searched(), 4, []), {"name": "dense-minilm"})
    record_sources(row, docs, None, None, {})
    assert row["faiss_recall_at_k"] == 0.97 and row["retriever"] == "dense-minilm"
    gold: dict = {}
    record_sources(gold, Documents(None, {"name": "gold"}), None, None, {})
    assert "faiss_recall_at_k" not in gold  # no retriever searched
