"""RALM perplexity records per window whether it was scored without a document and whether
its document was cut to doc_max_tokens; the row carries the rates (ragrepro.generation)."""
from __future__ import annotations

import pytest

from ralm.engine import StreamEval
from ralm.lm_eval import aggregate, doc_cut_checker
from tests.ralm.test_engine import STREAM, FakeLM, FakeSource, encode_doc, settings


def _cut(doc: dict) -> bool:
    # documents of rank 2 are the ones a 2-token budget would cut (3 tokens in encode_doc)
    return doc["id"].endswith("-2")


def test_windows_without_a_document_and_cut_documents_are_recorded():
    recs = StreamEval(FakeLM(), settings(), FakeSource(), encode_doc, doc_cut=_cut).run(STREAM)
    # window 0 has no document, every later one the first (rank 0, not cut)
    assert recs[0]["diag"] == {"no_document": True, "doc_truncated": None}
    assert all(r["diag"] == {"no_document": False, "doc_truncated": False} for r in recs[1:])
    m = aggregate([recs], [STREAM], ["w " * 10], "spaces", False)
    assert m["diag_no_document"] == pytest.approx(1 / len(recs))
    assert m["diag_doc_truncated"] == 0.0


def test_random_choice_cut_share_is_over_windows_with_a_document():
    recs = StreamEval(FakeLM(), settings(rerank="random"), FakeSource(), encode_doc,
                      doc_cut=_cut).run(STREAM)
    with_doc = [r for r in recs if r["diag"]["no_document"] is False]
    cut = [r for r in with_doc if r["doc_pid"].endswith("-2")]
    assert 0 < len(cut) < len(with_doc)  # the seeded choice picks rank 2 only sometimes
    assert [r["diag"]["doc_truncated"] for r in with_doc] == [r in cut for r in with_doc]
    m = aggregate([recs], [STREAM], ["w w"], "spaces", False)
    assert m["diag_doc_truncated"] == pytest.approx(len(cut) / len(with_doc))


def test_no_retrieval_run_has_no_document_anywhere_and_no_cut_rate():
    recs = StreamEval(FakeLM(), settings(rerank="none"), None, encode_doc).run(STREAM)
    m = aggregate([recs], [STREAM], ["w w"], "spaces", False)
    assert m["diag_no_document"] == 1.0 and "diag_doc_truncated" not in m


def test_records_of_a_run_made_before_the_diagnostics_add_no_columns():
    old = [{"nll_sum": 2.0, "n_scored": 4}, {"nll_sum": 1.0, "n_scored": 4}]
    m = aggregate([old], [list(range(9))], ["a b"], "spaces", False)
    assert not [k for k in m if k.startswith("diag_")]


class CharTok:
    """One id per character; a BOS id 1 first when asked for special tokens."""

    def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
        ids = ([1] if add_special_tokens else []) + [ord(c) for c in text]
        return {"input_ids": ids[:max_length] if truncation else ids}


class TokLM:
    tokenizer = CharTok()
    bos_id = 1


def test_doc_cut_checker_agrees_with_the_encoders_truncation():
    from ralm.documents import doc_encoder

    lm = TokLM()
    # "T\nabc": 5 characters + BOS = 6 ids
    doc = {"title": "T", "text": "abc"}
    for max_tokens in (5, 6, 7):
        enc = doc_encoder(lm, max_tokens, bos_first=True)(doc)
        full = 6
        assert doc_cut_checker(lm, max_tokens, True)(doc) == (len(enc) < full)
    assert doc_cut_checker(lm, 5, True)(doc) is True
    assert doc_cut_checker(lm, 6, True)(doc) is False
