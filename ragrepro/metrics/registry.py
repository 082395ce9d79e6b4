"""A name registry of metrics in the manner of lm-evaluation-harness.

A metric maps one sample to a per-sample value; an aggregation maps the list of
per-sample values to the reported number. Keeping the two apart is what lets a
result table recompute or add metrics from `samples.jsonl` without rerunning.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import NumericsError, unknown_name


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
