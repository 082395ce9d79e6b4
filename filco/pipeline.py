"""FilCo experiments: the Full / Psg / FilCo / Silver comparison (Fig. 4, Table 5), the
per-measure comparison (Table 4), context statistics (Table 3, Fig. 6) and retrieval
statistics (Table 2). One run = one setting on one evaluation set = one CSV row.

`run` builds the run's parts (filco/resources.py: Setup, Models, Budgets, Labeller), labels
the examples, lets the setting (filco/variants.py, `filco.setting`) build the test contexts,
then trains the setting's generator and scores its predictions."""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ragrepro import shards
from ragrepro.deferred import Deferred
from ragrepro.generation import record, summarize
from ragrepro.metrics import get_metric
from ragrepro.metrics.qa import unigram_precision
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval.base import Retriever, index_row
from ragrepro.tracking import Run

from . import prompts
from .data import QASet, load_examples
from .diagnostics import context_diag
from .encoding import count_tokens, prompt_ids_truncated
from .measures import CXMI_THRESHOLD_NOTE
from .official import official_prediction
from .resources import (
    Budgets,
    Labelled,
    Labeller,
    Models,
    Setup,
    TestContexts,
    join_passages,
    task_of,  # noqa: F401  (filco/table2.py imports it from here)
)
from .settings import FilcoSettings, variant_label
from .silver import Example, Silver, choose_output
from .tasks import Task, get_task

log = logging.getLogger(__name__)
_join = join_passages  # filco/table2.py imports `_join` from here


def passage_retriever(fc: FilcoSettings, corpus: Deferred, retriever: Deferred) -> Retriever | None:
    """The retriever over the corpus, unless the passages come from the records only."""
    return retriever.build(corpus=corpus.build()) if fc.passages != "record" else None


def gen_pairs(setup: Setup, exs: Sequence[Example], contexts: Sequence[str]) -> list[tuple[str, str]]:
    """M_gen training pairs: question + context -> `answer: o` (o: filco.silver.choose_output)."""
    return [(prompts.gen_prompt(setup.task, e.question, ctx),
             prompts.gen_target(setup.task, choose_output(e.answers, e.passages)))
            for e, ctx in zip(exs, contexts)]


def check_gen_budget(budgets: Budgets, train: Sequence[Example]) -> dict[str, int]:
    """M_gen's targets (`answer: ..` of the training questions) are known at start."""
    fc, task = budgets.setup.fc, budgets.setup.task
    if fc.stage != "generate":
        return {}
    targets = [prompts.gen_target(task, choose_output(e.answers, e.passages)) for e in train]
    return budgets.check("filco.gen_max_new_tokens", fc.gen_max_new_tokens, "gen", targets,
                         "M_gen training target")


# -- the pipelines -------------------------------------------------------------------------
def _settings(setup: Setup, train: QASet, test: QASet, n_train: int, n_test: int,
              retriever: str | None, scorer: str | None) -> dict[str, Any]:
    fc, common, lm, spec = setup.fc, setup.fc.train.common, setup.lm, setup.spec
    return {**test.row(), "method": fc.setting.method,
            "setting": fc.setting.name, "variant": variant_label(fc.setting.name,
                                                                 fc.fallback.switches()),
            "stage": fc.stage, "top_k": fc.k, "family": lm.kind,
            "generator": lm.name,
            "generator_revision": lm.revision, "task": setup.task.name, "k": fc.k,
            "measure": spec.name, "measure_mode": spec.mode,
            "measure_threshold": spec.threshold, "splitter": fc.splitter,
            "eval_dataset": test.name, "eval_split": test.split, "eval_limit": test.limit,
            "train_dataset": train.name, "train_dataset_variant": train.variant,
            "train_split": train.split, "train_limit": train.limit,
            "n_train": n_train, "n_eval": n_test, "gen_format": fc.gen_format,
            "ctx_answer_prefix": fc.ctx_answer_prefix, "cxmi_output": spec.cxmi_output,
            "test_context": fc.test_context, "fallback_test": fc.fallback.test,
            "fallback_gen_train": fc.fallback.gen_train,
            "fallback_ctx_target": fc.fallback.ctx_target,
            "cxmi_scorer": scorer or "generator-base",
            "cxmi_prompt": fc.cxmi.prompt, "retriever": retriever,
            "train_epochs": common["epochs"], "train_max_steps": common["max_steps"],
            "train_lr": common["lr"], "lora": common["lora"],
            "max_input_tokens": fc.max_input_tokens, "gen_max_new_tokens": fc.gen_max_new_tokens,
            "ctx_max_new_tokens": fc.ctx_max_new_tokens}


