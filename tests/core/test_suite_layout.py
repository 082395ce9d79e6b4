"""The Makefile's second pytest run collects only EXCLUSIVE_TESTS: every `exclusive` test must
live there, or `make test` would never run it."""
import re
from pathlib import Path

from conftest import EXCLUSIVE_FOLDER, misplaced_exclusive

from ragrepro.paths import REPO_ROOT


def test_an_exclusive_test_elsewhere_is_named():
    assert misplaced_exclusive(["tests/bench/test_a.py::t", "tests/core/test_b.py::t[1]"]) == \
        ["tests/core/test_b.py::t[1]"]


def test_the_makefile_runs_the_folder_the_rule_names():
    makefile = (REPO_ROOT / "Makefile").read_text()
    (folder,) = re.findall(r"^EXCLUSIVE_TESTS\s*\??=\s*(\S+)\s*$", makefile, re.MULTILINE)
    assert f"{folder.rstrip('/')}/" == EXCLUSIVE_FOLDER
    assert makefile.count("$(EXCLUSIVE_TESTS)") == 2  # make test and make test-fast


def test_every_exclusive_mark_in_the_suite_is_in_that_folder():
    marked = [p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "tests").rglob("*.py")
              if "mark.exclusive" in p.read_text(encoding="utf-8") and p.name != Path(__file__).name]
    assert marked and misplaced_exclusive(marked) == []
