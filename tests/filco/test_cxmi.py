"""CXMI with real models: batched scoring equals the official one-sentence-at-a-time
schedule, and the log-ratio equals a direct computation from the model's logits."""
from __future__ import annotations

import numpy as np
import pytest

from filco.cxmi import CxmiItem, CxmiScorer
from filco.encoding import prompt_ids, target_ids
from filco.prompts import gen_prompt, gen_target
from filco.tasks import get_task

ITEMS = [
    CxmiItem("Who composed Carmen?", "Georges Bizet",
             ("Carmen is an opera in four acts by the French composer Georges Bizet.",
              "The libretto was written by Henri Meilhac and Ludovic Halevy.",
              "It premiered in Paris.")),
    CxmiItem("What is the capital of Laos?", "Vientiane",
             ("Vientiane is the capital and largest city of Laos.", "Laos is landlocked.")),
]


@pytest.fixture(scope="module")
def small64(smollm):
    """SmolLM2's tokenizer on a small random Llama in float64: float32 batching changes matmul
    blocking (about 1e-6 per token, summed over a target), which would hide whether batched
    rows are really the same computation; float64 does not, and the small model is fast."""
    import dataclasses

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(smollm.tokenizer), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=512)
    return dataclasses.replace(smollm, model=LlamaForCausalLM(cfg).double().eval())


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["paper", "code"])
def test_batched_equals_one_at_a_time_causal(small64, prompt):
    scorer = CxmiScorer(small64, get_task("nq"), prompt=prompt, batch_size=3)
    batched = scorer.log_ratios(ITEMS)
    single = scorer.log_ratios_one_at_a_time(ITEMS)
    assert [len(r) for r in batched] == [3, 2]
    np.testing.assert_allclose(np.concatenate(batched), np.concatenate(single), atol=1e-5)


@pytest.mark.slow
def test_cxmi_prefers_the_answer_bearing_sentence(smollm):
    batched = CxmiScorer(smollm, get_task("nq"), batch_size=8).log_ratios(ITEMS)    # the answer-bearing sentence raises the answer's probability, the others less
    assert batched[0][0] > 0 and batched[0][0] > batched[0][1]
    assert batched[1][0] > batched[1][1]


@pytest.mark.slow
def test_batched_equals_one_at_a_time_real_model_float32(smollm):
    """The real model in float32, as runs use it: equal up to float32 rounding (about 1e-6
    per token, summed over the target: 1e-3 nats at most here)."""
    scorer = CxmiScorer(smollm, get_task("nq"), prompt="code", batch_size=8)
    np.testing.assert_allclose(np.concatenate(scorer.log_ratios(ITEMS[1:])),
                               np.concatenate(scorer.log_ratios_one_at_a_time(ITEMS[1:])),
                               atol=1e-3)


@pytest.mark.slow
def test_log_ratio_matches_direct_logits(smollm):
    task = get_task("nq")
    it = ITEMS[1]
    ratio = CxmiScorer(smollm, task).log_ratios([it])[0][0]

    def direct(prompt: str) -> float:
        p = prompt_ids(smollm, prompt)
        t = target_ids(smollm, gen_target(task, it.output))
        logp = smollm.full_logprobs(p + t)
        return float(sum(logp[len(p) - 1 + j, tok].item() for j, tok in enumerate(t)))

    expected = direct(gen_prompt(task, it.question, it.sentences[0])) - direct(
        gen_prompt(task, it.question, None))
    assert ratio == pytest.approx(expected, abs=1e-4)


@pytest.mark.slow
def test_batched_equals_one_at_a_time_seq2seq():
    import dataclasses

    from filco.tiny_t5 import load_tiny_t5

    base = load_tiny_t5(device="cpu")
    lm = dataclasses.replace(base, model=base.model.double())
    scorer = CxmiScorer(lm, get_task("wow"), batch_size=4)
    batched = scorer.log_ratios(ITEMS)
    single = scorer.log_ratios_one_at_a_time(ITEMS)
    np.testing.assert_allclose(np.concatenate(batched), np.concatenate(single), atol=1e-5)
    assert all(np.isfinite(np.concatenate(batched)))
