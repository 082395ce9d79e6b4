"""FilCo Table 2: recall of the top-k retrieved passages and unigram precision of the positive
passages against the output. No model; one run = one dataset and k = one CSV row."""
from __future__ import annotations

from ragrepro.deferred import Deferred
from ragrepro.metrics.qa import unigram_precision
from ragrepro.pipeline import Result
from ragrepro.retrieval import index_row
from ragrepro.tracking import Run

from .data import QASet, load_examples
from .pipeline import _join, _mean, passage_retriever, task_of
from .settings import FilcoSettings
from .silver import answer_in


def recall_kind(task: str) -> str:
    """Table 2 recall: `answer` (answer string in a passage: NQ, TQA and the short-answer
    mini sets) or `title` (a gold / provenance article among the passages: KILT tasks)."""
    return "answer" if task in ("nq", "tqa", "qa") else "title"


def run_retrieval(run: Run, *, test: QASet, task: str, settings: FilcoSettings,
                  corpus: Deferred, retriever: Deferred) -> Result:
    """Recall of the top-k passages (answer string in a passage; gold title among them) and
    unigram precision of the positive passages against the output (Table 2), on `test` (the
    `dataset` node); filco.k, filco.passages and filco.task (auto: the dataset's) apply."""
    fc, the_task = settings, task_of(settings, task)
    source = passage_retriever(fc, corpus, retriever)
    examples = load_examples(test, source, fc.k, the_task.name, fc.passages)
    recs = []
    for e in examples:
        pos = [p for p in e.passages if answer_in(p, e.answers)]
        rec = {"qid": e.qid, "recall_answer": float(bool(pos)),
               "recall_title": float(any(t in set(e.gold_titles) for t in e.titles)),
               "titles": list(e.titles)}
        if pos:
            rec["precision"] = max(unigram_precision(_join(pos), a) for a in e.answers)
        recs.append(rec)
        run.add_sample(rec)
    metrics = {"recall_answer": 100 * _mean([r["recall_answer"] for r in recs]),
               "recall_title": 100 * _mean([r["recall_title"] for r in recs]),
               "precision": 100 * _mean([r["precision"] for r in recs if "precision" in r])}
    # the report's Table 2 columns (fractions): the paper's recall is the answer string for
    # NQ / TQA and a KILT provenance article for the others (reference §7)
    kind = recall_kind(the_task.name)
    metrics["recall_at_k"] = metrics[f"recall_{kind}"] / 100
    metrics["unigram_precision"] = metrics["precision"] / 100
    row = {**test.row(), "recall_at_k_kind": kind, "top_k": fc.k, "k": fc.k,
           "task": the_task.name, "eval_dataset": test.name, "eval_split": test.split,
           "eval_limit": test.limit, "retriever": retriever.name, "n_eval": len(examples),
           **index_row(source)}
    return Result(metrics=metrics, settings=row)
