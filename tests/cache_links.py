"""Private cache folders that share the session's converted embedded models.

A test that gives itself a private RAGREPRO_CACHE, to show what a run builds, merges or
reuses, would otherwise convert SmolLM2 again (about 12 s) and join and convert Gemma (about
40 s) in every such folder. The converted models are pinned by sha256 (tests/core/test_lm.py)
and are not what those tests check, so their `models` and `assets` folders are links to the
session's own cache; everything else in the folder stays private. Imported by name (tests/
has no packages), like launcher_helpers."""
from __future__ import annotations

import os
from pathlib import Path

from ragrepro.paths import REPO_ROOT

SHARED = ("models", "assets")
# the session's cache, read once when the suite starts: later tests move RAGREPRO_CACHE
SESSION_CACHE = Path(os.environ.get("RAGREPRO_CACHE", REPO_ROOT / ".cache" / "ragrepro"))


def private_cache(path: Path) -> Path:
    """`path` made a cache folder whose converted models are the session's."""
    path.mkdir(parents=True, exist_ok=True)
    for name in SHARED:
        target = SESSION_CACHE / name
        target.mkdir(parents=True, exist_ok=True)
        link = path / name
        if not link.is_symlink() and not link.exists():
            link.symlink_to(target, target_is_directory=True)
    return path
