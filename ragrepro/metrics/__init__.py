"""Metrics looked up by name; each declares its aggregation and direction."""
from . import (  # noqa: F401  (registers the built-in metrics)
    autoais,
    perplexity,
    qa,
)
from .registry import METRICS, Metric, aggregate, get_metric, register_metric  # noqa: F401
