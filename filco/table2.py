"""FilCo Table 2: recall of the top-k retrieved passages and unigram precision of the positive
passages against the output. No model; one run = one dataset and k = one CSV row."""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ragrepro.metrics.qa import unigram_precision
from ragrepro.pipeline import Result
from ragrepro.tracking import Run

from .data import data_settings, default_split
from .pipeline import _join, _mean, build_ctx, load_data


def recall_kind(task: str) -> str:
    """Table 2 recall: `answer` (answer string in a passage: NQ, TQA and the short-answer
    mini sets) or `title` (a gold / provenance article among the passages: KILT tasks)."""
    return "answer" if task in ("nq", "tqa", "qa") else "title"


def run_retrieval(cfg: DictConfig, run: Run) -> Result:
    """Recall of the top-k passages (answer string in a passage; gold title among them) and
    unigram precision of the positive passages against the output (Table 2)."""
    from .silver import answer_in

    c = build_ctx(cfg, load_model=False)
    test = load_data(c, "eval_data")
    recs = []
    for e in test:
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
    kind = recall_kind(c.task.name)
    metrics["recall_at_k"] = metrics[f"recall_{kind}"] / 100
    metrics["unigram_precision"] = metrics["precision"] / 100
    eval_spec = OmegaConf.to_container(c.fc.eval_data, resolve=True)
    settings = {**data_settings(eval_spec), "recall_at_k_kind": kind,  # type: ignore[arg-type]
                "top_k": c.k, "k": c.k, "task": c.task.name, "eval_dataset": c.fc.eval_data.name,
                "eval_split": c.fc.eval_data.split or default_split(c.fc.eval_data.name),
                "eval_limit": c.fc.eval_data.get("limit"),
                "retriever": cfg.retriever.get("name"), "n_eval": len(test)}
    return Result(metrics=metrics, settings=settings)
