"""Shared pieces of the benchmarks: timing, the machine's matmul peak, result writing."""
from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io import atomic_write_text


@dataclass
class BenchResult:
    name: str
    rows: list[dict[str, Any]]
    summary: list[str] = field(default_factory=list)  # Markdown lines for the README
    targets: list[tuple[str, bool, str]] = field(default_factory=list)  # (target, met, detail)


def best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    """Minimum wall time over `repeat` calls: the least disturbed by other load."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def matmul_peak_gflops(dtype: str = "float32", n: int = 1024) -> float:
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    torch.mm(a, b)
    reps = 10
    seconds = best_of(lambda: [torch.mm(a, b) for _ in range(reps)])
    return 2 * n**3 * reps / seconds / 1e9


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    header: list[str] = []
    for r in rows:
        header += [k for k in r if k not in header]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header)
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())
