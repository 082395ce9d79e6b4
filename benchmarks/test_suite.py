"""Benchmark: `make test` and `make test-fast` wall time from a fresh clone (opt-in).

`git clone` of this repository's HEAD into a temporary folder, `make setup setup-cluster
setup-browser` there (timed apart: the README's set-up), then `make test-fast` and `make test`
as a new user runs them: the clone's own .venv, .cache and results/, so both embedded models
are converted inside the suite (the README's order runs `make reproduce-table1` first, which
leaves them converted; this is the slower case). A failing test fails the benchmark.

    python -m benchmarks tests           # about 25 minutes on 2 cores; not in `make bench`
"""
from __future__ import annotations

import logging

from ragrepro.paths import results_dir

from .common import BenchResult, load_average, ratio_target
from .table1 import fresh_clone, timed

log = logging.getLogger(__name__)

TEST_TARGET_S = 10 * 60  # issue 31: the whole suite
FAST_TARGET_S = 3 * 60


def run() -> BenchResult:
    log_path = results_dir() / "bench" / "tests.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    log.info("tests: fresh clone, make test-fast, make test (about 25 minutes); log: %s",
             log_path)
    with fresh_clone("ragrepro-bench-tests-", log_path) as (clone, env, _):
        setup = timed(["make", "setup", "setup-cluster", "setup-browser"], clone, env, log_path)
        fast = timed(["make", "test-fast"], clone, env, log_path)
        full = timed(["make", "test"], clone, env, log_path)
    row = {"setup_s": setup, "test_fast_s": fast, "test_s": full, "load_avg": load_average()}
    targets = [ratio_target(f"make test <= {TEST_TARGET_S // 60} min", full / 60,
                            TEST_TARGET_S / 60, " min", higher_is_better=False,
                            why="the slowest tests are listed in the log (--durations)"),
               ratio_target(f"make test-fast <= {FAST_TARGET_S // 60} min", fast / 60,
                            FAST_TARGET_S / 60, " min", higher_is_better=False)]
    summary = [("From a fresh `git clone`, on this machine: `make test` (the whole suite on two "
                "pytest-xdist workers, then the `exclusive` tests alone) and `make test-fast` "
                "(no real models, browser or clusters)."), "",
               f"- make test: {full / 60:.1f} min", f"- make test-fast: {fast / 60:.1f} min",
               f"- set-up before them (make setup setup-cluster setup-browser): {setup:.0f} s"]
    return BenchResult("tests", [row], summary, targets)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for line in run().summary:
        log.info("%s", line)
