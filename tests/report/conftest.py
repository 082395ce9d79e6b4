"""The synthetic results tree of tests/report/demo.py, in a fresh tmp folder per test, and the
headless Chromium of the dashboard tests."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ragrepro.report.browser import INSTALL_HINT, Chromium
from tests.report.demo import build_demo


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return build_demo(tmp_path / "results")


@pytest.fixture
def browser():
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        pytest.fail(f"Chromium is required for this test and was not found. {INSTALL_HINT}")
    with Chromium(width=1400, height=1000) as b:
        yield b


def table_cells(b, selector: str) -> list[list[str]]:
    """The text of every cell of the rows `selector` finds, row by row."""
    return b.eval(f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
                  ".map(tr => Array.from(tr.cells).map(td => td.innerText.trim()))")
