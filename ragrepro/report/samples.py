"""A run's per-sample records -> resampling units for one of its metrics (ragrepro.stats).

Which records feed a metric is its `resample` kind in the metric registry
(ragrepro.metrics.registry.MetricInfo):
  windows   samples.jsonl window records (nll_sum, n_scored): blocks of consecutive windows
            (stats.window_blocks), e.g. ppl_word / ppl_token;
  autoais   autoais.jsonl (its `record_field`: attributed / nli_score, a missing score
            counting 0, as the pipeline does);
  ratio     two per-sample fields of samples.jsonl;
  field     (any unregistered metric too) samples.jsonl, the field of the same name, one unit
            per question (records where it is null are left out, as the pipelines' means do).
The units are accepted only when their full-sample statistic reproduces the number the run
recorded (as a fraction or x100): a field that means something else gives no interval rather
than a wrong one.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .. import run_files
from ..errors import DataError
from ..metrics.registry import MetricInfo, metric_info, metric_infos
from ..run_files import read_metrics
from ..stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedTest,
    Units,
    bootstrap_ci,
    mean_units,
    paired_test,
    window_blocks,
)

log = logging.getLogger(__name__)

BLOCK_TOKENS = 128
AUTOAIS_FILE = "autoais.jsonl"


@dataclass(frozen=True)
class StatsSettings:
    """Recorded next to every interval so a reader can recompute it."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    level: float = DEFAULT_LEVEL
    block_tokens: int = BLOCK_TOKENS

    def describe(self) -> str:
        return (f"{int(self.level * 100)}% percentile bootstrap, {self.resamples} resamples, "
                f"seed {self.seed}; perplexity resamples blocks of consecutive windows with "
                f">= {self.block_tokens} scored tokens; paired rows: paired bootstrap on the "
                f"same questions/blocks and a paired permutation test")


DEFAULT_STATS = StatsSettings()


@lru_cache(maxsize=256)
def _records(path: str, mtime: float) -> tuple[dict[str, Any], ...]:
    # a finished run's file: any unreadable line is damage, named with its line
    return tuple(run_files.read_records(Path(path), finished=True))


def read_records(path: Path) -> list[dict[str, Any]]:
    """A run's JSONL file (cached while unchanged); [] when absent."""
    if not path.exists():
        return []
    return list(_records(str(path), path.stat().st_mtime))


def _key(rec: dict[str, Any], i: int) -> Any:
    for k in ("qid", "idx", "id"):
        if rec.get(k) is not None:
            return rec[k]
    if "text" in rec and "window" in rec:
        return (rec["text"], rec["window"])
    return i


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(float(v)):
        return float(v)
    return None


def _field_units(records: list[dict[str, Any]], field: str) -> Units | None:
    keys, values = [], []
    for i, r in enumerate(records):
        v = _number(r.get(field))
        if v is not None:
            keys.append(_key(r, i))
            values.append(v)
    if not values or len(set(keys)) != len(keys):
        return None
    return mean_units(keys, values)


def _ratio_units(records: list[dict[str, Any]], num: str, den: str | None) -> Units | None:
    keys, values, counts = [], [], []
    for i, r in enumerate(records):
        v = _number(r.get(num, 0.0))
        c = 1.0 if den is None else _number(r.get(den, 0.0))
        if v is None or c is None:
            return None
        keys.append(_key(r, i))
        values.append(v)
        counts.append(c)
    if not keys or len(set(keys)) != len(keys) or sum(counts) <= 0:
        return None
    return Units(tuple(keys), np.asarray(values), np.asarray(counts), "mean", "questions")


def _ppl_units(records: list[dict[str, Any]], metrics: dict[str, Any], info: MetricInfo,
               block_tokens: int) -> Units | None:
    windows = [r for r in records if "nll_sum" in r and "n_scored" in r]
    denom = _number(metrics.get(str(info.count)))
    scored = sum(float(w["n_scored"]) for w in windows)
    if not windows or denom is None or scored <= 0:
        return None
    return window_blocks(windows, block_tokens, denom / scored)


def _autoais_units(run_dir: Path, field: str) -> Units | None:
    per = read_records(run_dir / AUTOAIS_FILE)
    if not per:
        return None
    keys = [_key(p, i) for i, p in enumerate(per)]
    if len(set(keys)) != len(keys):
        return None
    return mean_units(keys, [float(p.get(field) or 0.0) for p in per])


