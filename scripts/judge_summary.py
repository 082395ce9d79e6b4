"""A short view of the judge evaluation for the README: each judge's accuracy on the
hand-checked attribution set, at the threshold RICHES runs use and with a cross-validated one.

    python -m scripts.judge_summary     # results/judge/judge_eval.csv -> results/judge/summary.md
"""
from __future__ import annotations

import csv
import logging
from pathlib import Path

from ragrepro.paths import results_dir

log = logging.getLogger(__name__)


def pct(row: dict[str, str]) -> str:
    acc, lo, hi = (float(row[k]) * 100 for k in ("accuracy", "accuracy_ci_low", "accuracy_ci_high"))
    return f"{acc:.1f} [{lo:.1f}, {hi:.1f}]"


def render(rows: list[dict[str, str]]) -> str:
    """One line per judge: accuracy at 0.5, with the 5-fold CV threshold, and AUC."""
    by: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    for r in rows:
        by.setdefault((r["judge"], r["dtype"]), {})[r["threshold"]] = r
    n = rows[0]["n"] if rows else "0"
    head = ("| judge | dtype | accuracy at P(yes) > 0.5 [95% CI] | accuracy, CV threshold "
            "[95% CI] | AUC | n |")
    lines = [head, "|---|---|---|---|---|---|"]
    for (judge, dtype), cells in by.items():
        cv = cells.get("5-fold CV")
        fixed = next((r for t, r in cells.items() if t != "5-fold CV"), None)
        lines.append(f"| {judge} | {dtype} | {pct(fixed) if fixed else '-'} | "
                     f"{pct(cv) if cv else '-'} | {float((fixed or cv)['roc_auc']):.2f} | {n} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = results_dir() / "judge"
    with open(root / "judge_eval.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out: Path = root / "summary.md"
    out.write_text(render(rows), encoding="utf-8")
    log.info("wrote %s", out)


if __name__ == "__main__":
    main()
