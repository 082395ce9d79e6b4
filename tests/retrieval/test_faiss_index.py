"""FAISS index types: auto parameters, refusals, size formulas (by hand and against FAISS's own
serialised indexes), the GPU choice (a no-op on this CPU build) and the dense retriever's
cached approximate index, on random vectors (no model)."""
from __future__ import annotations

import numpy as np
import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.retrieval import dense as dense_mod
from ragrepro.retrieval import faiss_index as fi
from ragrepro.retrieval.corpus import Corpus
from ragrepro.retrieval.dense import DenseRetriever, training_sample

MINILM = {"name": "minilm-l6", "source": "embedded:minilm", "pooling": "mean"}


@pytest.mark.parametrize("n, nlist", [
    (9_828, 252),          # 4 sqrt(N) = 396.6, capped at N // 39 = 252 (wiki-vital)
    (21_015_324, 18_337),  # 4 x 4584.25 = 18337.0 (DPR's Wikipedia)
    (100, 2),              # 100 // 39
    (39, 1)])
def test_auto_nlist(n, nlist):
    assert fi.auto_nlist(n) == nlist


def test_other_auto_values_by_hand():
    assert (fi.auto_pq_m(384), fi.auto_pq_m(768), fi.auto_pq_m(100)) == (48, 96, 10)
    assert (fi.auto_nprobe(252), fi.auto_nprobe(18_337), fi.auto_nprobe(4)) == (8, 286, 4)
    assert fi.auto_train_size(9_828, 252, 8) == 9_828             # 64 x 256 > N
    assert fi.auto_train_size(21_015_324, 18_337, 8) == 1_173_568  # 64 x 18337


def test_resolved_spec_and_its_label():
    spec = fi.resolve_spec({"type": "ivfpq", "nlist": "auto", "m": "auto", "nbits": 8,
                            "nprobe": "auto", "train_size": "auto", "hnsw_m": 32,
                            "gpu": "auto"}, 9_828, 384)
    assert spec.params() == {"type": "ivfpq", "nlist": 252, "m": 48, "nbits": 8, "nprobe": 8,
                             "train_size": 9_828}
    assert spec.build_params() == {"type": "ivfpq", "nlist": 252, "m": 48, "nbits": 8,
                                   "train_size": 9_828}
    assert spec.label() == "ivfpq(nlist=252,m=48,nbits=8,nprobe=8,train_size=9828)"
    hnsw = fi.resolve_spec({"type": "hnsw", "nlist": "auto"}, 10, 8)
    assert hnsw.params() == {"type": "hnsw", "hnsw_m": 32, "ef_construction": 80,
                             "ef_search": 128}
    assert fi.resolve_spec(None, 5, 8).params() == {"type": "flat"}


@pytest.mark.parametrize("raw, n, match", [
    ({"type": "ivfpq", "nlist": 1000}, 9_828, r"nlist <= 252"),
    ({"type": "ivfpq"}, 20, "too few to train"),
    ({"type": "ivfpq", "nbits": 12}, 1_000, "4096-centroid"),
    ({"type": "ivfpq", "m": 7}, 10_000, "must divide the vector size 384"),
    ({"type": "ivfpq", "nprobe": 300}, 10_000, "more than nlist=256"),
    ({"type": "ivfpq", "train_size": 20}, 10_000, "train_size=20"),
    ({"type": "ivf"}, 10_000, "use one of"),
    ({"type": "flat", "nprob": 3}, 10_000, "Unknown retriever.faiss key"),
    ({"type": "hnsw", "hnsw_m": 1}, 10_000, "hnsw_m=1"),
    ({"type": "hnsw", "ef_search": 2.5}, 10_000, "ef_search=2.5"),
    ({"gpu": "yes"}, 10, "gpu='yes'")])
def test_refusals_name_the_key_and_the_fix(raw, n, match):
    with pytest.raises(ConfigError, match=match):
        fi.resolve_spec(raw, n, 384, "corpus 'c'")


