"""Which context reaches the generator in each setting (Full, Psg, FilCo, Silver).

The released code feeds the SILVER context in its "FilCo" path (issue #10); here FilCo must
feed the filter model's predictions, and `test_context=silver_as_released` must reproduce the
released behaviour. Fake models record every prompt they are given."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from filco import pipeline, prompts, resources
from filco.measures import MeasureSpec
from filco.resources import Labeller, Setup
from filco.settings import FilcoSettings
from filco.silver import Example
from filco.tasks import get_task
from ragrepro.configcheck import option_file
from ragrepro.tracking import Run


class FakeLM:
    """Character-level 'tokenizer'; generate() records the decoded prompt and answers by role."""

    kind = "causal"
    add_bos = False
    eos_id = None

    def __init__(self, role: str, log: dict):
        self.name, self.revision, self.role, self.log = f"fake-{role}", role, role, log
        self.tokenizer = lambda text, add_special_tokens=False: {"input_ids": text.split()}

    def encode(self, text, add_bos=None):
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)

    def respond(self, prompt: str) -> str:
        if self.role == "ctx":
            return "PREDICTED by M_ctx."
        if self.role == "psg":
            return "yes" if "KEEP" in prompt.split("context:")[-1] else "no"
        return "answer: Paris"

    def generate(self, prompts, max_new_tokens, batch_size=8, **_):
        return [ids for ids, _ in self.generate_with_finish(prompts, max_new_tokens, batch_size)]

    def generate_with_finish(self, prompts, max_new_tokens, batch_size=8, **_):
        """As LM.generate_with_finish; `length` when the answer fills the budget (not cut:
        the psg verdicts' 2-token budget is counted in characters here)."""
        texts = [self.decode(p) for p in prompts]
        self.log.setdefault(self.role, []).extend(texts)
        out = [self.encode(self.respond(t)) for t in texts]
        return [(ids, "length" if len(ids) >= max_new_tokens else "eos") for ids in out]


TRAIN = [Example("t1", "Capital of France?", ("Paris",),
                 ("Paris is the capital of France. It is old.",), "nq")]
TEST = [Example("e1", "Which city is the French capital?", ("Paris",),
                ("KEEP Paris is in France. Paris is the capital.",), "nq"),
        Example("e2", "Largest city of Germany?", ("Berlin",),
                ("Munich is big. Hamburg is a port.",), "nq")]


def filco_settings(variant: str = "filco", **over) -> FilcoSettings:
    """filco/conf/filco/default.yaml with one filco/variant option file merged after its own
    keys (as Hydra composes them: `defaults: [_self_, variant: filco]`), then `over` (dotted
    keys)."""
    node = OmegaConf.load(option_file("filco", "default"))
    node.pop("defaults")
    chosen = OmegaConf.load(option_file("filco/variant", variant))
    cfg = OmegaConf.create({"filco": OmegaConf.merge(node, chosen)})
    for k, v in over.items():
        OmegaConf.update(cfg, f"filco.{k}", v)
    return instantiate(cfg.filco, _convert_="object")


def nq_setup(fc: FilcoSettings, lm) -> Setup:
    """A run on NQ-style questions with the StrInc measure (paper mode)."""
    return Setup(fc, get_task("nq"), MeasureSpec.from_mode("strinc"), lm, seed=0)


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))
    log: dict = {"trained": {}}

    def fake_trained_lm(lm, pairs, tc, role, root=None):
        log["trained"][role] = list(pairs)
        return FakeLM("gen" if role.startswith("gen") else role, log), {"role": role}

    monkeypatch.setattr(resources, "trained_lm", fake_trained_lm)

    def make(variant: str, run_id: str | None = None, **over):
        """One run of the filco/conf/filco/variant file `variant` on TRAIN / TEST."""
        s = nq_setup(replace(filco_settings(variant, **over), k=1), FakeLM("base", log))
        run = Run("filco/test", run_id or variant, tmp_path / "results")
        run.start()
        records, _, _ = pipeline.evaluate(s, Labeller(s), TRAIN, TEST, run)
        return records, log

    return make


def gen_contexts(log) -> list[str]:
    # drop the trailing "\n"; an empty context is "context:" (the input is stripped as a whole)
    return [p.split("\ncontext:", 1)[1][:-1].removeprefix(" ") for p in log["gen"]]


