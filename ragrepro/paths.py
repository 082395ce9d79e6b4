"""Where caches and results live. Overridable by environment variables."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"


def cache_dir() -> Path:
    """Content-addressed caches (converted models, indexes, retrievals)."""
    path = Path(os.environ.get("RAGREPRO_CACHE", REPO_ROOT / ".cache" / "ragrepro"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_dir() -> Path:
    return Path(os.environ.get("RAGREPRO_RESULTS", REPO_ROOT / "results"))
