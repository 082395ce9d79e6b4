"""Metrics looked up by name (ragrepro.metrics.registry); each declares its aggregation,
direction and report facts once. The core's are registered by ragrepro.metrics.builtin, a
method's through its profile."""
from . import builtin  # noqa: F401  (registers the core's metrics)
from .registry import (  # noqa: F401
    AnswerForm,
    Metric,
    aggregate,
    computable,
    get_metric,
    metric_info,
    metric_infos,
    metric_table,
)
