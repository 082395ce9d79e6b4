"""AutoAIS for RICHES rows (§5.2): the judge built from `riches.autoais`, and its scores.

`riches.autoais` is a Hydra partial of `autoais_judge`: the llm-judge backend scores with
`riches.autoais.judge_model` (a model partial, docs/autoais.md) or else the run's own LM,
which exists only once the pipeline is built, so the judge is made at the end of a run (and
the 11B TRUE checkpoint of the paper configs is loaded only after decoding). The offline
judge is reported as `autoais_substitute`, never as `autoais`.

Decoding never waits on an optional judge: when the judge's weights are not installed (the
default Qwen-1.5B judge on a fresh clone), the run records everything else, leaves the
attribution columns empty with the reason in `autoais_status`, and `ragrepro judge
<experiment>` fills them in later from the samples' generic fields (question, prediction,
evidence; ragrepro/metrics/judging.py). No other judge is swapped in.
"""
from __future__ import annotations

import functools
import logging
from typing import Any

from ragrepro.metrics import judging
from ragrepro.metrics.autoais import AutoAIS, load_autoais
from ragrepro.models.lm import LM
from ragrepro.tracking import Run

from .settings import JudgeFactory

log = logging.getLogger(__name__)


def autoais_judge(lm: LM, *, enabled: bool, **options: Any) -> AutoAIS | None:
    """The AutoAIS evaluator of `options` (ragrepro.metrics.autoais.load_autoais), or None
    when `enabled` is false."""
    return load_autoais(lm=lm, **options) if enabled else None


def judge_options(factory: JudgeFactory) -> tuple[bool, dict[str, Any]]:
    """(enabled, load_autoais options) of the `riches.autoais` partial; a factory that is
    not a partial (a test's) reports no options and is always called."""
    if not isinstance(factory, functools.partial):
        return True, {}
    kw = dict(factory.keywords)
    return bool(kw.pop("enabled", True)), kw


def missing_reason(factory: JudgeFactory) -> str | None:
    enabled, options = judge_options(factory)
    return judging.missing_judge(options) if enabled else None


def warn_if_missing(factory: JudgeFactory, experiment: str) -> None:
    """Say at the start, not after decoding, that the attribution columns will stay empty."""
    reason = missing_reason(factory)
    if reason:
        log.warning("%s. Decoding runs; the attribution columns stay empty until the judge "
                    "is installed: %s.", reason, judging.pending_status(reason, experiment))


def attribution(run: Run, factory: JudgeFactory, lm: LM, samples: list[dict]) -> tuple[dict, dict]:
    """AutoAIS over (question, prediction, concatenated evidence): metrics and row settings;
    per-question scores go to the run's autoais.jsonl. A judge that cannot load yet leaves
    the metrics empty and says why (`autoais_status`); judge.json keeps its options for
    `ragrepro judge`."""
    enabled, options = judge_options(factory)
    if not enabled:
        return {}, {"autoais_backend": "disabled", "autoais_status": "disabled"}
    reason = judging.missing_judge(options)
    if reason:
        judging.write_judge_file(run.work_dir, options, judging.PENDING, reason)
        return {}, {"autoais_status": judging.pending_status(reason, run.experiment)}
    judge = factory(lm)
    if judge is None:
        return {}, {"autoais_backend": "disabled", "autoais_status": "disabled"}
    with run.timed("autoais"):
        metrics, settings, lines = judging.judge_samples(judge, samples)
    judging.write_scores(run.path("autoais.jsonl"), lines)
    if options:
        judging.write_judge_file(run.work_dir, options, judging.JUDGED)
    settings["autoais_status"] = judging.JUDGED
    return metrics, settings


soft_score = judging.soft_score  # the name tests and tables have used
