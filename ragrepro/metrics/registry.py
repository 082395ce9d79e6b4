"""A name registry of metrics in the manner of lm-evaluation-harness.

A metric maps one sample to a per-sample value; an aggregation maps the list of
per-sample values to the reported number. Keeping the two apart is what lets a
result table recompute or add metrics from `samples.jsonl` without rerunning.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import NumericsError, unknown_name
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


@dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[..., Any]
    aggregation: str
    higher_is_better: bool
    description: str = ""

    def aggregate(self, values: Sequence[Any]) -> float:
        return AGGREGATIONS[self.aggregation](values)


METRICS: dict[str, Metric] = {}


def register_metric(name: str, *, aggregation: str, higher_is_better: bool, description: str = ""):
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in METRICS:
            raise ValueError(f"metric {name!r} registered twice")
        METRICS[name] = Metric(name, fn, aggregation, higher_is_better, description or (fn.__doc__ or "").strip())
        return fn

    return wrap


def get_metric(name: str) -> Metric:
    if name not in METRICS:
        raise unknown_name("metric", name, METRICS)
    return METRICS[name]


def aggregate(name: str, values: Sequence[Any]) -> float:
    return get_metric(name).aggregate(values)


# ------------------------------------------------------------------ what the report knows
@dataclass(frozen=True)
class MetricInfo:
    """Everything the tables, plots, `compare` and the dashboard know of a metric column:
    how it is shown next to the papers' numbers and which per-sample records resample it
    for its interval (ragrepro.report.samples). The one place for these facts."""

    name: str
    label: str = ""
    scale: float = 1.0              # our stored value * scale = the paper's unit
    unit: str = ""
    higher_is_better: bool = True
    decimals: int = 1
    same_as: str | None = None      # another column name for the very same metric
    headline: bool = False          # the dashboard's runs table shows it first (this order)
    # Resampling units: `field` (samples.jsonl, the field of the same name, one unit per
    # question), `windows` (samples.jsonl window records, blocks of consecutive windows,
    # `count` the metrics.json total of the counted unit), `ratio` (two per-sample fields,
    # `ratio` = (numerator, denominator or None: per question)), `autoais` (autoais.jsonl,
    # `record_field`, a missing score counting 0 as the pipeline does).
    resample: str = "field"
    count: str | None = None
    ratio: tuple[str, str | None] | None = None
    record_field: str | None = None

    @property
    def aggregation(self) -> str:
        """How per-sample units make the number: a perplexity of summed NLL, else a mean."""
        return "perplexity" if self.resample == "windows" else "mean"


RESAMPLE_KINDS = ("field", "windows", "ratio", "autoais")
INFOS: dict[str, MetricInfo] = {}


def describe_metric(info: MetricInfo) -> MetricInfo:
    """Register what the report knows of a metric (a plug-in adds its own metrics here)."""
    if info.resample not in RESAMPLE_KINDS:
        raise ValueError(f"metric {info.name!r}: resample must be one of {RESAMPLE_KINDS}, "
                         f"not {info.resample!r}")
    if info.name in INFOS:
        raise ValueError(f"metric {info.name!r} described twice")
    INFOS[info.name] = info
    return info


@functools.cache
def _describe_method_metrics() -> None:
    """The metrics each registered method profile declares (its `metrics`), described once."""
    for profile in registered():
        for info in profile.metrics:
            if INFOS.get(info.name) != info:
                describe_metric(info)


def metric_info(name: str) -> MetricInfo:
    """The registered facts of `name`; an unknown column is shown unscaled under its name."""
    _describe_method_metrics()
    return INFOS.get(name) or MetricInfo(name, label=name)


def metric_infos() -> dict[str, MetricInfo]:
    _describe_method_metrics()
    return dict(INFOS)


def headline_metrics() -> tuple[str, ...]:
    _describe_method_metrics()
    return tuple(n for n, i in INFOS.items() if i.headline)


def _pct(name: str, label: str, **kw: Any) -> MetricInfo:
    """A QA metric stored as a fraction 0..1 that the papers print in percent."""
    return MetricInfo(name, label, scale=100, unit="%", **kw)


for _info in (
    MetricInfo("ppl_word", "word-level perplexity", higher_is_better=False, decimals=2,
               headline=True, resample="windows", count="n_words"),
    MetricInfo("ppl_token", "token-level perplexity", higher_is_better=False, decimals=2,
               headline=True, resample="windows", count="n_tokens"),
    _pct("em_squad", "exact match, SQuAD-normalised (%)", headline=True),
    # ralm.qa writes em_squad under the official eval_qa.py name `em`.
    _pct("em", "exact match, SQuAD-normalised (%)", same_as="em_squad"),
    _pct("f1_squad", "token F1, SQuAD-normalised (%)", headline=True),
    _pct("em_filco_code", "exact match, FilCo eval.py normalisation (%)", headline=True),
    _pct("f1_char_filco_code", "character-level F1, FilCo eval.py (%)", headline=True),
    _pct("accuracy", "accuracy (%)", headline=True),
    _pct("has_answer", "answer string in prediction (%)", headline=True),
    _pct("autoais", "AutoAIS (%)", headline=True, resample="autoais",
         record_field="attributed"),
    _pct("unigram_precision", "unigram precision (%)", headline=True),
    _pct("recall_at_k", "recall of the top-k passages (%): answer string or gold article, "
         "see recall_at_k_kind", headline=True),
    MetricInfo("n_tokens", "scored tokens", unit="tokens", decimals=0),
    MetricInfo("input_tokens", "input length (tokens)", unit="tokens", higher_is_better=False,
               decimals=0),
    MetricInfo("avg_input_tokens", "mean input length (tokens)", unit="tokens",
               higher_is_better=False, decimals=0),
    # Below: columns shown under their own name (no label the tables would print).
    # The offline judge standing in for the T5 AutoAIS model, and the soft (NLI) scores.
    MetricInfo("autoais_substitute", "autoais_substitute", resample="autoais",
               record_field="attributed"),
    MetricInfo("autoais_mean_score", "autoais_mean_score", resample="autoais",
               record_field="nli_score"),
    MetricInfo("autoais_substitute_mean_score",
               "autoais_substitute_mean_score",
               resample="autoais", record_field="nli_score"),
):
    describe_metric(_info)
