"""The Makefile's second pytest run collects only EXCLUSIVE_TESTS: every `exclusive` test must
live there, or `make test` would never run it. `make test-fast` leaves out `slow` tests, which
are the ones with a real model: a test without the mark that resolves one is refused; private
caches share the session's converted models and nothing else."""
import re
from pathlib import Path

import pytest
from conftest import EXCLUSIVE_FOLDER, misplaced_exclusive, xdist_group

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


def test_a_fast_test_that_resolves_a_real_model_is_refused_naming_the_mark():
    from ragrepro.models.loading import resolve_source

    with pytest.raises(AssertionError, match=r"SmolLM2-135M-Instruct\.Q4_1\.gguf but is not "
                                             r"marked slow: add @pytest\.mark\.slow"):
        resolve_source("embedded:smollm2")


def test_a_private_cache_shares_only_the_sessions_models(tmp_path):
    from cache_links import SESSION_CACHE, private_cache

    cache = private_cache(tmp_path / "cache")
    assert sorted(p.name for p in cache.iterdir()) == ["assets", "models"]
    assert (cache / "models").resolve() == (SESSION_CACHE / "models").resolve()
    assert (cache / "assets").is_symlink() and not (cache / "indexes").exists()
    assert private_cache(cache) == cache  # again: the links are kept, not doubled


class _Item:
    """What xdist_group reads of a collected test."""

    def __init__(self, nodeid: str, marks: tuple[str, ...] = (), fixtures: tuple[str, ...] = ()):
        self.nodeid, self._marks, self.fixturenames = nodeid, marks, fixtures

    def get_closest_marker(self, name: str):
        return pytest.mark.__getattr__(name) if name in self._marks else None


def test_one_worker_puts_a_modules_tests_in_one_group_and_named_groups_win():
    a = _Item("tests/filco/test_x.py::test_a", ("one_worker",))
    b = _Item("tests/filco/test_x.py::test_b[1]", ("one_worker",))
    assert xdist_group(a) == xdist_group(b) == "module:tests/filco/test_x.py"
    assert xdist_group(_Item("tests/filco/test_x.py::test_c")) is None
    # a Slurm test of such a module still goes with the other Slurm tests
    assert xdist_group(_Item("tests/l/test_y.py::t", ("one_worker",), ("slurm",))) == "slurm"

