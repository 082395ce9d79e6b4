"""Command line. `ragrepro experiment=<name> [overrides]` runs one experiment through
Hydra (`-m` sweeps); `ragrepro compare|table|report ...` are plain subcommands."""
from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

import hydra
from hydra.errors import ConfigCompositionException, OverrideParseException
from omegaconf import DictConfig

from .configcheck import check_cell, check_command_line, check_inputs
from .errors import RagreproError
from .paths import CONF_DIR

log = logging.getLogger("ragrepro")
T = TypeVar("T")

SUBCOMMANDS = {
    "compare": "ragrepro.report.compare:main",
    "table": "ragrepro.report.results_tables:main",
    "report": "ragrepro.report.build:main",
    "plan": "ragrepro.plan:main",
    "samples": "ragrepro.report.sample_view:main",
    "lock": "ragrepro.lock:main",
    "check": "ragrepro.results_check:main",   # the results folder against itself; --repair
    "judge": "ragrepro.metrics.judging:main",   # fill in a deferred attribution judge
    "verify": "ragrepro.verify:main",   # a rebuilt table against the committed one, per cell
    "evidence": "ragrepro.evidence_cli:main",   # pack/unpack the runs behind a committed table
    "shards": "ragrepro.shards:main",   # merge (or list) the parts of runs split by shard=i/n
    "rescore": "ragrepro.rescore:main",   # metrics recomputed from saved samples, no model
    "attest": "ragrepro.report.attest_cli:main",   # each run's hash of its per-sample outputs; --check
}


def _offline_defaults() -> None:
    # The embedded default never needs a hub; a user who is online can unset these.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _hydra_main() -> None:
    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _run(cfg: DictConfig) -> float | None:
        quiet_loaders()
        metrics = user_errors_exit_2(lambda: _checked_run(cfg))
        if metrics and cfg.get("sweep_metric") in (metrics or {}):
            return float(metrics[cfg.sweep_metric])
        return None

    _run()


def _checked_run(cfg: DictConfig) -> dict | None:
    check_cell(cfg)  # every value's type and range, before torch or a model loads
    check_inputs(cfg)  # the data files it names
    # deferred: runner imports torch (seconds); config errors are reported before
    from .runner import execute

    return execute(cfg)


# Third-party loggers that report their own import at INFO (FAISS tries each CPU build and
# logs the ModuleNotFoundError of the ones not installed): shown only with debug logs
# (`hydra.verbose=true`, or `hydra.verbose=faiss.loader` for one of them).
NOISY_LOGGERS = ("faiss.loader", "numexpr.utils")


def quiet_loaders() -> None:
    debug = logging.getLogger().isEnabledFor(logging.DEBUG)
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not debug and logger.level == logging.NOTSET:  # a level set by the user stays
            logger.setLevel(logging.WARNING)


def _user_error(e: BaseException, kind: type) -> BaseException | None:
    """Hydra wraps errors raised while instantiating a config; find ours in the chain."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, kind):
            return e
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def main() -> None:
    _offline_defaults()
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        name = sys.argv.pop(1)
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        quiet_loaders()
        module, func = SUBCOMMANDS[name].split(":")  # hydra's get_method cannot read "a.b:c"
        command = getattr(importlib.import_module(module), func)
        status = user_errors_exit_2(lambda: command(sys.argv[1:]))
        if isinstance(status, int) and status:  # e.g. verify: 1 when a cell differs
            raise SystemExit(status)
        return
    user_errors_exit_2(lambda: check_command_line(sys.argv[1:]))
    _hydra_main()


# What a user can fix: ours, and Hydra's for an unknown experiment, group option or key and
# for override syntax (MissingConfigException is a ConfigCompositionException).
USER_ERRORS = (RagreproError, ConfigCompositionException, OverrideParseException)


def user_errors_exit_2(command: Callable[[], T]) -> T:
    """The one wrapper of every subcommand and of the run's command-line check: a user error
    is `error: <message>` on stderr and exit code 2, without a traceback; a bug keeps its."""
    try:
        return command()
    except Exception as e:
        user_error = _user_error(e, USER_ERRORS)
        if user_error is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
