"""What every dataset loader shares: the `limit` cut, local-file checks, the empty-result
error, and the QA `hops` filter. Loaders (conf/dataset/*.yaml `_target_`s) end with
`finish_docs` or `finish_qa`."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from ..errors import ConfigError, DataError
from .records import LMDoc, QARecord

T = TypeVar("T")
SPLITS = ("train", "train-nodev", "dev", "test", "all")
EMBEDDED_LM = "dataset=wiki-vital"
EMBEDDED_QA = "dataset=vital-qa (or vital-qa-bridge, fanout-grounded)"


def take(items: Sequence[T], limit: int | None) -> list[T]:
    """The first `limit` items (file order, deterministic); None keeps all."""
    if limit is None:
        return list(items)
    if int(limit) < 1:
        raise ConfigError(f"limit={limit}: use a positive number of examples, or null for all.")
    return list(items[: int(limit)])


def need_path(name: str, path: str | None, what: str) -> Path:
    """The local file a dataset reads; `what` (the config's `file_help`) says what it is."""
    if not path:
        raise ConfigError(f"dataset {name!r} is read from a local file: set dataset.path=... "
                          f"({what}).")
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p}: file not found (dataset {name!r}, {what}).")
    if p.is_dir():
        raise DataError(f"{p} is a folder; dataset {name!r} reads a file ({what}): point "
                        f"dataset.path to the file inside it.")
    return p


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(f"split={split!r}; use one of {list(SPLITS)}.")


def finish_docs(docs: Sequence[LMDoc], name: str, split: str, limit: int | None) -> list[LMDoc]:
    out = take(docs, limit)
    if not out:
        raise DataError(f"dataset {name!r} split {split!r} has no documents.")
    return out


def finish_qa(records: Sequence[QARecord], name: str, split: str, limit: int | None,
              hops: int | None) -> list[QARecord]:
    """Keep records with `hops` hops (when given), then the first `limit`."""
    if hops is not None:
        records = [r for r in records if r.hops == int(hops)]
    out = take(records, limit)
    if not out:
        raise DataError(f"dataset {name!r} split {split!r}"
                        + (f" hops={hops}" if hops is not None else "") + " has no records.")
    return out
