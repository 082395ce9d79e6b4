"""The synthetic results tree of tests/report/demo.py, in a fresh tmp folder per test."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.demo import build_demo


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return build_demo(tmp_path / "results")
