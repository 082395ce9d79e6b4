"""Shared fixtures. Tests never touch the repository's results/ folder.

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`); the tests
that must not run beside each other are put into xdist groups here (XDIST_GROUPS), and every
test starts from the same logging configuration whatever ran before it in its worker."""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from ragrepro.io import atomic_write_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")

# xdist groups (`--dist loadgroup`): the tests of one group run one after another on one
# worker, never beside each other; tests of different groups, and ungrouped ones, may.
# - "ray": every test using the session's Ray head (tests/launchers/conftest.py `ray_head`;
#   one head per worker otherwise, `--num-cpus=2` each on a 2-core machine), and any other
#   `cluster` test, which may start a head of its own: one test binds Ray's fixed default
#   ports on purpose and starts a second head beside the session's.
# - "slurm": every test using the session's one-node Slurm (`slurm`): one slurmctld/slurmd
#   pair per worker otherwise, each with its own spool and job queue to wait on.
# - "browser": a headless Chromium each (a few hundred MB, both cores while it lays out a page).
# A Ray test beside a Slurm test is fine: a sequential session already keeps both session
# daemons up together; each has its own ports (free_ports, below the ephemeral range) and folder.
# The local-launcher tests in tests/launchers/ (joblib, submitit-local) use private results
# and cache folders, so they stay ungrouped.
XDIST_GROUPS = (("ray", lambda item: "ray_head" in getattr(item, "fixturenames", ())),
                ("slurm", lambda item: "slurm" in getattr(item, "fixturenames", ())),
                ("browser", lambda item: item.get_closest_marker("browser") is not None),
                ("ray", lambda item: item.get_closest_marker("cluster") is not None))


def xdist_group(item: pytest.Item) -> str | None:
    """The first group of XDIST_GROUPS whose rule takes the test; for a test marked
    `one_worker`, its module (a costly module-scoped fixture is then built once, not once per
    worker); otherwise None."""
    named = next((name for name, takes in XDIST_GROUPS if takes(item)), None)
    if named is None and item.get_closest_marker("one_worker") is not None:
        return "module:" + item.nodeid.split("::", 1)[0]
    return named


# pytest-xdist 3.8's own `--dist loadgroup` marks a grouped test by appending "@group" to
# `item._nodeid`, which pytest 9.2 no longer reads (Node.nodeid is built from `_id`): the
# groups are silently ignored and, seen here, both workers started a Ray head and a Slurm.
# So the groups travel another way: each worker writes {nodeid: group} into a folder the
# controller made (GROUPS_ENV, inherited by the workers it starts), and the controller's
# scheduler (pytest_xdist_make_scheduler) reads it and sends each group to one worker.
GROUPS_ENV = "RAGREPRO_XDIST_GROUPS"
EXCLUSIVE_FOLDER = "tests/bench/"  # the Makefile's EXCLUSIVE_TESTS


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", None) == "loadgroup" and not _is_worker(config):
        os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="rr-xdist-groups-")
    import warm_cli

    # the slow tests run real-model commands: the warm server imports transformers once
    warm_cli.PRELOAD_MODELS = warm_cli.runs_slow_tests(config.option.markexpr or "")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _is_worker(config) and (folder := os.environ.pop(GROUPS_ENV, None)):
        shutil.rmtree(folder, ignore_errors=True)


