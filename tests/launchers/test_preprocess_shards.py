"""Issue 29 items 2 and 4 through the real launchers: FilCo silver labels in parts on the local
Slurm, the RICHES index shards on a local Ray head and the proposition rewrite on the local
launcher, each merged into what one process writes (the FilCo labels file byte for byte, the
index's suffix arrays and answers, the proposition cache line for line) and found by the run
that follows without recomputing."""
from __future__ import annotations

import pytest
from cache_links import private_cache
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from launcher_helpers import base_env, cache_env, ragrepro
from omegaconf import OmegaConf

from ragrepro.paths import CONF_DIR

SILVER = ["experiment=filco/silver_shards", "train_dataset.limit=40"]  # 3 chunks of 16
INDEX = ["experiment=riches/index_shards", "riches/keys@riches.key=title",
         "riches.index_shard_tokens=20000"]  # 9,828 titles, 38,432 tokens: 2 shards
PROPS = ["experiment=riches/propositions_shards", "riches.key.n_articles=4",
         "riches.key.generation_max_new_tokens=6"]


def _compose(args):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(args))


def _ok(proc):
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def _one_process_silver(cache):
    """The labels file of filco/pipeline.py's Labeller on the composed FilCo run."""
    from filco.data import load_examples, load_split
    from filco.pipeline import passage_retriever
    from filco.resources import Labeller, Setup
    from ragrepro.deferred import Deferred

    cfg = _compose(SILVER)
    fc = instantiate(cfg.filco, _convert_="object")
    with cache_env(cache):
        setup = Setup.of(fc, cfg.dataset.task, None, 0)
        train = load_split(OmegaConf.to_container(cfg.train_dataset, resolve=True))
        source = passage_retriever(fc, Deferred(cfg.corpus), Deferred(cfg.retriever))
        exs = load_examples(train, source, fc.k, setup.task.name, fc.passages)
        Labeller(setup).silvers(exs)
    [path] = (cache / "filco" / "silver").glob("*.json")
    return path.relative_to(cache), path.read_bytes(), len(exs)


