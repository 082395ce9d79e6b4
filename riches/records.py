"""The per-question record every RICHES variant writes (samples.jsonl) and its means."""
from __future__ import annotations

from typing import Any

import numpy as np

from ragrepro import generation
from ragrepro.data.records import QARecord
from ragrepro.metrics.qa import em_squad, f1_squad


def sample_record(rec: QARecord, answer: str, evidence: str, titles: list[str],
                  extra: dict) -> dict[str, Any]:
    gold = {t for t in rec.gold_titles}
    return {"qid": rec.qid, "question": rec.question, "answers": rec.answers, "hops": rec.hops,
            "gold_titles": rec.gold_titles, "prediction": answer, "evidence": evidence,
            "retrieved_titles": titles,
            "f1_squad": f1_squad(answer, rec.answers), "em_squad": em_squad(answer, rec.answers),
            "gold_title_recall": (len(gold & set(titles)) / len(gold)) if gold else None,
            **extra}


def sample_metrics(samples: list[dict], decoded_keys: bool) -> dict[str, Any]:
    """Means over the per-question records. `keys_per_answer` counts closed keys only (a
    key cut off by the budget retrieved nothing); `verbatim_rate` (share of opened keys
    found verbatim in the corpus) exists only for methods that decode keys (RICHES and its
    no-retrieval ablation); the retrieve-then-read baselines copy passages, so the column
    is left out for them (not applicable), never set to 1. The generation diagnostics
    (ragrepro.generation.summarize: gen_answer_length, gen_answer_empty, diag_keys_closed,
    ...) come from each sample's `generation` and `diag` mappings."""
    n = len(samples)
    keys = sum(s.get("n_keys", 0) for s in samples)  # closed keys (or retrieved passages)
    recalls = [s["gold_title_recall"] for s in samples if s.get("gold_title_recall") is not None]
    metrics: dict[str, Any] = {
        "f1_squad": float(np.mean([s["f1_squad"] for s in samples])) if n else float("nan"),
        "em_squad": float(np.mean([s["em_squad"] for s in samples])) if n else float("nan"),
        "keys_per_answer": keys / n if n else float("nan"),
        "gold_title_recall": float(np.mean(recalls)) if recalls else float("nan"),
        "seconds_per_question": float(np.mean([s.get("seconds", 0.0) for s in samples])) if n else 0.0,
        "n": n,
    }
    if decoded_keys:
        verb = sum(s.get("keys_verbatim", 0) for s in samples)
        opened = sum(_opened(s) for s in samples)
        metrics["verbatim_rate"] = verb / opened if opened else float("nan")
    metrics.update(generation.summarize(samples))
    return metrics


def _opened(sample: dict) -> int:
    """Keys a generation opened (closed or not); a sample from before `diag` counted every
    opened key in n_keys."""
    diag = sample.get("diag") or {}
    return int(diag.get("keys_opened", sample.get("n_keys", 0)))
