"""Hugging Face hub datasets: the real loading path for users with network access, and a clear
OfflineError (how to get the data, what to use instead) on a machine without it. The loaders
`hub_qa` (any QA dataset on the hub: repo, config, split policy and a named row converter from
its YAML) and `wikitext` are conf/dataset/*.yaml `_target_`s."""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import sources
from ..errors import ConfigError, DataError, OfflineError
from ..io import iter_jsonl
from ..lock import check_loaded, hub_commit, is_commit
from .common import EMBEDDED_LM, EMBEDDED_QA, finish_docs, finish_qa, need_path
from .converters import get_converter
from .local import read_text_docs
from .records import LMDoc, QARecord

log = logging.getLogger(__name__)

# The split policy of a hub QA dataset lives in its YAML (conf/dataset/nq-open.yaml ...):
# `split_map` maps our split names to the hub's. Test answers of NQ-open (= DPR's nq-test),
# TriviaQA (DPR uses the unfiltered validation set as test), HotpotQA distractor and the KILT
# tasks are the public validation sets; FilCo reports KILT dev results. So `test` reads
# `validation`, and `dev` cannot read it too (tuning on dev would be tuning on test):
# `heldout_dev` makes dev a seeded held-out part of `train` (1 row in `every`), `train-nodev`
# the rest; `train` stays the whole hub split, as the papers trained on it.


@dataclass(frozen=True)
class HeldoutDev:
    """dev = the train rows whose sha256("seed:index") is 0 modulo `every`."""

    every: int
    seed: str


