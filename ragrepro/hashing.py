"""Content hashes used for run ids and cache keys."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def hash_obj(obj: Any, length: int = 12) -> str:
    """sha256 of the canonical JSON of obj, truncated."""
    return hashlib.sha256(stable_json(obj).encode("utf-8")).hexdigest()[:length]


def hash_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
