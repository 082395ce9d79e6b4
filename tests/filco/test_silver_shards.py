"""Issue 29 item 4, FilCo silver labelling in parts (filco/silver_shards.py): parts merged give
the very file one process writes (same path under the cache, same bytes), for StrInc and for
CXMI scored by a real (small, random) model; the FilCo run then labels nothing; a part killed
mid-way, or whose file was deleted, labels only what is missing."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from filco import resources
from filco import silver_shards as ss
from filco.resources import Labeller, Setup
from filco.silver import SILVER_CHUNK, Example
from ragrepro.errors import ConfigError, DataError
from ragrepro.paths import CONF_DIR

FACTS = [("Paris", "France"), ("Rome", "Italy"), ("Lima", "Peru"), ("Oslo", "Norway"),
         ("Cairo", "Egypt"), ("Quito", "Ecuador"), ("Hanoi", "Vietnam"), ("Bern", "Switzerland")]


def _examples(n: int) -> list[Example]:
    """n questions; every third passage lacks the answer (an empty StrInc label)."""
    out = []
    for i in range(n):
        city, country = FACTS[i % len(FACTS)]
        named = city if i % 3 else "its largest city"
        text = (f"{country} is a country. The capital of {country} is {named}. "
                f"It has {i} museums. Many people visit it every year.")
        out.append(Example(f"q{i}", f"What is the capital of {country}? ({i})", (city,),
                           (text,)))
    return out


def _settings(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config",
                      overrides=["experiment=filco/silver_shards", *overrides])
    return instantiate(cfg.filco, _convert_="object")


@pytest.fixture(scope="module")
def strinc():
    return _settings("filco.measure=strinc", "filco.splitter=regex")


@pytest.fixture(scope="module")
def tiny_lm(smollm):
    """SmolLM2's tokenizer on a small random Llama (float32): CXMI's real batched scoring
    path, fast."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(smollm.tokenizer), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=1024)
    return dataclasses.replace(smollm, model=LlamaForCausalLM(cfg).eval())


def _labeller(fc, lm=None) -> Labeller:
    return Labeller(Setup.of(fc, "qa", lm, 0))


def _one_process(fc, exs, cache, monkeypatch, lm=None):
    monkeypatch.setenv("RAGREPRO_CACHE", str(cache))
    lab = _labeller(fc, lm)
    lab.silvers(exs)
    [path] = (cache / "filco" / "silver").glob("*.json")
    return path.relative_to(cache), path.read_bytes()


def _parts(fc, exs, cache, monkeypatch, parts, lm=None):
    monkeypatch.setenv("RAGREPRO_CACHE", str(cache))
    lab = _labeller(fc, lm)
    path = ss.labels_file(lab, exs)
    for i in range(parts):
        ss.label_part(exs, ss.chunk_labeller(lab), path, i, parts)
    return lab, path


