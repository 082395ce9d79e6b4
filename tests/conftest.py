"""Shared fixtures. Tests never touch the repository's results/ folder."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(autouse=True)
def _isolated_results(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path / "results"))
    yield


@pytest.fixture(scope="session")
def smollm():
    from ragrepro.models import load_lm

    return load_lm("smollm2-135m", "embedded:smollm2", add_bos=False, dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def gemma():
    from ragrepro.models import load_lm

    return load_lm("gemma3-270m", "embedded:gemma3", add_bos=True, dtype="float32", device="cpu")
