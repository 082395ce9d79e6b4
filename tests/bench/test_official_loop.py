"""ralm.official_loop (the literal eval_lm.py loop) against the production engine.

A tiny randomly initialised Llama and a character tokenizer make the comparison fast and
model-file free; one slow test repeats it with the real smollm2-135m."""
import numpy as np
import pytest
import torch

from benchmarks.ralm_throughput import FixedDocs, production_nll, workload
from ragrepro.models.lm import LM
from ralm.official_loop import official_doc_ids, official_eval
from ralm.settings import rerank_option, settings_from_defaults
from ralm.windows import make_windows

L, DOC_MAX, RANK = 48, 12, 8


class CharTokenizer:
    """One token per character (ids 5..94); `encode`/`__call__` truncate like HF."""

    pad_token_id = 0
    bos_token_id = None
    eos_token_id = 1

    def _ids(self, text, max_length=None, truncation=False):
        ids = [5 + ord(c) % 90 for c in text]
        return ids[:max_length] if truncation and max_length else ids

    def encode(self, text, max_length=None, truncation=False):
        return self._ids(text, max_length, truncation)

    def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
        return {"input_ids": self._ids(text, max_length, truncation)}

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(chr(i - 5 + 32) for i in ids)


@pytest.fixture(scope="module")
def tiny_lm():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(cfg).eval()
    return LM(name="tiny", model=model, tokenizer=CharTokenizer())


DOCS = [{"id": "a", "title": "Nile", "text": "The Nile flows north into the sea."},
        {"id": "b", "title": "Amazon", "text": "The Amazon is the largest river."},
        {"id": "c", "title": "", "text": "Manaus lies on the Rio Negro."}]


def settings(rerank, stride, k=3):
    return settings_from_defaults(
        {"max_length": L, "stride": stride, "retrieval_stride": stride, "query_len": 16,
         "doc_max_tokens": DOC_MAX, "k": k, "rerank": rerank, "rerank_tokens": RANK,
         "window_bos": False, "batch_windows": 4}, seed=0, batch_size=3, model_adds_bos=False)


@pytest.mark.parametrize("stride", [5, 16])
@pytest.mark.parametrize("rerank,strategy", [("none", "first"), ("first", "first"),
                                             ("zeroshot", "logprob"), ("oracle", "logprob")])
def test_official_loop_equals_production(tiny_lm, rerank, strategy, stride):
    if rerank == "oracle":
        strategy = "oracle"
    rng = np.random.default_rng(1)
    stream = [int(x) for x in rng.integers(5, 95, size=150)]
    s = settings(rerank, stride)
    windows = make_windows(len(stream), L, stride)
    # different candidate orders per window, so reranking has something to choose
    docs = {w.index: [DOCS[(w.index + j) % 3] for j in range(3)] for w in windows[1:]}
    if rerank == "none":
        docs_for_off = None
    else:
        docs_for_off = [{"retrieved_docs": docs.get(i, [])} for i in range(len(windows))]
    off = official_eval(tiny_lm.model, tiny_lm.tokenizer, torch.tensor([stream]), L, stride,
                        docs_for_off, strategy, 3, RANK, DOC_MAX)
    prod, chosen = production_nll(tiny_lm, stream, s, docs)
    assert off.n_scored == len(stream) - 1
    assert len(off.window_nlls) == len(windows)
    assert prod == pytest.approx(off.nll_sum, rel=1e-5)
    if rerank in ("zeroshot", "oracle"):
        assert chosen[1:] == off.chosen[1:]
        assert len(set(off.chosen[1:])) > 1  # the ranking really chooses


def test_official_doc_encoding_title_rule():
    tok = CharTokenizer()
    assert official_doc_ids(tok, {"title": "T", "text": "xy"}, 10) == tok.encode("T\nxy")
    assert official_doc_ids(tok, {"title": "", "text": "xy"}, 10) == tok.encode("xy")
    assert len(official_doc_ids(tok, {"title": "T", "text": "x" * 50}, 7)) == 7


def test_unknown_ranking_strategy_is_refused(tiny_lm):
    with pytest.raises(ValueError, match="random"):
        official_eval(tiny_lm.model, tiny_lm.tokenizer, torch.tensor([[5] * 60]), L, 16,
                      None, "random")


def test_workload_counts_rows_and_logit_positions():
    # N=80, L=48, s=16: windows [0,48) scores 47; [16,64) 16; [32,80) 16
    ws = make_windows(80, 48, 16)
    assert [w.n_scored for w in ws] == [47, 16, 16]
    first = workload(ws, {1: 3, 2: 3}, rerank_option("first"), 8)
    assert (first.rows, first.head_positions_production, first.head_positions_official) == \
        (3, 47 + 16 + 16, 3 * 48)
    zs = workload(ws, {1: 3, 2: 2}, rerank_option("zeroshot"), 8)
    assert zs.rows == 1 + 3 + 2
    assert zs.head_positions_production == 47 + 3 * (8 + 16) + 2 * (8 + 16)
    assert zs.head_positions_official == 6 * 48
    assert zs.scored_tokens == 79


@pytest.mark.slow
def test_official_loop_equals_production_smollm(smollm):
    text = ("The Amazon River in South America is the largest river by discharge volume of "
            "water in the world, and the disputed longest river system in the world in "
            "comparison to the Nile. The river system originates in the Andes and drains into "
            "the Atlantic Ocean near the city of Belem in Brazil, after passing Manaus.")
    stream = smollm.encode(text)
    s = settings_from_defaults(
        {"max_length": 40, "stride": 8, "retrieval_stride": 8, "query_len": 16,
         "doc_max_tokens": 12, "k": 3, "rerank": "zeroshot", "rerank_tokens": 8,
         "window_bos": False}, seed=0, batch_size=8, model_adds_bos=False)
    windows = make_windows(len(stream), 40, 8)
    docs = {w.index: DOCS for w in windows[1:]}
    off = official_eval(smollm.model, smollm.tokenizer, torch.tensor([stream]), 40, 8,
                        [{"retrieved_docs": docs.get(i, [])} for i in range(len(windows))],
                        "logprob", 3, 8, 12)
    prod, chosen = production_nll(smollm, stream, s, docs)
    assert prod == pytest.approx(off.nll_sum, rel=1e-4)
    assert chosen[1:] == off.chosen[1:]
    assert isinstance(FixedDocs(docs).docs(0, windows[1:2], [""])[0], list)
