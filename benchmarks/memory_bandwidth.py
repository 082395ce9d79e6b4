"""This machine's effective memory bandwidth and matmul rate, the CPU figures of the
planner's time model (ragrepro/plan.py: decoding is memory-bound, prefill and scoring
compute-bound).

    python -m benchmarks.memory_bandwidth [--mib 512] [--threads 1] [--repeat 5]

Writes results/bench/memory_bandwidth.csv (one row per measurement, with the load average)
and results/bench/memory_bandwidth.md. Measured on arrays far larger than the caches:

- read: `np.add.reduce` over a float32 array (every byte read once, nothing written);
- copy: `np.copyto` between two arrays (read + write, both bytes counted);
- matvec: `torch.mv` of a float32 matrix by a vector, the access pattern of one decoding step
  (every weight read once, a few FLOPs per byte), bytes of the matrix per second;
- matmul: `torch.mm` of two 1024 x 1024 float32 matrices, GFLOP/s (compute-bound passes).

Each figure is the best of `repeat` timed calls (the least disturbed by other load), per CPU
second of this process (`rate`, what a dedicated core does) and per wall second.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.io import atomic_write_text, write_rows_csv
from ragrepro.paths import REPO_ROOT

log = logging.getLogger("benchmarks.memory_bandwidth")

OUT = Path("results") / "bench" / "memory_bandwidth"


def best_seconds(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `repeat` calls after one untimed warm-up call.
    The CPU time (this process's, one thread) is what a dedicated core takes: on a machine
    shared with other jobs the wall time also counts the time the core went to them."""
    fn()
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def measure(mib: int, threads: int, repeat: int) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(threads)
    n = mib * 2**20 // 4
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.empty_like(a)
    rows: list[tuple[str, float, tuple[float, float]]] = []  # (kind, work, (wall, CPU s))
    rows.append(("read", a.nbytes, best_seconds(lambda: np.add.reduce(a), repeat)))
    rows.append(("copy", 2 * a.nbytes, best_seconds(lambda: np.copyto(b, a), repeat)))
    cols = 8192
    w = torch.from_numpy(a[: (n // cols) * cols].reshape(-1, cols))
    x = torch.ones(cols)
    rows.append(("matvec", w.numel() * 4, best_seconds(lambda: torch.mv(w, x), repeat)))
    m1, m2 = torch.randn(1024, 1024), torch.randn(1024, 1024)
    rows.append(("matmul", 2 * 1024**3, best_seconds(lambda: torch.mm(m1, m2), repeat)))
    load = os.getloadavg()[0]
    # rate: per CPU second (a dedicated core; what the planner reads); wall_rate: per second
    # of wall time, lower when other jobs share the core
    return [{"kind": k, "array_mib": mib if k != "matmul" else "", "threads": threads,
             "seconds": wall, "cpu_seconds": cpu, "rate": work / max(cpu, 1e-9) / 1e9,
             "wall_rate": work / wall / 1e9,
             "unit": "GFLOP/s" if k == "matmul" else "GB/s (1e9 bytes)",
             "load_avg": load, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
            for k, work, (wall, cpu) in rows]


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["# Memory bandwidth and matmul rate of this machine", "",
             ("`python -m benchmarks.memory_bandwidth` (best of the timed calls; "
             "read/copy/matvec over float32 arrays far larger than the caches). The planner's "
             "CPU device reads `matvec` (decoding reads every weight once a step) and "
             "`matmul` (prefill and scoring)."), "",
             ("`rate` is per CPU second of this process (a dedicated core), `wall rate` per "
             "second of wall time (lower while other jobs share the core)."), "",
             ("| kind | array MiB | threads | wall s | CPU s | rate | wall rate | unit | "
             "load average |"), "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['kind']} | {r['array_mib']} | {r['threads']} | {r['seconds']:.4g} | "
              f"{r['cpu_seconds']:.4g} | {r['rate']:.3g} | {r['wall_rate']:.3g} | {r['unit']} "
              f"| {r['load_avg']:.2f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_bandwidth",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="array size (MiB)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rows = measure(args.mib, args.threads, args.repeat)
    write_rows_csv(REPO_ROOT / OUT.with_suffix(".csv"), rows)
    atomic_write_text(REPO_ROOT / OUT.with_suffix(".md"), render(rows))
    for r in rows:
        log.info("%s: %.3g %s", r["kind"], r["rate"], r["unit"])


if __name__ == "__main__":
    main()
