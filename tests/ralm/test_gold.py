"""The gold-document upper bound: which article a window gets, and that the engine inserts it."""
import pytest
from ralm_testdata import run_settings

from ragrepro.data.records import LMDoc
from ragrepro.errors import ConfigError
from ralm.engine import StreamEval
from ralm.gold import GoldSource, article_at, article_starts, gold_doc
from ralm.windows import make_windows

DOCS = [LMDoc("A", "A\n\naaaa\n\n", "A"), LMDoc("B", "B\n\nbb\n\n", "B"),
        LMDoc("C", "C\n\ncccccc\n\n", "C")]


def test_article_starts_and_lookup():
    # lengths 9, 7, 11 -> starts 0, 9, 16
    starts = article_starts(DOCS)
    assert starts == [0, 9, 16]
    assert [article_at(starts, c) for c in (0, 8, 9, 15, 16, 40)] == [0, 0, 1, 1, 2, 2]
    with pytest.raises(ConfigError):
        article_at([], 0)


def test_gold_doc_drops_the_title_line():
    assert gold_doc(DOCS[0]) == {"id": "A", "title": "A", "text": "aaaa", "score": 1.0}


class CharLM:
    """One token per character (token = code point); decode joins them back."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)

    def score_targets(self, inputs, target_starts, batch_size=8):
        import numpy as np

        return [np.full(len(ids) - s, -1.0) for ids, s in zip(inputs, target_starts)]


def test_joined_stream_windows_get_the_article_of_their_first_scored_token():
    text = "".join(d.text for d in DOCS)
    stream = [ord(c) for c in text]
    lm = CharLM()
    src = GoldSource(DOCS, [stream], lm.decode, joined=True)
    wins = make_windows(len(stream), 8, 4)
    got = [ds[0]["id"] for ds in src.docs(0, wins[1:], [""] * (len(wins) - 1))]
    # window i >= 1 scores from target_start = i*4 + 4: 8 -> A, 12 -> B, 16 -> C, 20 -> C ...
    assert [w.target_start for w in wins[1:4]] == [8, 12, 16]
    assert got[:3] == ["A", "B", "C"] and set(got[3:]) == {"C"}


def test_per_document_streams_get_their_own_article_and_the_engine_inserts_it():
    lm = CharLM()
    streams = [[ord(c) for c in d.text] for d in DOCS]
    src = GoldSource(DOCS, streams, lm.decode, joined=False)
    s = run_settings(max_length=6, stride=2, retrieval_stride=2, query_len=2, doc_max_tokens=2,
                     k=1, rerank="gold", rerank_tokens=1)
    recs = StreamEval(lm, s, src, lambda d: [1, 2], text_index=2).run(streams[2])
    with_doc = [r for r in recs if r.get("doc_rank") is not None]
    assert with_doc and {r["doc_pid"] for r in with_doc} == {"C"}
    assert len(with_doc) == len(recs) - 1  # every window but window 0
