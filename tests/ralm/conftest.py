"""RALM tests use the session-scoped `smollm` fixture of tests/conftest.py.

RALM_TEST_THREADS=1 pins torch to one thread: on a machine shared with other jobs, two
OpenMP threads spinning against each other made a 64-token forward pass 15x slower."""
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _ralm_threads():
    if os.environ.get("RALM_TEST_THREADS"):
        import torch

        torch.set_num_threads(int(os.environ["RALM_TEST_THREADS"]))
    yield
