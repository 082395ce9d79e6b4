"""Command line. `ragrepro experiment=<name> [overrides]` runs one experiment through
Hydra (`-m` sweeps); `ragrepro compare|table|report ...` are plain subcommands."""
from __future__ import annotations

import importlib
import logging
import os
import sys

import hydra
from omegaconf import DictConfig

from .configcheck import check_config, check_overrides
from .errors import ConfigError, RagreproError
from .paths import CONF_DIR
from .validate import check_values

log = logging.getLogger("ragrepro")

SUBCOMMANDS = {
    "compare": "ragrepro.report.compare:main",
    "table": "ragrepro.report.results_tables:main",
    "report": "ragrepro.report.build:main",
    "plan": "ragrepro.plan:main",
    "samples": "ragrepro.report.sample_view:main",
    "lock": "ragrepro.lock:main",
    "judge": "ragrepro.metrics.judging:main",   # fill in a deferred attribution judge
    "verify": "ragrepro.verify:main",   # a rebuilt table against the committed one, per cell
    "evidence": "ragrepro.evidence:main",   # pack/unpack the runs behind a committed table
}


def _offline_defaults() -> None:
    # The embedded default never needs a hub; a user who is online can unset these.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _hydra_main() -> None:
    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _run(cfg: DictConfig) -> float | None:
        quiet_loaders()
        try:
            check_values(cfg)  # every value's type and range, before torch or a model loads
            check_config(cfg)
            # deferred: runner imports torch (seconds); config errors are reported before
            from .runner import execute

            metrics = execute(cfg)
        except Exception as e:  # only user errors are turned into exit code 2
            user_error = _user_error(e, RagreproError)
            if user_error is None:
                raise
            log.error("%s", user_error)
            raise SystemExit(2) from None
        if metrics and cfg.get("sweep_metric") in (metrics or {}):
            return float(metrics[cfg.sweep_metric])
        return None

    _run()


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
        status = getattr(importlib.import_module(module), func)(sys.argv[1:])
        if isinstance(status, int) and status:  # e.g. verify: 1 when a cell differs
            raise SystemExit(status)
        return
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    _hydra_main()


if __name__ == "__main__":
    main()
