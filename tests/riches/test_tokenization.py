"""Tokenisation edge cases with both embedded tokenizers (SmolLM2 49k, Gemma 262k), and the
KV-cached beam model against a plain forward pass."""
from __future__ import annotations

import pytest
import torch
from riches_fakes import shipped_prompt

from riches import markers
from riches.constraint import (
    KeyConstraint,
    key_token_ids,
    marker_spec,
    token_strings,
    word_start_ids,
)
from riches.index import SuffixIndex
from riches.keys import split_sentences
from riches.prompts import RichesPrompt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny forward passes: one torch thread avoids oversubscription on a loaded machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def tokenizer(request):
    from transformers import AutoTokenizer

    from ragrepro.models.loading import resolve_source

    return AutoTokenizer.from_pretrained(resolve_source(f"embedded:{request.param}")[0])


@pytest.fixture(scope="module")
def passages():
    from ragrepro.data.vital import corpus_passages

    return corpus_passages()[:300]


def test_markers_are_single_distinct_tokens(tokenizer) -> None:
    spec = marker_spec(tokenizer)
    assert len(spec.open) == 1 and len(spec.close) == 1 and spec.open != spec.close
    assert tokenizer.decode(list(spec.open)) == " <<"
    assert tokenizer.decode(list(spec.close)) == " >>"


def test_keys_decode_from_the_tokens_the_model_emits(tokenizer, passages) -> None:
    spec = marker_spec(tokenizer)
    sents = [s for p in passages for s in split_sentences(p.text)][:400]
    sents += ["1,234 people live there.", "Zürich  has two spaces.", "(parenthesis) first"]
    for s, ids in zip(sents, key_token_ids(tokenizer, sents)):
        assert tokenizer.decode(ids) == " " + s
        full = list(spec.open) + ids + list(spec.close)
        assert tokenizer.decode(full) == " << " + s + " >>"
        state = markers.run(spec, full)
        assert state.keys == (tuple(ids),)


def test_substring_keys_start_on_word_tokens(tokenizer, passages) -> None:
    """A key starting mid-paragraph begins with a word-start token and decodes with its
    leading space, so '<< ' + substring is what the reader sees."""
    strings = token_strings(tokenizer)
    starts = set(word_start_ids(strings).tolist())
    texts = [p.text for p in passages[:50]]
    index = SuffixIndex.build(key_token_ids(tokenizer, texts), len(tokenizer))
    c = KeyConstraint.for_tokenizer(index, tokenizer, start="anywhere", end="anywhere")
    state = c.advance(c.initial(), c.spec.open[0])
    first = c.allowed(state).ids
    assert len(first) > 100 and set(first.tolist()) <= starts | {c.spec.close[0]}
    for tok in first[:50]:
        assert tokenizer.decode([int(tok)])[:1] == " "


def test_demonstration_prompt_keys_are_index_keys(tokenizer) -> None:
    from ragrepro.data.vital import corpus_passages

    cfg = shipped_prompt("multi_hop")
    demo_titles = {st["title"] for ex in cfg["examples"] for st in ex["steps"]}
    all_docs = corpus_passages()
    docs = [p for p in all_docs if p.title in demo_titles] + all_docs[:200]
    text = {p.title: p.text for p in docs}
    spec = marker_spec(tokenizer)
    for key_type in ("title", "sentence", "paragraph"):
        prompt = RichesPrompt(cfg, key_type, True, lambda s: tokenizer(s, add_special_tokens=False)["input_ids"],
                              lambda s: key_token_ids(tokenizer, [s])[0], spec.open, spec.close, text)
        keys = prompt.demo_keys()
        units = ([p.title for p in docs] if key_type == "title" else
                 [p.text for p in docs] if key_type == "paragraph" else
                 [s for t in demo_titles for s in split_sentences(text[t])])
        index = SuffixIndex.build(key_token_ids(tokenizer, units), len(tokenizer))
        for k in keys:
            assert index.is_full_key(key_token_ids(tokenizer, [k])[0]), k
        ids, shared = prompt.build("Who?")
        decoded = tokenizer.decode(ids)
        assert decoded.endswith("Question: Who?\n") and shared < len(ids)
        assert "Evidence: << " + keys[0] + " >>\n" in decoded
        assert decoded.count("Evidence: << ") == len(keys) == 6


