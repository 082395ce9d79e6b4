"""`make bench`: run every benchmark, write results/bench/<name>.csv and a summary
results/bench/README.md (machine, library versions, figures, targets met or missed).

    python -m scripts.bench                 # all benchmarks
    python -m scripts.bench loading ralm    # a subset, by name
"""
from __future__ import annotations

import argparse
import importlib
import logging
import time
import traceback

from ragrepro.bench.common import BenchResult, matmul_peak_gflops, write_csv
from ragrepro.io import atomic_write_text
from ragrepro.metadata import git_state, machine, package_versions
from ragrepro.paths import results_dir

log = logging.getLogger("bench")

# name -> module with run() -> BenchResult. Method packages own their benchmarks.
BENCHMARKS = {
    "ralm": "ralm.bench",
    "retrieval": "ragrepro.bench.retrieval",
    "riches": "riches.bench",
    "cxmi": "filco.bench",
    "loading": "ragrepro.bench.loading",
    "table1": "ralm.bench_table1",
}


def _machine_lines() -> list[str]:
    info = machine()
    lines = [f"- {k}: {v}" for k, v in info.items()]
    lines.append(f"- measured matmul peak: float32 {matmul_peak_gflops('float32'):.0f} GFLOP/s, "
                 f"bfloat16 {matmul_peak_gflops('bfloat16'):.0f} GFLOP/s (1024x1024)")
    lines.append(f"- git: {git_state()}")
    lines += [f"- {k} {v}" for k, v in sorted(package_versions().items())]
    return lines


def _section(result: BenchResult, seconds: float) -> list[str]:
    out = [f"## {result.name}", "", f"(ran in {seconds:.0f} s)", ""]
    out += result.summary + [""]
    if result.targets:
        out += ["| target | met | measured |", "|---|---|---|"]
        out += [f"| {t} | {'yes' if ok else '**no**'} | {d} |" for t, ok, d in result.targets]
        out.append("")
    return out


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help=f"subset of {list(BENCHMARKS)}")
    args = parser.parse_args()
    names = args.names or list(BENCHMARKS)
    out_dir = results_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Benchmarks", "", f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `make bench`.",
             "", "## Machine", "", *_machine_lines(), ""]
    for name in names:
        t0 = time.perf_counter()
        try:
            result: BenchResult = importlib.import_module(BENCHMARKS[name]).run()
        except Exception:  # noqa: BLE001 - one failing benchmark must not hide the others
            log.exception("benchmark %s failed", name)
            lines += [f"## {name}", "", "FAILED:", "```", traceback.format_exc(limit=3), "```", ""]
            continue
        write_csv(out_dir / f"{result.name}.csv", result.rows)
        lines += _section(result, time.perf_counter() - t0)
        atomic_write_text(out_dir / "README.md", "\n".join(lines) + "\n")  # as we go
    atomic_write_text(out_dir / "README.md", "\n".join(lines) + "\n")
    log.info("wrote %s", out_dir / "README.md")


if __name__ == "__main__":
    main()
