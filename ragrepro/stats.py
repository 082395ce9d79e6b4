"""Uncertainty of every reported number, computed once, here, from per-sample records.

Every statistic we report is a ratio of sums over resampling *units*:
  - QA metrics (EM, F1, recall, AutoAIS...): unit = one question, value = its score,
    statistic = sum(values) / n (the mean);
  - perplexity: unit = one block of consecutive evaluation windows, value = the block's NLL
    sum, count = the block's token (or word) count, statistic = exp(sum NLL / sum count),
    recomputed from the per-window records for every resample.
`Units` holds (key, value, count) per unit; resampling reweights units, so the statistic
of a resample is sum(w * value) / sum(w * count), then the transform (identity or exp).

- `bootstrap_ci`: percentile bootstrap over units (one run).
- `paired_test`: two runs scored on the same units (a row and its baseline): the paired
  bootstrap CI of the difference (or of the relative gain) and a paired permutation test
  (swap the two runs' values unit by unit; exact enumeration when 2**n <= resamples).

Pure functions of arrays; reading runs from disk lives in ragrepro.report.samples.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from .errors import DataError

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
Transform = Literal["mean", "exp"]
Contrast = Literal["diff", "rel"]


@dataclass(frozen=True)
class Units:
    """Resampling units of one run: the statistic is transform(sum(value) / sum(count))."""

    keys: tuple[Any, ...]
    values: np.ndarray
    counts: np.ndarray
    transform: Transform = "mean"
    unit: str = "questions"          # what one unit is, for the table notes
    scale: float = 1.0               # reported number = scale * statistic (e.g. 100 for %)

    def __post_init__(self) -> None:
        if not (len(self.keys) == len(self.values) == len(self.counts)):
            raise DataError(f"Units: {len(self.keys)} keys, {len(self.values)} values and "
                            f"{len(self.counts)} counts; they must be the same length.")
        if len(set(self.keys)) != len(self.keys):
            raise DataError("Units: duplicate unit keys; each question or block must appear "
                            "once (a per-sample file with a repeated id?).")
        if not np.all(np.isfinite(self.values)) or not np.all(np.isfinite(self.counts)):
            raise DataError(f"Units ({self.unit}): a value or count is NaN/inf; fix the "
                            f"per-sample records before computing intervals.")

    @property
    def n(self) -> int:
        return len(self.keys)

    def estimate(self) -> float:
        return float(self.scale * _apply(self.transform, _ratio(self.values, self.counts)))


def mean_units(keys: Sequence[Any], values: Sequence[float], unit: str = "questions",
               scale: float = 1.0) -> Units:
    """One unit per question, the statistic their mean."""
    v = np.asarray(values, dtype=float)
    return Units(tuple(keys), v, np.ones_like(v), "mean", unit, scale)


def _ratio(values: np.ndarray, counts: np.ndarray) -> float:
    total = float(np.sum(counts))
    if total <= 0:
        raise DataError("Units: the counts sum to zero; there is nothing to average.")
    return float(np.sum(values)) / total


def _apply(transform: Transform, x: Any) -> Any:
    return np.exp(x) if transform == "exp" else x


def _stat_rows(units: Units, weights: np.ndarray) -> np.ndarray:
    """The statistic for every row of a (resamples, n) weight matrix."""
    num = weights @ units.values
    den = weights @ units.counts
    with np.errstate(divide="ignore", invalid="ignore"):
        out = units.scale * _apply(units.transform, num / den)
    return np.asarray(out, dtype=float)


def resample_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) multiplicities: row b says how often each unit is drawn in resample b
    (n draws with replacement)."""
    if n < 1:
        raise DataError("Cannot bootstrap zero units: the run has no per-sample records.")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(float)


def all_resample_weights(n: int) -> np.ndarray:
    """Every one of the n**n ordered resamples (for tests and tiny inputs)."""
    rows = [np.bincount(idx, minlength=n) for idx in itertools.product(range(n), repeat=n)]
    return np.asarray(rows, dtype=float)