def test_size_formulas_by_hand():
    assert fi.flat_bytes(21_015_324, 768) == 64_559_075_328  # the 64 GB of a flat DPR index
    # 1000 x (8 code bytes + 8 id bytes) + 4 x 64 x (16 + 256) = 16,000 + 69,632
    assert fi.ivfpq_bytes(1_000, 64, 16, 8, 8) == 85_632
    # per node: 4 x 384 + 4 x (64 + 32/31) + 12 = 1536 + 260.129 + 12
    assert fi.hnsw_bytes(1_000, 384, 32) == pytest.approx(1_808_129.0, abs=1)
    # k-means: 2 x 1000 points x 16 centroids x 64 dims x 25 iterations
    assert fi.kmeans_flops(1_000, 16, 64) == 51_200_000
    assert fi.hnsw_build_flops(1_000, 64, 80, 32) == 4 * 1_000 * 64 * 80 * 32
    assert fi.ivfpq_build_flops(1_000, 64, 16, 8, 1_000) == \
        51_200_000 + 819_200_000 + 2 * 1_000 * 64 * (16 + 256)


def _clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(32, dim))
    x = centres[rng.integers(0, 32, n)] + 0.5 * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


@pytest.mark.parametrize("raw", [{"type": "ivfpq", "nlist": 16, "m": 8},
                                 {"type": "hnsw", "hnsw_m": 16}, {"type": "flat"}])
def test_size_formulas_match_faiss_serialised_indexes(raw):
    import faiss

    x = _clustered(4_000, 64)
    spec = fi.resolve_spec(raw, len(x), 64)
    index = fi.empty_index(spec, 64)
    if spec.type == "ivfpq":
        index.train(x)
    index.add(x)
    assert len(faiss.serialize_index(index)) == pytest.approx(fi.spec_bytes(spec, 4_000, 64),
                                                              rel=0.02)


@pytest.mark.parametrize("setting, has, n_gpus, kind, expected", [
    ("auto", False, 0, "flat", False),   # this machine: faiss-cpu, no GPU
    ("auto", True, 0, "ivfpq", False),   # GPU build, no GPU visible
    ("auto", True, 1, "ivfpq", True),
    ("auto", True, 2, "hnsw", False),    # FAISS has no GPU HNSW
    (False, True, 1, "flat", False),
    (True, True, 1, "flat", True)])
def test_gpu_choice(setting, has, n_gpus, kind, expected):
    assert fi.use_gpu(setting, has, n_gpus, kind) is expected


@pytest.mark.parametrize("has, n_gpus, kind, match", [
    (False, 0, "flat", "CPU build"), (True, 0, "ivfpq", "no GPU is visible"),
    (True, 1, "hnsw", "no GPU HNSW")])
def test_gpu_required_but_unavailable_is_refused(has, n_gpus, kind, match):
    with pytest.raises(ConfigError, match=match):
        fi.use_gpu(True, has, n_gpus, kind)


def test_this_cpu_build_reports_no_gpu():
    import faiss

    has, n = fi.gpu_faiss()
    assert has == hasattr(faiss, "StandardGpuResources")
    assert n == (faiss.get_num_gpus() if has else 0)


def _retriever(tmp_path, monkeypatch, x: np.ndarray, faiss: dict | None,
               shard_size: int = 1_000) -> DenseRetriever:
    """A dense retriever whose corpus embeddings are already 'cached' (random vectors)."""
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))
    corpus = Corpus("rand", [Passage(str(i), f"t{i}", f"p{i}") for i in range(len(x))])
    r = DenseRetriever(corpus, MINILM, faiss=faiss, shard_size=shard_size)
    r.embeddings_dir().mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(r.shard_paths()):
        np.save(path, x[i * shard_size:(i + 1) * shard_size])
    return r


def _recall(approx, exact, k: int) -> float:
    return float(np.mean([len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact)]))


def test_ivfpq_and_hnsw_indexes_are_cached_by_their_parameters(tmp_path, monkeypatch):
    x = _clustered(3_000, 32)
    q = _clustered(50, 32, seed=1)
    flat = _retriever(tmp_path, monkeypatch, x, None).build_index()
    _, exact = flat.search(q, 10)
    for raw, floor in (({"type": "ivfpq", "nlist": 32, "m": 16, "nbits": 6, "nprobe": 8}, 0.5),
                       ({"type": "hnsw", "hnsw_m": 16}, 0.9)):
        r = _retriever(tmp_path / raw["type"], monkeypatch, x, raw)
        index = r.build_index()
        [cached] = r.embeddings_dir().glob(f"index-{raw['type']}-*.faiss")
        fi.set_search_params(index, r.index_spec(), 10)
        _, ids = index.search(q, 10)
        assert index.ntotal == 3_000 and _recall(ids, exact, 10) >= floor
        stamp = cached.stat().st_mtime_ns
        assert r.build_index().ntotal == 3_000 and cached.stat().st_mtime_ns == stamp  # reused
        assert r.settings()["faiss"] == {**r.index_spec().params(), "trained_on": "cpu"}
    pq16 = {"type": "ivfpq", "nlist": 16, "m": 16, "nbits": 6}
    other = _retriever(tmp_path / "ivfpq", monkeypatch, x, pq16)
    other.build_index()
    assert len(list(other.embeddings_dir().glob("index-ivfpq-*.faiss"))) == 2  # new key
    same = _retriever(tmp_path / "ivfpq", monkeypatch, x, {**pq16, "nprobe": 4})
    same.build_index()  # nprobe is a search parameter: the same trained index
    assert len(list(same.embeddings_dir().glob("index-ivfpq-*.faiss"))) == 2


