"""The RICHES experiment targets, one per variant of the main table (§5.4, §6.2).

conf/riches/method/<variant>.yaml names one of them as the experiment's `pipeline` and the
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragrepro.data.records import QARecord
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval import Corpus, Retriever, index_row
from ragrepro.tracking import Run

from .attribution import attribution
from .baselines import RowMatch, dense_k, run_dense, run_iterative
from .budgets import check_iterative, check_reader
from .decoding import run_decoding
from .inputs import Inputs, prepare
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
    metrics = sample_metrics(ordered, decoded_keys=method in ("riches", "no_retrieval"))
    ais, ais_settings = attribution(run, settings.autoais, inputs.lm, ordered)
    metrics.update(ais)
    row.update(ais_settings)
    return Result(metrics=metrics, settings=row)