def in_heldout_dev(index: int, heldout: HeldoutDev) -> bool:
    """Whether train row `index` belongs to the held-out dev split (a hash, not the row order,
    so dev is spread over the file and stable across machines)."""
    digest = hashlib.sha256(f"{heldout.seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % heldout.every == 0


def dev_partition(n_rows: int, split: str, heldout: HeldoutDev) -> list[int] | None:
    """Row indices of `train` for split dev / train-nodev; None for every other split."""
    if split == "dev":
        return [i for i in range(n_rows) if in_heldout_dev(i, heldout)]
    if split == "train-nodev":
        return [i for i in range(n_rows) if not in_heldout_dev(i, heldout)]
    return None


def split_source(split: str, hub_split: str, heldout: HeldoutDev | None) -> str:
    """What a row records as the source of its split."""
    if heldout is not None and split == "dev" and hub_split == "train":
        return f"train (held-out dev: 1 row in {heldout.every}, {heldout.seed})"
    if heldout is not None and split == "train-nodev":
        return f"train (without the held-out dev rows, {heldout.seed})"
    return hub_split


def heldout_of(value: Mapping[str, Any] | None) -> HeldoutDev | None:
    """The YAML's `heldout_dev: {every, seed}` (or null) as a HeldoutDev."""
    return None if value is None else HeldoutDev(every=int(value["every"]),
                                                 seed=str(value["seed"]))


def offline_message(what: str, instead: str) -> str:
    return (f"{what} is not available offline (not in the Hugging Face cache and hub access is "
            f"off). On a machine with network access run the same command once with "
            f"HF_DATASETS_OFFLINE=0 HF_HUB_OFFLINE=0 to download and cache it, or give a local "
            f"file with dataset.path=... . To run without it, use the embedded {instead}.")


def is_offline_error(err: BaseException) -> bool:
    text = f"{type(err).__name__} {err}"
    return (isinstance(err, ConnectionError) or "Offline" in text or "offline" in text
            or "Couldn't reach" in text or "couldn't connect" in text.lower())


def load_hub_split(repo: str, config: str | None, split: str, instead: str,
                   split_map: Mapping[str, str], heldout: HeldoutDev | None,
                   revision: str | None = None) -> tuple[Any, str]:
    """(rows, source of the split: the hub split, or how dev was carved out of train).
    Raises OfflineError when the data cannot be fetched."""
    hub_split = split_map.get(split, split)
    rows = _load_hub_rows(repo, config, hub_split, instead, revision)
    part = dev_partition(len(rows), split, heldout) if heldout and hub_split == "train" else None
    if part is not None:
        rows = rows.select(part)
    return rows, split_source(split, hub_split, heldout)


def commit_of_rows(rows: Any) -> str | None:
    """The repo commit a loaded hub dataset came from: datasets names its cache folder
    `<org>___<name>/<config>/<version>/<commit>/` (also what an offline load finds)."""
    for f in getattr(rows, "cache_files", None) or []:
        for part in reversed(Path(str(f.get("filename", ""))).parts):
            if is_commit(part):
                return part
    return None


def _load_hub_rows(repo: str, config: str | None, hub_split: str, instead: str,
                   revision: str | None = None) -> Any:
    import datasets  # deferred: datasets (seconds to import; only a hub dataset needs it)

    what = f"Dataset {repo}" + (f" ({config})" if config else "") + f" split {hub_split!r}"
    fixture = sources.current().hub_file(repo, config, hub_split)
    if fixture is not None:  # same rows schema and split names, read from a local file
        if not fixture.exists():
            raise DataError(f"{what}: this split does not exist on the hub (no fixture "
                            f"{fixture}); use one of the hub's split names.")
        rows = datasets.load_dataset("json", data_files={hub_split: str(fixture)},
                                     split=hub_split)
        log.info("Loaded %s from the rehearsal fixture: %d rows", what, len(rows))
        return rows
    try:
        rows = datasets.load_dataset(repo, config, split=hub_split, revision=revision)
    except Exception as e:
        if is_offline_error(e) or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise OfflineError(offline_message(what, instead)) from e
        raise DataError(f"{what}: could not be loaded ({type(e).__name__}: {e}).") from e
    resolved = hub_commit(repo, revision, "dataset") or commit_of_rows(rows)
    log.info("Loaded %s @ %s: %d rows", what, resolved or revision or "main", len(rows))
    check_loaded("dataset", repo, revision, resolved)
    return rows


# ---- loaders (conf/dataset/*.yaml `_target_`s) -------------------------------------------
def hub_qa(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
           repo: str, config: str | None, converter: str, split_map: Mapping[str, str],
           heldout_dev: Mapping[str, Any] | None, path: str | None = None,
           local_fields: list[str] | None = None, file_help: str = "",
           hops: int | None = None, revision: str | None = None) -> list[QARecord]:
    """QA records of a hub dataset: rows of `repo`/`config` in the hub's schema, split `split`
    read from `split_map[split]` (dev carved out of train by `heldout_dev`), each row turned
    into a QARecord by `converter` (ragrepro.data.converters). Only the first `limit` rows are
    converted. With `path`, rows come from a local JSONL in the same schema (allowed when the
    YAML lists the `local_fields` every row needs, e.g. MuSiQue's official release).
    `revision` (default main) is the hub revision; rows record the commit it resolved to."""
    conv = get_converter(converter)
    if path:
        if local_fields is None:
            raise ConfigError(f"dataset {name!r} loads from the hub; for a local copy convert "
                              f"it to the QARecord schema and use dataset=local_qa.")
        rows = iter_jsonl(need_path(name, path, file_help), required=tuple(local_fields))
        records = [conv(r, i, split, config) for i, r in enumerate(rows)]
        return finish_qa(records, name, split, limit, hops)
    table, source = load_hub_split(repo, config, split, EMBEDDED_QA, split_map,
                                   heldout_of(heldout_dev), revision)
    n = len(table) if limit is None else min(len(table), int(limit))
    records = []
    for i in range(n):
        rec = conv(table[i], i, split, config)
        rec.meta["hub_split"] = source
        records.append(rec)
    return finish_qa(records, name, split, limit, hops)


WIKITEXT_VARIANTS = ("wikitext-103-v1", "wikitext-103-raw-v1")


def join_wikitext_rows(texts: Iterable[str]) -> str:
    """The official eval_lm.py join: rows concatenated with "", an empty row becomes " \\n"."""
    return "".join(t if t else " \n" for t in texts)


def wikitext(*, name: str, task: str, variant: str, split: str, limit: int | None, repo: str,
             split_map: Mapping[str, str], path: str | None = None,
             file_help: str = "", revision: str | None = None) -> list[LMDoc]:
    """WikiText (hub config = `variant`) as one document: the split's rows joined as the
    official eval_lm.py joins them; or a local text dump of the split (`path`)."""
    if variant not in WIKITEXT_VARIANTS:
        raise ConfigError(f"wikitext-103 variant {variant!r}; use one of "
                          f"{list(WIKITEXT_VARIANTS)} (the official RALM README uses "
                          f"wikitext-103-v1, tokenized with <unk>).")
    if path:
        docs = read_text_docs(need_path(name, path, file_help), name)
    else:
        rows, _source = load_hub_split(repo, variant, split, EMBEDDED_LM, split_map, None,
                                       revision)
        docs = [LMDoc(doc_id=f"{variant}-{split}", title="",
                      text=join_wikitext_rows(rows["text"]))]
    return finish_docs(docs, name, split, limit)


def split_source_of(dataset: Mapping[str, Any]) -> str | None:
    """For a dataset config with a held-out dev policy (`heldout_dev`, the hub QA sets): where
    its split comes from, as every row records it; None for local files and other datasets."""
    if "heldout_dev" not in dataset or dataset.get("path") or not dataset.get("split"):
        return None
    split = str(dataset["split"])
    split_map = dataset.get("split_map") or {}
    return split_source(split, str(split_map.get(split, split)),
                        heldout_of(dataset.get("heldout_dev")))
