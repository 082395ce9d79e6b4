"""`ralm.lm_eval.run` called as Hydra calls it, with a one-token-per-character fake LM: the
settings come from ralm/conf/ralm/base.yaml (their only defaults), and the components a cell does
not use are never built (no retriever for rerank=none, no scorer for a self-scored cell)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.configcheck import option_file
from ragrepro.data.records import LMDoc
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError
from ragrepro.pipeline import build_pipeline
from ragrepro.retrieval.base import Hit
from ragrepro.tracking import Run
from ralm import lm_eval

TEXTS = [LMDoc(doc_id="a", title="A", text="one two three four five "),
         LMDoc(doc_id="b", title="B", text="six seven eight nine ")]


class CharLM:
    """One token per character; every scored token costs exactly 1 nat."""

    name, add_bos, bos_id = "char", False, None

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)

    def tokenizer(self, text: str, add_special_tokens: bool = True, truncation: bool = True,
                  max_length: int | None = None) -> dict:
        return {"input_ids": self.encode(text)[:max_length]}

    def score_targets(self, inputs, target_starts, batch_size: int = 8):
        return [np.full(len(ids) - s, -1.0) for ids, s in zip(inputs, target_starts)]


class Refused(Deferred):
    """A component that must not be built in this cell."""

    def __init__(self, name: str = "refused"):
        super().__init__({"_target_": "nowhere", "name": name})

    def build(self, **kwargs: Any) -> Any:
        raise AssertionError(f"{self.name} was built")


class Given(Deferred):
    def __init__(self, obj: Any, name: str):
        super().__init__({"_target_": "unused", "name": name})
        self.obj, self.builds = obj, 0

    def build(self, **kwargs: Any) -> Any:
        self.builds += 1
        return self.obj


class FakeRetriever:
    def __init__(self):
        self.queries: list[str] = []

    def search(self, queries, k, exclude_titles=(), fetch=None):
        self.queries += list(queries)
        return [[Hit(pid=f"p{j}", title=f"T{j}", text="zz", score=1.0) for j in range(k)]
                for _ in queries]

    def settings(self) -> dict:
        return {"name": "fake"}


def ralm_settings(rerank: str = "first", **over: Any):
    # the variant node exactly as its config group option writes it
    option = OmegaConf.load(option_file("ralm/rerank", rerank)).rerank
    node = OmegaConf.merge(OmegaConf.load(option_file("ralm", "base")).ralm,
                           {"max_length": 16, "stride": 4, "query_len": 2, "doc_max_tokens": 3,
                            "k": 2, "forbidden_titles": "none", "rerank": option, **over})
    return instantiate(node)


def call(tmp_path, settings, *, retriever: Deferred, corpus: Deferred,
         scorer: Deferred | None = None):
    run = Run("t/ralm", "r", tmp_path / "res")
    run.start()
    return lm_eval.run(run, lm=CharLM(), texts=TEXTS, settings=settings, corpus=corpus,
                       retriever=retriever, retrieval_file=None, scorer=scorer or Deferred(None),
                       reranker=None, label_model=Refused("label model"),
                       dataset=Deferred({"_target_": "unused", "name": "toy"}), seed=0,
                       batch_size=2)


def test_no_retrieval_builds_nothing_and_counts_every_token_but_the_first(tmp_path):
    res = call(tmp_path, ralm_settings(rerank="none"), retriever=Refused("retriever"),
               corpus=Refused("corpus"))
    n = len("".join(d.text for d in TEXTS))  # joined stream, one token per character
    n_words = "".join(d.text for d in TEXTS).count(" ")  # ralm.word_count=spaces (official)
    assert res.metrics["nll_sum"] == n - 1 and res.metrics["n_tokens"] == n
    assert res.metrics["ppl_token"] == pytest.approx(math.exp((n - 1) / n))
    assert res.metrics["ppl_word"] == pytest.approx(math.exp((n - 1) / n_words))
    assert res.settings["retriever"] is None and res.settings["corpus"] is None


def test_retrieval_builds_the_retriever_once_over_the_corpus(tmp_path):
    fake = FakeRetriever()
    retriever, corpus = Given(fake, "fake"), Given(object(), "toy-corpus")
    res = call(tmp_path, ralm_settings(rerank="first"), retriever=retriever, corpus=corpus)
    assert retriever.builds == 1 and corpus.builds == 1 and fake.queries
    assert res.metrics["n_windows_with_doc"] == res.metrics["n_windows"] - 1
    assert res.settings["corpus"] == "toy-corpus" and res.settings["retriever"] == "fake"


def test_a_scorer_other_than_the_model_only_for_zeroshot(tmp_path):
    with pytest.raises(ConfigError, match="zeroshot"):
        call(tmp_path, ralm_settings(rerank="first"), retriever=Refused(), corpus=Refused(),
             scorer=Refused("scorer"))


def test_the_scorer_is_not_loaded_when_it_is_the_evaluated_model(tmp_path):
    fake = FakeRetriever()
    res = call(tmp_path, ralm_settings(rerank="zeroshot", rerank_tokens=2),
               retriever=Given(fake, "fake"), corpus=Given(object(), "c"),
               scorer=Refused("char"))  # same name as CharLM: the LM scores itself
    assert res.settings["scorer_model"] == "char"


def test_settings_keys_are_checked_when_the_pipeline_is_built():
    base = OmegaConf.merge(OmegaConf.load(option_file("ralm", "base")).ralm,
                           OmegaConf.load(option_file("ralm/rerank", "first")))
    for bad, match in (({"strid": 4}, "strid"), ({"word_count": "words"}, "word_count")):
        cfg = OmegaConf.create({"ralm": OmegaConf.merge(base, bad), "pipeline": "${ralm}"})
        with pytest.raises(ConfigError, match=match):
            build_pipeline(cfg)
    missing = OmegaConf.create({"ralm": {k: v for k, v in base.items() if k != "k"},
                                "pipeline": "${ralm}"})
    with pytest.raises(ConfigError, match="missing 1 required positional argument: 'k'"):
        build_pipeline(missing)
