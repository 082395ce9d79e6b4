"""Compute-once values stored as JSON under the cache folder (ragrepro.paths.cache_dir).

The caller names the file (a content hash of the inputs in its name), the helper computes the
value when the file is missing and stores it atomically under a file lock, so parallel jobs
compute it once and a killed job never leaves half a file:

    data = cached_json(cache_path("riches", "keys", f"{unit}-{digest}.json"),
                       lambda: {"keys": keys, "key_doc": key_doc})
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .io import atomic_write_json, locked, read_json
from .paths import cache_dir


def cache_path(*parts: str) -> Path:
    """A path under the cache folder (RAGREPRO_CACHE)."""
    return cache_dir().joinpath(*parts)


def cached_json(path: Path, compute: Callable[[], Any]) -> Any:
    """The JSON value stored at `path`, or `compute()` stored there first. The value is read
    back from the file either way, so a first run and a cached run see the same types
    (JSON has lists, not tuples)."""
    with locked(path):
        if not path.exists():
            atomic_write_json(path, compute())
        return read_json(path)
