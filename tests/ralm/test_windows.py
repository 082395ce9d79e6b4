"""Window arithmetic, queries and document placement against the official loop (reference
§3.2-3.4), without a model."""
import itertools
import math

import pytest

from ragrepro.errors import ConfigError
from ralm.windows import (
    Window,
    expected_window_count,
    make_windows,
    place_doc,
    query_span,
    rerank_input,
    retrieval_plan,
)


def official_loop(n, max_length, stride):
    """The official eval_lm.py loop, literally: (begin, end, trg_len) per window."""
    out, prev_end = [], 0
    for begin_loc in range(0, n, stride):
        end_loc = min(begin_loc + max_length, n)
        trg_len = end_loc - prev_end
        out.append((begin_loc, end_loc, trg_len))
        prev_end = end_loc
        if end_loc == n:
            break
    return out


@pytest.mark.parametrize("n,L,s", [(1000, 128, 4), (1000, 128, 16), (129, 128, 4),
                                   (300, 64, 7), (64, 64, 4), (65, 64, 63), (1024, 256, 16)])
def test_windows_match_official_loop_and_score_every_token_once(n, L, s):
    wins = make_windows(n, L, s)
    ref = official_loop(n, L, s)
    assert [(w.begin, w.end) for w in wins] == [(b, e) for b, e, _ in ref]
    # scored counts: window 0 scores L-1 (token 0 unscored), later windows trg_len
    assert wins[0].n_scored == ref[0][1] - 1
    assert [w.n_scored for w in wins[1:]] == [t for _, _, t in ref[1:]]
    scored = [t for w in wins for t in range(w.target_start, w.end)]
    assert scored == list(range(1, n))
    assert len(wins) == 1 + math.ceil((n - L) / s) == expected_window_count(n, L, s)


@pytest.mark.parametrize("n", [2, 10, 63])
def test_text_shorter_than_a_window_gives_one_shorter_window(n):
    wins = make_windows(n, 64, 4)
    assert wins == [Window(0, 0, n, 1)]
    assert wins[0].n_scored == n - 1
    assert expected_window_count(n, 64, 4) == 1


def test_degenerate_inputs():
    assert make_windows(1, 64, 4) == [] and make_windows(0, 64, 4) == []
    with pytest.raises(ConfigError, match="stride"):
        make_windows(100, 64, 64)
    with pytest.raises(ConfigError, match="max_length"):
        make_windows(100, 1, 1)


def test_later_windows_have_context_L_minus_s_including_the_last():
    for w in make_windows(1000, 128, 16)[1:]:
        assert w.target_start - w.begin == 128 - 16


def test_query_is_the_l_tokens_before_the_boundary():
    assert query_span(256, 32) == (224, 256)
    assert query_span(10, 32) == (0, 10)
    with pytest.raises(ConfigError):
        query_span(10, 0)


def test_retrieval_plan_equal_strides_retrieves_every_window_but_the_first():
    wins = make_windows(400, 64, 8)
    assert retrieval_plan(wins, 8) == [None] + [w.index for w in wins[1:]]


def test_retrieval_plan_larger_retrieval_stride_reuses_the_latest_retrieval():
    wins = make_windows(200, 64, 4)  # boundaries 64, 68, 72, ...
    plan = retrieval_plan(wins, 12)
    assert plan[:8] == [None, 1, 1, 1, 4, 4, 4, 7]
    # every retrieving window's boundary moved exactly 12 tokens since the previous one
    starts = sorted({wins[p].target_start for p in plan if p is not None})
    assert all(b - a == 12 for a, b in itertools.pairwise(starts))


def test_doc_overwrites_the_first_positions_and_targets_stay():
    stream = list(range(100, 400))
    w = make_windows(300, 64, 8)[3]
    ids, start = place_doc(stream, w, [1, 2, 3])
    assert len(ids) == w.length == 64
    assert ids[:3] == [1, 2, 3] and ids[3:] == stream[w.begin + 3:w.end]
    # same as the paper's [doc ; last L - len(doc) tokens]
    assert ids == [1, 2, 3] + stream[w.end - (64 - 3):w.end]
    assert ids[start:] == stream[w.target_start:w.end]


def test_bos_overwrites_position_zero_only_without_a_doc_and_not_at_stream_start():
    stream = list(range(10, 300))
    wins = make_windows(290, 64, 8)
    assert place_doc(stream, wins[0], None, bos_id=1)[0][0] == 10
    ids, _ = place_doc(stream, wins[2], None, bos_id=1)
    assert ids[0] == 1 and ids[1:] == stream[wins[2].begin + 1:wins[2].end]
    assert place_doc(stream, wins[2], [7, 8], bos_id=1)[0][:2] == [7, 8]


def test_doc_that_would_cover_targets_is_refused():
    stream = list(range(300))
    w = make_windows(300, 64, 8)[2]
    with pytest.raises(ConfigError, match="doc_max_tokens"):
        place_doc(stream, w, list(range(60)))


def test_rerank_spans_zero_shot_and_oracle():
    stream = list(range(1000, 1300))
    w = make_windows(300, 64, 8)[5]
    ids, a, b = rerank_input(stream, w, [1, 2, 3, 4], rerank_tokens=16, oracle=False)
    start = w.target_start - w.begin
    assert (a, b) == (start - 16, start)
    assert ids[a:b] == stream[w.target_start - 16:w.target_start]
    ids, a, b = rerank_input(stream, w, [1, 2, 3, 4], rerank_tokens=16, oracle=True)
    assert ids[a:b] == stream[w.target_start:w.end]
    with pytest.raises(ConfigError, match="overlaps"):
        rerank_input(stream, w, list(range(50)), rerank_tokens=16, oracle=False)


@pytest.mark.slow  # a real embedded model
def test_clean_up_tokenization_equals_the_tokenizers_own_clean_up(smollm):
    """query_text(.., True) must equal what decode(.., clean_up_tokenization_spaces=True) gave
    in transformers 4.28 (the official eval_lm.py's default): the raw decode passed through the
    tokenizer's clean_up_tokenization. transformers 5 ignores that flag for BPE tokenizers, so
    the method is called directly."""
    from ralm.windows import clean_up_tokenization, query_text

    text = "He said , \" it 's n't here . \" Why ? They 've gone ! We 're ' ok ' I 'm sure"
    raw = smollm.tokenizer.decode(smollm.encode(text), clean_up_tokenization_spaces=False)
    assert raw == text
    cleaned = smollm.tokenizer.clean_up_tokenization(raw)
    assert cleaned == "He said, \" it'sn't here. \" Why? They've gone! We're'ok'I'm sure"
    assert clean_up_tokenization(raw) == cleaned == query_text(raw, True)
    assert query_text(raw, False) == raw
