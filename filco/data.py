"""Loading FilCo examples: QA records from `ragrepro.data.loaders`, top-k passages from the
record itself (DPR files, HotpotQA distractors) or from the configured retriever."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragrepro.errors import ConfigError

from .silver import Example

log = logging.getLogger(__name__)

# dataset name -> FilCo task (measure, metric, prompt fields)
DATASET_TASKS = {"nq-open": "nq", "nq-open-dpr": "nq", "triviaqa": "tqa", "triviaqa-dpr": "tqa",
                 "hotpotqa": "hotpotqa", "eli5": "eli5", "fever": "fever", "wow": "wow",
                 "vital-qa": "qa", "vital-qa-bridge": "qa", "fanout-grounded": "qa",
                 "local_qa": "qa"}


def task_for(dataset: str, task: str = "auto") -> str:
    if task != "auto":
        return task
    if dataset not in DATASET_TASKS:
        raise ConfigError(f"No FilCo task known for dataset {dataset!r}: set filco.task to one "
                          f"of nq, tqa, hotpotqa, eli5, fever, wow, qa.")
    return DATASET_TASKS[dataset]


def dataset_conf(name: str) -> dict[str, Any]:
    """conf/dataset/<name>.yaml as a dict ({} for a name without a config file)."""
    from omegaconf import OmegaConf

    from ragrepro.configcheck import group_options
    from ragrepro.named_configs import group_config

    if name not in group_options("dataset"):
        return {}
    return dict(OmegaConf.to_container(group_config("dataset", name), resolve=False))  # type: ignore[arg-type]


def default_split(name: str) -> str:
    """The split named in conf/dataset/<name>.yaml (fanout-grounded: dev; most: test)."""
    return str(dataset_conf(name).get("split") or "test")


def dataset_variant(name: str) -> str | None:
    """The `variant` of conf/dataset/<name>.yaml (vital-qa: the embedded file's version)."""
    v = dataset_conf(name).get("variant")
    return None if v is None else str(v)


def data_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The row columns that name an evaluation set: FilCo reads its data from filco.eval_data,
    not from the `dataset` config group, so these replace the root defaults."""
    name = str(spec["name"])
    return {"dataset": name, "dataset_variant": dataset_variant(name),
            "split": spec.get("split") or default_split(name), "limit": spec.get("limit"),
            "dataset_path": spec.get("path"), "dataset_hops": spec.get("hops")}


def load_records(spec: Mapping[str, Any]) -> list:
    from ragrepro.data.loaders import load_qa

    kw = {k: spec.get(k) for k in ("name", "split", "path", "limit", "hops")}
    if not kw["name"]:
        raise ConfigError("A FilCo data spec needs a `name` (e.g. vital-qa).")
    kw["split"] = kw["split"] or default_split(kw["name"])
    return load_qa(**{k: v for k, v in kw.items() if v is not None or k == "limit"})


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
