"""Hugging Face hub datasets: the real loading path for users with network access, and a clear
OfflineError (how to get the data, what to use instead) on a machine without it."""
from __future__ import annotations

import hashlib
import logging
import os
from typing import Any

from .. import rehearsal
from ..errors import DataError, OfflineError

log = logging.getLogger(__name__)

# Our split names -> the hub split that holds answers. Test answers of NQ-open (= DPR's
# nq-test), TriviaQA (DPR uses the unfiltered validation set as test), HotpotQA distractor and
# the KILT tasks are the public validation sets; FilCo reports KILT dev results. So `test`
# reads `validation`, and `dev` cannot read it too (tuning on dev would be tuning on test):
# dev is a seeded held-out part of `train` (1 row in DEV_EVERY), `train-nodev` the rest;
# `train` stays the whole hub split, as the papers trained on it.
DEFAULT_SPLIT_MAP = {"test": "validation", "dev": "train", "validation": "validation",
                     "train": "train", "train-nodev": "train"}
DEV_EVERY = 10
DEV_SEED = "ragrepro-dev-v1"


def in_heldout_dev(index: int, every: int = DEV_EVERY, seed: str = DEV_SEED) -> bool:
    """Whether train row `index` belongs to the held-out dev split (a hash, not the row order,
    so dev is spread over the file and stable across machines)."""
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % every == 0


def dev_partition(n_rows: int, split: str) -> list[int] | None:
    """Row indices of `train` for split dev / train-nodev; None for every other split."""
    if split == "dev":
        return [i for i in range(n_rows) if in_heldout_dev(i)]
    if split == "train-nodev":
        return [i for i in range(n_rows) if not in_heldout_dev(i)]
    return None


def split_source(split: str, hub_split: str) -> str:
    """What a row records as the source of its split."""
    if split == "dev" and hub_split == "train":
        return f"train (held-out dev: 1 row in {DEV_EVERY}, {DEV_SEED})"
    if split == "train-nodev":
        return f"train (without the held-out dev rows, {DEV_SEED})"
    return hub_split


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
                   split_map: dict[str, str] | None = None) -> tuple[Any, str]:
    """(rows, source of the split: the hub split, or how dev was carved out of train).
    Raises OfflineError when the data cannot be fetched."""
    rows, hub_split = _load_hub_rows(repo, config, split, instead, split_map)
    part = dev_partition(len(rows), split) if hub_split == "train" else None
    if part is not None:
        rows = rows.select(part)
    return rows, split_source(split, hub_split)


def _load_hub_rows(repo: str, config: str | None, split: str, instead: str,
                   split_map: dict[str, str] | None) -> tuple[Any, str]:
    import datasets

    hub_split = (DEFAULT_SPLIT_MAP if split_map is None else split_map).get(split, split)
    what = f"Dataset {repo}" + (f" ({config})" if config else "") + f" split {hub_split!r}"
    fixture = rehearsal.hub_file(repo, config, hub_split)
    if fixture is not None:  # same rows schema and split names, read from a local file
        if not fixture.exists():
            raise DataError(f"{what}: this split does not exist on the hub (no fixture "
                            f"{fixture}); use one of the hub's split names.")
        rows = datasets.load_dataset("json", data_files={hub_split: str(fixture)},
                                     split=hub_split)
        log.info("Loaded %s from the rehearsal fixture: %d rows", what, len(rows))
        return rows, hub_split
    try:
        rows = datasets.load_dataset(repo, config, split=hub_split)
    except Exception as e:
        if is_offline_error(e) or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise OfflineError(offline_message(what, instead)) from e
        raise DataError(f"{what}: could not be loaded ({type(e).__name__}: {e}).") from e
    log.info("Loaded %s: %d rows", what, len(rows))
    return rows, hub_split