@pytest.fixture(scope="module")
def smollm():
    from ragrepro.models import load_lm

    return load_lm("smollm2-135m", "embedded:smollm2", device="cpu")


def test_kv_cached_beam_steps_match_a_plain_forward(smollm) -> None:
    from riches.beam import HFStepModel

    prompt = smollm.encode("The Joker is played by")
    sm = HFStepModel(smollm.model)
    sm.start(prompt, shared=3)
    a, b, c, d = smollm.encode(" Joaquin Phoenix and Heath")[:4]
    sm.step([0, 0], [a, b])        # two children of the prompt
    got = sm.step([1, 0, 1], [c, d, a])  # reorder, grow to three rows
    for row, seq in enumerate([[b, c], [a, d], [b, a]]):
        ref = smollm.full_logprobs(prompt + seq)[-1]
        assert torch.allclose(torch.log_softmax(got[row], -1), ref, atol=1e-4)


def test_real_model_decodes_only_corpus_keys(smollm) -> None:
    """Figure 3 with SmolLM2: the corpus says Joaquin Phoenix and Heath Ledger; whatever the
    model prefers, every key it writes is a whole corpus sentence."""
    from riches.beam import BeamConfig, HFStepModel, beam_search

    corpus = ["Joker is played by Joaquin Phoenix in the 2019 film.",
              "Heath Ledger played the Joker in The Dark Knight.",
              "Christopher Nolan directed The Dark Knight."]
    tok = smollm.tokenizer
    index = SuffixIndex.build(key_token_ids(tok, corpus), len(tok))
    c = KeyConstraint.for_tokenizer(index, tok, start="key", end="key")
    # a key opened and 'Joker is played by' written: only the corpus continuation is allowed
    state = c.initial()
    for t in list(c.spec.open) + key_token_ids(tok, ["Joker is played by"])[0]:
        state = c.advance(state, t)
    allowed = {tok.decode([int(i)]) for i in c.allowed(state).ids}
    assert allowed == {tok.decode(key_token_ids(tok, ["Joaquin"])[0][:1])}
    assert " Nolan" not in allowed
    opened = c.advance(c.initial(), c.spec.open[0])
    prompt = smollm.encode("Question: Who plays the Joker?\nEvidence:") + list(c.spec.open)
    hyps = beam_search(HFStepModel(smollm.model), prompt, c,
                       BeamConfig(beam_size=2, max_new_tokens=24, stop_strings=("\n",)),
                       smollm.decode, [smollm.eos_id], start_state=opened)
    n = 0
    for h in hyps:
        for s, e, closed in markers.spans(c.spec, list(c.spec.open) + h.tokens):
            if closed:
                n += 1
                assert smollm.decode((list(c.spec.open) + h.tokens)[s:e]).strip() in corpus
    assert n > 0


def test_logits_processor_inside_lm_generate(smollm) -> None:
    """The processor inside transformers' own generate(): the open marker is the last prompt
    token and counted as generated (prompt_len = len - 1), so decoding starts inside a key."""
    from riches.constraint import RichesLogitsProcessor

    corpus = ["Joker is played by Joaquin Phoenix in the 2019 film.",
              "Heath Ledger played the Joker in The Dark Knight."]
    tok = smollm.tokenizer
    index = SuffixIndex.build(key_token_ids(tok, corpus), len(tok))
    c = KeyConstraint.for_tokenizer(index, tok, start="key", end="key")
    prompt = smollm.encode("Who plays the Joker? Christopher Nolan says:") + list(c.spec.open)
    proc = RichesLogitsProcessor(c, prompt_len=len(prompt) - 1)
    out = smollm.generate([prompt], max_new_tokens=20, logits_processor=[proc])[0]
    spans = markers.spans(c.spec, list(c.spec.open) + out)
    assert spans and spans[0][2]  # the key was closed
    s, e, _ = spans[0]
    assert smollm.decode((list(c.spec.open) + out)[s:e]).strip() in corpus
