"""`make bench`: run every benchmark, write results/bench/<name>.csv and a summary
results/bench/README.md (machine, library versions, figures, targets met or missed).

    python -m benchmarks                      # all benchmarks (table1, the slowest, last)
    python -m benchmarks tests                # opt-in: make test / test-fast from a fresh clone
    python -m benchmarks loading ralm         # a subset, by name
    python -m benchmarks --skip table1        # or BENCH_SKIP=table1 (comma list)
    python -m benchmarks --threads 2          # torch threads (default: torch's own)

Each benchmark is a module of this package with `run() -> BenchResult` (BENCHMARKS below).
Sections already in results/bench/README.md from an earlier invocation are kept when a subset
runs.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import time
import traceback
from collections.abc import Callable

from ragrepro.io import atomic_write_text
from ragrepro.metadata import git_state, machine, package_versions
from ragrepro.paths import results_dir

from .common import (
    BenchResult,
    cpu_model,
    load_average,
    matmul_peak_gflops,
    write_csv,
)

log = logging.getLogger("bench")


# name -> module of this package with run() (or a callable: tests substitute fakes). Ratio benchmarks first; those judged on absolute
# times (RICHES lookups, model loading) later, when a shared machine has often calmed down;
# table1 (about 20 minutes) last.
BENCHMARKS: dict[str, str | Callable[[], BenchResult]] = {
    "ralm": "benchmarks.ralm_throughput",
    "cxmi": "benchmarks.cxmi",
    "retrieval": "benchmarks.retrieval",
    "ann": "benchmarks.ann_recall",
    "riches": "benchmarks.riches_index",
    "riches_shards": "benchmarks.riches_shards",  # 2M tokens; BENCH_SHARDS_TOKENS=3e8: ~20 min
    "loading": "benchmarks.loading",
    "device": "benchmarks.device",  # paper architectures on this device (tiny on a CPU)
    "tests": "benchmarks.test_suite",  # opt-in (OPT_IN): `make test` from a fresh clone
    "table1": "benchmarks.table1",
}
# Run only when named: the test suite's wall time is checked before a release, not per bench.
OPT_IN = frozenset({"tests"})


def run_benchmark(name: str) -> BenchResult:
    target = BENCHMARKS[name]
    if callable(target):
        return target()
    return importlib.import_module(target).run()


def _machine_lines() -> list[str]:
    info = machine()
    lines = [f"- {k}: {v}" for k, v in info.items()]
    lines.append(f"- cpu: {cpu_model()}")
    lines.append(f"- load average at start (1 min): {load_average():.1f}")
    lines.append(f"- measured matmul peak: float32 {matmul_peak_gflops('float32'):.0f} GFLOP/s, "
                 f"bfloat16 {matmul_peak_gflops('bfloat16'):.0f} GFLOP/s (1024x1024)")
    lines.append(f"- git: {git_state()}")
    lines += [f"- {k} {v}" for k, v in sorted(package_versions().items())]
    return lines



def section(result: BenchResult, seconds: float, cpu: str | None = None) -> list[str]:
    """A benchmark's README section. It names the CPU it ran on: sections of earlier runs are
    kept beside newer ones, and the Machine section describes only the newest run's machine."""
    out = [f"## {result.name}", "", (f"(ran in {seconds:.0f} s on {cpu or cpu_model()}, load "
                                    f"average {load_average():.1f} at the end)"), ""]
    if result.summary:
        out += result.summary + [""]
    if result.targets:
        out += ["| target | met | measured |", "|---|---|---|"]
        out += [f"| {_cell(t)} | {'yes' if ok else '**no**'} | {_cell(d)} |"
                for t, ok, d in result.targets]
        out.append("")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a literal pipe would split the table cell


OLDER = "(from an earlier `make bench`)"


def split_sections(text: str) -> dict[str, list[str]]:
    """'## name' sections of an earlier README (the machine section excluded)."""
    out: dict[str, list[str]] = {}
    cur: str | None = None
    for line in text.splitlines():
        if line == OLDER:
            continue
        m = re.match(r"^## (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        if cur is not None:
            out[cur].append(line)
    out.pop("Machine", None)
    for lines in out.values():
        while lines and not lines[-1].strip():
            lines.pop()
    return out


def selected(names: list[str], skip: list[str]) -> list[str]:
    unknown = [n for n in names + skip if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    return [n for n in (names or [b for b in BENCHMARKS if b not in OPT_IN]) if n not in skip]


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"subset of {list(BENCHMARKS)}")
    parser.add_argument("--skip", default=os.environ.get("BENCH_SKIP", ""),
                        help="comma list of benchmarks to leave out (env BENCH_SKIP)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    names = selected(args.names, [s for s in args.skip.split(",") if s])
    out_dir = results_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    readme = out_dir / "README.md"
    head = ["# Benchmarks", "", (f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} by `make bench` "
            f"({', '.join(names)})."), "", "## Machine", "",
            ("The machine of this invocation; every section below names the CPU it ran on "
             "(sections from before 2026-12-06 did not, and may come from another machine)."),
            "", *_machine_lines(), ""]
    done: dict[str, list[str]] = {}

    def write() -> None:
        # re-read each time: another `python -m benchmarks` process may have added sections since
        old = split_sections(readme.read_text()) if readme.exists() else {}
        body = []
        for n in BENCHMARKS:  # fixed order; sections of other runs kept, marked as older
            key = _result_name(n)
            if key in done:
                body += done[key]
            elif key in old:
                body += old[key] + ["", OLDER, ""]
        atomic_write_text(readme, "\n".join(head + body) + "\n")

    for name in names:
        t0 = time.perf_counter()
        try:
            result = run_benchmark(name)
        except Exception:
            log.exception("benchmark %s failed", name)
            done[_result_name(name)] = [f"## {_result_name(name)}", "", "FAILED:", "```",
                                        traceback.format_exc(limit=4), "```", ""]
            write()
            continue
        write_csv(out_dir / f"{result.name}.csv", result.rows)
        done[result.name] = section(result, time.perf_counter() - t0)
        write()
    write()
    log.info("wrote %s", readme)


RESULT_NAMES = {"loading": "model_loading", "ralm": "ralm_throughput", "table1": "table1",
                "riches_shards": "riches_shards_small"}  # riches_shards.csv: the 3e8 run


def _result_name(name: str) -> str:
    return RESULT_NAMES.get(name, name)


if __name__ == "__main__":
    main()
