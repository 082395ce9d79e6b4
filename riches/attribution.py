"""AutoAIS for RICHES rows (§5.2): the judge built from `riches.autoais`, and its scores.

`riches.autoais` is a Hydra partial of `autoais_judge`: the llm-judge backend scores with
`riches.autoais.judge_model` (a model partial, docs/autoais.md) or else the run's own LM,
which exists only once the pipeline is built, so the judge is made at the end of a run (and
the 11B TRUE checkpoint of the paper configs is loaded only after decoding). The offline
judge is reported as `autoais_substitute`, never as `autoais`.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrepro.io import atomic_write_text
from ragrepro.metrics.autoais import AttributionItem, AutoAIS, load_autoais
from ragrepro.models.lm import LM
from ragrepro.tracking import Run


def autoais_judge(lm: LM, *, enabled: bool, **options: Any) -> AutoAIS | None:
    """The AutoAIS evaluator of `options` (ragrepro.metrics.autoais.load_autoais), or None
    when `enabled` is false."""
    return load_autoais(lm=lm, **options) if enabled else None


def attribution(run: Run, judge: AutoAIS | None, samples: list[dict]) -> tuple[dict, dict]:
    """AutoAIS over (question, prediction, concatenated evidence): metrics and row settings;
    per-question scores go to the run's autoais.jsonl."""
    if judge is None:
        return {}, {"autoais_backend": "disabled"}
    items = [AttributionItem(question=s["question"], answer=s["prediction"], title=None,
                             passage=s["evidence"]) for s in samples]
    with run.timed("autoais"):
        res = judge.evaluate(items)
    atomic_write_text(run.path("autoais.jsonl"), "".join(
        json.dumps({"qid": s["qid"], **p}, default=float) + "\n"
        for s, p in zip(samples, res.per_sample)))
    metrics = dict(res.metrics)
    # RICHES app. 10.2 averages the calibrated NLI score (missing = 0) instead of thresholding
    metrics[f"{judge.result_key}_mean_score"] = soft_score(res.per_sample)
    settings = dict(res.settings)
    # the metric is also called autoais_substitute: keep the scorer's name in its own column
    if "autoais_substitute" in settings:
        settings["autoais_scorer"] = settings.pop("autoais_substitute")
    return metrics, settings


def soft_score(per_sample: Sequence[dict]) -> float:
    """Mean NLI score over all questions, a missing prediction or passage counting 0."""
    if not per_sample:
        return float("nan")
    return float(np.mean([p.get("nli_score") or 0.0 for p in per_sample]))