def misplaced_exclusive(nodeids: Iterable[str]) -> list[str]:
    """The `exclusive` tests (given by node id) outside EXCLUSIVE_FOLDER, which the Makefile
    would never run."""
    return [n for n in nodeids if not n.startswith(EXCLUSIVE_FOLDER)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its xdist group (for a reader of the marks) and, in an xdist
    worker of a `--dist loadgroup` run, writes the groups for the controller's scheduler."""
    misplaced = misplaced_exclusive(item.nodeid for item in items
                                    if item.get_closest_marker("exclusive"))
    if misplaced:
        raise pytest.UsageError(f"tests marked `exclusive` must live in {EXCLUSIVE_FOLDER} "
                                f"(the Makefile's EXCLUSIVE_TESTS runs that folder alone after "
                                f"the parallel part): move {', '.join(misplaced)}.")
    groups = {}
    for item in items:
        if (group := xdist_group(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
    folder = os.environ.get(GROUPS_ENV)
    if folder and _is_worker(config):
        atomic_write_json(Path(folder) / f"{config.workerinput['workerid']}.json", groups)


def read_groups(folder: Path) -> dict[str, str]:
    """{nodeid: group} of every worker's file (each worker collects the same tests)."""
    out: dict[str, str] = {}
    for path in sorted(folder.glob("*.json")):
        out.update(json.loads(path.read_text()))
    return out


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    folder = os.environ.get(GROUPS_ENV)
    if not folder:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's load-scope scheduling with a test's group as its scope (ungrouped tests
        are each a scope of their own): what `--dist loadgroup` means."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first called once every worker has collected
                self.groups = read_groups(Path(folder))
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


def _own_handlers(lg: logging.Logger) -> list[logging.Handler]:
    """A logger's handlers except pytest's (caplog and the report's capture handlers, which
    pytest adds and removes around each test phase itself)."""
    return [h for h in lg.handlers if not type(h).__module__.startswith("_pytest")]


def _loggers() -> dict[str, logging.Logger]:
    found = {name: lg for name, lg in logging.Logger.manager.loggerDict.items()
             if isinstance(lg, logging.Logger)}
    return {"": logging.getLogger(), **found}


@pytest.fixture(autouse=True)
def _restore_logging():
    """The level, handlers, `disabled` and `propagate` of every logger that existed before a
    test are put back after it: an in-process `ragrepro <subcommand>` calls
    logging.basicConfig(INFO) and quiets some loggers, and Hydra's job logging reconfigures
    the root logger, so a caplog assertion in a later test would depend on whether such a
    test ran earlier in the same worker (CI once failed on exactly that; under xdist the
    order changes from run to run). Loggers created during the test keep what their library
    gave them at import (transformers, for one, sets its own level and propagate=False)."""
    before = {name: (lg.level, lg.disabled, lg.propagate, _own_handlers(lg))
              for name, lg in _loggers().items()}
    disable = logging.root.manager.disable
    yield
    logging.disable(disable)
    for name, lg in _loggers().items():
        if name not in before:
            continue
        level, disabled, propagate, handlers = before[name]
        if lg.level != level:
            lg.setLevel(level)
        lg.disabled, lg.propagate = disabled, propagate
        now = _own_handlers(lg)
        for h in now:
            if h not in handlers:
                lg.removeHandler(h)
        for h in handlers:
            if h not in now:
                lg.addHandler(h)


@pytest.fixture(scope="session", autouse=True)
def _test_threads():
    """RALM_TEST_THREADS=N pins torch to N threads for every test: on a machine shared with
    other jobs, two OpenMP threads spinning against each other made a 64-token forward pass
    15x slower. The processes the tests start (`ragrepro` runs, Slurm jobs, Ray workers)
    inherit OMP_NUM_THREADS=N unless the environment sets it: one such run at torch's default
    of one thread per core beside the other worker made that worker's tests 1.5x slower
    (measured, a SmolLM2 generation test beside a two-thread matmul loop)."""
    value = os.environ.get("RALM_TEST_THREADS")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise pytest.UsageError(f"RALM_TEST_THREADS={value!r}: give a positive integer.")
        import torch

        torch.set_num_threads(int(value))
        os.environ.setdefault("OMP_NUM_THREADS", value)
    yield


@pytest.fixture(autouse=True)
def _fast_tests_load_no_real_model(request, monkeypatch):
    """`slow` means "runs a real embedded model" and `make test-fast` leaves those out (with
    the `browser` and `cluster` tests): a test that it runs and that resolves a GGUF model in
    this process (SmolLM2, Gemma, the ladder: a conversion of 12-40 s on a fresh clone, then a
    load of seconds) fails and says so. Processes the test starts are not watched."""
    if any(request.node.get_closest_marker(m) for m in ("slow", "cluster", "browser")):
        yield
        return
    from ragrepro.models import loading

    def refuse(gguf_path, *args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} resolves the real embedded model "
                             f"{Path(gguf_path).name} but is not marked slow: add "
                             f"@pytest.mark.slow (make test-fast leaves out real models)")

    monkeypatch.setattr(loading, "converted_gguf_dir", refuse)
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
