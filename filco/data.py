"""FilCo's question sets and examples: QA records from a composed dataset config node (its
`_target_`, conf/dataset/<name>.yaml), top-k passages from the record itself (DPR files,
HotpotQA distractors) or from the configured retriever. A dataset's FilCo task is the `task`
key of its YAML (the pipeline configs interpolate `${dataset.task}`)."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragrepro.data.records import QARecord
from ragrepro.errors import ConfigError
from ragrepro.retrieval.base import Retriever

from .silver import Example

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class QASet:
    """Question records and the dataset facts a row names them by (from the dataset node)."""

    records: tuple[QARecord, ...]
    name: str
    variant: str | None
    split: str
    limit: int | None
    path: str | None
    hops: int | None

    def row(self) -> dict[str, Any]:
        """The row columns that name this set (they replace the runner's `dataset` columns)."""
        return {"dataset": self.name, "dataset_variant": self.variant, "split": self.split,
                "limit": self.limit, "dataset_path": self.path, "dataset_hops": self.hops}


def load_split(dataset: Mapping[str, Any], **overrides: Any) -> QASet:
    """The records of a composed dataset config node (conf/dataset/<name>.yaml), with
    `overrides` (e.g. split=train, limit=32) replacing its arguments. Hydra hands the node over
    unbuilt (`_recursive_: false`) so that the overrides apply before it loads."""
    node = OmegaConf.to_container(dataset, resolve=True) if isinstance(dataset, DictConfig) \
        else dict(dataset)
    node = {**node, **overrides}  # type: ignore[dict-item]
    if not node.get("name"):
        raise ConfigError("A FilCo question set needs a dataset node with a `name` (e.g. "
                          "dataset=vital-qa).")
    records = tuple(instantiate(node, _convert_="all"))
    # dataset facts: keys of the dataset's own YAML, absent for some datasets
    return QASet(records, str(node["name"]), node.get("variant"), str(node["split"]),
                 node.get("limit"), node.get("path"), node.get("hops"))


def to_examples(records: Sequence[Any], passages: Sequence[Sequence[Any]], task: str,
                k: int) -> list[Example]:
    """Pure: records + their ranked passages (objects with .title/.text) -> Examples."""
    out = []
    for r, ps in zip(records, passages):
        ps = list(ps)[:k]
        out.append(Example(qid=r.qid, question=r.question, answers=tuple(r.answers),
                           passages=tuple(p.text for p in ps), task=task,
                           titles=tuple(p.title for p in ps), gold_titles=tuple(r.gold_titles)))
    return out


def retrieve(records: Sequence[Any], retriever: Retriever | None, k: int,
             mode: str = "auto") -> list[list[Any]]:
    """Ranked passages per record. mode: auto (the record's own passages when it has k of
    them, else the retriever), record, retriever."""
    if mode not in ("auto", "record", "retriever"):
        raise ConfigError(f"filco.passages={mode!r}; use auto, record or retriever.")
    own = [list(r.passages) for r in records]
    if mode == "record" or (mode == "auto" and all(len(p) >= k for p in own)):
        if any(not p for p in own):
            raise ConfigError("Some records have no passages; set filco.passages=retriever.")
        return own
    if retriever is None:
        raise ConfigError("These records carry no passages and no retriever is configured.")
    return retriever.search([r.question for r in records], k)


def load_examples(qa: QASet, retriever: Retriever | None, k: int, task: str,
                  mode: str = "auto") -> list[Example]:
    return to_examples(qa.records, retrieve(qa.records, retriever, k, mode), task, k)
