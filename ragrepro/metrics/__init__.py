"""Metrics looked up by name; each declares its aggregation and direction."""
from .registry import METRICS, Metric, aggregate, get_metric, register_metric  # noqa: F401
from . import qa, perplexity  # noqa: F401,E402  (registers the built-in metrics)
from . import autoais  # noqa: F401,E402  (registers "autoais")
