"""ragrepro.stats against hand-enumerated resample distributions and analytic cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ragrepro import stats
from ragrepro.errors import DataError
from ragrepro.stats import (
    Units,
    all_resample_weights,
    bootstrap_ci,
    mean_units,
    paired_test,
    percentile_interval,
    resample_weights,
    sign_patterns,
    window_blocks,
)


def test_all_resample_weights_enumerates_the_four_resamples_of_two_units():
    w = all_resample_weights(2)
    assert sorted(map(tuple, w.tolist())) == [(0, 2), (1, 1), (1, 1), (2, 0)]


def test_exact_bootstrap_of_two_questions_matches_hand_computed_percentiles():
    # resample means of [0, 1]: 0, .5, .5, 1; numpy linear quantile at 2.5%: position
    # 0.025 * 3 = 0.075 -> 0.075 * 0.5 = 0.0375; at 97.5%: 0.5 + 0.925 * 0.5 = 0.9625
    ci = bootstrap_ci(mean_units(["q1", "q2"], [0.0, 1.0]), weights=all_resample_weights(2))
    assert ci.estimate == 0.5
    assert ci.low == pytest.approx(0.0375)
    assert ci.high == pytest.approx(0.9625)
    assert ci.n == 2 and ci.resamples == 4 and ci.unit == "questions"


def test_scale_multiplies_estimate_and_interval():
    u = mean_units(["a", "b"], [0.0, 1.0], scale=100.0)
    ci = bootstrap_ci(u, weights=all_resample_weights(2))
    assert (ci.estimate, ci.low, ci.high) == pytest.approx((50.0, 3.75, 96.25))


def test_bernoulli_interval_width_matches_the_normal_approximation():
    rng = np.random.default_rng(7)
    x = (rng.random(400) < 0.3).astype(float)
    ci = bootstrap_ci(mean_units(range(400), x), resamples=4000, seed=1)
    p = x.mean()
    half = 1.96 * math.sqrt(p * (1 - p) / 400)
    assert (ci.high - ci.low) / 2 == pytest.approx(half, rel=0.12)
    assert ci.low < p < ci.high


def test_same_seed_same_interval_other_seed_other_resamples():
    u = mean_units(range(30), [i % 3 for i in range(30)])
    assert bootstrap_ci(u, seed=3) == bootstrap_ci(u, seed=3)
    assert not np.array_equal(resample_weights(30, 50, 3), resample_weights(30, 50, 4))
    assert resample_weights(30, 50, 3).sum(axis=1).tolist() == [30.0] * 50


def test_identical_runs_give_zero_difference_p_one_and_includes_zero():
    u = mean_units(range(12), [0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1])
    t = paired_test(u, u)
    assert (t.estimate, t.low, t.high) == (0.0, 0.0, 0.0)
    assert t.p_value == 1.0 and t.includes_zero


def test_exact_permutation_p_value_of_two_and_three_wins():
    # A beats B on every question by 1: of the 2**n swap patterns only "none" and "all"
    # reach |mean diff| = 1, so p = 2 / 2**n
    for n, p in ((2, 0.5), (3, 0.25)):
        a, b = mean_units(range(n), [1.0] * n), mean_units(range(n), [0.0] * n)
        t = paired_test(a, b, resamples=100)
        assert t.exact and t.permutations == 2 ** n
        assert t.p_value == pytest.approx(p)


@pytest.mark.parametrize("noise", [1e-7, -1e-7, 0.0])
def test_a_unit_equal_up_to_float_noise_is_a_tie_on_every_machine(noise):
    # A beats B by 1 on units x, y; on z both runs scored 7.3 (another CPU: 1e-7 apart).
    # Swapping z changes nothing, so of the 8 patterns "none", "both of x, y" and each of
    # them with z swapped tie the observed |mean diff| = 2/3: p = 4/8, whatever the noise.
    a = mean_units(["x", "y", "z"], [1.0, 1.0, 7.3])
    b = mean_units(["x", "y", "z"], [0.0, 0.0, 7.3 * (1 + noise)])
    t = paired_test(a, b, resamples=100)
    assert t.exact and t.p_value == 0.5


def test_without_the_tie_tolerance_the_noise_decides(monkeypatch):
    # The same units with z's noise against A: the swapped-z patterns fall 1e-7 short of the
    # observed statistic and only 2 of 8 count (p 0.25): the machine-dependent p of issue 28.
    monkeypatch.setattr(stats, "TIE_RTOL", 0.0)
    a = mean_units(["x", "y", "z"], [1.0, 1.0, 7.3])
    b = mean_units(["x", "y", "z"], [0.0, 0.0, 7.3 * (1 - 1e-7)])
    assert paired_test(a, b, resamples=100).p_value == 0.25


def test_tie_tolerance_scales_with_the_compared_values():
    assert stats.tie_tolerance(36.0, 30.0, "diff") == pytest.approx(36e-5)
    # |log(A/B)| of perplexities: the noise is that of the mean NLLs, log 36 = 3.58
    assert stats.tie_tolerance(36.0, 30.0, "rel") == pytest.approx(1e-5 * math.log(36.0))
    assert stats.tie_tolerance(0.5, 0.4, "rel") == pytest.approx(1e-5)
    assert stats.tie_tolerance(0.0, 0.0, "diff") == 1e-12


def test_one_nonzero_difference_cannot_be_told_from_noise():
    # d = [1, 0]: every swap pattern gives |mean diff| = 0.5, so p = 1; the paired bootstrap
    # diffs are A's resample means 1, .5, .5, 0 (B is all zero)
    a, b = mean_units(["x", "y"], [1.0, 0.0]), mean_units(["x", "y"], [0.0, 0.0])
    t = paired_test(a, b, weights=all_resample_weights(2))
    assert t.estimate == 0.5 and t.p_value == 1.0
    assert (t.low, t.high) == pytest.approx((0.0375, 0.9625))


def test_paired_test_aligns_units_by_key_not_by_position():
    a = mean_units(["q1", "q2", "q3"], [1.0, 0.0, 1.0])
    b = mean_units(["q3", "q1", "q2"], [1.0, 1.0, 0.0])   # the same scores, shuffled
    t = paired_test(a, b)
    assert (t.estimate, t.low, t.high, t.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_paired_test_refuses_different_examples_and_names_them():
    a, b = mean_units(["q1", "q2"], [1, 0]), mean_units(["q1", "q9"], [1, 0])
    with pytest.raises(DataError, match=r"only in the first: \['q2'\].*only in the second: "
                                        r"\['q9'\]"):
        paired_test(a, b)


def test_duplicate_and_nan_units_are_refused():
    with pytest.raises(DataError, match="duplicate"):
        mean_units(["q1", "q1"], [1, 0])
    with pytest.raises(DataError, match="NaN"):
        mean_units(["q1", "q2"], [1, float("nan")])
    with pytest.raises(DataError, match="zero units"):
        resample_weights(0, 10, 0)


def _windows(nlls, scored, text=0):
    return [{"text": text, "window": i, "nll_sum": x, "n_scored": s}
            for i, (x, s) in enumerate(zip(nlls, scored))]


def test_window_blocks_group_consecutive_windows_and_never_cross_texts():
    ws = _windows([10, 2, 3, 4, 5], [100, 16, 16, 16, 16]) + _windows([7, 1], [50, 16], text=1)
    u = window_blocks(ws, block_tokens=32)
    # text 0: [w0] (100 >= 32), [w1 w2] (32), [w3 w4]; text 1: [w0] (50), [w1]
    assert u.keys == ((0, 0), (0, 1), (0, 3), (1, 0), (1, 1))
    assert u.values.tolist() == [10, 5, 9, 7, 1]
    assert u.counts.tolist() == [100, 32, 32, 50, 16]
    assert u.estimate() == pytest.approx(math.exp(32 / 230))


def test_word_level_perplexity_is_the_runs_value_and_resamples_by_hand():
    ws = _windows([20.0, 40.0], [10, 10])
    # 30 words for 20 scored tokens: ppl_word = exp(60 / 30)
    u = window_blocks(ws, block_tokens=10, denominator_per_token=30 / 20)
    assert u.estimate() == pytest.approx(math.exp(2.0))
    # resamples: both blocks 0 -> exp(40/30); mixed -> exp(2); both 1 -> exp(80/30)
    ci = bootstrap_ci(u, weights=all_resample_weights(2))
    lo, hi = percentile_interval(np.exp(np.array([40 / 30, 2, 2, 80 / 30])))
    assert (ci.low, ci.high) == pytest.approx((lo, hi))
    assert ci.low < math.exp(2.0) < ci.high


def test_relative_gain_of_perplexity_by_hand():
    base = window_blocks(_windows([20.0, 20.0], [10, 10]), block_tokens=10)
    ret = window_blocks(_windows([10.0, 20.0], [10, 10]), block_tokens=10)
    t = paired_test(ret, base, contrast="rel", weights=all_resample_weights(2))
    assert t.estimate == pytest.approx((math.exp(1.5) - math.exp(2.0)) / math.exp(2.0))
    # resamples: {b0,b0}: (e^1 - e^2)/e^2, mixed twice: the estimate, {b1,b1}: 0
    d = np.array([math.exp(-1) - 1, t.estimate, t.estimate, 0.0])
    assert (t.low, t.high) == pytest.approx(percentile_interval(d))
    # the percentile interval stops short of 0 (-0.0295), but with one changed block
    # every swap pattern is at least as extreme: the permutation test says p = 1
    assert not t.includes_zero and t.high == pytest.approx(0.075 * (math.exp(-0.5) - 1))
    assert t.p_value == 1.0
    assert t.contrast == "rel" and t.unit.startswith("blocks")


def test_sign_patterns_exact_only_when_enumerable():
    s, exact = sign_patterns(3, 8, 0)
    assert exact and s.shape == (8, 3)
    s, exact = sign_patterns(4, 8, 0)
    assert not exact and s.shape == (8, 4)


def test_monte_carlo_permutation_p_is_never_zero():
    a, b = mean_units(range(40), [1.0] * 40), mean_units(range(40), [0.0] * 40)
    t = paired_test(a, b, resamples=500)
    assert not t.exact
    assert t.p_value == pytest.approx(1 / 501, abs=2 / 501)
    assert t.p_value > 0 and not t.includes_zero


def test_units_reject_mismatched_lengths():
    with pytest.raises(DataError, match="same length"):
        Units(("a",), np.array([1.0, 2.0]), np.array([1.0]))


def test_relative_change_from_a_zero_baseline_is_refused():
    a, b = mean_units(range(3), [1.0, 0.0, 0.0]), mean_units(range(3), [0.0, 0.0, 0.0])
    with pytest.raises(DataError, match="baseline of 0 is undefined"):
        paired_test(a, b, contrast="rel")
    assert paired_test(a, b, contrast="diff").estimate == pytest.approx(1 / 3)


def test_relative_permutation_statistic_is_symmetric_under_swapping_the_runs():
    # every block 10% lower NLL in A: only "swap none" and "swap all" reach |log ratio|
    # of the observed size, so p = 2 / 2**3 (|A/B - 1| would also count "swap all" twice as
    # extreme, yet it is the same evidence)
    base = window_blocks(_windows([20.0, 30.0, 40.0], [10, 10, 10]), block_tokens=10)
    ret = window_blocks(_windows([18.0, 27.0, 36.0], [10, 10, 10]), block_tokens=10)
    t = paired_test(ret, base, contrast="rel", resamples=100)
    assert t.exact and t.p_value == pytest.approx(0.25)
    assert paired_test(base, ret, contrast="rel", resamples=100).p_value == pytest.approx(0.25)