def test_full_feeds_all_passages(setup):
    records, log = setup("full")
    assert gen_contexts(log) == [TEST[0].passages[0], TEST[1].passages[0]]
    assert [r["prediction"] for r in records] == ["Paris", "Paris"]
    assert [r["score"] for r in records] == [1.0, 0.0]
    # the Full generator is trained on full passages
    assert log["trained"]["gen-full"][0][0].endswith("context: " + TRAIN[0].passages[0])


def test_psg_feeds_passages_the_filter_kept(setup):
    _, log = setup("psg")
    assert gen_contexts(log) == [TEST[0].passages[0], ""]  # e2's passage dropped, no fallback
    assert log["trained"]["psg"] == [(prompts.psg_prompt(get_task("nq"), TRAIN[0].question,
                                                                  TRAIN[0].passages[0]), "yes")]


def test_filco_feeds_the_filter_predictions_not_silver(setup):
    records, log = setup("filco")
    assert gen_contexts(log) == ["PREDICTED by M_ctx.", "PREDICTED by M_ctx."]
    assert [r["context"] for r in records] == ["PREDICTED by M_ctx."] * 2
    # M_ctx learns question+passages -> silver sentence; M_gen learns on the silver sentence
    (ctx_pair,) = log["trained"]["ctx"]
    assert ctx_pair[1] == "Paris is the capital of France."
    (gen_pair,) = log["trained"]["gen-silver"]
    assert gen_pair == (prompts.gen_prompt(get_task("nq"), TRAIN[0].question,
                                                    "Paris is the capital of France."),
                        "answer: Paris")


def test_silver_feeds_the_silver_context(setup):
    records, log = setup("silver")
    # e1: first span containing "Paris"; e2: nothing contains "Berlin" -> empty (no fallback)
    assert gen_contexts(log) == ["KEEP Paris is in France.", ""]
    assert records[1]["context_empty"] is True
    assert "ctx" not in log["trained"]


def test_released_code_behaviour_feeds_silver_in_filco_path(setup):
    _, log = setup("filco", test_context="silver_as_released")
    assert gen_contexts(log) == ["KEEP Paris is in France.", ""]


def test_test_time_top1_fallback_switch(setup):
    _, log = setup("silver", **{"fallback.test": "top1"})
    assert gen_contexts(log) == ["KEEP Paris is in France.", TEST[1].passages[0]]


def test_rerun_resumes_from_samples(setup, tmp_path):
    records, log = setup("full", run_id="resume")
    assert len(log["gen"]) == 2
    again, log = setup("full", run_id="resume")
    assert len(log["gen"]) == 2          # nothing regenerated: predictions come from samples.jsonl
    assert [r["prediction"] for r in again] == [r["prediction"] for r in records]
    samples = tmp_path / "results" / "filco" / "test" / "tmp_resume" / "samples.jsonl"
    assert len(samples.read_text().splitlines()) == 2  # no duplicate records


@pytest.mark.parametrize("i,raw,ours,code,code_score", [
    # the fake LMs are causal: query_llama.py lower-cases, then eval.py cuts at "answer:"
    (0, "Answer: Paris", "Paris", "paris", 1.0),
    (1, "ANSWER: Paris", "Paris", "paris", 1.0),
    (2, "Predictions: answer: Paris", "Paris", "paris", 1.0),
    (3, "Paris, answer: Lyon", "Lyon", "lyon", 0.0),
])
def test_score_code_uses_the_official_extraction(setup, monkeypatch, i, raw, ours, code,
                                                 code_score):
    monkeypatch.setattr(FakeLM, "respond", lambda self, prompt: raw)
    records, _ = setup("full", run_id=f"clean{i}")
    r = records[0]
    assert (r["prediction"], r["prediction_code"], r["score_code"]) == (ours, code, code_score)


def test_score_code_for_seq2seq_follows_query_py(setup, monkeypatch):
    # query.py + eval.py: capitalised "Answer" is folded, other casings are not
    monkeypatch.setattr(FakeLM, "kind", "seq2seq")
    monkeypatch.setattr(FakeLM, "respond", lambda self, prompt: "ANSWER: Paris")
    import filco.encoding

    monkeypatch.setattr(filco.encoding, "prompt_ids", lambda lm, s, n=None: lm.encode(s))
    records, _ = setup("full", run_id="s2s")
    assert records[0]["prediction"] == "Paris"
    assert records[0]["prediction_code"] == "ANSWER: Paris" and records[0]["score_code"] == 0.0