def _no_labelling(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("labelled again: the merged labels were not found")
    monkeypatch.setattr(resources, "silver_contexts", refuse)


def test_parts_merge_to_the_one_process_file_strinc(strinc, tmp_path, monkeypatch):
    exs = _examples(2 * SILVER_CHUNK + 5)  # 3 chunks, the last one short
    rel, one = _one_process(strinc, exs, tmp_path / "one", monkeypatch)
    lab, path = _parts(strinc, exs, tmp_path / "sharded", monkeypatch, 2)
    ss.merge(path, len(exs))
    assert path.relative_to(tmp_path / "sharded") == rel  # the FilCo run's cache file
    assert path.read_bytes() == one
    rows = json.loads(one)
    assert len(rows) == len(exs) and sum(not r["text"] for r in rows) == 13  # i % 3 == 0
    assert rows[1]["text"] == "The capital of Italy is Rome." and rows[1]["spans"] == [[0, 1]]
    _no_labelling(monkeypatch)  # the FilCo run reads the merged file and labels nothing
    assert [s.text for s in lab.silvers(exs)] == [r["text"] for r in rows]


@pytest.mark.slow
def test_parts_merge_to_the_one_process_file_cxmi(tiny_lm, tmp_path, monkeypatch):
    fc = _settings("filco.measure=cxmi", "filco.splitter=regex", "filco.cxmi.batch_size=4")
    exs = _examples(2 * SILVER_CHUNK + 3)
    rel, one = _one_process(fc, exs, tmp_path / "one", monkeypatch, tiny_lm)
    _, path = _parts(fc, exs, tmp_path / "sharded", monkeypatch, 3, tiny_lm)
    assert [p.name.split(".", 1)[1] for p in ss.part_paths(path)] == [
        "part-0-of-3.jsonl", "part-1-of-3.jsonl", "part-2-of-3.jsonl"]
    ss.merge(path, len(exs))
    assert path.relative_to(tmp_path / "sharded") == rel and path.read_bytes() == one
    assert any(r["text"] for r in json.loads(one))  # CXMI selected sentences


def test_killed_part_resumes_and_relabels_only_the_rest(strinc, tmp_path, monkeypatch):
    exs = _examples(3 * SILVER_CHUNK)
    _, one = _one_process(strinc, exs, tmp_path / "one", monkeypatch)
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "sharded"))
    lab = _labeller(strinc)
    path, label = ss.labels_file(lab, exs), ss.chunk_labeller(lab)
    calls: list[str] = []

    def dies_on_third(block):
        calls.append(block[0].qid)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed")
        return label(block)

    with pytest.raises(KeyboardInterrupt):
        ss.label_part(exs, dies_on_third, path, 0, 1)
    part = ss.part_path(path, 0, 1)
    assert len(part.read_text().splitlines()) == 2
    with open(part, "a") as f:  # and the kill tore a line half-written
        f.write('{"chunk": 2, "rows": [{"te')
    calls.clear()
    counts = ss.label_part(exs, lambda b: calls.append(b[0].qid) or label(b), path, 0, 1)
    assert calls == [f"q{2 * SILVER_CHUNK}"] and counts["labelled"] == 1
    assert len(part.read_text().splitlines()) == 4  # the torn line stays, on a line of its own
    ss.merge(path, len(exs))
    assert path.read_bytes() == one


def test_deleted_part_is_relabelled_alone(strinc, tmp_path, monkeypatch):
    exs = _examples(3 * SILVER_CHUNK + 1)
    _, one = _one_process(strinc, exs, tmp_path / "one", monkeypatch)
    lab, path = _parts(strinc, exs, tmp_path / "sharded", monkeypatch, 3)
    ss.part_path(path, 1, 3).unlink()
    with pytest.raises(ConfigError, match=r"chunks 2 of 4 .*overwrite=true"):
        ss.merge(path, len(exs))
    assert not path.exists()
    calls: list[str] = []
    label = ss.chunk_labeller(lab)
    for i in range(3):  # every part rerun: only the lost chunk is labelled
        ss.label_part(exs, lambda b: calls.append(b[0].qid) or label(b), path, i, 3)
    assert calls == [f"q{2 * SILVER_CHUNK}"]
    # parts of another count find the same chunks: nothing to label
    assert ss.label_part(exs, lambda b: calls.append("x") or [], path, 0, 2)["labelled"] == 0
    ss.merge(path, len(exs))
    assert path.read_bytes() == one


def test_parts_are_chunk_aligned_and_cover_every_chunk():
    assert ss.n_chunks(33) == 3 and ss.n_chunks(32) == 2 and ss.n_chunks(0) == 0
    assert ss._ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_garbage_line_is_skipped_and_its_chunk_labelled_again(strinc, tmp_path, monkeypatch):
    exs = _examples(SILVER_CHUNK + 1)
    _, one = _one_process(strinc, exs, tmp_path / "one", monkeypatch)
    lab, path = _parts(strinc, exs, tmp_path / "sharded", monkeypatch, 1)
    part = ss.part_path(path, 0, 1)
    lines = part.read_text().splitlines()
    part.write_text("garbage\n" + lines[1] + "\n")  # chunk 0's line lost, chunk 1's kept
    calls: list[str] = []
    label = ss.chunk_labeller(lab)
    ss.label_part(exs, lambda b: calls.append(b[0].qid) or label(b), path, 0, 1)
    assert calls == ["q0"]
    ss.merge(path, len(exs))
    assert path.read_bytes() == one


def test_a_chunk_of_the_wrong_size_is_refused_by_name(strinc, tmp_path, monkeypatch):
    exs = _examples(SILVER_CHUNK + 1)
    _, path = _parts(strinc, exs, tmp_path, monkeypatch, 1)
    with pytest.raises(DataError, match=r"part-0-of-1.jsonl: chunk 1 holds 1 labels, not 2"):
        ss.merge(path, len(exs) + 1)  # other examples than the parts were labelled for
