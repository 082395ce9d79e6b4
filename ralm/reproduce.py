"""`make reproduce-table1`: the Table 1 sweep in two lanes side by side, then the table.

    python -m ralm.reproduce [experiment] [--lanes 1|2] [-- extra overrides]

Two lanes (the default for ralm/table1) run its 12 cells as two processes side by side, each
with half the machine's cores as torch threads (one each on a 2-core machine); --lanes 1 is
the plain `ragrepro -m experiment=<experiment>` (torch's own thread count). The numbers are
the same either way (ragrepro.lanes); only the wall time changes
(docs/performance.md#2-table-1-wall-time-table1). The lanes are balanced by the cells'
measured times: lane 1 trains the predictive reranker first (SmolLM2 labels, used by both
LMs' predictive cells) and then runs SmolLM2's zero-shot and oracle cells, whose scoring
passes are shared in one process (ragrepro.models.passes); lane 2 runs Gemma's six cells,
its predictive cell last (by then the reranker is trained, or it waits for it), and then
SmolLM2's three cheap ones.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from ragrepro.errors import ConfigError
from ragrepro.lanes import Sweep, check_cover, lane_commands, run_lanes
from ragrepro.paths import REPO_ROOT

from . import table1

log = logging.getLogger(__name__)

CONF = Path(__file__).resolve().parent / "conf" / "experiment"
LANES: dict[str, list[list[Sweep]]] = {
    "ralm/table1": [
        [{"model": "smollm2-135m", "ralm/rerank": "predictive,zeroshot,oracle"}],
        [{"model": "gemma3-270m", "ralm/rerank": "none,first,zeroshot,oracle,gold,predictive"},
         {"model": "smollm2-135m", "ralm/rerank": "none,first,gold"}],
    ],
}


def sweep_params(experiment: str) -> Sweep:
    path = CONF / f"{experiment}.yaml"
    if not path.exists():
        raise ConfigError(f"No experiment {experiment!r} ({path.relative_to(REPO_ROOT)} is "
                          "missing); the RALM experiments are under ralm/conf/experiment/.")
    params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
    return {str(k): str(v) for k, v in params.items()}


def ragrepro_prefix() -> list[str]:
    exe = Path(sys.executable).parent / "ragrepro"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ragrepro"]


def plan(experiment: str, n_lanes: int, extra: list[str], stamp: str):
    if n_lanes == 1:
        return lane_commands(ragrepro_prefix(), experiment, [[{}]], extra, stamp), None
    if experiment not in LANES:
        raise ConfigError(f"No lane plan for {experiment!r} (plans: {sorted(LANES)}); run "
                          "it with --lanes 1.")
    lanes = LANES[experiment]
    check_cover(sweep_params(experiment), lanes)
    # the machine's cores split between the lanes: one thread each on 2 cores
    threads = max(1, (os.cpu_count() or 2) // len(lanes))
    return lane_commands(ragrepro_prefix(), experiment, lanes, extra, stamp), threads


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(options, the overrides after `--`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="after --: overrides given to every sweep "
                                        "(e.g. -- wandb.mode=disabled)")
    ap.add_argument("experiment", nargs="?", default="ralm/table1")
    ap.add_argument("--lanes", type=int, choices=(1, 2), default=2)
    cut = argv.index("--") if "--" in argv else len(argv)
    return ap.parse_args(argv[:cut]), argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    a, extra = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S_")
    lanes, threads = plan(a.experiment, a.lanes, extra, stamp)
    log_dir = REPO_ROOT / ".cache" / "logs" / a.experiment / stamp.rstrip("_")
    t0 = time.perf_counter()
    codes = run_lanes(lanes, log_dir, threads=threads, cwd=REPO_ROOT)
    failed = {k: v for k, v in codes.items() if v != 0}
    if failed:
        for name, code in failed.items():
            log.error("%s exited %d; its log: %s", name, code,
                      (log_dir / f"{name.replace(' ', '')}.log").relative_to(REPO_ROOT))
        log.error("Finished cells are kept; rerun the same command to resume.")
        return 1
    log.info("All cells finished in %.0f s (%d lane(s))", time.perf_counter() - t0, len(lanes))
    table1.main([a.experiment])
    return 0


if __name__ == "__main__":
    sys.exit(main())
