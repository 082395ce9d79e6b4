"""The mini proposition index is chosen without looking at evaluation questions, every RICHES
row says what its index was built from, and baselines have no verbatim rate (issue 14)."""
from __future__ import annotations

import hashlib

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from riches_fakes import key_settings, shipped_prompt

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR
from riches.key_index import build_key_corpus, proposition_docs
from riches.keys import build_keys
from riches.provenance import keys_hash, provenance, sample_articles
from riches.records import sample_metrics

TITLES = [f"Article {i}" for i in range(50)]


def _by_hash(titles: list[str], n: int, seed: int) -> set[str]:
    """The rule written out by hand: the n titles with the smallest sha256(seed, title)."""
    ranked = sorted(titles, key=lambda t: hashlib.sha256(f"{seed}\x1f{t}".encode()).hexdigest())
    return set(ranked[:n])


def test_sample_is_the_n_smallest_title_hashes_and_stable() -> None:
    got = sample_articles(TITLES, 7, seed=3)
    assert len(got) == 7 and got == sorted(got)
    assert {TITLES[i] for i in got} == _by_hash(TITLES, 7, 3)
    # the corpus order does not matter, only titles and seed do
    rev = TITLES[::-1]
    assert {rev[i] for i in sample_articles(rev, 7, seed=3)} == _by_hash(TITLES, 7, 3)
    assert {TITLES[i] for i in sample_articles(TITLES, 7, seed=4)} != _by_hash(TITLES, 7, 3)
    assert sample_articles(TITLES, None, seed=0) == list(range(50))
    assert len(sample_articles(TITLES, 500, seed=0)) == 50
    with pytest.raises(ConfigError, match="n_articles"):
        sample_articles(TITLES, 0, seed=0)


def _cfg(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("config", overrides=["experiment=riches/main", *overrides])


def test_proposition_articles_do_not_depend_on_the_evaluated_questions() -> None:
    """Two different question sets (single-hop test, first 3 vs two-hop dev, first 20) get
    the same articles; the old rule added the gold articles of the evaluated questions."""
    docs = [Passage(str(i), t, f"{t} is a thing.") for i, t in enumerate(TITLES)]
    a = _cfg("dataset.hops=1", "limit=3")
    b = _cfg("dataset.hops=2", "dataset.split=dev", "limit=20")
    assert OmegaConf.select(a, "riches.key.n_articles") == 100
    for cfg in (a, b):
        cfg.riches.key.n_articles = 5
    sa = [p.title for p in proposition_docs(instantiate(a.riches.key), docs)]
    assert sa == [p.title for p in proposition_docs(instantiate(b.riches.key), docs)]
    assert set(sa) == _by_hash(TITLES, 5, 0)
    a.riches.key.articles = "gold"
    with pytest.raises(ConfigError, match="articles"):
        proposition_docs(instantiate(a.riches.key), docs)


class FakeLM:
    """Enough of ragrepro's LM for lm_propositions: every rewrite is 'X is a thing.'"""

    name, revision, tokenizer = "fake", "0", None

    def encode(self, text: str) -> list[int]:
        return [len(text)]

    def generate(self, prompts, **kw) -> list[list[int]]:
        return [[0] for _ in prompts]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "Fake rewrite that is a thing.\nmore"


def test_every_key_type_records_its_provenance(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path))
    docs = [Passage(str(i), t, f"{t} is a thing. It is old.") for i, t in enumerate(TITLES)]
    demo = {"examples": [{"steps": [{"title": "Article 7", "proposition": "Article 7 is old."}]}]}
    kc = key_settings("proposition", source="lm", articles="sample", n_articles=4, seed=1,
                      generation_max_new_tokens=8, min_overlap=0.7)
    gen = shipped_prompt("propositions")
    kcorp, origin = build_key_corpus(kc, docs, FakeLM(), [demo, demo], gen)  # counted once
    sampled = _by_hash(TITLES, 4, 1)
    assert {docs[d].title for d in kcorp.key_doc} == sampled | {"Article 7"}
    assert origin["keys_source"] == "lm" and origin["keys_articles"] == "sample"
    assert origin["keys_seed"] == 1 and origin["keys_n_sampled"] == 4
    assert origin["keys_n_demo"] == 1 and origin["keys_corpus_articles"] == 50
    assert origin["keys_n_articles"] == len(sampled | {"Article 7"})
    assert origin["keys_hash"] == keys_hash(kcorp)
    other = {"examples": [{"steps": [{"title": "Article 9", "proposition": "Article 9 is old."}]}]}
    # a run's own prompt is listed again after the shipped ones: same keys, same hash
    single_run = build_key_corpus(kc, docs, FakeLM(), [demo, other, demo], gen)[1]["keys_hash"]
    assert single_run == build_key_corpus(kc, docs, FakeLM(), [demo, other, other],
                                          gen)[1]["keys_hash"]
    assert single_run != build_key_corpus(kc, docs, FakeLM(), [other, demo], gen)[1]["keys_hash"]
    title_corpus, title_origin = build_key_corpus(key_settings("title"), docs,
                                                  FakeLM(), [demo], gen)
    assert title_origin == {"keys_source": "corpus", "keys_articles": "all",
                            "keys_n_articles": 50, "keys_corpus_articles": 50,
                            "keys_seed": None, "keys_hash": keys_hash(title_corpus)}