def percentile_interval(stats: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Percentile interval of a resample distribution (numpy's linear interpolation)."""
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return math.nan, math.nan
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(finite, [a, 1.0 - a])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap CI, and how it was computed."""

    estimate: float
    low: float
    high: float
    n: int
    unit: str
    level: float
    resamples: int
    seed: int
    method: str = "percentile bootstrap"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bootstrap_ci(units: Units, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                 level: float = DEFAULT_LEVEL, weights: np.ndarray | None = None) -> Interval:
    """Percentile bootstrap CI of the statistic over units (weights: override the random
    resamples, e.g. with all_resample_weights for an exact enumeration)."""
    w = resample_weights(units.n, resamples, seed) if weights is None else weights
    lo, hi = percentile_interval(_stat_rows(units, w), level)
    return Interval(units.estimate(), lo, hi, units.n, units.unit, level, len(w), seed)


@dataclass(frozen=True)
class PairedTest:
    """Run A against its baseline B on the same units."""

    estimate: float        # A - B (diff) or (A - B) / B (rel)
    low: float
    high: float
    p_value: float         # two-sided paired permutation test of no difference
    includes_zero: bool    # the CI of the difference contains 0: not distinguishable
    n: int
    unit: str
    contrast: str
    level: float
    resamples: int
    seed: int
    permutations: int      # number of sign patterns used (2**n when exact)
    exact: bool
    method: str = "paired percentile bootstrap; paired permutation test"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def align(a: Units, b: Units) -> tuple[Units, Units]:
    """Both runs on the same units in the same order; refuses when they differ."""
    if set(a.keys) != set(b.keys):
        only_a = sorted(map(str, set(a.keys) - set(b.keys)))[:3]
        only_b = sorted(map(str, set(b.keys) - set(a.keys)))[:3]
        raise DataError(f"Paired test needs the same examples in both runs: {a.n} vs {b.n} "
                        f"units; only in the first: {only_a}, only in the second: {only_b}. "
                        f"Run both with the same dataset, split and limit.")
    if a.transform != b.transform or a.scale != b.scale:
        raise DataError("Paired test between different statistics (transform or scale).")
    pos = {k: i for i, k in enumerate(b.keys)}
    order = np.array([pos[k] for k in a.keys], dtype=int)
    return a, Units(a.keys, b.values[order], b.counts[order], b.transform, b.unit, b.scale)


def _contrast(sa: np.ndarray, sb: np.ndarray, contrast: Contrast) -> np.ndarray:
    if contrast == "rel":
        with np.errstate(divide="ignore", invalid="ignore"):
            return (sa - sb) / sb
    return sa - sb


def sign_patterns(n: int, resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    """(patterns, exact): rows of 0/1 swap flags per unit; all 2**n rows when that is no
    more than `resamples`, else `resamples` random rows."""
    if 2 ** n <= resamples:
        return np.asarray(list(itertools.product((0, 1), repeat=n)), dtype=float), True
    rng = np.random.default_rng(seed + 1)
    return rng.integers(0, 2, size=(resamples, n)).astype(float), False


def _test_statistic(ta: np.ndarray, tb: np.ndarray, contrast: Contrast) -> np.ndarray:
    """|A - B|, or for a relative change |log(A / B)|: symmetric under swapping the runs,
    which |A / B - 1| is not (it would count the fully swapped pattern as more extreme)."""
    if contrast == "rel":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(np.log(ta / tb))
    return np.abs(ta - tb)


# Two permutation statistics closer than this (relative to the compared quantities) are a
# tie. Per-unit sums computed on another CPU, or with another thread count, differ by float
# reduction noise (float32 epsilon 6e-8; measured: NLL sums 1e-7 relative apart). A unit whose
# two values are equal up to that noise moves the statistic by about as much when it is
# swapped, and without a tolerance the exact test counted such a pattern "as extreme" on one
# machine and not on another (p 0.938 vs 0.930). 1e-5 is over 100x the noise and far below
# any difference a table prints (docs/statistics.md).
TIE_RTOL = 1e-5


def tie_tolerance(ta: float, tb: float, contrast: Contrast) -> float:
    """How far below the observed statistic a permuted one still counts as a tie: TIE_RTOL of
    the compared values for a difference. For a relative change the statistic is |log(A/B)|,
    whose noise is that of log A and log B (for perplexity, the mean NLLs): TIE_RTOL of their
    size, and at least TIE_RTOL (a relative tolerance on the values is an absolute one there)."""
    if contrast == "rel":
        logs = [abs(math.log(x)) for x in (ta, tb) if x > 0 and math.isfinite(x)]
        return TIE_RTOL * max([1.0, *logs])
    scale = max(abs(ta), abs(tb))
    return TIE_RTOL * scale if math.isfinite(scale) and scale > 0 else 1e-12


def permutation_p(a: Units, b: Units, contrast: Contrast, resamples: int,
                  seed: int) -> tuple[float, int, bool]:
    """Two-sided paired permutation p-value: under no difference, swapping the two runs'
    (value, count) within a unit leaves the distribution unchanged."""
    s, exact = sign_patterns(a.n, resamples, seed)
    va = (1 - s) * a.values + s * b.values
    vb = s * a.values + (1 - s) * b.values
    ca = (1 - s) * a.counts + s * b.counts
    cb = s * a.counts + (1 - s) * b.counts
    with np.errstate(divide="ignore", invalid="ignore"):
        ta = a.scale * _apply(a.transform, va.sum(1) / ca.sum(1))
        tb = a.scale * _apply(a.transform, vb.sum(1) / cb.sum(1))
    t = _test_statistic(ta, tb, contrast)
    ea, eb = a.estimate(), b.estimate()
    t_obs = float(_test_statistic(np.array([ea]), np.array([eb]), contrast)[0])
    hits = int(np.sum(t >= t_obs - tie_tolerance(ea, eb, contrast)))
    p = hits / len(s) if exact else (hits + 1) / (len(s) + 1)
    return float(min(1.0, p)), len(s), exact


def paired_test(a: Units, b: Units, contrast: Contrast = "diff",
                resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                level: float = DEFAULT_LEVEL, weights: np.ndarray | None = None) -> PairedTest:
    """A vs baseline B on the same units: paired bootstrap CI of A - B (contrast=diff) or
    (A - B) / B (contrast=rel), the permutation p-value, and whether the CI includes 0."""
    a, b = align(a, b)
    if contrast == "rel" and b.estimate() == 0:
        raise DataError("A relative change from a baseline of 0 is undefined (e.g. EM 0 "
                        "without retrieval); compare the difference (contrast='diff').")
    w = resample_weights(a.n, resamples, seed) if weights is None else weights
    d = _contrast(_stat_rows(a, w), _stat_rows(b, w), contrast)
    lo, hi = percentile_interval(d, level)
    est = float(_contrast(np.array(a.estimate()), np.array(b.estimate()), contrast))
    p, n_perm, exact = permutation_p(a, b, contrast, resamples, seed)
    includes_zero = bool(not (lo > 0 or hi < 0)) if math.isfinite(lo) else True
    return PairedTest(est, lo, hi, p, includes_zero, a.n, a.unit, contrast, level, len(w),
                      seed, n_perm, exact)


# -- perplexity: blocks of consecutive windows ------------------------------------------
def window_blocks(windows: Sequence[dict[str, Any]], block_tokens: int = 128,
                  denominator_per_token: float = 1.0) -> Units:
    """Perplexity units from per-window records ({text, window, nll_sum, n_scored}).

    Consecutive windows of one text are grouped until a block holds >= block_tokens scored
    tokens (adjacent windows share context, so single windows are not independent); a block
    never crosses texts. Each block's count is its scored tokens * denominator_per_token:
    1 for token-level perplexity, n_words / n_scored_tokens for word-level perplexity (the
    run's word count spread over blocks in proportion to their tokens, because per-window
    word counts are not recorded). The full-sample statistic equals the run's own value."""
    if not windows:
        raise DataError("No per-window records (samples.jsonl is empty): cannot compute a "
                        "perplexity interval.")
    for i, w in enumerate(windows):
        missing = [k for k in ("text", "window", "nll_sum", "n_scored") if k not in w]
        if missing:
            raise DataError(f"Per-window record {i} lacks {missing}; it is not a perplexity "
                            f"window record.")
    ordered = sorted(windows, key=lambda w: (int(w["text"]), int(w["window"])))
    keys: list[Any] = []
    nll: list[float] = []
    tok: list[float] = []
    current_text = None
    for w in ordered:
        if w["text"] != current_text or tok[-1] >= block_tokens:
            current_text = w["text"]
            keys.append((int(w["text"]), int(w["window"])))
            nll.append(0.0)
            tok.append(0.0)
        nll[-1] += float(w["nll_sum"])
        tok[-1] += float(w["n_scored"])
    counts = np.asarray(tok) * denominator_per_token
    return Units(tuple(keys), np.asarray(nll), counts, "exp",
                 f"blocks of >= {block_tokens} scored tokens (consecutive windows)")
