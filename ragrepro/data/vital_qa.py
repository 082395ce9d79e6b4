"""`vital-qa`: the embedded hand-written QA set over wiki-vital leads (see docs/datasets.md)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..io import iter_jsonl
from .common import check_split, finish_qa
from .records import QARecord

VITAL_QA_FILE = "vital_qa.jsonl"
# Version of the embedded vital-qa file; conf/dataset/vital-qa*.yaml record it as `variant`.
# v2: article-disjoint train/dev/test splits (v1 split by qid and shared gold articles).
VITAL_QA_VERSION = "embedded-v2"
VITAL_QA_FIELDS = ("qid", "question", "answers", "gold_titles", "hops", "split")


def vital_qa_path() -> Path:
    return Path(str(resources.files("ragrepro.data") / "embedded" / VITAL_QA_FILE))


def load_vital_qa(split: str = "test", hops: int | None = None) -> list[QARecord]:
    """The records of one split (`all`: every split), optionally only those with `hops` hops."""
    check_split(split)
    out = []
    for r in iter_jsonl(vital_qa_path(), required=VITAL_QA_FIELDS):
        if split != "all" and r["split"] != split:
            continue
        if hops is not None and int(r["hops"]) != int(hops):
            continue
        out.append(QARecord(qid=r["qid"], question=r["question"], answers=list(r["answers"]),
                            gold_titles=list(r["gold_titles"]), task="qa", hops=int(r["hops"]),
                            split=r["split"], meta={"bridge_entity": r.get("bridge_entity"),
                                                    "topic": r.get("topic"),
                                                    "source": "vital-qa"}))
    return out


def vital_qa(*, name: str, task: str, variant: str, split: str, limit: int | None,
             hops: int | None) -> list[QARecord]:
    """Loader of conf/dataset/vital-qa.yaml and vital-qa-bridge.yaml (hops: 2)."""
    return finish_qa(load_vital_qa(split, hops), name, split, limit, hops)
