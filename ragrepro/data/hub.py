"""Hugging Face hub datasets: the real loading path for users with network access, and a clear
OfflineError (how to get the data, what to use instead) on a machine without it."""
from __future__ import annotations

import logging
import os
from typing import Any

from .. import rehearsal
from ..errors import DataError, OfflineError

log = logging.getLogger(__name__)

# Our split names -> the hub split that holds answers. Test answers of NQ-open (= DPR's
# nq-test), TriviaQA (DPR uses the unfiltered validation set as test), HotpotQA distractor and
# the KILT tasks are the public validation sets; FilCo reports KILT dev results.
DEFAULT_SPLIT_MAP = {"test": "validation", "dev": "validation", "validation": "validation",
                     "train": "train"}


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
    """(rows, hub split name). Raises OfflineError when the data cannot be fetched."""
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