def test_flat_settings_are_unchanged_by_index_types(tmp_path, monkeypatch):
    r = _retriever(tmp_path, monkeypatch, _clustered(100, 8), {"type": "flat", "gpu": "auto"})
    assert "faiss" not in r.settings() and r.index_spec().params() == {"type": "flat"}


def test_training_sample_is_seeded_and_spans_the_shards(tmp_path, monkeypatch):
    x = np.arange(2_500 * 2, dtype=np.float32).reshape(2_500, 2)
    r = _retriever(tmp_path, monkeypatch, x, None)
    a = training_sample(r.shard_paths(), 600)
    assert a.shape == (600, 2) and np.array_equal(a, training_sample(r.shard_paths(), 600))
    rows = a[:, 0] / 2
    assert np.all(np.diff(rows) > 0) and rows.min() < 1_000 and rows.max() >= 2_000


def test_gpu_path_is_taken_only_when_gpu_faiss_sees_a_gpu(tmp_path, monkeypatch):
    """On this CPU machine the index stays on the CPU; with GPU FAISS reported, _open hands
    the built index to to_gpu (replaced here: no GPU to run it on)."""
    r = _retriever(tmp_path, monkeypatch, _clustered(200, 8), {"type": "flat"})
    monkeypatch.setattr(dense_mod, "gpu_faiss", lambda: (False, 0))
    assert type(r._open()).__name__ == "IndexFlatIP"
    moved = []
    monkeypatch.setattr(dense_mod, "gpu_faiss", lambda: (True, 1))
    monkeypatch.setattr(dense_mod, "to_gpu", lambda index, spec, n: moved.append(n) or index)
    r._index = None
    r._open()
    assert moved == [1]


def test_prebuilt_index_of_another_type_is_refused(tmp_path, monkeypatch):
    x = _clustered(2_000, 16)
    built = _retriever(tmp_path / "a", monkeypatch, x, {"type": "hnsw", "hnsw_m": 8})
    path = built.save_index(tmp_path / "idx.faiss")
    r = _retriever(tmp_path / "b", monkeypatch, x, {"type": "flat"})
    r.index_path = str(path)
    with pytest.raises(ConfigError, match="retriever.faiss says"):
        r._open()
    ok = _retriever(tmp_path / "c", monkeypatch, x, {"type": "hnsw", "hnsw_m": 8})
    ok.index_path = str(path)
    assert ok._open().ntotal == 2_000


def test_rows_name_the_configured_index():
    from hydra import compose, initialize_config_dir

    from ragrepro.paths import CONF_DIR
    from ragrepro.runner import base_settings

    assert fi.config_label(None) == "flat"
    assert fi.config_label({"type": "ivfpq", "nlist": 1024, "hnsw_m": 32}) == \
        "ivfpq(nlist=1024,m=auto,nbits=8,nprobe=auto,train_size=auto)"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        dense = compose("config", overrides=["retriever=dense-minilm",
                                             "retriever.faiss.type=hnsw"])
        bm25 = compose("config", overrides=["retriever=bm25"])
    assert base_settings(dense)["faiss_index"] == \
        "hnsw(hnsw_m=32,ef_construction=80,ef_search=128)"
    assert "faiss_index" not in base_settings(bm25)


def test_recall_at_k_by_hand():
    from benchmarks.ann_recall import recall_at

    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    approx = np.array([[1, 3, 9, -1], [6, 5, 7, 8]])
    assert recall_at(approx, exact, 1) == 0.5            # query 0 has the same first hit
    assert recall_at(approx, exact, 2) == 0.75           # {1} of {1,2}; {5,6} of {5,6}: (1+2)/4
    assert recall_at(approx, exact, 4) == (2 + 4) / 8    # -1 (no hit) never counts
