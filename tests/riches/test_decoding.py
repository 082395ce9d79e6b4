"""Marker state machine, logits-processor masks and the adaptive beam, on a toy vocabulary."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from riches_fakes import (
    EOS,
    EOS_WORD,
    ID,
    SPEC,
    WORDS,
    BigramModel,
    V,
    decode,
    ids,
    table_from,
    toy_constraint,
)

from riches import markers
from riches.beam import BeamConfig, BeamStats, beam_search
from riches.constraint import RichesLogitsProcessor
from riches.markers import MarkerSpec, MarkerState, Mode

KEYS = [[" Joker", " is", " played", " by", " Joaquin", " Phoenix", "."],
        [" Heath", " Ledger", " played", " Joker", " in", " the", " film", " Batman", "."],
        [" Joker", " is", " played", " by", " Heath", " Ledger", "."]]


# -- marker state machine ----------------------------------------------------------------
def test_marker_state_machine_multi_token_markers() -> None:
    spec = MarkerSpec(open=(7, 8), close=(9, 10))
    s = markers.run(spec, [1, 7, 2, 7, 8])  # a lone 7 is free text
    assert s.mode is Mode.KEY and s.key == ()
    s = markers.run(spec, [3, 4], s)
    assert s.key == (3, 4)
    s = markers.step(spec, s, 9)
    assert s.mode is Mode.CLOSING and s.keys == ((3, 4),) and s.close_pos == 1
    with pytest.raises(ValueError):
        markers.step(spec, s, 3)  # the rest of the close marker is forced
    s = markers.step(spec, s, 10)
    assert s == MarkerState(Mode.FREE, (), (), 0, ((3, 4),))
    toks = [1, 7, 8, 3, 9, 10, 2, 7, 8, 5, 6]
    assert markers.spans(spec, toks) == [(3, 4, True), (9, 11, False)]


def test_marker_spec_rejects_ambiguous_markers() -> None:
    from ragrepro.errors import ConfigError

    with pytest.raises(ConfigError):
        MarkerSpec(open=(5,), close=(5,))


# -- masks -------------------------------------------------------------------------------
def allowed_words(c, words_so_far: list[str]) -> set[str]:
    state = c.initial()
    for t in ids(words_so_far):
        state = c.advance(state, t)
    a = c.allowed(state)
    return {WORDS[i] for i in a.ids}


def test_figure3_nolan_is_masked_inside_a_key() -> None:
    c = toy_constraint(KEYS, start="key", end="key")
    prefix = [" answer", " <<", " Joker", " is", " played", " by"]
    assert allowed_words(c, prefix) == {" Joaquin", " Heath"}  # " Nolan" is not in the corpus
    # ... and the processor turns that into -inf, whatever the model prefers.
    prompt = ids([" answer"])
    proc = RichesLogitsProcessor(c, prompt_len=len(prompt))
    scores = torch.zeros(1, V)
    scores[0, ID[" Nolan"]] = 100.0
    out = proc(torch.tensor([ids([" answer"] + prefix[1:] )]), scores)
    finite = {WORDS[i] for i in torch.nonzero(torch.isfinite(out[0])).flatten().tolist()}
    assert finite == {" Joaquin", " Heath"}
    assert out[0, ID[" Joaquin"]] == 0.0  # allowed scores pass through unchanged


def test_close_marker_only_where_a_key_may_end() -> None:
    full = toy_constraint(KEYS, start="key", end="key")
    assert " >>" not in allowed_words(full, [" <<", " Joker", " is"])
    assert allowed_words(full, [" <<", " Joker", " is", " played", " by", " Joaquin", " Phoenix", "."]) == {" >>"}
    sub = toy_constraint(KEYS, start="anywhere", end="anywhere", min_key_tokens=2)
    assert " >>" not in allowed_words(sub, [" <<", " played"])  # too short
    assert allowed_words(sub, [" <<", " played", " by"]) == {" Joaquin", " Heath", " >>"}
    # a substring may start mid-key, but only at a word start; a key start may not
    assert " played" in allowed_words(sub, [" <<"]) and "." not in allowed_words(sub, [" <<"])
    assert allowed_words(full, [" <<"]) == {" Joker", " Heath"}


def test_free_text_bans_marker_lookalikes_but_not_the_open_marker() -> None:
    c = toy_constraint(KEYS)
    proc = RichesLogitsProcessor(c, prompt_len=1)
    out = proc(torch.tensor([[ID[" answer"], ID[" the"]]]), torch.zeros(1, V))
    banned = {WORDS[i] for i in torch.nonzero(torch.isinf(out[0])).flatten().tolist()}
    assert banned == {" >>", " <<<", ">>"}


def test_no_retrieval_can_close_a_key_but_free_text_still_bans_lookalikes() -> None:
    """enabled=False (the no-retrieval baseline, §5.4): evidence is unconstrained text, yet
    the close marker is the only way out of a key, so inside a key it must be allowed; the
    look-alikes and the open marker are banned there, and outside keys the close marker is
    banned as before."""
    c = toy_constraint(KEYS, enabled=False)
    free = c.allowed(c.initial())
    assert free.kind == "free" and {WORDS[i] for i in free.banned} == {" >>", " <<<", ">>"}
    state = c.initial()
    for w in [" <<", " Nolan", " Batman"]:  # not a corpus key: nothing constrains it
        state = c.advance(state, ID[w])
    inside = c.allowed(state)
    assert state.marker.mode is Mode.KEY and inside.kind == "free"
    assert {WORDS[i] for i in inside.banned} == {" <<<", ">>", " <<"}  # keys do not nest
    closed = c.advance(state, ID[" >>"])
    assert closed.marker.mode is Mode.FREE and closed.marker.keys == ((ID[" Nolan"], ID[" Batman"]),)


def test_no_retrieval_beam_closes_its_key_and_stops_before_the_budget() -> None:
    """The model wants to close the key after ' Nolan' and then end: with the constraint off
    it must be able to (today's bug ran every no-retrieval generation to max_new_tokens)."""
    c = toy_constraint(KEYS, enabled=False)
    model = BigramModel(table_from({" by": {" <<": 5}, " <<": {" Nolan": 5},
                                    " Nolan": {" >>": 5, " Christopher": 1},
                                    " Christopher": {" Nolan": 5}, " >>": {EOS_WORD: 5}}))
    best = beam_search(model, ids([" by"]), c, BeamConfig(beam_size=2, max_new_tokens=12,
                                                           stop_strings=()), decode, [EOS])[0]
    assert best.reason == "eos" and decode(best.tokens) == " << Nolan >><eos>"


def test_the_end_of_the_answer_line_ends_the_output() -> None:
    """A model that goes on after its answer line (more evidence, more answers) stops at the
    answer's line end when the prompt says the answer ends the output."""
    c = toy_constraint(KEYS, enabled=False)
    loop = table_from({" by": {" answer": 5}, " answer": {" Joker": 5}, " Joker": {"\n": 5},
                       "\n": {" answer": 5}})
    cfg = BeamConfig(beam_size=1, max_new_tokens=12, stop_strings=("\n\n",))
    cut = beam_search(BigramModel(loop), ids([" by"]), c, cfg, decode, [EOS])[0]
    assert cut.reason == "length" and len(cut.tokens) == 12
    cfg.answer_prefix = " answer"
    done = beam_search(BigramModel(loop), ids([" by"]), c, cfg, decode, [EOS])[0]
    assert done.reason == "stop" and decode(done.tokens) == " answer Joker\n"


def test_processor_state_follows_reordered_rows() -> None:
    c = toy_constraint(KEYS, start="key", end="key")
    proc = RichesLogitsProcessor(c, prompt_len=1)
    rows = torch.tensor([ids([" answer", " <<", " Heath"]), ids([" answer", " the", " film"])])
    out = proc(rows, torch.zeros(2, V))
    assert {WORDS[i] for i in torch.nonzero(torch.isfinite(out[0])).flatten().tolist()} == {" Ledger"}
    assert torch.isfinite(out[1]).sum() == V - 3  # free row
    out = proc(rows.flip(0), torch.zeros(2, V))  # the same rows in the other order
    assert torch.isfinite(out[0]).sum() == V - 3
    assert {WORDS[i] for i in torch.nonzero(torch.isfinite(out[1])).flatten().tolist()} == {" Ledger"}


def test_processor_works_inside_hf_generate() -> None:
    from transformers import LogitsProcessorList

    c = toy_constraint(KEYS, start="key", end="key")
    proc = RichesLogitsProcessor(c, prompt_len=2)
    # A greedy loop applying the processor exactly as generate() does, on a model that wants
    # " Nolan" after " by" and would never close the key.
    table = table_from({" answer": {" <<": 5}, " <<": {" Joker": 5}, " Joker": {" is": 5},
                        " is": {" played": 5}, " played": {" by": 5}, " by": {" Nolan": 9, " Heath": 1},
                        " Heath": {" Ledger": 3}, " Ledger": {".": 3}, ".": {" >>": 1, " Heath": 2},
                        " >>": {"<eos>": 5}})
    seq = torch.tensor([ids([" the", " answer"])])
    plist = LogitsProcessorList([proc])
    for _ in range(12):
        scores = plist(seq, torch.tensor(table[[int(seq[0, -1])]], dtype=torch.float32))
        nxt = int(scores.argmax())
        seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
        if nxt == EOS:
            break
    assert decode(seq[0, 2:].tolist()) == " << Joker is played by Heath Ledger. >><eos>"


# -- beam ----------------------------------------------------------------------------------
def _run(table, constraint, **kw):
    model = BigramModel(table)
    stats = BeamStats()
    cfg = BeamConfig(**{"beam_size": 3, "max_new_tokens": 20, "stop_strings": (), **kw})
    hyps = beam_search(model, ids([" answer"]), constraint, cfg, decode, [EOS], stats)
    return hyps, stats, model


FREE_THEN_KEY = {
    # free text: " the film" with a strong greedy path and close runner-ups
    " answer": {" the": 3, " film": 2.9, " in": 2.8},
    " the": {" film": 3, " Batman": 2.9, " 2019": 2.8},
    " film": {" <<": 3, " in": 2.9, " the": 2.8},
    " <<": {" Joker": 2, " Heath": 1.9},
    " Joker": {" is": 2, " in": 1},
    " is": {" played": 2},
    " played": {" by": 2, " Joker": 1},
    " by": {" Nolan": 6, " Joaquin": 1, " Heath": 1.5},
    " Joaquin": {" Phoenix": 2}, " Phoenix": {".": 2},
    " Heath": {" Ledger": 2}, " Ledger": {".": 2, " played": 1},
    ".": {" >>": 3},
    " >>": {"<eos>": 3},
}


def test_adaptive_beam_free_hypotheses_expand_to_one() -> None:
    c = toy_constraint(KEYS, start="key", end="key")
    hyps, stats, model = _run(table_from(FREE_THEN_KEY), c, adaptive=True)
    # free steps: one live hypothesis proposing one token (greedy), until the key opens
    assert stats.expansions[:3] == [1, 1, 1]
    # after " <<" the single hypothesis proposes beam_size=3 continuations (only 2 allowed)
    assert stats.expansions[3] == 2
    assert max(model.batch_sizes) <= 3
    # every hypothesis shares the greedy free prefix; they differ only inside the key
    assert [decode(h.tokens) for h in hyps[:2]] == [
        " the film << Joker is played by Heath Ledger. >><eos>",
        " the film << Joker is played by Joaquin Phoenix. >><eos>"]
    assert hyps[0].reason == "eos"
    assert {decode(h.tokens).split(" <<")[0] for h in hyps} == {" the film"}


def test_fixed_beam_lets_free_variants_fill_the_beam() -> None:
    c = toy_constraint(KEYS, start="key", end="key")
    hyps, stats, _ = _run(table_from(FREE_THEN_KEY), c, adaptive=False)
    assert stats.expansions[:2] == [3, 9]  # every free hypothesis proposes beam_size tokens
    # free-text variants now compete with (and here displace) the key alternatives
    assert len({decode(h.tokens).split(" <<")[0] for h in hyps}) > 1


def test_beam_scores_are_unrenormalised_logprobs() -> None:
    c = toy_constraint(KEYS, start="key", end="key")
    table = table_from(FREE_THEN_KEY)
    hyps, _, _ = _run(table, c, adaptive=True, beam_size=1)
    best = hyps[0]
    logp = torch.log_softmax(torch.tensor(table, dtype=torch.float64), -1).numpy()
    seq = ids([" answer"]) + best.tokens
    expected = sum(logp[a, b] for a, b in itertools.pairwise(seq))
    assert math.isclose(best.score, expected, rel_tol=1e-5)
    # greedy, constrained: " by" -> best allowed is " Heath" (1.5) over " Joaquin" (1)
    assert decode(best.tokens) == " the film << Joker is played by Heath Ledger. >><eos>"


def test_beam_recovers_what_greedy_misses() -> None:
    """Greedy takes ' Heath' (the locally better key token) and is stuck with a weak ending;
    a beam of 3 keeps ' Joaquin' and finds the sequence with the higher total score."""
    prefs = {k: dict(v) for k, v in FREE_THEN_KEY.items()}
    prefs[" Heath"] = {" Ledger": 0.0, " Nolan": 8, " in": 8, " by": 8}
    prefs[" Joaquin"] = {" Phoenix": 8}
    table = table_from(prefs)
    c = toy_constraint(KEYS, start="key", end="key")
    greedy = _run(table, c, beam_size=1)[0][0]
    beam = _run(table, c, beam_size=3)[0][0]
    assert "Heath" in decode(greedy.tokens) and "Joaquin" in decode(beam.tokens)
    assert beam.score > greedy.score


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("start,end", [("key", "key"), ("anywhere", "anywhere")])
def test_every_decoded_key_occurs_verbatim(seed: int, start: str, end: str) -> None:
    rng = np.random.default_rng(seed)
    table = rng.normal(0, 3, size=(V, V))
    table[:, ID[" <<"]] += 4  # open keys often, close them when allowed, end late
    table[:, ID[" >>"]] += 4
    table[:, EOS] -= 6
    table[ID[" answer"], ID[" <<"]] = 20  # the prompt's last token opens a key
    table[ID[" >>"], ID[" <<"]] = 20  # and every key is followed by another
    c = toy_constraint(KEYS, start=start, end=end, min_key_tokens=2)
    hyps, _, _ = _run(table, c, beam_size=4, max_new_tokens=40)
    n_keys = 0
    for h in hyps:
        for s, e, closed in markers.spans(SPEC, h.tokens):
            key = h.tokens[s:e]
            assert c.index.count(key, at_key_start=(start == "key")) > 0, decode(key)
            if closed:
                n_keys += 1
                assert len(key) >= 2
                if end == "key":
                    assert c.index.is_full_key(key)
                text = decode(key)
                assert any(text in decode(ids(k)) for k in KEYS)
    assert n_keys > 0
