"""Content hashes used for run ids and cache keys, and the memo of large files' hashes."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .paths import cache_dir


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


def file_hash_cached(path: Path) -> str:
    """sha256 of a large file, remembered by (path, size, mtime) so warm loads skip hashing."""
    st = path.stat()
    memo = cache_dir() / "hashes.json"
    key = f"{path.resolve()}|{st.st_size}|{int(st.st_mtime)}"
    table = json.loads(memo.read_text()) if memo.exists() else {}
    if key not in table:
        table[key] = hash_file(path)
        # A per-process temporary name: parallel jobs writing one shared name would replace
        # each other's file and the second os.replace would find nothing.
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"{memo.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(table, indent=1))
        os.replace(tmp, memo)
    return table[key]
