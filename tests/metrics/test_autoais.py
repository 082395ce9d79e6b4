"""AutoAIS plumbing on a tiny randomly initialised T5 with a tokenizer trained on the fly.
This checks the input format, the P("1") read-out and batching, not NLI quality."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ragrepro.errors import ConfigError
from ragrepro.metrics import get_metric
from ragrepro.metrics.autoais import (
    AttributionItem,
    AutoAIS,
    LLMJudgeScorer,
    T5NLIScorer,
    decoded_is_entailment,
    entailment_label,
    entailment_token_id,
    format_premise,
    judge_prompt,
    t5_input,
)

CORPUS = [
    ("premise: Paris is the capital of France. hypothesis: The answer to the question "
     "'What is the capital of France?' is 'Paris'"),
    "1 0 1 0 entailment yes no the a of is in to question answer",
    "Sydney Opera House is in Sydney . Jupiter is a planet . 1 2 3",
] * 20


@pytest.fixture(scope="module")
def tiny_t5():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(
        special_tokens=["<pad>", "</s>", "<unk>"]))
    # T5 appends </s> to every input
    tok.post_processor = processors.TemplateProcessing(single="$A </s>",
                                                       special_tokens=[("</s>", 1)])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                     unk_token="<unk>")
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=len(hf_tok), d_model=32, d_ff=64, d_kv=8, num_layers=2,
                   num_decoder_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                   eos_token_id=1)
    return T5ForConditionalGeneration(cfg).eval(), hf_tok


def test_input_string_is_attributed_qa_format():
    assert t5_input("Paris. Paris is the capital of France.", "What is the capital of France?",
                    "Paris") == ("premise: Paris. Paris is the capital of France. hypothesis: The "
                                 "answer to the question 'What is the capital of France?' is "
                                 "'Paris'")
    assert format_premise("Paris", "Capital.", "heading") == "Paris. Capital."
    assert format_premise("Paris", "Capital.", "alce") == "Title: Paris\nCapital."
    assert format_premise("Paris", "Capital.", "text") == "Capital."
    with pytest.raises(ConfigError):
        format_premise("a", "b", "nope")


def test_one_token_id_comes_from_tokenizer(tiny_t5):
    _, tok = tiny_t5
    one = entailment_token_id(tok)
    assert tok.decode([one]) == "1"
    assert one == tok.convert_tokens_to_ids("1")


def test_prob_equals_hand_computed_softmax(tiny_t5):
    model, tok = tiny_t5
    scorer = T5NLIScorer(model, tok, model_name="tiny", batch_size=4)
    text = t5_input("Paris is the capital of France.", "What is the capital of France?", "Paris")
    got = scorer.score_texts([text])[0]["nli_score"]
    ids = tok(text, return_tensors="pt").input_ids
    assert ids[0, -1].item() == 1  # </s> appended like T5
    with torch.no_grad():
        logits = model(input_ids=ids, decoder_input_ids=torch.tensor([[0]])).logits[0, 0]
    logits = logits.double().numpy()
    expected = math.exp(logits[tok.convert_tokens_to_ids("1")]) / np.exp(logits).sum()
    assert got == pytest.approx(expected, rel=1e-5)
    assert 0.0 < got < 1.0


def test_batch_equals_one_at_a_time(tiny_t5):
    model, tok = tiny_t5
    texts = [t5_input("Jupiter is a planet .", "What is Jupiter?", "a planet"),
             t5_input("Sydney Opera House is in Sydney . 1 2 3 1 2 3 1 2 3", "Where?", "Sydney"),
             t5_input("Paris", "capital?", "Paris")]
    batched = T5NLIScorer(model, tok, "tiny", batch_size=3).score_texts(texts)
    single = T5NLIScorer(model, tok, "tiny", batch_size=1).score_texts(texts)
    for b, s in zip(batched, single):
        assert b["nli_score"] == pytest.approx(s["nli_score"], abs=1e-6)


def test_decode_mode_matches_greedy_generation(tiny_t5):
    model, tok = tiny_t5
    scorer = T5NLIScorer(model, tok, "tiny", mode="decode")
    text = t5_input("Paris is the capital of France.", "What is the capital?", "Paris")
    row = scorer.score_texts([text])[0]
    gen = model.generate(tok(text, return_tensors="pt").input_ids, max_new_tokens=10,
                         do_sample=False)
    assert row["decoded"] == tok.decode(gen[0], skip_special_tokens=True)
    assert row["attributed"] == (row["decoded"] == "1")
    assert decoded_is_entailment("1") and not decoded_is_entailment("1 0")
    assert not decoded_is_entailment(" 1")


def test_denominator_is_all_questions_and_missing_is_unattributed(tiny_t5):
    model, tok = tiny_t5
    scorer = T5NLIScorer(model, tok, "tiny", threshold=0.0)  # every scored sample passes
    items = [AttributionItem("What is the capital of France?", "Paris", "Paris", "Paris is the capital."),
             AttributionItem("What is Jupiter?", None, "Jupiter", "Jupiter is a planet."),
             AttributionItem("Where?", "Sydney", None, None),
             AttributionItem("Where?", "  ", "x", "y")]
    res = AutoAIS(scorer).evaluate(items)
    # a toy T5 is not the TRUE checkpoint: its number is a substitute, never `autoais`
    assert res.metrics == {"autoais_substitute": 0.25}
    assert [p["attributed"] for p in res.per_sample] == [True, False, False, False]
    assert [p["missing"] for p in res.per_sample] == [None, "answer", "passage", "answer"]
    assert res.settings["autoais_canonical"] is False
    assert res.settings["autoais_substitute"] == "t5:tiny"


def test_only_the_true_checkpoint_reports_autoais(tiny_t5):
    from ragrepro.metrics.autoais import TRUE_MODEL

    model, tok = tiny_t5
    items = [AttributionItem("What is the capital of France?", "Paris", "Paris", "Paris.")]
    for name in ("tiny", "google/t5-small", "t5_xxl_true_nli_mixture"):
        ev = AutoAIS(T5NLIScorer(model, tok, name, threshold=0.0))
        assert ev.is_substitute and ev.result_key == "autoais_substitute", name
        assert set(ev.evaluate(items).metrics) == {"autoais_substitute"}
    # the same weights under the TRUE name: the label follows the checkpoint name
    true = AutoAIS(T5NLIScorer(model, tok, TRUE_MODEL, threshold=0.0))
    res = true.evaluate(items)
    assert res.metrics == {"autoais": 1.0}
    assert res.settings["autoais_canonical"] is True and "autoais_substitute" not in res.settings


def test_registered_metric_thresholds_stored_scores():
    m = get_metric("autoais")
    assert m.higher_is_better and m.aggregation == "mean"
    values = [m.fn(0.9), m.fn(0.5), m.fn(None), m.fn(float("nan")), m.fn(0.51)]
    assert values == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert m.aggregate(values) == pytest.approx(0.4)


def test_nli_label_lookup():
    from types import SimpleNamespace

    mnli = SimpleNamespace(id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    binary = SimpleNamespace(id2label={"0": "entailment", "1": "not_entailment"})
    assert entailment_label(mnli) == 2
    assert entailment_label(binary) == 0
    only_label2id = SimpleNamespace(id2label={0: "LABEL_0", 1: "LABEL_1"},
                                    label2id={"neutral": 0, "entailment": 1})
    assert entailment_label(only_label2id) == 1
    with pytest.raises(ConfigError):
        entailment_label(type("C", (), {"id2label": {0: "LABEL_0", 1: "LABEL_1"}}))


class _FakeLM:
    """Log-prob table LM: ' yes' gets -1 nat, ' no' -2 nats (whole-word tokens)."""

    name = "fake-lm"

    def encode(self, text):
        return [hash(w) % 1000 for w in text.split(" ")]

    def score_targets(self, rows, starts, batch_size=8):
        return [np.array([-1.0 if i % 2 == 0 else -2.0]) for i in range(len(rows))]


def test_llm_judge_is_labelled_substitute():
    ev = AutoAIS(LLMJudgeScorer(_FakeLM()))
    res = ev.evaluate([AttributionItem("Q?", "A", "T", "text")])
    assert "autoais" not in res.metrics
    assert res.metrics == {"autoais_substitute": 1.0}
    assert res.settings["autoais_substitute"] == "llm-judge:fake-lm"
    assert res.per_sample[0]["nli_score"] == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert judge_prompt("P", "Q?", "A").endswith("Answer yes or no.\nAnswer:")
