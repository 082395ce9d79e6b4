"""Document choice, the predictive reranker's loss (paper Eq. 9) and its training helpers."""
import math

import numpy as np
import pytest
import torch

from ragrepro.errors import ConfigError, NumericsError
from ralm import predictive as pr
from ralm import rerank as rr


def test_choose_min_nll_takes_the_first_minimum_like_torch_argmin():
    assert rr.choose_min_nll([5.0, 2.0, 3.0, 2.0]) == 1
    assert int(torch.argmin(torch.tensor([5.0, 2.0, 3.0, 2.0]))) == 1
    with pytest.raises(NumericsError):
        rr.choose_min_nll([1.0, float("nan")])
    with pytest.raises(ConfigError):
        rr.choose_min_nll([])


def test_choose_first_and_max_score():
    assert rr.choose_first(4) == 0
    assert rr.choose_max_score([0.1, 3.0, -2.0, 3.0]) == 1


def test_random_choice_is_seeded_per_retrieval_and_roughly_uniform():
    a = [rr.choose_random(4, seed=0, retrieval_index=i) for i in range(400)]
    b = [rr.choose_random(4, seed=0, retrieval_index=i) for i in range(400)]
    c = [rr.choose_random(4, seed=1, retrieval_index=i) for i in range(400)]
    assert a == b and a != c
    counts = np.bincount(a, minlength=4)
    assert counts.min() > 60 and set(a) == {0, 1, 2, 3}


def test_unknown_strategy_is_named():
    with pytest.raises(ConfigError, match="zeroshot"):
        rr.variant("zero-shot")


def test_eq9_loss_against_hand_computation():
    # one example, k = 3: scores f, stride log-likelihoods ll
    f = [1.0, 0.0, -1.0]
    ll = [-10.0, -12.0, -11.0]
    z = sum(math.exp(x) for x in f)
    p_rank = [math.exp(x) / z for x in f]
    expected = -math.log(sum(p * math.exp(l) for p, l in zip(p_rank, ll)))
    got = pr.eq9_loss(torch.tensor([f]), torch.tensor([ll], dtype=torch.float64).float())
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_eq9_loss_is_finite_where_raw_probabilities_underflow():
    # a 64-token stride at ~10 nats per token: exp(-640) underflows float32 and float64
    scores = torch.tensor([[0.5, -0.5]])
    ll = torch.tensor([[-640.0, -650.0]])
    assert math.exp(-640.0) * 0.5 == 0.0 or math.exp(-640) < 1e-277
    got = float(pr.eq9_loss(scores, ll))
    p0 = 1 / (1 + math.exp(-1.0))
    expected = 640.0 - math.log(p0 + (1 - p0) * math.exp(-10.0))
    assert math.isfinite(got) and got == pytest.approx(expected, rel=1e-6)


def test_eq9_gradient_moves_scores_towards_the_lm_posterior():
    scores = torch.zeros(1, 2, requires_grad=True)
    pr.eq9_loss(scores, torch.tensor([[-5.0, -9.0]])).backward()
    # d loss / d f_i = p_rank_i - posterior_i: negative for the better document
    post0 = 1 / (1 + math.exp(-4.0))
    assert scores.grad[0, 0].item() == pytest.approx(0.5 - post0, rel=1e-5)
    assert scores.grad[0, 0] < 0 < scores.grad[0, 1]


def test_kl_loss_against_hand_computation():
    f, ll = [2.0, 0.0], [-1.0, -3.0]
    q = [math.exp(x) / sum(math.exp(y) for y in f) for x in f]
    p = [math.exp(x) / sum(math.exp(y) for y in ll) for x in ll]
    expected = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
    assert float(pr.kl_loss(torch.tensor([f]), torch.tensor([ll]))) == pytest.approx(expected)
    with pytest.raises(ConfigError):
        pr.loss_fn("mse")


def test_sample_boundaries_and_label_rows():
    rng = np.random.default_rng(0)
    bs = pr.sample_boundaries(100, 16, 5, rng, min_prefix=20)
    assert len(bs) == 5 and bs == sorted(set(bs))
    assert all(20 <= b <= 84 for b in bs)
    assert pr.sample_boundaries(20, 16, 3, rng, min_prefix=16) == []
    toks = list(range(100, 200))
    rows = pr.label_rows(toks, 50, 16, 40, [[1, 2, 3], [4]])
    ids, start = rows[0]
    # [doc; prefix trimmed to fit L = 40; next stride]
    assert ids == [1, 2, 3] + toks[50 - 21:50] + toks[50:66] and len(ids) == 40
    assert ids[start:] == toks[50:66]
    assert rows[1][0][:1] == [4] and len(rows[1][0]) == 40


def test_lr_schedule():
    assert pr.lr_at(0, 100, 10, 1.0) == pytest.approx(0.1)
    assert pr.lr_at(9, 100, 10, 1.0) == pytest.approx(1.0)
    assert pr.lr_at(55, 100, 10, 1.0) == pytest.approx(0.5)
    assert pr.lr_at(100, 100, 10, 1.0) == 0.0
