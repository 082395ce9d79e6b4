"""The RICHES experiment targets, one per variant of the main table (§5.4, §6.2).

riches/conf/riches/method/<variant>.yaml names one of them as the experiment's `pipeline` and the
components Hydra builds for it (the LM, the questions, the corpus, a retriever factory, the
typed `riches:` settings), so `riches/method=dense_reader` chooses a variant:

- riches: constrained interleaved decoding (riches/decoding.py, riches/beam.py).
- no_retrieval: the same prompt and decoder with nothing constrained; its "keys" are
  hallucinated, so their verbatim rate is reported, not assumed.
- dense_reader, iterative: the retrieve-then-read baselines (riches/baselines.py); they
  decode no keys, so their rows have no verbatim rate.

Per-sample records go to samples.jsonl first (the resume checkpoint); AutoAIS and the
aggregates are computed from them at the end.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro import shards
from ragrepro.data.records import QARecord
from ragrepro.metrics import judging
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval import Corpus, Retriever, index_row
from ragrepro.tracking import Run

from .attribution import attribution
from .baselines import RowMatch, dense_k, run_dense, run_iterative
from .budgets import check_iterative, check_reader
from .decoding import run_decoding
from .inputs import Inputs
from .inputs import prepare as prepare_all
from .records import sample_metrics
from .settings import RichesSettings

# a retriever config built by Hydra with `_partial_: true`: called with the corpus the
# pipeline already holds, so a run loads its corpus once
RetrieverFactory = Callable[..., Retriever]
# the rehearsal's record of the budgets it capped (dotted key -> configured value), or None:
# every variant checks its configured budget against its prompt (riches/budgets.py)
Uncapped = Mapping[str, Any] | None


def riches(run: Run, *, lm: LM, records: Sequence[QARecord], corpus: Corpus,
           settings: RichesSettings, hops: int | None, uncapped: Uncapped = None) -> Result:
    """RICHES: retrieval keys decoded under the corpus constraint."""
    return _decoded("riches", run, lm, records, corpus, settings, hops, uncapped)


def no_retrieval(run: Run, *, lm: LM, records: Sequence[QARecord], corpus: Corpus,
                 settings: RichesSettings, hops: int | None, uncapped: Uncapped = None) -> Result:
    """The RICHES prompt and decoder without the constraint (the paper's no-retrieval row)."""
    return _decoded("no_retrieval", run, lm, records, corpus, settings, hops, uncapped)


def dense_reader(run: Run, *, lm: LM, records: Sequence[QARecord], corpus: Corpus,
                 retriever: RetrieverFactory, settings: RichesSettings, hops: int | None,
                 dataset: str, limit: int | None, uncapped: Uncapped = None) -> Result:
    """Retriever top-k + few-shot reader; `k: auto` takes k from the RICHES row of the same
    question set in this experiment's CSV, so run it after RICHES."""
    inputs = prepare(run, lm, records, corpus, settings)
    needed = check_reader(settings, inputs.prompt, lm, uncapped)
    k, k_source = dense_k(settings.dense, run.csv_path, RowMatch(dataset, lm.name, limit, hops))
    built = retriever(corpus=corpus)
    run_dense(run, inputs, built, k, settings.reader_max_new_tokens)
    return finish(run, "dense_reader", inputs, settings, corpus.name, hops,
                  {"k": k, "k_source": k_source, "retriever": built.name, **index_row(built),
                   "max_new_tokens": settings.reader_max_new_tokens,
                   "max_new_tokens_needed": needed})


def iterative(run: Run, *, lm: LM, records: Sequence[QARecord], corpus: Corpus,
              retriever: RetrieverFactory, settings: RichesSettings, hops: int | None,
              uncapped: Uncapped = None) -> Result:
    """Self-ask follow-up questions, one top-1 retrieval each, then an answer."""
    inputs = prepare(run, lm, records, corpus, settings)
    needed = check_iterative(settings, inputs.prompt, lm, uncapped)
    built = retriever(corpus=corpus)
    run_iterative(run, inputs, built, settings.iterative)
    return finish(run, "iterative", inputs, settings, corpus.name, hops,
                  {"k": 1, "retriever": built.name, **index_row(built),
                   "max_steps": settings.iterative.max_steps,
                   "max_new_tokens": settings.iterative.max_new_tokens,
                   "max_new_tokens_needed": needed})


def prepare(run: Run, lm: LM, records: Sequence[QARecord], corpus: Corpus,
            settings: RichesSettings) -> Inputs:
    """The inputs of every variant; a shard (shard=i/n) answers its own range of the
    questions (one at a time, as the unsharded run does) and is merged by `merge_shards`."""
    inputs = prepare_all(run, lm, records, corpus, settings)
    if shards.part_of(run) is None:
        return inputs
    mine = {inputs.records[i].qid for i in shards.items_of(run, len(inputs.records))}
    return dataclasses.replace(inputs, todo=[r for r in inputs.todo if r.qid in mine])


def _decoded(method: str, run: Run, lm: LM, records: Sequence[QARecord], corpus: Corpus,
             settings: RichesSettings, hops: int | None, uncapped: Uncapped) -> Result:
    inputs = prepare(run, lm, records, corpus, settings)
    row = run_decoding(run, inputs, settings, corpus.name, method, uncapped)
    return finish(run, method, inputs, settings, corpus.name, hops, row)


def finish(run: Run, method: str, inputs: Inputs, settings: RichesSettings, corpus_name: str,
           hops: int | None, method_settings: dict[str, Any]) -> Result:
    """Metrics over the run's samples (in question order) and AutoAIS; the row settings."""
    row: dict[str, Any] = {"riches_method": method, "prompt": inputs.prompt.get("name"),
                           "n_questions": len(inputs.records), "corpus": corpus_name,
                           "dataset_hops": hops, **method_settings}
    samples = {r["qid"]: r for r in run.done_samples()}
    ordered = [samples[r.qid] for r in inputs.records if r.qid in samples]
    metrics = sample_metrics(ordered, decoded_keys=method in DECODES_KEYS)
    ais, ais_settings = attribution(run, settings.autoais, inputs.lm, ordered)
    metrics.update(ais)
    row.update(ais_settings)
    return Result(metrics=metrics, settings=row)


DECODES_KEYS = ("riches", "no_retrieval")
MEAN_SCORE = "_mean_score"  # ragrepro.metrics.judging.judge_samples: <result key>_mean_score


def merge_shards(parts: Sequence[shards.Part], samples: list[dict[str, Any]],
                 out: Path) -> dict[str, Any]:
    """The run's metrics from its parts (ragrepro/shards.py): the means over the merged
    samples, and AutoAIS recomputed from the merged per-question judgements (autoais.jsonl)
    as judging.judge_samples computes it."""
    method = parts[0].settings.get("riches_method")
    metrics = sample_metrics(samples, decoded_keys=method in DECODES_KEYS)
    keys = {k[:-len(MEAN_SCORE)] for p in parts for k in p.metrics if k.endswith(MEAN_SCORE)}
    scores = out / "autoais.jsonl"
    if keys and scores.is_file():
        lines = [json.loads(x) for x in scores.read_text(encoding="utf-8").splitlines() if x]
        for key in sorted(keys):
            metrics[key] = float(np.mean([x["attributed"] for x in lines])) if lines \
                else float("nan")
            metrics[key + MEAN_SCORE] = judging.soft_score(lines)
    return metrics


# every RICHES variant runs in shards (shard=i/n, questions): ragrepro/shards.py
for _variant in (riches, no_retrieval, dense_reader, iterative):
    shards.shardable(merge_shards)(_variant)
