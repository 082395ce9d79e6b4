"""Loaders: local formats, error messages naming file:line, offline errors, limits."""
from __future__ import annotations

import json

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.data.catalog import load_named
from ragrepro.data.hub import join_wikitext_rows
from ragrepro.errors import ConfigError, DataError, OfflineError
from ragrepro.paths import CONF_DIR


def test_wikitext_join_matches_official():
    assert join_wikitext_rows(["", " = A = \n", "", " text \n"]) == " \n = A = \n \n text \n"


def test_local_text_is_one_document(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("Line one.\nLine two.\n", encoding="utf-8")
    (doc,) = load_named("local_text", path=str(p))
    assert doc.text == "Line one.\nLine two.\n"


def test_local_text_non_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nstill ok\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"bad.txt:3: not valid UTF-8"):
        load_named("local_text", path=str(p))


def test_pile_subset_jsonl_needs_path_and_reads_docs(tmp_path):
    with pytest.raises(ConfigError, match="dataset.path"):
        load_named("realnews")
    p = tmp_path / "rn.jsonl"
    p.write_text('{"text": "doc a"}\n{"text": "doc b"}\n{"text": "doc c"}\n')
    docs = load_named("realnews", path=str(p), limit=2)
    assert [d.text for d in docs] == ["doc a", "doc b"]
    p.write_text('{"text": "doc a"}\n{"txt": "oops"}\n')
    with pytest.raises(DataError, match=r"rn.jsonl:2: record lacks field"):
        load_named("arxiv", path=str(p))


def test_local_qa_errors_name_the_line(tmp_path):
    p = tmp_path / "qa.jsonl"
    p.write_text('{"qid": "1", "question": "q", "answers": ["a"]}\n{"qid": "2", "question"\n')
    with pytest.raises(DataError, match=r"qa.jsonl:2: malformed JSON"):
        load_named("local_qa", split="all", path=str(p))
    p.write_text('{"qid": "1", "question": "q", "answers": ["a"]}\n\n{"qid": "2", "answers": ["b"]}\n')
    with pytest.raises(DataError, match=r"qa.jsonl:3: record lacks field 'question'"):
        load_named("local_qa", split="all", path=str(p))


def test_local_qa_round_trip(tmp_path):
    p = tmp_path / "qa.json"
    p.write_text(json.dumps([{"qid": "a", "question": "q?", "answers": ["x"], "split": "dev",
                              "passages": [{"pid": "p", "title": "T", "text": "x y"}],
                              "hops": 2, "gold_titles": ["T"]}]))
    (r,) = load_named("local_qa", split="dev", path=str(p))
    assert r.passages[0].text == "x y" and r.hops == 2 and r.gold_titles == ["T"]
    with pytest.raises(DataError, match="no records"):
        load_named("local_qa", split="test", path=str(p))


def test_dpr_file(tmp_path):
    p = tmp_path / "nq.json"
    p.write_text(json.dumps([{"question": "who?", "answers": ["A"], "ctxs": [
        {"id": "9", "title": "T", "text": "body", "score": "1.5", "has_answer": True}]}]))
    (r,) = load_named("nq-open-dpr", path=str(p))
    assert (r.passages[0].pid, r.passages[0].title) == ("9", "T")
    assert r.meta["ctx_has_answer"] == [True]
    p.write_text(json.dumps([{"question": "who?"}]))
    with pytest.raises(DataError, match="item 0 lacks"):
        load_named("triviaqa-dpr", path=str(p))


@pytest.mark.parametrize("name", ["nq-open", "triviaqa", "hotpotqa", "eli5", "fever", "wow"])
def test_hub_datasets_offline_say_what_to_do(name, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(OfflineError) as e:
        load_named(name, split="test")
    msg = str(e.value)
    assert "HF_DATASETS_OFFLINE=0" in msg and "dataset.path" in msg and "vital-qa" in msg


def test_wikitext_offline_suggests_wiki_vital(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(OfflineError, match="wiki-vital"):
        load_named("wikitext-103", split="test", variant="wikitext-103-raw-v1")
    with pytest.raises(ConfigError, match="wikitext-103-v1"):
        load_named("wikitext-103", split="test", variant="wikitext-2")


def test_unknown_names_suggest():
    with pytest.raises(ConfigError, match="vital-qa"):
        load_named("vital_qa")


def test_every_dataset_config_instantiates_or_explains():
    """Each conf/dataset/*.yaml points to a loader and has the common keys."""
    offline_or_path = (OfflineError, ConfigError, DataError)
    for path in sorted((CONF_DIR / "dataset").glob("*.yaml")):
        cfg = OmegaConf.merge(OmegaConf.create({"limit": 3}),
                              {"dataset": OmegaConf.load(path)})
        ds = cfg.dataset
        assert {"_target_", "name", "task", "variant", "split", "limit"} <= set(ds), path
        try:
            out = instantiate(ds, _convert_="all")
        except InstantiationException as e:  # hydra wraps the loader's own error
            assert isinstance(e.__cause__, offline_or_path), (path, e)
            continue
        assert 0 < len(out) <= 3, path
