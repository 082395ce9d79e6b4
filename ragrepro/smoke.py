"""A model-free pipeline: proves config -> run -> metrics -> CSV without loading anything."""
from __future__ import annotations

from omegaconf import DictConfig

from .metrics import get_metric
from .runner import Result
from .tracking import Run


def run(cfg: DictConfig, run: Run) -> Result:
    per_metric: dict[str, list[float]] = {m: [] for m in cfg.smoke.metrics}
    for i, item in enumerate(cfg.smoke.predictions):
        record = {"idx": i, "prediction": item.prediction, "answers": list(item.answers)}
        for name in cfg.smoke.metrics:
            value = get_metric(name).fn(item.prediction, list(item.answers))
            record[name] = value
            per_metric[name].append(value)
        run.add_sample(record)
    return Result(metrics={m: get_metric(m).aggregate(v) for m, v in per_metric.items()},
                  settings={"n_examples": len(cfg.smoke.predictions)})
