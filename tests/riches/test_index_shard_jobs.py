"""Issue 29 item 2, the RICHES index built by launcher jobs (riches/shard_jobs.py
`index_part`): jobs i/n over a planned folder give the suffix arrays of one process (byte for
byte) and, queried as one, the unsharded index's spans, children and located keys; the job
that finds every shard built finishes the index; a rerun skips built shards; a job killed
mid-way, or a deleted shard, rebuilds only what is missing; the folder is the one a RICHES run
(`riches.key_index.build_index`) loads."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from ragrepro.errors import ConfigError, DataError
from riches import index_build as ib
from riches import shard_jobs as sj
from riches.keys import KeyCorpus

VOCAB = 12
SHARD_TOKENS = 60


def _keys() -> KeyCorpus:
    rng = np.random.default_rng(7)
    keys = [" ".join(str(int(t)) for t in rng.integers(0, VOCAB, size=int(rng.integers(1, 7))))
            for _ in range(90)]
    keys += keys[:15]  # repeated keys, in other shards
    return KeyCorpus("sentence", keys, [i // 3 for i in range(len(keys))], [])


def _tokenize(texts):
    return [[int(w) for w in t.split()] for t in texts]


def _one_process(root):
    kc = _keys()
    return ib.build_or_load(kc.keys, kc.key_doc, _tokenize, VOCAB, {"t": 1}, cache_root=root,
                            shard_tokens=SHARD_TOKENS)


def _folder(root):
    kc = _keys()
    return ib.index_folder(kc.keys, kc.key_doc, VOCAB, {"t": 1}, root)


def _job(root, shard):
    folder, fp = _folder(root)
    return sj.index_part(folder, _keys(), _tokenize, VOCAB, SHARD_TOKENS,
                         {"t": 1, "fingerprint": fp}, shard)


def _sa_bytes(folder):
    return [p.read_bytes() for p in sorted(folder.glob("shards/*/sa.i32"))]


def _answers(index):
    """Counts, children and located keys of every prefix of up to 2 tokens (the separator
    included), from the text's root and from a key start."""
    out = []
    for n in range(3):
        for prefix in itertools.product(range(VOCAB + 1), repeat=n):
            for at_start in (False, True):
                span = index.find(list(prefix), at_start)
                if span is None or span.count == 0:
                    out.append((prefix, at_start, 0))
                    continue
                # past a key's closing separator the order is the key-truncated one
                # (riches/index_sort.py): no query continues there, so no children compared
                closed = VOCAB in prefix[0 if at_start else 1:]
                out.append((prefix, at_start, span.count,
                            None if closed else index.children(span).as_dict(),
                            sorted(index.locate(span, max_hits=10_000))))
    return out


def test_jobs_build_the_one_process_index(tmp_path):
    one = _one_process(tmp_path / "one")
    folder, _ = _folder(tmp_path / "jobs")
    first = _job(tmp_path / "jobs", "0/2")
    assert first["shards"] >= 4 and first["built"] == (first["shards"] + 1) // 2
    assert not (folder / ib.META).exists()  # not queryable before every shard is there
    with pytest.raises(DataError, match="not a finished RICHES index"):
        ib.open_index(folder)
    second = _job(tmp_path / "jobs", "1/2")
    assert first["built"] + second["built"] == first["shards"]
    assert (folder / ib.META).exists()  # the last job finished it
    one_folder, _ = _folder(tmp_path / "one")
    assert _sa_bytes(folder) == _sa_bytes(one_folder)
    assert (folder / "tokens.u16").read_bytes() == (one_folder / "tokens.u16").read_bytes()
    sharded = ib.open_index(folder)
    assert len(sharded.shards) == first["shards"]
    unsharded = ib.build_or_load(_keys().keys, _keys().key_doc, _tokenize, VOCAB, {"t": 1},
                                 cache_root=tmp_path / "whole")
    assert _answers(sharded) == _answers(unsharded) == _answers(one)
    merged = _job(tmp_path / "jobs", "merge")
    assert merged["n_keys"] == len(_keys().keys) and merged["index_tokens"] == unsharded.n


