"""Fine-tuning: loss only on target tokens (not the official pad-as-label), the
logits-at-targets loss equals the plain one, LoRA, and the training cache."""
from __future__ import annotations

import pytest
import torch

from filco.train import (
    IGNORE,
    Encoded,
    TrainConfig,
    causal_batch,
    causal_target_loss,
    masked_loss,
    seq2seq_batch,
    trained_lm,
)
from ragrepro.errors import ConfigError
from ragrepro.models.lm import LM


def test_causal_batch_masks_prompt_and_padding():
    items = [Encoded([5, 6, 7], [8, 9]), Encoded([5], [4])]
    b = causal_batch(items, pad_id=0)
    assert b["input_ids"].tolist() == [[5, 6, 7, 8, 9], [5, 4, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert b["labels"].tolist() == [[IGNORE, IGNORE, IGNORE, 8, 9], [IGNORE, 4, IGNORE, IGNORE, IGNORE]]
    # the official train.py's label padding with the pad id: padding enters the loss
    b = causal_batch(items, pad_id=0, label_pad="pad_token")
    assert b["labels"][1].tolist() == [IGNORE, 4, 0, 0, 0]


def test_seq2seq_batch_labels():
    b = seq2seq_batch([Encoded([3, 4, 1], [7, 1]), Encoded([3, 1], [1])], pad_id=0)
    assert b["labels"].tolist() == [[7, 1], [1, IGNORE]]
    b = seq2seq_batch([Encoded([3, 4, 1], [7, 1]), Encoded([3, 1], [1])], pad_id=0,
                      label_pad="pad_token")
    assert b["labels"].tolist() == [[7, 1], [1, 0]]


def test_masked_loss_hand_computation():
    # uniform logits over 4 tokens: each labelled token costs ln 4
    logits = torch.zeros(1, 3, 4)
    loss, n = masked_loss(logits, torch.tensor([[IGNORE, 2, 3]]), shift=True)
    assert n == 2 and loss.item() == pytest.approx(2 * torch.log(torch.tensor(4.0)).item())


@pytest.fixture(scope="module")
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def test_target_only_logits_equal_full_logits_loss(tiny_llama):
    b = causal_batch([Encoded([1, 2, 3, 4], [5, 6, 7]), Encoded([9, 8], [7])], pad_id=0)
    full = tiny_llama(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    ref, n = masked_loss(full, b["labels"], shift=True)
    fast = causal_target_loss(tiny_llama, b, "cpu")
    assert n == 4
    assert fast.item() == pytest.approx(ref.item(), rel=1e-5)


class _Tok:
    """Whitespace tokenizer over integers, enough for encode_pairs on a toy model."""

    pad_token_id, eos_token_id, bos_token_id = 0, 1, None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [int(t) for t in text.split()]}


def test_lora_training_lowers_loss_and_is_cached(tiny_llama, tmp_path):
    lm = LM(name="toy", model=tiny_llama, tokenizer=_Tok(), kind="causal", revision="r0")
    pairs = [("2 3 4", "10 11 12"), ("5 6", "13 14")] * 4
    tc = TrainConfig(epochs=30, lr=1e-2, batch_size=8, micro_batch_size=4, lora_r=4,
                     max_input_tokens=16, max_target_tokens=8)
    trained, info = trained_lm(lm, pairs, tc, "gen-test", root=tmp_path)
    assert info["lora"] and not info["cached"] and info["steps"] == 30
    assert info["last_loss"] < 0.9 * info["first_loss"]  # 4.3k LoRA weights on a random toy
    assert (tmp_path / f"gen-test-{info['key']}" / "adapter_model.safetensors").exists()
    # the base model is untouched; the cached model reloads to the same weights
    assert trained.model is not tiny_llama
    again, info2 = trained_lm(lm, pairs, tc, "gen-test", root=tmp_path)
    assert info2["cached"]
    x = torch.tensor([[2, 3, 4, 10]])
    assert torch.allclose(trained.model(x).logits, again.model(x).logits, atol=1e-5)
    assert not torch.allclose(trained.model(x).logits, tiny_llama(x).logits, atol=1e-3)


def test_full_finetune_memorises_toy_pairs(tiny_llama, tmp_path):
    lm = LM(name="toy", model=tiny_llama, tokenizer=_Tok(), kind="causal", revision="r0")
    pairs = [("2 3 4", "10 11 12"), ("5 6", "13 14")] * 4
    tc = TrainConfig(epochs=30, lr=1e-2, batch_size=8, micro_batch_size=4, lora=False,
                     max_input_tokens=16, max_target_tokens=8)
    trained, info = trained_lm(lm, pairs, tc, "gen-full-ft", root=tmp_path)
    assert not info["lora"] and info["last_loss"] < 0.3
    assert (tmp_path / f"gen-full-ft-{info['key']}" / "model.safetensors").exists()
    # greedy continuation of a training prompt is its target (EOS=1 stops it)
    assert trained.generate([[2, 3, 4]], 5)[0] == [10, 11, 12]


def test_bad_train_settings():
    with pytest.raises(ConfigError, match="label_pad"):
        TrainConfig(label_pad="zero").check()
    with pytest.raises(ConfigError, match="multiple"):
        TrainConfig(batch_size=10, micro_batch_size=4).check()


@pytest.mark.slow
def test_seq2seq_full_finetune_tiny_t5(tmp_path):
    from filco.tiny_t5 import load_tiny_t5

    lm = load_tiny_t5(device="cpu")
    pairs = [("question: capital of France?", "answer: Paris"),
             ("question: capital of Italy?", "answer: Rome")] * 4
    tc = TrainConfig(epochs=15, lr=3e-3, batch_size=8, micro_batch_size=8, max_input_tokens=32,
                     max_target_tokens=8)
    trained, info = trained_lm(lm, pairs, tc, "gen-t5", root=tmp_path)
    assert not info["lora"] and info["last_loss"] < 0.5 * info["first_loss"]
    out = trained.generate([trained.tokenizer("question: capital of Italy?")["input_ids"]], 6)
    assert trained.decode(out[0], skip_special_tokens=True).strip() == "answer: Rome"


def test_cache_key_separates_base_dtype():
    """A bfloat16 base trains different weights from a float32 one: never share a cached
    adapter; float32 keeps the key it had before the dtype entered it."""
    import copy

    from filco.train import model_key
    from ragrepro.hashing import hash_obj

    class _M(torch.nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1, dtype=dtype))

        @property
        def dtype(self):
            return self.w.dtype

    tc, pairs = TrainConfig(), [("q", "a")]
    f32 = LM(name="toy", model=_M(torch.float32), tokenizer=None, kind="causal", revision="r0")
    bf16 = copy.copy(f32)
    bf16.model = _M(torch.bfloat16)
    from dataclasses import asdict

    old = hash_obj({"base": ["toy", "r0", "causal"], "train": asdict(tc), "role": "gen",
                    "pairs": hash_obj([["q", "a"]], 32)}, 20)
    assert model_key(f32, tc, pairs, "gen") == old
    assert model_key(bf16, tc, pairs, "gen") != old
