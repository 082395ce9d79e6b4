"""n, 95% CI and paired tests for the rows of the config-driven paper tables.

Every number comes from ragrepro.report.samples (per-sample records of the run folder) and
ragrepro.stats; this module only converts them into the table's unit (the `scale` of
ragrepro.metrics.registry) and formats them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for


@dataclass
class RowStats:
    """What a table row shows about its uncertainty (values in the table's unit)."""

    n: int | None = None
    unit: str = ""
    ci_low: float | None = None
    ci_high: float | None = None
    # the row against its baseline (gain, relative) or its delta partner (difference)
    test_estimate: float | None = None
    test_low: float | None = None
    test_high: float | None = None
    p_value: float | None = None
    includes_zero: bool | None = None
    test_note: str = ""


def _dir_metrics(rec: Any) -> tuple[Path | None, dict[str, Any]]:
    d = getattr(rec, "dir", None)
    metrics = getattr(rec, "metrics", None) or {}
    return (Path(d) if d else None), dict(metrics)


def value_stats(rec: Any, metric: str | None, scale: float,
                st: StatsSettings = DEFAULT_STATS) -> RowStats:
    """n and the CI of the run's own value of `metric`, times `scale`."""
    if not metric:
        return RowStats()
    d, metrics = _dir_metrics(rec)
    iv = interval_for(d, metrics, metric, st)
    if iv is None:
        return RowStats()
    return RowStats(n=iv.n, unit=iv.unit, ci_low=scale * iv.low, ci_high=scale * iv.high)


def add_test(stats: RowStats, rec: Any, partner: Any, metric: str | None, contrast: str,
             scale: float, st: StatsSettings = DEFAULT_STATS) -> RowStats:
    """The paired test of rec against partner (its baseline, or the run a delta subtracts):
    contrast rel -> relative gain (unitless), diff -> difference in the table's unit."""
    if not metric:
        return stats
    a_dir, a_metrics = _dir_metrics(rec)
    b_dir, b_metrics = _dir_metrics(partner)
    test, why = paired_for(a_dir, a_metrics, b_dir, b_metrics, metric, contrast, st)
    if test is None:
        stats.test_note = why
        if contrast == "rel" and "baseline of 0" in why:
            # no relative change from 0: the paired difference still says whether it moved
            diff, _ = paired_for(a_dir, a_metrics, b_dir, b_metrics, metric, "diff", st)
            if diff is not None:
                stats.test_note = (
                    f"relative change undefined (baseline 0); paired difference "
                    f"{scale * diff.estimate:+.2f} [{scale * diff.low:+.2f}, "
                    f"{scale * diff.high:+.2f}] p={diff.p_value:.3f}"
                    f"{zero_mark(diff.includes_zero, diff.p_value)}")
        return stats
    k = 1.0 if contrast == "rel" else scale
    stats.test_estimate, stats.test_low, stats.test_high = (k * test.estimate, k * test.low,
                                                            k * test.high)
    stats.p_value, stats.includes_zero = test.p_value, test.includes_zero
    return stats


def fmt_ci(value: float | None, low: float | None, high: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if low is None or high is None:
        return f"{value:.{digits}f} [no CI]"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def zero_mark(includes_zero: bool | None, p_value: float | None = None) -> str:
    """The mark every table uses: '≈0' when the paired CI includes zero; '≠0' when it excludes
    zero and the permutation test agrees (p < 0.05); 'borderline' when the two disagree (a
    percentile CI over few units tends to be too narrow, so it alone does not settle it)."""
    if includes_zero is None:
        return ""
    if includes_zero:
        return " ≈0"
    return " borderline" if p_value is not None and p_value >= 0.05 else " ≠0"


def fmt_test(stats: RowStats, percent: bool) -> str:
    """'[low, high] p=… ≈0' for a gain (percent) or a difference."""
    if stats.test_low is None or stats.test_high is None:
        return " [no CI]" if stats.test_note else ""
    f = 100.0 if percent else 1.0
    return (f" [{f * stats.test_low:+.1f}, {f * stats.test_high:+.1f}] "
            f"p={stats.p_value:.3f}{zero_mark(stats.includes_zero, stats.p_value)}")
