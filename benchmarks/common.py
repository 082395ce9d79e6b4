"""Shared pieces of the benchmarks: timing, the machine's matmul peak, result writing."""
from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrepro.io import write_rows_csv
from ragrepro.named_configs import group_config, load_model
from ragrepro.report.readable import check_columns


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
    write_rows_csv(path, rows)


def interleaved_best(fns: dict[str, Callable[[], Any]], repeat: int = 2
                     ) -> tuple[dict[str, float], dict[str, Any]]:
    """Run the functions in turn (A, B, A, B, ...) and keep each one's fastest time and its
    last return value. Interleaving exposes both to the same drift of a shared machine, so
    their ratio is meaningful even when absolute times are not."""
    best = {k: float("inf") for k in fns}
    values: dict[str, Any] = {}
    for _ in range(max(1, repeat)):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            values[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best, values


def ratio_target(label: str, value: float, threshold: float, unit: str = "x",
                 higher_is_better: bool = True, why: str = "") -> tuple[str, bool, str]:
    """(target, met, detail) with how far a missed target is from its threshold."""
    met = value >= threshold if higher_is_better else value <= threshold
    detail = f"{value:.3g}{unit}"
    if not met:
        gap = (threshold / value if higher_is_better else value / threshold) if value else float("inf")
        detail += f"; missed by {gap:.2f}x ({threshold:.3g}{unit} needed)"
        if why:
            detail += f": {why}"
    return label, met, detail


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> list[str]:
    """A Markdown table of dict rows (floats to 4 significant digits)."""
    if not rows:
        return []
    cols = columns or [k for k in rows[0]]

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return out


def markdown_tables(rows: list[dict[str, Any]],
                    groups: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """One readable table per (caption, columns) group (at most ten columns each,
    ragrepro.report.readable) instead of one wide table; the CSV keeps every column."""
    out: list[str] = []
    for caption, cols in groups:
        check_columns(list(cols), f"benchmark table {caption!r}")
        out += ([f"**{caption}**", ""] if caption else []) + markdown_table(rows, list(cols))
        out.append("")
    return out[:-1]


def replace_first_table(text: str, table: list[str]) -> str:
    """`text` with its first Markdown table replaced by `table` (a committed benchmark page
    rewritten from its CSV keeps the lines its measurement wrote around the table)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")),
               len(lines))
    return "\n".join(lines[:start] + table + lines[end:]) + "\n"


def _typed(text: str) -> Any:
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A benchmark CSV's rows with numbers as numbers: the Markdown of a committed CSV is
    rewritten from it exactly as the run wrote it (`markdown_table` formats floats)."""
    with path.open(newline="", encoding="utf-8") as f:
        return [{k: _typed(v) for k, v in r.items()} for r in csv.DictReader(f)]


def load_average() -> float:
    import os

    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def load_lm(name: str, dtype: str = "float32") -> Any:
    """The LM of conf/model/<name>.yaml on the CPU (benchmarks always run there)."""
    return load_model(name, dtype, "cpu")[0]


def wiki_vital_bm25() -> tuple[Any, Any]:
    """(corpus, retriever): BM25 over wiki-vital, from conf/corpus and conf/retriever."""
    from ragrepro.retrieval import build_corpus, build_retriever

    corpus = build_corpus(group_config("corpus", "wiki-vital"))
    return corpus, build_retriever(group_config("retriever", "bm25"), corpus)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"