def context_record(lm: LM, e: Example, context: str) -> dict[str, Any]:
    """Per-example context statistics: Table 3 (unigram precision of the context against the
    gold output, max over answers) and Fig. 6 (generator input tokens: query + context)."""
    n_q, n_ctx = count_tokens(lm, [e.question, context])
    return {"qid": e.qid, "question": e.question, "answers": list(e.answers), "context": context,
            "context_empty": not context.strip(),
            "context_precision": max((unigram_precision(context, a) for a in e.answers),
                                     default=0.0),
            "input_tokens": n_q + n_ctx, "context_tokens": n_ctx}


def run(run: Run, *, lm: LM, train: QASet, test: QASet, task: str, settings: FilcoSettings,
        corpus: Deferred, retriever: Deferred, cxmi_scorer: Deferred, seed: int,
        uncapped: Mapping[str, Any] | None = None) -> Result:
    """One setting (filco.setting) on one evaluation set (`test`, the `dataset` node), the
    filter and the generator fine-tuned from `lm` on `train`. `task` is the dataset's (used
    when filco.task=auto); corpus and retriever are built unless filco.passages=record;
    filco.stage=context stops after building the contexts (Table 3 / Fig. 6 need no generator).
    `uncapped`: the configured generation budgets the rehearsal capped (their checks read it)."""
    fc = settings
    setup = Setup.of(fc, task, lm, seed)
    with run.timed("data"):
        source = passage_retriever(fc, corpus, retriever)
        train_exs, test_exs = (load_examples(qa, source, fc.k, setup.task.name, fc.passages)
                               for qa in (train, test))
    # a shard (shard=i/n) evaluates whole batches of the test examples (filter and M_gen
    # batches of the unsharded run); each shard labels and trains on the whole train set
    mine = shards.items_of(run, len(test_exs), math.lcm(fc.gen_batch_size, fc.cxmi.batch_size))
    records, extra, sil_train = evaluate(setup, Labeller(setup, cxmi_scorer), train_exs,
                                         [test_exs[i] for i in mine], run,
                                         Budgets(setup, uncapped))
    metrics: dict[str, Any] = _aggregate(records, setup.task, fc.stage == "generate")
    metrics.update(summarize(records))  # gen_<stage>_* and diag_ctx_* rates
    if fc.setting.labels_train:  # Full needs no silver contexts
        metrics["silver_empty_train"] = sum(s.empty for s in sil_train) / max(1, len(sil_train))
    settings_row = {**_settings(setup, train, test, len(train_exs), len(test_exs),
                                retriever.name, cxmi_scorer.name), **index_row(source)}
    return Result(metrics=metrics, settings=settings_row, extra=extra)


def merge_shards(parts: Sequence[shards.Part], samples: list[dict[str, Any]],
                 out: Path) -> dict[str, Any]:
    """The run's metrics from its parts' samples (in test order): ragrepro/shards.py. The
    train-set figures (silver_empty_train) are the same in every part."""
    first = parts[0].metrics
    task = get_task(str(parts[0].settings["task"]))
    metrics: dict[str, Any] = _aggregate(samples, task, parts[0].settings["stage"] == "generate")
    metrics.update(summarize(samples))
    if "silver_empty_train" in first:
        metrics["silver_empty_train"] = first["silver_empty_train"]
    return metrics


def label(setup: Setup, labeller: Labeller, train: Sequence[Example],
          test: Sequence[Example]) -> Labelled:
    """The examples with the silver contexts the setting needs (empty ones elsewhere)."""
    variant = setup.fc.setting
    return Labelled(train, test,
                    labeller.silvers(train) if variant.labels_train else [Silver("")] * len(train),
                    labeller.silvers(test) if variant.labels_test else [Silver("")] * len(test))


def evaluate(setup: Setup, labeller: Labeller, train: Sequence[Example], test: Sequence[Example],
             run: Run, budgets: Budgets | None = None) -> tuple[list[dict], dict, list[Silver]]:
    """Contexts for the setting, then (stage=generate) the generator's predictions and scores.
    Per-sample records go to run.add_sample (a rerun skips the ones already written)."""
    variant, models, budgets = setup.fc.setting, Models(setup), budgets or Budgets(setup)
    needed = check_gen_budget(budgets, train)
    with run.timed("silver"):
        data = label(setup, labeller, train, test)
    needed.update(variant.filter_budgets(budgets, data))
    with run.timed("filter"):
        tc = variant.test_contexts(models, data)
    done = {r["qid"]: r for r in run.repair_samples()}
    records = context_records(setup, data, tc)
    extra: dict[str, Any] = {"filter_train": tc.info, "budgets_needed": needed,
                             "cxmi_threshold_note": CXMI_THRESHOLD_NOTE}
    if setup.fc.stage == "generate":
        with run.timed("generator"):
            contexts = variant.train_contexts(train, data.sil_train, setup.fc.fallback.gen_train)
            gen, extra["generator_train"] = models.fine_tune(
                "gen", gen_pairs(setup, train, contexts), variant.generator_role)
            _generate_and_record(setup, gen, test, tc.contexts, records, done, run)
    else:
        for r in records:
            if r["qid"] not in done:
                run.add_sample({"setting": variant.name, **r})
    return records, extra, list(data.sil_train)


