"""Keys, prompts, propositions, evidence, tables and the bench hook (no model)."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from riches_fakes import ID, WORDS, decode, ids, shipped_prompt, toy_constraint

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from riches import markers
from riches.baselines import RowMatch, auto_k
from riches.decoding import analyse_keys, evidence_text
from riches.keys import KeyCorpus, build_keys, document_frequencies, split_sentences, tfidf_rank
from riches.prompts import example_key, parse_answer
from riches.propositions import build_prompt, choose, parse_rewrite, supported
from riches.tables import build_table, to_markdown

DOCS = [Passage("a", "Joker", "Joker is a supervillain. He was created by Bill Finger."),
        Passage("b", "Batman", "Batman is a superhero. He appears in DC Comics.")]


def test_key_types() -> None:
    assert build_keys("title", DOCS).keys == ["Joker", "Batman"]
    assert build_keys("title_paragraph", DOCS).keys[0] == "Joker | " + DOCS[0].text
    assert build_keys("paragraph", DOCS).keys == [DOCS[0].text, DOCS[1].text]
    sent = build_keys("sentence", DOCS)
    assert sent.keys == ["Joker is a supervillain.", "He was created by Bill Finger.",
                         "Batman is a superhero.", "He appears in DC Comics."]
    assert sent.key_doc == [0, 0, 1, 1]
    prop = build_keys("proposition", DOCS, propositions=[("Joker was created by Bill Finger.", 0)])
    assert prop.keys == ["Joker was created by Bill Finger."] and prop.key_doc == [0]
    with pytest.raises(ConfigError):
        build_keys("proposition", DOCS)
    with pytest.raises(ConfigError, match="Did you mean"):
        build_keys("sentences", DOCS)


def test_sentences_are_verbatim_substrings() -> None:
    text = "Dr. No (1962) was the first film. It starred Sean Connery. Born c. 1930, he acted."
    for s in split_sentences(text):
        assert s in text
    assert split_sentences(text)[1] == "It starred Sean Connery."


def test_parse_answer() -> None:
    out = "Keywords: x\nEvidence: << a >>\nAnswer: Heath Ledger\n\n"
    assert parse_answer(out) == "Heath Ledger"
    assert parse_answer("no answer line") == ""
    assert parse_answer("Answer: a\nAnswer: b") == "b"


def test_proposition_parsing_and_filter() -> None:
    assert parse_rewrite(" Joker was created by  Bill Finger.\nArticle: x") == "Joker was created by Bill Finger."
    assert choose("Joker was created by Bill Finger.", "He was created by Bill Finger.", DOCS[0], 0.7) \
        == ("Joker was created by Bill Finger.", "rewrite")
    assert choose("Stan Lee made Joker in Paris in 1990.", "He was created by Bill Finger.", DOCS[0], 0.7) \
        == ("He was created by Bill Finger.", "sentence")
    cfg = shipped_prompt("propositions")
    prompt = build_prompt(cfg, "Joker", "He was created by Bill Finger.")
    assert prompt.endswith("Article: Joker\nSentence: He was created by Bill Finger.\nStand-alone:")
    assert prompt.count("Stand-alone:") == len(cfg["examples"]) + 1
    assert supported("Joker was created by Bill Finger.", DOCS[0])
    assert not supported("Joker was created by Stan Lee in Paris.", DOCS[0])  # 4/8 words
    assert not supported("Joker.", DOCS[0])  # too short to be a fact


def test_tfidf_rank_prefers_matching_document() -> None:
    df = document_frequencies(DOCS)
    assert tfidf_rank("Who created the Joker supervillain?", [d.text for d in DOCS], df, 2) == [0, 1]
    assert tfidf_rank("Which comics does the superhero appear in?", [d.text for d in DOCS], df, 2)[0] == 1


def test_demonstration_keys_must_be_verbatim() -> None:
    text = {"Joker": DOCS[0].text}
    step = {"title": "Joker", "sentence": "Joker is a supervillain.", "proposition": "p"}
    assert example_key(step, "sentence", text) == "Joker is a supervillain."
    assert example_key(step, "title_paragraph", text) == "Joker | " + DOCS[0].text
    assert example_key(step, "paragraph", text, demo="sentence") == "Joker is a supervillain."
    assert example_key(step, "title_paragraph", text, demo="first_sentence") == \
        "Joker | Joker is a supervillain."
    with pytest.raises(ConfigError, match="verbatim"):
        example_key({**step, "sentence": "Joker is a villain."}, "sentence", text)
    with pytest.raises(ConfigError, match="corpus"):
        example_key({**step, "title": "Robin"}, "paragraph", text)


def test_shipped_prompts_are_three_shot_and_never_use_test_questions() -> None:
    from ragrepro.data.loaders import load_qa

    test_qs = {r.question for r in load_qa("vital-qa", split="test")}
    for name, steps in (("single_hop", 1), ("multi_hop", 2)):
        cfg = shipped_prompt(name)
        assert len(cfg["examples"]) == 3
        assert all(len(ex["steps"]) == steps for ex in cfg["examples"])
        assert all(ex["question"] not in test_qs for ex in cfg["examples"])
        assert all(st["thought"] and st["subquestion"] for ex in cfg["examples"] for st in ex["steps"])


def test_analyse_keys_and_evidence() -> None:
    keys = [[" Joker", " is", " played", " by", " Joaquin", " Phoenix", "."],
            [" Heath", " Ledger", " played", " Joker", " in", " the", " film", " Batman", "."]]
    c = toy_constraint(keys, start="anywhere", end="anywhere")
    kcorp = KeyCorpus("sentence", [decode(ids(k)).strip() for k in keys], [0, 1],
                      [Passage("1", "Joker (film)", "x"), Passage("2", "The Dark Knight", "y")])
    gen = ids([" answer", " <<", " played", " by", " Joaquin", " >>", " the", " <<", " Heath"])
    hits = analyse_keys(gen, c, kcorp, decode, at_key_start=False)
    assert [h.text for h in hits] == ["played by Joaquin", "Heath"]
    assert [h.closed for h in hits] == [True, False]
    assert all(h.verbatim for h in hits) and hits[0].doc_indices == [0]
    ev, titles = evidence_text(hits, kcorp, "key", "q", Counter())
    assert ev == "played by Joaquin Heath" and titles == ["Joker (film)", "The Dark Knight"]
    ev, titles = evidence_text(hits[:1], kcorp, "document", "q", Counter())
    assert ev == "Joker (film). x"
    # a hallucinated key (not in the corpus) is not verbatim
    bad = analyse_keys(ids([" <<", " Nolan", " played", " >>"]), c, kcorp, decode, False)
    assert not bad[0].verbatim and bad[0].n_matches == 0
    assert markers.spans(c.spec, gen) == [(2, 5, True), (8, 9, False)]
    assert WORDS[ID[" <<"]] == " <<"


def test_auto_k_reads_the_riches_run(tmp_path) -> None:
    (tmp_path / "riches").mkdir()
    (tmp_path / "riches" / "main.csv").write_text(
        "run_id,riches_method,dataset,model,limit,dataset_hops,keys_per_answer\n"
        "r1,riches,vital-qa,smollm2-135m,15,1,1.4\n"
        "r2,riches,vital-qa,smollm2-135m,15,2,2.6\n"
        "r3,dense_reader,vital-qa,smollm2-135m,15,2,1\n")
    csv_path = tmp_path / "riches" / "main.csv"
    match = RowMatch(dataset="vital-qa", model="smollm2-135m", limit=15, hops=2)
    assert auto_k(csv_path, match, 1) == (3, "riches run r2")
    match = dataclasses.replace(match, hops=1)
    assert auto_k(csv_path, match, 1) == (1, "riches run r1")
    match = dataclasses.replace(match, model="gemma3-270m")
    assert auto_k(csv_path, match, 7) == (7, "default")
    # limit=null (every question) is an empty CSV cell, not the string "None"
    with open(csv_path, "a") as f:
        f.write("r4,riches,vital-qa,smollm2-135m,,2,2.8\n")
    match = RowMatch(dataset="vital-qa", model="smollm2-135m", limit=None, hops=2)
    assert auto_k(csv_path, match, 1) == (3, "riches run r4")


def test_table_one_row_per_setting_and_refuses_two_runs_of_one_setting() -> None:
    from ragrepro.errors import DataError

    rows = [{"key_type": "title", "f1_squad": "0.3", "model": "m", "dataset": "d", "n": "15"},
            {"key_type": "sentence", "f1_squad": "0.25", "model": "m", "dataset": "d", "n": "15"}]
    header, body = build_table(rows, ["key_type"])
    assert header[:2] == ["key_type", "f1_squad"]
    # no run folders here: no per-sample records, said in the cell
    assert body == [["sentence", "0.250 (no CI)", "", ""],  # n, model, dataset: the note
                    ["title", "0.300 (no CI)", "", ""]]     # and the CSV (keys_articles: none)
    _, beams = build_table([{"beam_size": b, "model": "m"} for b in ("10", "5", "1", "20")],
                           ["beam_size"])
    assert [r[0] for r in beams] == ["1", "5", "10", "20"]
    md = to_markdown("t", header, body)
    assert md.count("\n| ") == 3
    # a second title run with another limit used to replace the first silently
    other = {"key_type": "title", "f1_squad": "0.1", "model": "m", "dataset": "d", "n": "5",
             "limit": "5"}
    with pytest.raises(DataError, match="differ in limit"):
        build_table([*rows, other], ["key_type"])


def _riches_run(root, run_id, method, f1):
    import json

    d = root / run_id
    d.mkdir(parents=True)
    (d / "samples.jsonl").write_text("".join(json.dumps({"qid": f"q{i}", "f1_squad": v}) + "\n"
                                             for i, v in enumerate(f1)))
    settings = {"dataset_hops": 1, "riches_method": method, "model": "m", "dataset": "d"}
    (d / "metrics.json").write_text(json.dumps({"metrics": {"f1_squad": sum(f1) / len(f1)},
                                                "settings": settings}))
    return {"run_id": run_id, "dataset_hops": "1", "riches_method": method, "retriever": "",
            "k": "", "model": "m", "dataset": "d", "f1_squad": str(sum(f1) / len(f1))}


def test_main_table_pairs_riches_with_each_baseline_on_the_same_questions(tmp_path) -> None:
    from riches.tables import TABLES

    rows = [_riches_run(tmp_path, "r", "riches", [1.0, 1.0, 0.5, 0.0]),
            _riches_run(tmp_path, "n", "no_retrieval", [0.0, 0.0, 0.5, 0.0])]
    header, body = build_table(rows, TABLES["main"], lambda r: tmp_path / r["run_id"])
    col = header.index("RICHES − row: f1_squad")
    by = {b[1]: b for b in body}
    assert by["riches"][col] == ""
    # differences (1, 1, 0, 0): +0.5; swapping either non-zero unit alone gives 0, so
    # exact permutation p = 8 / 16; resamples of only the two tied questions give 0: ≈0
    assert by["no_retrieval"][col] == "+0.500 [+0.000, +1.000] p=0.50 ≈0"
    assert by["riches"][header.index("f1_squad")].startswith("0.625 [")


def test_lookup_benchmark_hook_small() -> None:
    from benchmarks.riches_index import lookup_benchmark

    row = lookup_benchmark(30_000, "synthetic", n_walks=20)
    assert row["bytes_per_token"] == 6 and row["n_tokens"] >= 30_000
    assert row["steps_timed"] > 0 and row["ms_per_step_mean"] > 0


def test_soft_autoais_is_the_mean_score_with_missing_as_zero(tmp_path) -> None:
    from riches.attribution import soft_score
    from riches.tables import fill_soft_score

    per = [{"nli_score": 0.9}, {"nli_score": None, "missing": "answer"}, {"nli_score": 0.3}]
    assert soft_score(per) == pytest.approx(0.4)
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "autoais.jsonl").write_text(
        '{"qid": "a", "nli_score": 0.9}\n{"qid": "b", "nli_score": null}\n{"qid": "c", "nli_score": 0.3}\n')
    row = fill_soft_score({"run_id": "r1", "autoais_substitute": "0.33"}, tmp_path)
    assert float(row["autoais_substitute_mean_score"]) == pytest.approx(0.4)


def test_answered_is_the_share_of_non_empty_predictions(tmp_path) -> None:
    """A decoder that runs to its token limit without an answer: 1 of 4 answered."""
    from riches.tables import fill_answered

    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "samples.jsonl").write_text(
        '{"prediction": ""}\n{"prediction": "  "}\n{"prediction": "Paris"}\n{}\n')
    assert fill_answered({"run_id": "r1"}, tmp_path)["answered"] == "0.25"
    # a recorded value is kept; a run without samples gets no value
    assert fill_answered({"run_id": "r1", "answered": "1.0"}, tmp_path)["answered"] == "1.0"
    assert "answered" not in fill_answered({"run_id": "none"}, tmp_path)


def test_time_walks_counts_rows_read_per_step() -> None:
    """Four copies of the key [7, 8, 9]: the key-start children are cached, then each of the
    next two steps scans the 4 suffix-array rows of its span: 8 rows over 3 steps."""
    import numpy as np

    from benchmarks.riches_index import time_walks
    from riches.index import SuffixIndex

    keys = [np.array([7, 8, 9])] * 4
    index = SuffixIndex.build(keys, vocab_size=16)
    row = time_walks(index, keys, n_walks=2)
    assert row["steps_timed"] == 6
    assert row["probes_per_step_mean"] == pytest.approx(8 / 3)
    assert "_next_at" not in vars(index)  # the counter is removed afterwards


def test_main_table_keeps_bm25_and_dense_baselines_apart() -> None:
    from riches.tables import TABLES

    rows = [{"dataset_hops": "1", "riches_method": "dense_reader", "retriever": r, "k": "1",
             "f1_squad": f, "model": "m", "dataset": "d"} for r, f in (("bm25", "0.5"),
                                                                       ("dense-minilm", "0.4"))]
    header, body = build_table(rows, TABLES["main"])
    assert [(b[header.index("retriever")], b[header.index("f1_squad")]) for b in body] == [
        ("bm25", "0.500 (no CI)"), ("dense-minilm", "0.400 (no CI)")]