def test_rerun_skips_built_shards_and_more_jobs_than_shards_is_fine(tmp_path):
    planned = _job(tmp_path, "plan")
    folder, _ = _folder(tmp_path)
    assert planned["built"] == 0 and ib.missing_shards(folder) == list(range(planned["shards"]))
    with pytest.raises(ConfigError, match=r"shards \[0, 1.*overwrite=true"):
        _job(tmp_path, "merge")
    n = planned["shards"] + 2
    built = [_job(tmp_path, f"{i}/{n}")["built"] for i in range(n)]
    assert built == [1] * planned["shards"] + [0, 0]
    stamps = [p.stat().st_mtime_ns for p in sorted(folder.glob("shards/*/sa.i32"))]
    assert _job(tmp_path, "0/1")["built"] == 0
    assert [p.stat().st_mtime_ns for p in sorted(folder.glob("shards/*/sa.i32"))] == stamps


def test_job_killed_mid_way_and_deleted_shard_rebuild_only_what_is_missing(tmp_path,
                                                                          monkeypatch):
    real = ib.sort_suffixes
    calls = []

    def dies_on_second(text, sep, out=None, block=None):
        calls.append(len(text))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(text, sep, out=out, block=block)

    monkeypatch.setattr(ib, "sort_suffixes", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        _job(tmp_path, "0/1")
    folder, _ = _folder(tmp_path)
    total = len(ib.missing_shards(folder)) + 1
    assert ib.missing_shards(folder) == list(range(1, total))
    monkeypatch.setattr(ib, "sort_suffixes", real)
    assert _job(tmp_path, "0/1")["built"] == total - 1
    whole = _answers(ib.open_index(folder))
    stamps = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("shards/*/sa.i32")}
    lost = ib.shard_dir(folder, 2)
    for p in lost.iterdir():
        p.unlink()
    lost.rmdir()
    with pytest.raises(DataError, match=r"shards \[2\] of .* are missing"):
        ib.open_index(folder)  # a finished index that lost a shard is refused by name
    assert _job(tmp_path, "0/1")["built"] == 1
    again = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("shards/*/sa.i32")}
    assert {k for k in again if again[k] != stamps.get(k)} == {lost.name}
    assert _answers(ib.open_index(folder)) == whole


@pytest.mark.slow  # a real embedded model
def test_the_jobs_fill_the_folder_a_riches_run_loads(smollm, tmp_path, monkeypatch):
    from ragrepro.data.records import Passage
    from riches.key_index import build_index
    from riches.keys import build_keys
    from riches.settings import KeySettings

    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path))
    docs = [Passage(str(i), f"Article {i}", f"Article {i} is about the number {i}.")
            for i in range(40)]
    kcorp = build_keys("title", docs)
    kc = KeySettings(name="title", unit="title", start="key", end="key", min_key_tokens=1,
                     start_at_word=True, evidence="document", max_new_tokens=8, demo="unit",
                     source="lm", paths=[], articles="sample", n_articles=3, seed=0,
                     generation_max_new_tokens=8, min_overlap=0.7)
    from riches.constraint import key_token_ids, vocab_size_of

    vocab = vocab_size_of(smollm.tokenizer)
    extra = sj.fingerprint_extra(smollm, "docs40", kc)
    folder, fp = ib.index_folder(kcorp.keys, kcorp.key_doc, vocab, extra)
    for i in range(2):
        sj.index_part(folder, kcorp, lambda t: key_token_ids(smollm.tokenizer, t), vocab, 60,
                      {**extra, "fingerprint": fp}, f"{i}/2")
    assert len(ib.open_index(folder).shards) >= 3

    def no_build(*a, **k):
        raise AssertionError("the run built the index again")

    monkeypatch.setattr(ib, "build_folder", no_build)
    index = build_index(kcorp, smollm, "docs40", kc, shard_tokens=60)
    ids = key_token_ids(smollm.tokenizer, ["Article 17"])[0]
    assert index.is_full_key(ids) and index.documents(ids, at_key_start=True) == [17]