def context_records(setup: Setup, data: Labelled, tc: TestContexts) -> list[dict[str, Any]]:
    """Per test example: the context statistics, the filtered context, its diagnostics
    (against the example's silver context where the setting labels the test set) and the
    filter's generation record."""
    with_silver = setup.fc.setting.labels_test
    records = [context_record(setup.lm, e, ctx) for e, ctx in zip(data.test, tc.contexts)]
    for i, (r, e) in enumerate(zip(records, data.test)):
        r["filtered_context"] = tc.filtered[i]
        r["diag"] = context_diag(tc.filtered[i], e.passages, e.answers, setup.split,
                                 data.sil_test[i].text if with_silver else None)
        r["generation"] = {"filter": tc.filter_generation[i]} if tc.filter_generation else {}
    return records


_DONE_KEYS = ("raw_output", "prediction", "score", "prediction_code", "score_code")


def _take_done(records: list[dict], done: dict[str, dict]) -> list[int]:
    """Fills the records a killed run already wrote from samples.jsonl; the indices left."""
    todo = []
    for i, r in enumerate(records):
        prev = done.get(r["qid"], {})
        if "raw_output" in prev:
            r.update({k: prev[k] for k in _DONE_KEYS + (("generation",) if "generation" in prev
                                                         else ())})
        else:
            todo.append(i)
    return todo


def _generate_and_record(setup: Setup, gen: LM, test: Sequence[Example],
                         contexts: Sequence[str], records: list[dict], done: dict[str, dict],
                         run: Run) -> None:
    """M_gen predictions, batch by batch; each finished batch is written at once, and examples
    already in samples.jsonl (a killed run) are taken from there instead of regenerated."""
    fc, task = setup.fc, setup.task
    todo = _take_done(records, done)
    bs = fc.gen_batch_size
    for b in tqdm(range(0, len(todo), bs), desc="M_gen", leave=False):
        idx = todo[b:b + bs]
        enc = [prompt_ids_truncated(gen, prompts.gen_prompt(
            task, test[i].question, contexts[i], fc.gen_format, fc.ctx_answer_prefix),
            fc.max_input_tokens) for i in idx]
        outs = gen.generate_with_finish([ids for ids, _ in enc],
                                        max_new_tokens=fc.gen_max_new_tokens, batch_size=bs)
        for i, (ids, cut), (out_ids, finish) in zip(idx, enc, outs):
            r = records[i]
            raw = gen.decode(out_ids, skip_special_tokens=True)
            pred = prompts.clean_output(raw.strip())
            r["generation"] = {**r.get("generation", {}), "answer": record(
                finish, len(ids), len(out_ids), truncated=cut, prediction=pred)}
            # score_code: the prediction as the official scripts extract it (query.py or
            # query_llama.py, then eval.py's clean_output) under eval.py's metric
            pred_code = official_prediction(raw, gen.kind)
            r.update(raw_output=raw.strip(), prediction=pred,
                     score=get_metric(task.metric).fn(pred, r["answers"]),
                     prediction_code=pred_code,
                     score_code=get_metric(task.metric_code).fn(pred_code, r["answers"]))
            run.add_sample({"setting": fc.setting.name, **r})


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def _aggregate(records: Sequence[dict], task: Task, with_scores: bool) -> dict[str, Any]:
    """Means over the evaluated examples. `score`, `score_code`, `context_precision` are x100
    (filco.tables); the columns named after the metric (em_squad, em_filco_code, ...,
    unigram_precision) are fractions, the unit of conf/report/metrics.yaml."""
    m = {"context_precision": 100 * _mean([r["context_precision"] for r in records]),
         "unigram_precision": _mean([r["context_precision"] for r in records]),
         "input_tokens": _mean([r["input_tokens"] for r in records]),
         "context_tokens": _mean([r["context_tokens"] for r in records]),
         "context_empty": _mean([float(r["context_empty"]) for r in records])}
    if with_scores:
        m["score"] = 100 * _mean([r["score"] for r in records])
        m["score_code"] = 100 * _mean([r["score_code"] for r in records])
        m["metric"] = task.metric
        m["metric_code"] = task.metric_code
        # the same numbers under the metric's own name, for the report's paper tables
        m[task.metric] = _mean([r["score"] for r in records])
        m[task.metric_code] = _mean([r["score_code"] for r in records])
    return m


# `filco.pipeline.run` runs in shards (shard=i/n, batches of test examples): ragrepro/shards.py
run = shards.shardable(merge_shards)(run)
