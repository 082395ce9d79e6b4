"""Table 1 with and without the pass memo on one machine: the same outputs bit for bit, and
where the time went (issue 31 item 5).

    BENCH_TABLE1_KEEP=/tmp/memo python -m benchmarks table1          # cold, memo on (default)
    RAGREPRO_RESULTS=/tmp/plain RAGREPRO_CACHE=/tmp/plaincache RAGREPRO_PASS_MEMO_MB=0 \\
        ragrepro -m experiment=ralm/table1                             # every pass computed
    python -m benchmarks.table1_memo --memo /tmp/memo --plain /tmp/plain/ralm/table1

Writes results/bench/table1_memo.md and .csv: per cell, the seconds of its stages (the run's
`timings_s`) with the memo off and on, and its outputs compared record by record
(ragrepro.verify_runs with a noise bound of 0: any differing bit is named). The plain run
needs its own cache folder (linking `models` and `assets` is fine: conversions are
byte-identical), or it would reuse the memo run's trained reranker instead of labelling and
training its own. Both sides must come from one CPU: the comparison is about the memo, not
the machine.
"""
from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.verify_runs import check_run, cpu_of, local_files

from .common import write_csv

log = logging.getLogger(__name__)

ORDER = ("none", "zeroshot", "oracle", "first", "predictive", "gold")  # the sweep's order


@dataclass(frozen=True)
class Cell:
    run_id: str
    model: str
    rerank: str
    plain_s: float
    memo_s: float
    status: str
    numbers: int


def _metrics(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))


def _seconds(metrics: dict[str, Any]) -> float:
    return float(sum(float(v) for v in (metrics.get("timings_s") or {}).values()))


def _runs(folder: Path, side: str) -> dict[str, Path]:
    runs = {p.parent.name: p.parent for p in Path(folder).glob("*/metrics.json")
            if not p.parent.name.startswith("tmp_")}
    if not runs:
        raise DataError(f"{folder}: no finished run folders (<run_id>/metrics.json) for the "
                        f"{side} side; see `python -m benchmarks.table1_memo --help`.")
    return runs


def compare(memo_dir: Path, plain_dir: Path) -> list[Cell]:
    """Every run id of both folders, in the sweep's order per model; the same ids on both
    sides and one CPU, or DataError naming what differs."""
    memo, plain = _runs(memo_dir, "memo"), _runs(plain_dir, "plain")
    if set(memo) != set(plain):
        raise DataError(f"The two folders hold different cells (only with the memo: "
                        f"{sorted(set(memo) - set(plain))}; only without: "
                        f"{sorted(set(plain) - set(memo))}): run both sweeps in full.")
    cells = []
    for run_id in sorted(memo):
        m, p = _metrics(memo[run_id]), _metrics(plain[run_id])
        if cpu_of(m) != cpu_of(p):
            raise DataError(f"{run_id}: made on {cpu_of(p)} without the memo and on "
                            f"{cpu_of(m)} with it: compare runs of one machine.")
        check = check_run(local_files(memo[run_id]), local_files(plain[run_id]), run_id,
                          noise=0.0)
        s = m.get("settings") or {}
        cells.append(Cell(run_id, str(s.get("model")), str(s.get("rerank")), _seconds(p),
                          _seconds(m), check.status, check.tally.total().n))
    rank = {r: i for i, r in enumerate(ORDER)}
    return sorted(cells, key=lambda c: (c.model != "smollm2-135m", c.model,
                                        rank.get(c.rerank, len(ORDER))))


def render(cells: list[Cell], cpu: str) -> str:
    same = sum(c.status == "same bits" for c in cells)
    plain, memo = sum(c.plain_s for c in cells), sum(c.memo_s for c in cells)
    lines = ["# Table 1 with and without the pass memo", "",
             (f"Built by `python -m benchmarks.table1_memo` from two sweeps of ralm/table1 on "
              f"{cpu}: memo off (`RAGREPRO_PASS_MEMO_MB=0`, every forward pass computed, its own "
              "cache, the converted models reused) and memo on (the default, a cold run from a "
              "fresh clone, whose first cell of each model also converts its GGUF file). "
              "Seconds are the "
              "sum of each run's stage timings; outputs are every value of metrics.json's "
              "metrics and of every per-sample record (texts, picks and integers equal, floats "
              "bit for bit)."), "", "## Cells", "",
             "| model | reranking | memo off (s) | memo on (s) | outputs | floats compared |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {c.model} | {c.rerank} | {c.plain_s:.0f} | {c.memo_s:.0f} | {c.status} | "
              f"{c.numbers} |" for c in cells]
    lines += ["", (f"{same} of {len(cells)} cells give the same bits with and without the memo; "
                   f"the cells took {plain / 60:.1f} min without it and {memo / 60:.1f} min with "
                   "it.")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.table1_memo",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--memo", type=Path, required=True,
                    help="run folders of the memo-on sweep (BENCH_TABLE1_KEEP of the benchmark)")
    ap.add_argument("--plain", type=Path, required=True,
                    help="run folders of the memo-off sweep (<its results>/ralm/table1)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: results/bench/table1_memo.md (and .csv beside it)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cells = compare(args.memo, args.plain)
    cpu = cpu_of(_metrics(args.memo / cells[0].run_id))
    out = args.out or results_dir() / "bench" / "table1_memo.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(cells, cpu))
    write_csv(out.with_suffix(".csv"), [{**c.__dict__, "cpu": cpu} for c in cells])
    log.info("wrote %s", out)
    return 0 if all(c.status == "same bits" for c in cells) else 1


if __name__ == "__main__":
    raise SystemExit(main())
