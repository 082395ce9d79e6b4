"""Loading FilCo examples: QA records of a dataset named by its config (conf/dataset/<name>.yaml,
read through `ragrepro.data.catalog`), top-k passages from the record itself (DPR files,
HotpotQA distractors) or from the configured retriever. The FilCo task of a dataset is the
`task` key of its YAML."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragrepro.data.catalog import dataset_property, has_dataset, load_named
from ragrepro.errors import ConfigError

from .silver import Example
from .tasks import TASKS

log = logging.getLogger(__name__)


def task_for(dataset: str, task: str = "auto") -> str:
    """`filco.task`, or with `auto` the `task` of conf/dataset/<dataset>.yaml."""
    if task != "auto":
        return task
    found = has_dataset(dataset) and dataset_property(dataset, "task")
    if found not in TASKS:
        raise ConfigError(f"No FilCo task known for dataset {dataset!r}: set filco.task to one "
                          f"of nq, tqa, hotpotqa, eli5, fever, wow, qa.")
    return str(found)


def default_split(name: str) -> str:
    """The split named in conf/dataset/<name>.yaml (fanout-grounded: dev; most: test)."""
    return str((has_dataset(name) and dataset_property(name, "split")) or "test")


def dataset_variant(name: str) -> str | None:
    """The `variant` of conf/dataset/<name>.yaml (vital-qa: the embedded file's version)."""
    v = dataset_property(name, "variant") if has_dataset(name) else None
    return None if v is None else str(v)


def data_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The row columns that name an evaluation set: FilCo reads its data from filco.eval_data,
    not from the `dataset` config group, so these replace the root defaults."""
    name = str(spec["name"])
    return {"dataset": name, "dataset_variant": dataset_variant(name),
            "split": spec.get("split") or default_split(name), "limit": spec.get("limit"),
            "dataset_path": spec.get("path"), "dataset_hops": spec.get("hops")}


def load_records(spec: Mapping[str, Any]) -> list:
    """The records of conf/dataset/<spec.name>.yaml with the spec's split, path, limit, hops."""
    name = spec.get("name")
    if not name:
        raise ConfigError("A FilCo data spec needs a `name` (e.g. vital-qa).")
    kw = {k: spec.get(k) for k in ("split", "path", "limit", "hops")}
    kw["split"] = kw["split"] or default_split(str(name))
    return load_named(str(name), **{k: v for k, v in kw.items() if v is not None or k == "limit"})


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


def retrieve(records: Sequence[Any], retriever: Any, k: int, mode: str = "auto") -> list[list[Any]]:
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


def load_examples(spec: Mapping[str, Any], retriever: Any, k: int, task: str,
                  mode: str = "auto") -> list[Example]:
    records = load_records(spec)
    return to_examples(records, retrieve(records, retriever, k, mode), task, k)
