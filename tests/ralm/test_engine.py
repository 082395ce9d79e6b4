"""The evaluation loop with a fake LM and a fake retriever: which inputs get scored, document
reuse with a larger retrieval stride, resume, and the per-window records."""
import numpy as np
import pytest
from ralm_testdata import run_settings

from ragrepro.errors import ConfigError
from ralm.engine import StreamEval
from ralm.lm_eval import aggregate
from ralm.windows import make_windows


class FakeLM:
    """log p(token | context) depends on the token and on whether the document token 7 is in
    the context, so a document visibly changes the numbers."""

    def __init__(self):
        self.calls = []

    def score_targets(self, inputs, target_starts, batch_size=8):
        self.calls.append([list(x) for x in inputs])
        out = []
        for ids, s in zip(inputs, target_starts):
            bonus = 0.5 if 7 in ids[:s] else 0.0
            out.append(np.array([-(1.0 + (t % 5)) + bonus * (t % 2) for t in ids[s:]]))
        return out

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(str(i) for i in ids)


class FakeSource:
    def __init__(self):
        self.queries = []

    def docs(self, text_index, windows, queries):
        self.queries += list(queries)
        return [[{"id": f"p{w.index}-{j}", "title": f"T{j}", "text": "x", "score": 10.0 - j}
                 for j in range(3)] for w in windows]


def encode_doc(d):
    # document j of any window: tokens [7] * (j + 1) (rank 0 is the shortest)
    return [7] * (int(d["id"].split("-")[1]) + 1)


def settings(**kw):
    base = {"max_length": 32, "stride": 4, "retrieval_stride": 4, "query_len": 6,
            "doc_max_tokens": 4, "k": 3, "rerank": "first", "rerank_tokens": 4,
            "batch_windows": 5}
    base.update(kw)
    return run_settings(**base)


STREAM = list(range(100, 200))


def test_no_retrieval_scores_each_token_once_and_records_windows():
    lm = FakeLM()
    recs = StreamEval(lm, settings(rerank="none"), None, encode_doc).run(STREAM)
    wins = make_windows(100, 32, 4)
    assert [r["window"] for r in recs] == [w.index for w in wins]
    assert sum(r["n_scored"] for r in recs) == 99
    expected = sum(1.0 + (t % 5) for t in STREAM[1:])
    assert sum(r["nll_sum"] for r in recs) == pytest.approx(expected)
    assert all("doc_rank" not in r for r in recs)


def test_first_doc_queries_and_placement():
    lm, src = FakeLM(), FakeSource()
    recs = StreamEval(lm, settings(), src, encode_doc).run(STREAM)
    assert recs[0].get("retrieval_window") is None and "query" not in recs[0]
    # the query of window 1 is the 6 tokens before its boundary (32)
    assert src.queries[0] == " ".join(str(t) for t in STREAM[26:32])
    assert all(r["doc_rank"] == 0 and r["doc_pid"] == f"p{r['window']}-0" for r in recs[1:])
    scored_inputs = [x for call in lm.calls for x in call]
    assert any(x[0] == 7 and x[1] != 7 for x in scored_inputs)  # doc over position 0


def test_larger_retrieval_stride_reuses_the_latest_document():
    src = FakeSource()
    recs = StreamEval(FakeLM(), settings(retrieval_stride=12), src, encode_doc).run(STREAM)
    used = [r["retrieval_window"] for r in recs[1:]]
    assert used[:6] == [1, 1, 1, 4, 4, 4]
    assert len(src.queries) == len(set(used))
    assert all(r["doc_pid"].startswith(f"p{r['retrieval_window']}-") for r in recs[1:])


def test_zeroshot_picks_the_doc_that_helps_the_prefix_and_scores_in_the_same_pass():
    lm = FakeLM()
    recs = StreamEval(lm, settings(rerank="zeroshot"), FakeSource(), encode_doc).run(STREAM)
    # every doc contains token 7, so ties: argmin keeps the first
    assert all(r["doc_rank"] == 0 for r in recs[1:])
    assert all(r["rerank_score"] is not None for r in recs[1:])
    # ranking rows (3 per retrieval) gave the target NLLs: no extra row for those windows
    n_rows = sum(len(c) for c in lm.calls)
    assert n_rows == 1 + 3 * (len(recs) - 1)


def test_random_choice_is_recorded_and_reproducible():
    a = StreamEval(FakeLM(), settings(rerank="random", seed=3), FakeSource(), encode_doc).run(STREAM)
    b = StreamEval(FakeLM(), settings(rerank="random", seed=3), FakeSource(), encode_doc).run(STREAM)
    assert [r.get("doc_rank") for r in a] == [r.get("doc_rank") for r in b]
    assert len({r["doc_rank"] for r in a[1:]}) > 1


def test_predictive_uses_the_reranker_scores():
    seen = []

    def predict(prefix, docs):
        seen.append(prefix)
        return [0.0, 5.0, 1.0]

    recs = StreamEval(FakeLM(), settings(rerank="predictive"), FakeSource(), encode_doc,
                      predict=predict, reranker_prefix_tokens=3).run(STREAM)
    assert all(r["doc_rank"] == 1 and r["rerank_score"] == 5.0 for r in recs[1:])
    assert seen[0] == " ".join(str(t) for t in STREAM[29:32])


