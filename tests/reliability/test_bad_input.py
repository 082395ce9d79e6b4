"""Issue 8 guarantee 4 and 5: every kind of bad input stops with an error that names the
file, line or key and the fix; non-finite numbers name the window that produced them."""
import numpy as np
import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError, DataError, NumericsError, OfflineError
from ragrepro.retrieval.corpus import Corpus
from ralm.engine import StreamEval
from ralm.settings import settings_from_defaults
from ralm.windows import make_windows


def _settings(**kw):
    base = {"max_length": 32, "stride": 4, "retrieval_stride": 4, "query_len": 6,
            "doc_max_tokens": 4, "k": 3, "rerank": "none", "rerank_tokens": 4}
    base.update(kw)
    return settings_from_defaults(base, seed=0, batch_size=8, model_adds_bos=False)


class NaNLM:
    """Finite everywhere except in the input that contains token 150."""

    def score_targets(self, inputs, target_starts, batch_size=8):
        out = [np.full(len(ids) - s, -1.0) for ids, s in zip(inputs, target_starts)]
        bad = [i for i, ids in enumerate(inputs) if 150 in ids[target_starts[i]:]]
        for i in bad:
            out[i][0] = np.nan
        if bad:
            raise NumericsError("non-finite log-probability", rows=bad)
        return out

    def decode(self, ids, skip_special_tokens=False):
        return ""


def test_nan_names_the_window():
    stream = list(range(100, 200))
    with pytest.raises(NumericsError, match=r"text 0, window 5 \(tokens 20-52\)"):
        StreamEval(NaNLM(), _settings(), None, lambda d: []).run(stream)


def test_empty_passage_names_its_id():
    with pytest.raises(DataError, match="p2"):
        Corpus("c", [Passage("p1", "A", "text"), Passage("p2", "B", "  ")])


def test_passage_with_extra_newlines_is_fine():
    corpus = Corpus("c", [Passage("p1", "A", "line one\n\nline two\nthree")])
    assert len(corpus) == 1


def test_text_shorter_than_one_window_is_one_shorter_window():
    (w,) = make_windows(10, 32, 4)
    assert (w.begin, w.end, w.target_start) == (0, 10, 1)


@pytest.mark.parametrize("kw,msg", [
    ({"stride": 40, "retrieval_stride": 40}, "stride=40 must be in 1..max_length-1"),
    ({"rerank": "first", "doc_max_tokens": 30}, "must be below ralm.max_length"),
    ({"rerank": "first", "k": 0}, "ralm.k=0 must be >= 1"),
    ({"rerank": "first", "retrieval_stride": 2}, "set retrieval_stride >= stride"),
])
def test_settings_that_cannot_work_together(kw, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(".", r"\.")):
        StreamEval(NaNLM(), _settings(**kw), None, lambda d: []).run(list(range(100, 140)))


def test_hub_dataset_offline_says_what_to_do(monkeypatch):
    from ragrepro.data.loaders import load_qa

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(OfflineError, match="vital-qa"):
        load_qa("hotpotqa", split="test")


def test_local_qa_malformed_line(tmp_path):
    from ragrepro.data.loaders import load_qa

    p = tmp_path / "qa.jsonl"
    p.write_text('{"qid": "1", "question": "q", "answers": ["a"]}\n{"qid": "2", "question": \n')
    with pytest.raises(DataError, match=r"qa\.jsonl:2"):
        load_qa("local_qa", split="test", path=str(p))


def test_non_utf8_local_text(tmp_path):
    from ragrepro.data.loaders import load_lm_docs

    p = tmp_path / "t.txt"
    p.write_bytes(b"caf\xe9 au lait\n")
    with pytest.raises(DataError, match="not valid UTF-8"):
        load_lm_docs("local_text", split="test", path=str(p))