def test_keys_hash_changes_with_keys_and_with_the_documents_they_point_to() -> None:
    docs = [Passage("a", "A", "One. Two."), Passage("b", "B", "Three.")]
    base = build_keys("proposition", docs, propositions=[("One.", 0)])
    assert keys_hash(base) == keys_hash(build_keys("proposition", docs, propositions=[("One.", 0)]))
    assert keys_hash(base) != keys_hash(build_keys("proposition", docs, propositions=[("One.", 1)]))
    assert keys_hash(base) != keys_hash(build_keys("proposition", docs, propositions=[("Two.", 0)]))
    assert provenance(base, "lm", "sample", 5)["keys_n_articles"] == 1


def test_baselines_have_no_verbatim_rate_and_riches_measures_it() -> None:
    rows = [{"f1_squad": 1.0, "em_squad": 1.0, "n_keys": 2, "keys_verbatim": 1,
             "gold_title_recall": 0.5, "seconds": 2.0},
            {"f1_squad": 0.0, "em_squad": 0.0, "n_keys": 2, "keys_verbatim": 2,
             "gold_title_recall": None, "seconds": 4.0}]
    riches = sample_metrics(rows, decoded_keys=True)
    assert riches["verbatim_rate"] == pytest.approx(3 / 4)
    assert riches["keys_per_answer"] == 2 and riches["gold_title_recall"] == 0.5
    assert riches["seconds_per_question"] == 3.0 and riches["n"] == 2
    baseline = sample_metrics(rows, decoded_keys=False)
    assert "verbatim_rate" not in baseline
    assert {k: v for k, v in riches.items() if k != "verbatim_rate"} == baseline


def test_main_table_leaves_the_baselines_verbatim_rate_empty_and_shows_the_index() -> None:
    from ragrepro.report import run_rows
    from riches.tables import TABLES, build_table

    rows = [{"dataset_hops": "1", "riches_method": "riches", "verbatim_rate": "1.0",
             "f1_squad": "0.1", "keys_articles": "sample", "keys_n_articles": "103"},
            {"dataset_hops": "1", "riches_method": "dense_reader", "retriever": "bm25",
             "k": "1", "f1_squad": "0.5"}]
    header, body = build_table(rows, TABLES["main"])
    col = {name: i for i, name in enumerate(header)}
    by_method = {b[col["riches_method"]]: b for b in body}
    # without a run folder there are no per-question records, so no CI is attached
    assert by_method["riches"][col["verbatim_rate"]] == "1 (no CI)"
    assert by_method["dense_reader"][col["verbatim_rate"]] == ""
    # the index's provenance is a setting every row shares: stated in the note (and the CSV),
    # not a column of the readable table
    assert "keys_articles" not in col and "keys_n_articles" not in col
    note = run_rows.shared_settings_note(rows, TABLES["main"]["note_columns"])
    assert "keys_articles = sample (1 of 2 rows; the others have none)" in note, note
    assert "keys_n_articles = 103 (1 of 2 rows" in note, note
    assert {"keys_articles", "keys_n_articles"} <= set(run_rows.csv_spec(TABLES["main"])["context"])