def _with_scale(units: Units, recorded: float | None) -> Units | None:
    """Units whose estimate reproduces the recorded value, as stored or x100 (percent);
    None when the run recorded no value to check against."""
    if recorded is None:
        return None
    est = units.estimate()
    for scale in (1.0, 100.0):
        if math.isclose(scale * est, recorded, rel_tol=1e-6, abs_tol=1e-9):
            return Units(units.keys, units.values, units.counts, units.transform, units.unit,
                         scale)
    return None


def units_for(run_dir: Path | None, metrics: dict[str, Any], metric: str,
              block_tokens: int = BLOCK_TOKENS) -> Units | None:
    """Resampling units of `metric` for the run in run_dir, or None when its per-sample
    records do not reproduce the recorded number (or are absent)."""
    if run_dir is None:
        return None
    run_dir = Path(run_dir)
    records = read_records(run_dir / "samples.jsonl")
    info = metric_info(metric)
    if info.resample == "windows":
        units = _ppl_units(records, metrics, info, block_tokens)
    elif info.resample == "ratio" and info.ratio is not None:
        units = _ratio_units(records, *info.ratio)
    elif info.resample == "autoais":
        units = _autoais_units(run_dir, str(info.record_field))
    else:
        units = _field_units(records, metric)
    if units is None:
        return None
    checked = _with_scale(units, _number(metrics.get(metric)))
    if checked is None:
        log.debug("%s: per-sample %s does not reproduce the recorded value %s; no interval.",
                    run_dir, metric, metrics.get(metric))
    return checked


def run_metrics(run_dir: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, settings) from a run folder's metrics.json; empty when absent."""
    if run_dir is None or not (Path(run_dir) / "metrics.json").exists():
        return {}, {}
    data = read_metrics(Path(run_dir) / "metrics.json")  # damage: DataError naming the file
    return dict(data["metrics"]), dict(data["settings"])


def interval_for(run_dir: Path | None, metrics: dict[str, Any], metric: str,
                 st: StatsSettings = DEFAULT_STATS) -> Interval | None:
    """The 95% CI of the run's `metric` (None without reproducing per-sample records).
    Cached per (run folder, its record files' mtimes, metric, recorded value, settings):
    the report asks for the same interval from several tables and the dashboard."""
    if run_dir is None:
        return None
    stamps = tuple(p.stat().st_mtime if p.exists() else 0.0
                   for p in (Path(run_dir) / "samples.jsonl", Path(run_dir) / AUTOAIS_FILE))
    counts = [str(i.count) for i in metric_infos().values() if i.resample == "windows"]
    extra = {k: metrics.get(k) for k in (metric, *counts)}
    if not all(isinstance(v, (int, float, str, bool, type(None))) for v in extra.values()):
        return None                                  # a non-scalar metric has no interval
    return _cached_interval(str(run_dir), stamps, metric, tuple(sorted(extra.items())), st)


@lru_cache(maxsize=4096)
def _cached_interval(run_dir: str, _stamps: tuple[float, ...], metric: str,
                     metrics: tuple[tuple[str, Any], ...], st: StatsSettings) -> Interval | None:
    units = units_for(Path(run_dir), dict(metrics), metric, st.block_tokens)
    if units is None:
        return None
    return bootstrap_ci(units, st.resamples, st.seed, st.level)


def paired_for(a_dir: Path | None, a_metrics: dict[str, Any], b_dir: Path | None,
               b_metrics: dict[str, Any], metric: str, contrast: str = "diff",
               st: StatsSettings = DEFAULT_STATS) -> tuple[PairedTest | None, str]:
    """(test of run A against baseline B on `metric`, '' or why there is none)."""
    a = units_for(a_dir, a_metrics, metric, st.block_tokens)
    b = units_for(b_dir, b_metrics, metric, st.block_tokens)
    if a is None or b is None:
        return None, "no per-sample records reproducing the metric"
    if set(a.keys) != set(b.keys):
        return None, (f"not paired: the runs scored different examples ({a.n} vs {b.n} "
                      f"{a.unit})")
    if a.scale != b.scale:
        return None, "not paired: the runs store the metric on different scales"
    try:
        return paired_test(a, b, contrast, st.resamples, st.seed, st.level), ""  # type: ignore[arg-type]
    except DataError as e:
        return None, str(e)