@pytest.mark.cluster
def test_silver_parts_on_slurm_merge_to_the_one_process_labels(slurm, tmp_path):
    cache, res = private_cache(tmp_path / "cache"), tmp_path / "results"
    env = base_env(res, RAGREPRO_CACHE=str(cache), SLURM_CONF=str(slurm))
    parts = ragrepro(["-m", *SILVER, "shard=0/3,1/3,2/3", "hydra/launcher=slurm",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"], env, timeout=900)
    log = _ok(parts)
    assert "Submitted 3 cells as one array" in log
    merged = ragrepro([*SILVER, "shard=merge"], env)
    _ok(merged)
    rel, one, n = _one_process_silver(private_cache(tmp_path / "one"))
    assert n == 40
    assert (cache / rel).read_bytes() == one  # the file the FilCo run reads, as it writes it
    again = ragrepro(["-m", *SILVER, "shard=0/3,1/3,2/3", "hydra/launcher=slurm",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"], env)
    assert "3 cells, 3 already finished (skipped), 0 to run" in _ok(again)


@pytest.mark.cluster
def test_index_shards_on_ray_are_the_one_process_index(ray_head, tmp_path, monkeypatch):
    import numpy as np

    from ragrepro.retrieval import load_corpus
    from riches import index_build as ib
    from riches import shard_jobs as sj
    from riches.constraint import key_token_ids, vocab_size_of
    from riches.key_index import build_index, cached_keys

    cache, res = private_cache(tmp_path / "cache"), tmp_path / "results"
    env = base_env(res, RAGREPRO_CACHE=str(cache))
    jobs = ragrepro(["-m", *INDEX, "shard=0/2,1/2", "hydra/launcher=ray",
                     f"hydra.launcher.ray.init.address={ray_head}"], env, timeout=900)
    log = _ok(jobs)
    assert "(_run_job pid=" in log  # built in Ray workers
    cfg = _compose(INDEX)
    kc = instantiate(cfg.riches.key)
    smollm = instantiate(cfg.model)  # the run's model entry (its revision is fingerprinted)
    docs = list(load_corpus("wiki-vital").passages)
    monkeypatch.setenv("RAGREPRO_CACHE", str(cache))
    kcorp = cached_keys("title", docs)

    def no_build(*a, **k):
        raise AssertionError("the RICHES run built the index again")

    with monkeypatch.context() as m:
        m.setattr(ib, "build_folder", no_build)
        index = build_index(kcorp, smollm, "wiki-vital", kc, shard_tokens=20000)
    assert len(index.shards) == 2
    def tok(texts):
        return key_token_ids(smollm.tokenizer, texts)

    vocab = vocab_size_of(smollm.tokenizer)
    extra = sj.fingerprint_extra(smollm, "wiki-vital", kc)
    one = ib.build_or_load(kcorp.keys, kcorp.key_doc, tok, vocab, extra,
                           cache_root=tmp_path / "one", shard_tokens=20000)
    folder, _ = ib.index_folder(kcorp.keys, kcorp.key_doc, vocab, extra)
    one_folder, _ = ib.index_folder(kcorp.keys, kcorp.key_doc, vocab, extra, tmp_path / "one")
    for i in range(2):
        assert (ib.shard_dir(folder, i) / "sa.i32").read_bytes() == \
            (ib.shard_dir(one_folder, i) / "sa.i32").read_bytes()
    whole = ib.build_or_load(kcorp.keys, kcorp.key_doc, tok, vocab, extra,
                             cache_root=tmp_path / "whole")
    for title in ("Paris", "Albert Einstein", "Zhou Enlai", docs[-1].title):
        ids = tok([title])[0]
        for n in range(len(ids) + 1):
            spans = [ix.find(ids[:n], at_key_start=True) for ix in (index, one, whole)]
            assert len({s.count for s in spans}) == 1, (title, n)
            kids = [ix.children(s).as_dict() for ix, s in zip((index, one, whole), spans)]
            assert kids[0] == kids[1] == kids[2], (title, n)
            hits = [sorted(ix.locate(s, s.count)) for ix, s in zip((index, one, whole), spans)]
            assert hits[0] == hits[1] == hits[2], (title, n)
    assert int(np.sum([s.n for s in index.shards])) == whole.n + 1  # one shared separator


@pytest.mark.slow
def test_proposition_parts_merge_to_the_one_process_cache(tmp_path):
    from ragrepro.retrieval import load_corpus
    from riches.key_index import proposition_docs
    from riches.propositions import lm_propositions

    cache, res = private_cache(tmp_path / "cache"), tmp_path / "results"
    env = base_env(res, RAGREPRO_CACHE=str(cache))
    log = _ok(ragrepro(["-m", *PROPS, "shard=0/2,1/2"], env, timeout=900))
    assert "Part 1/2: sentence batches" in log
    _ok(ragrepro([*PROPS, "shard=merge"], env))
    cfg = _compose(PROPS)
    kc = instantiate(cfg.riches.key)
    lm = instantiate(cfg.model)  # the run's model entry (its revision keys the cache lines)
    prompt = OmegaConf.to_container(cfg.riches.prompts.propositions, resolve=True)
    subset = proposition_docs(kc, list(load_corpus("wiki-vital").passages))
    ref = tmp_path / "one" / "riches" / "propositions" / "smollm2-135m.jsonl"
    lm_propositions(lm, subset, prompt, ref, max_new_tokens=6, min_overlap=kc.min_overlap)
    merged = cache / "riches" / "propositions" / "smollm2-135m.jsonl"
    assert merged.read_bytes() == ref.read_bytes()
    assert len(ref.read_text().splitlines()) == 10  # 2 batches: one per part
