"""The metric registry: one typed record per metric column, looked up by name.

A metric maps one sample to a per-sample value (`fn`); its aggregation maps the list of
per-sample values to the reported number. Keeping the two apart is what lets a result table
recompute or add metrics from `samples.jsonl` without rerunning. The same record holds what
the tables, plots, `compare`, the dashboard and `ragrepro rescore` know of the column (label,
scale, direction, resampling units, how rescoring recomputes it), each fact stated once.

The core's own metrics are registered by ragrepro.metrics.builtin; a method registers its
own through its profile's `metrics` (ragrepro.methods.MethodProfile), which every lookup here
adds on first use. A column registered nowhere is shown unscaled under its own name.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, NumericsError, unknown_name
from ..methods import registered


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")


def _perplexity(values: Sequence[tuple[float, float]]) -> float:
    """values are (summed NLL in nats, count); ppl = exp(sum NLL / sum count)."""
    nll = sum(v[0] for v in values)
    count = sum(v[1] for v in values)
    if count <= 0:
        raise NumericsError("perplexity over zero counted units: nothing was scored.")
    return math.exp(nll / count)


def _sum(values: Sequence[float]) -> float:
    return float(sum(values))


AGGREGATIONS: dict[str, Callable[[Sequence[Any]], float]] = {
    "mean": _mean,
    "perplexity": _perplexity,
    "sum": _sum,
}
RESAMPLE_KINDS = ("field", "windows", "ratio", "autoais")


@dataclass(frozen=True)
class AnswerForm:
    """How `ragrepro rescore` recomputes an answer metric from saved samples: its `family`
    (the kernel that takes a normalisation: em, f1, f1_char, accuracy, has_answer), the
    normalisation its own function applies (`native`, by name, with the function itself so
    a method's normalisation becomes a `--normalization` choice) and the sample field holding
    the scored text (the gold answers are always `answers`)."""

    family: str
    native: str
    normalize: Callable[[str], str]
    text_field: str = "prediction"


@dataclass(frozen=True)
class Metric:
    """Everything the harness knows of one metric column.

    name, label        the column and how tables print it (default: the name)
    fn                 the per-sample function (None: a column a pipeline writes, e.g. a
                       count, that no registry function computes)
    aggregation        per-sample values -> the number (AGGREGATIONS; default: `perplexity`
                       for window-resampled columns, else `mean`)
    higher_is_better   the direction, for tables, plots and `compare`
    scale, unit        our stored value * scale = the paper's unit
    decimals, same_as  printed decimals; another column name for the very same metric
    headline           the dashboard's runs table shows it first, in this rank (0: not)
    resample, count, ratio, record_field
                       the resampling units of its interval (ragrepro.report.samples):
                       `field` (samples.jsonl, the field of the same name, one unit per
                       question), `windows` (window records, blocks of consecutive windows,
                       `count` the metrics.json total of the counted unit), `ratio` (two
                       per-sample fields, `ratio` = (numerator, denominator or None: per
                       question)), `autoais` (autoais.jsonl, `record_field`, a missing score
                       counting 0 as the pipeline does)
    rescore            AnswerForm when `ragrepro rescore` can recompute it from samples
    """

    name: str
    label: str = ""
    fn: Callable[..., Any] | None = None
    aggregation: str = ""
    higher_is_better: bool = True
    description: str = ""
    scale: float = 1.0
    unit: str = ""
    decimals: int = 1
    same_as: str | None = None
    headline: int = 0
    resample: str = "field"
    count: str | None = None
    ratio: tuple[str, str | None] | None = None
    record_field: str | None = None
    rescore: AnswerForm | None = None

    def __post_init__(self) -> None:
        # derived defaults, so a declaration states only what differs from them
        if not self.aggregation:
            object.__setattr__(self, "aggregation",
                               "perplexity" if self.resample == "windows" else "mean")
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if not self.description and self.fn is not None:
            object.__setattr__(self, "description", (self.fn.__doc__ or "").strip())
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"metric {self.name!r}: aggregation must be one of "
                             f"{tuple(AGGREGATIONS)}, not {self.aggregation!r}")
        if self.resample not in RESAMPLE_KINDS:
            raise ValueError(f"metric {self.name!r}: resample must be one of {RESAMPLE_KINDS}, "
                             f"not {self.resample!r}")

    def aggregate(self, values: Sequence[Any]) -> float:
        return AGGREGATIONS[self.aggregation](values)


# The former name of the report's half of this record: a plug-in profile may still build its
# `metrics` with it (ragrepro.report and older profiles import it).
MetricInfo = Metric

_CORE: dict[str, Metric] = {}


def pct(name: str, label: str, **kw: Any) -> Metric:
    """A QA metric stored as a fraction 0..1 that the papers print in percent."""
    return Metric(name, label, scale=100, unit="%", **kw)


def register(metric: Metric) -> Metric:
    """Register one of the core's metrics (ragrepro.metrics.builtin); a method declares its
    own in its profile's `metrics` instead."""
    if metric.name in _CORE:
        raise ValueError(f"metric {metric.name!r} registered twice")
    _CORE[metric.name] = metric
    return metric


@functools.cache
def _table() -> dict[str, Metric]:
    """The core's metrics, then each registered method's (its profile's `metrics`). Cached for
    the process, like the profiles themselves."""
    out = dict(_CORE)
    for profile in registered():
        for metric in profile.metrics:
            if not isinstance(metric, Metric):
                raise ConfigError(f"Method {profile.name}: metrics holds a "
                                  f"{type(metric).__name__}; declare each as a "
                                  f"ragrepro.metrics.registry.Metric.")
            if metric.name in out and out[metric.name] != metric:
                raise ConfigError(f"Method {profile.name} declares metric {metric.name!r}, "
                                  f"which another method or the core already declares "
                                  f"differently: rename one.")
            out[metric.name] = metric
    return out


def metric_table() -> dict[str, Metric]:
    """Every registered metric column, by name (a copy)."""
    return dict(_table())


def computable() -> dict[str, Metric]:
    """The metrics with a per-sample function, by name."""
    return {n: m for n, m in _table().items() if m.fn is not None}


def get_metric(name: str) -> Metric:
    """A metric with a per-sample function; an unknown name lists the known ones."""
    metric = _table().get(name)
    if metric is None or metric.fn is None:
        raise unknown_name("metric", name, computable())
    return metric


def aggregate(name: str, values: Sequence[Any]) -> float:
    return get_metric(name).aggregate(values)


def metric_info(name: str) -> Metric:
    """The registered facts of `name`; an unknown column is shown unscaled under its name."""
    return _table().get(name) or Metric(name)


def metric_infos() -> dict[str, Metric]:
    """Every column's facts, the headline ones first in their rank (then registration order)."""
    table = _table()
    order = {n: i for i, n in enumerate(table)}
    return dict(sorted(table.items(), key=lambda kv: (kv[1].headline == 0, kv[1].headline,
                                                      order[kv[0]])))


def headline_metrics() -> tuple[str, ...]:
    return tuple(n for n, m in metric_infos().items() if m.headline)
