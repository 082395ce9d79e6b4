"""A model-free pipeline: proves config -> run -> metrics -> CSV without loading anything.
It resumes like the real pipelines: records already in samples.jsonl are not recomputed."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .metrics import get_metric
from .pipeline import Result
from .tracking import Run

log = logging.getLogger(__name__)


def _score(idx: int, item: Mapping[str, Any], metrics: Sequence[str]) -> dict:
    record = {"idx": idx, "prediction": item["prediction"], "answers": list(item["answers"])}
    for name in metrics:
        record[name] = get_metric(name).fn(item["prediction"], list(item["answers"]))
    return record


def run(run: Run, *, predictions: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> Result:
    """Score each {prediction, answers} with each metric of the registry."""
    done = {r["idx"]: r for r in run.repair_samples()}
    if done:
        log.info("Resuming: %d of %d examples already scored", len(done), len(predictions))
    records = []
    for i, item in enumerate(predictions):
        if i not in done:
            done[i] = _score(i, item, metrics)
            run.add_sample(done[i])
        records.append(done[i])
    return Result(metrics={m: get_metric(m).aggregate([r[m] for r in records]) for m in metrics},
                  settings={"n_examples": len(records)})