def test_resume_skips_recorded_windows_and_gives_the_same_result():
    full = StreamEval(FakeLM(), settings(), FakeSource(), encode_doc).run(STREAM)
    retrievals = []
    first = StreamEval(FakeLM(), settings(), FakeSource(), encode_doc,
                       on_retrieval=retrievals.append)
    first.run(STREAM)
    done = {r["window"]: r for r in full[:10]}
    restored = {r["window"]: r for r in retrievals if r["window"] < 10}
    lm, src = FakeLM(), FakeSource()
    again = StreamEval(lm, settings(), src, encode_doc).run(STREAM, done, restored)
    assert again == full
    scored = sum(len(c) for c in lm.calls)
    assert scored == len(full) - 10
    assert len(src.queries) == len(full) - 10


def test_doc_too_long_for_the_window_is_refused():
    with pytest.raises(ConfigError, match="doc_max_tokens"):
        StreamEval(FakeLM(), settings(doc_max_tokens=28), FakeSource(), encode_doc).run(STREAM)
    with pytest.raises(ConfigError, match="retrieval_stride"):
        settings(retrieval_stride=2)


def test_aggregate_word_and_token_ppl_share_one_nll_sum():
    recs = [[{"nll_sum": 10.0, "n_scored": 9}, {"nll_sum": 2.0, "n_scored": 1,
                                                 "doc_rank": 0}]]
    m = aggregate(recs, [list(range(11))], ["a b c d  e"], "spaces", add_bos=True)
    assert m["n_words"] == 5 and m["n_tokens"] == 10 and m["n_scored_tokens"] == 10
    assert m["ppl_word"] == pytest.approx(np.exp(12.0 / 5))
    assert m["ppl_token"] == pytest.approx(np.exp(12.0 / 10))
    m2 = aggregate(recs, [list(range(11))], ["a b c d  e"], "whitespace_split", add_bos=False)
    assert m2["n_words"] == 5 - 0 and m2["n_tokens"] == 11
    assert aggregate(recs, [list(range(11))], ["a b\nc"], "whitespace_split", False)["n_words"] == 3
    assert aggregate(recs, [list(range(11))], ["a b\nc"], "spaces", False)["n_words"] == 1


def test_text_shorter_than_one_window_is_one_window_without_retrieval():
    lm, src = FakeLM(), FakeSource()
    recs = StreamEval(lm, settings(), src, encode_doc).run(STREAM[:20])
    assert len(recs) == 1 and recs[0]["n_scored"] == 19 and src.queries == []
    assert recs[0]["nll_sum"] == pytest.approx(sum(1.0 + (t % 5) for t in STREAM[1:20]))


def test_retriever_source_near_dup_filter_overfetches_and_keeps_k():
    from ragrepro.retrieval.base import Hit
    from ragrepro.retrieval.neardup import NearDupFilter
    from ralm.lm_eval import RetrieverSource

    class R:
        def __init__(self):
            self.asked = []

        def search(self, queries, k, exclude_titles=(), fetch=None):
            self.asked.append(k)
            texts = ["the evaluated text itself again", "x y z", "p q r", "s t u", "v w"]
            return [[Hit(pid=str(i), title=f"T{i}", text=t, score=5.0 - i)
                     for i, t in enumerate(texts[:k])] for _ in queries]

    r = R()
    nd = NearDupFilter(["the evaluated text itself again"], n=2, threshold=0.05)
    docs = RetrieverSource(r, 2, [], nd).docs(0, [None], ["q"])
    assert r.asked == [8] and [d["id"] for d in docs[0]] == ["1", "2"]
    assert nd.settings()["near_dup_removed"] == 1
    plain = RetrieverSource(R(), 2, []).docs(0, [None], ["q"])
    assert [d["id"] for d in plain[0]] == ["0", "1"]


class WordLM(FakeLM):
    """Decodes token i to WORDS[i % len(WORDS)], spaced as a BPE decode leaves them."""

    WORDS = ("Paris", " is", " n't", " here", " .", " It", " 's", " big", " ,", " ok", " ?")

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.WORDS[i % len(self.WORDS)] for i in ids)


@pytest.mark.parametrize("clean,expected", [
    (True, "Paris isn't here. It's big, ok?"),     # official: transformers 4.28 decode default
    (False, "Paris is n't here . It 's big , ok ?"),
])
def test_query_clean_spaces_switch(clean, expected):
    src = FakeSource()
    s = settings(query_len=11, query_clean_spaces=clean)
    stream = [i % 11 for i in range(60)]  # the query ending at token 44 is the whole sentence
    StreamEval(WordLM(), s, src, encode_doc).run(stream)
    assert expected in src.queries


def test_query_clean_spaces_defaults_to_the_official_behaviour():
    assert settings().ralm.query_clean_spaces is True
