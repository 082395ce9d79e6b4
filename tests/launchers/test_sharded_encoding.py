"""Issue 16, sharded corpus encoding: parts `shard=i/n` encoded by launcher jobs (local and
Ray) and merged give the FAISS index of an unsharded encoding: same top-k on wiki-vital
(its first 30 passages, MiniLM); parts resume per embedding file; merging with a part
missing names the jobs to rerun."""

import numpy as np
import pytest
from launcher_helpers import base_env, cache_env, ragrepro

from ragrepro.errors import ConfigError
from ragrepro.retrieval.sharding import parse_shard, part_files

QUERIES = ["the undersea railway link between England and France",
           "a famous painter of the Renaissance", "the largest planet of the solar system",
           "an ancient city in Mesopotamia", "a musical instrument with strings"]
SHARDS = ["encode.first_passages=30", "encode.shard_size=10"]


def test_parts_cover_every_file_once():
    for n_files in range(12):
        for parts in range(1, 6):
            got = [i for p in range(parts) for i in part_files(n_files, p, parts)]
            assert got == list(range(n_files))
    assert [list(part_files(5, p, 3)) for p in range(3)] == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("spec,expected", [("0/4", (0, 4)), (" 3 / 4", (3, 4)), ("0/1", (0, 1))])
def test_parse_shard(spec, expected):
    assert parse_shard(spec) == expected


@pytest.mark.parametrize("spec", ["4/4", "1", "a/b", "-1/2", "0/0"])
def test_bad_shard_names_the_form(spec):
    with pytest.raises(ConfigError, match=r"i/n|0 <= i < n"):
        parse_shard(spec)


def _retriever(index_path=None):
    from ragrepro.retrieval import build_retriever, load_corpus
    from ragrepro.retrieval.corpus import corpus_from_passages

    corpus = corpus_from_passages("wiki-vital-first30", load_corpus("wiki-vital").passages[:30])
    cfg = {"_target_": "ragrepro.retrieval.dense.DenseRetriever", "name": "dense-minilm",
           "encoder": {"name": "minilm-l6", "source": "embedded:minilm",
                       "revision": "gt-0.1.0", "pooling": "mean",
                       "doc_format": "{title} {text}"},
           "max_length": 256, "batch_size": 64, "normalize": True, "dtype": "float32",
           "device": "cpu", "index_path": index_path, "cache": False}
    r = build_retriever(cfg, corpus)
    r.shard_size = 10
    return r


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    with cache_env(tmp_path_factory.mktemp("cache-unsharded")):
        hits = _retriever().search(QUERIES, k=5)
    return [[(h.pid, h.score) for h in q] for q in hits]


def _sharded_top_k(tmp_path, launcher_args):
    cache, results = tmp_path / "cache", tmp_path / "results"
    env = base_env(results, RAGREPRO_CACHE=str(cache))
    parts = ragrepro(["-m", "experiment=core/encode_shards", "shard=0/3,1/3,2/3", *SHARDS,
                      *launcher_args], env)
    assert parts.returncode == 0, parts.stderr[-3000:]
    out = tmp_path / "merged.faiss"
    merged = ragrepro(["experiment=core/encode_shards", "shard=merge", f"index_out={out}",
                       *SHARDS], env)
    assert merged.returncode == 0, merged.stderr[-3000:]
    with cache_env(tmp_path / "query-cache"):
        hits = _retriever(index_path=str(out)).search(QUERIES, k=5)
    return [[(h.pid, h.score) for h in q] for q in hits], parts.stdout + parts.stderr


def _same(a, b):
    assert [[pid for pid, _ in q] for q in a] == [[pid for pid, _ in q] for q in b]
    np.testing.assert_allclose([[s for _, s in q] for q in a], [[s for _, s in q] for q in b],
                               rtol=0, atol=1e-6)


@pytest.mark.slow
def test_local_launcher_parts_merge_to_the_unsharded_index(unsharded, tmp_path):
    got, log = _sharded_top_k(tmp_path, [])
    assert "Part 2/3 of wiki-vital-first30: embedding files 2-2, 1 to encode" in log
    _same(got, unsharded)
    assert len(unsharded) == len(QUERIES) and all(len(q) == 5 for q in unsharded)


@pytest.mark.cluster
def test_ray_parts_merge_to_the_unsharded_index(unsharded, ray_head, tmp_path):
    got, log = _sharded_top_k(tmp_path, ["hydra/launcher=ray",
                                         f"hydra.launcher.ray.init.address={ray_head}"])
    assert "(_run_job pid=" in log  # encoded in Ray workers
    _same(got, unsharded)


@pytest.mark.slow
def test_parts_resume_per_file_and_merge_names_missing_parts(tmp_path):
    cache, results = tmp_path / "cache", tmp_path / "results"
    env = base_env(results, RAGREPRO_CACHE=str(cache))
    first = ragrepro(["experiment=core/encode_shards", "shard=0/3", *SHARDS], env)
    assert first.returncode == 0, first.stderr[-3000:]
    [folder] = (cache / "dense").glob("wiki-vital-first30-*/")
    made = sorted(folder.glob("shard-*.npy"))
    assert [p.name for p in made] == ["shard-00000.npy"]
    merge = ragrepro(["experiment=core/encode_shards", "shard=merge", *SHARDS], env)
    log = merge.stdout + merge.stderr
    assert merge.returncode == 2 and "embedding files [1, 2]" in log and "shard=0/N" in log
    # a part that died after its first file: the rerun encodes only the missing one
    stamp = made[0].stat().st_mtime_ns
    two = ragrepro(["experiment=core/encode_shards", "shard=0/2", *SHARDS], env)
    log = two.stdout + two.stderr
    assert two.returncode == 0, log[-3000:]
    assert "embedding files 0-1, 1 to encode, 1 already done" in log
    assert made[0].stat().st_mtime_ns == stamp
