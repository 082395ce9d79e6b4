"""Shared fixtures. Tests never touch the repository's results/ folder."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(scope="session", autouse=True)
def _test_threads():
    """RALM_TEST_THREADS=N pins torch to N threads for every test: on a machine shared with
    other jobs, two OpenMP threads spinning against each other made a 64-token forward pass
    15x slower."""
    value = os.environ.get("RALM_TEST_THREADS")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise pytest.UsageError(f"RALM_TEST_THREADS={value!r}: give a positive integer.")
        import torch

        torch.set_num_threads(int(value))
    yield


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
