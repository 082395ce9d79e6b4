"""Fig. 4 at mini scale with the Qwen2.5-Coder ladder: perplexity against model size, with and
without retrieval, and the ladder question of issue 17: does the 0.5B with retrieval reach the
1.5B without it? Built from the finished Table 1 runs (no model is run here):

    python -m scripts.fig4_ladder                         # wiki-vital: ralm/table1 + ralm/table1_ladder
    python -m scripts.fig4_ladder --corpus foldoc         # ralm/table1_foldoc + ralm/table1_ladder_foldoc

Writes results/ladder/fig4_<corpus>.md (and .csv). Every number has its 95% bootstrap CI over
blocks of consecutive windows; "reaches" is a paired test on the same blocks (the two Qwen sizes
share one tokenizer, so their windows and blocks coincide).
"""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrepro.paths import results_dir
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.runs import experiment_runs
from ragrepro.report.samples import interval_for, paired_for
from ragrepro.report.table_stats import fmt_ci, zero_mark

log = logging.getLogger(__name__)

EXPERIMENTS = {"wiki-vital": ("ralm/table1", "ralm/table1_ladder"),
               "foldoc": ("ralm/table1_foldoc", "ralm/table1_ladder_foldoc")}
ROWS = ("none", "first", "predictive", "zeroshot", "oracle", "gold")
SMALL, LARGE = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class Cell:
    model: str
    rerank: str
    dtype: str
    run_dir: Path
    metrics: dict[str, Any]
    settings: dict[str, Any] | None = None


def finished_cells(root: Path, experiment: str) -> list[Cell]:
    """The finished runs of one experiment (ragrepro.report.runs: its CSV index joined with
    the run folders), latest per model/rerank."""
    latest: dict[tuple[str, str], Cell] = {}
    for rec in experiment_runs(root, experiment):
        row = rec.text
        if rec.dir is not None and rec.metrics:
            latest[(row["model"], row["rerank"])] = Cell(row["model"], row["rerank"],
                                                         row["dtype"], rec.dir, rec.metrics,
                                                         rec.settings)
    return list(latest.values())


def ppl_cell(cell: Cell | None) -> str:
    if cell is None:
        return "not run"
    ci = interval_for(cell.run_dir, cell.metrics, "ppl_word")
    value = cell.metrics["ppl_word"]
    n = f" n={ci.n}" if ci else ""
    return fmt_ci(value, ci.low if ci else None, ci.high if ci else None) + n


def reach_line(a: Cell | None, b: Cell | None) -> str:
    """Paired relative difference of A (small + retrieval) against B (large, none)."""
    if a is None or b is None:
        return "not run"
    test, why = paired_for(a.run_dir, a.metrics, b.run_dir, b.metrics, "ppl_word", "rel")
    if test is None:
        return why
    return (f"{a.metrics['ppl_word']:.2f} vs {b.metrics['ppl_word']:.2f}: "
            f"{test.estimate * 100:+.1f}% [{test.low * 100:+.1f}, {test.high * 100:+.1f}], "
            f"n={test.n} {test.unit}, p={test.p_value:.3g}{zero_mark(test.includes_zero, test.p_value)} -> "
            f"{verdict(test.estimate, test.includes_zero)}")


def verdict(rel_diff: float, includes_zero: bool) -> str:
    """Small + retrieval against large without: 'reaches' when its perplexity is lower or the
    paired CI cannot tell them apart."""
    if rel_diff <= 0:
        return "reaches (lower perplexity)"
    return "reaches (not distinguishable)" if includes_zero else "does not reach"


DATA_KEYS = ("dataset", "dataset_variant", "split", "limit", "max_length", "stride",
             "query_len", "doc_max_tokens", "k", "near_dup")


def data_line(cells: list[Cell]) -> str:
    """Which data and settings produced the numbers (the settings every cell shares)."""
    shared: dict[str, Any] = {}
    for key in DATA_KEYS:
        values = {str(c.settings.get(key)) for c in cells if c.settings and key in c.settings}
        if len(values) == 1:
            shared[key] = values.pop()
    return "Data and settings: " + (", ".join(f"{k}={v}" for k, v in shared.items()) or "-") + "."


def model_params_m() -> dict[str, float]:
    """Model sizes (millions) from the Table 1 spec, the one place they are written."""
    return {m: float(v) / 1e6 for m, v in load_result_spec("ralm/table1")["model_size"].items()}


def render(corpus: str, cells: list[Cell]) -> str:
    by = {(c.model, c.rerank): c for c in cells}
    params = model_params_m()
    models = sorted({c.model for c in cells}, key=lambda m: params.get(m, 0))
    lines = [f"# Fig. 4 at mini scale on {corpus}: perplexity vs model size, with the Qwen ladder",
             "", ("Word-level perplexity [95% CI, blocks of windows >= 128 tokens; 2,000 "
                  "resamples, seed 0]. Lower is better. `oracle` and `gold` are upper bounds "
                  "(oracle: best of the k=4 BM25 documents by the targets' own likelihood; "
                  "gold: the evaluated text itself, a leak). Built by `python -m "
                  f"scripts.fig4_ladder{' --corpus ' + corpus if corpus != 'wiki-vital' else ''}`"
                  " from finished runs."),
             "", "| Model | Params (M) | dtype | " + " | ".join(ROWS) + " |",
             "|---|---|---|" + "---|" * len(ROWS)]
    for m in models:
        dtypes = sorted({c.dtype for c in cells if c.model == m})
        size = f"{params[m]:.0f}" if m in params else "?"
        lines.append(f"| {m} | {size} | {', '.join(dtypes)} | "
                     + " | ".join(ppl_cell(by.get((m, r))) for r in ROWS) + " |")
    lines += ["", data_line(cells), "n = blocks of consecutive windows per cell.", "",
              "## Ladder", "", "**Does the 0.5B with retrieval reach the 1.5B without it?**", "",
              ("Paired relative difference of the 0.5B's perplexity against the 1.5B without "
               "retrieval, on the same blocks (negative = the 0.5B is better; 'reaches' when "
               "it is better or the CI includes 0)."), ""]
    for r in ("first", "predictive", "zeroshot", "oracle", "gold"):
        label = {"first": "BM25", "oracle": "oracle (upper bound)",
                 "gold": "gold (upper bound, leak)"}.get(r, f"BM25 + {r}")
        lines.append(f"- 0.5B + {label}: {reach_line(by.get((SMALL, r)), by.get((LARGE, 'none')))}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=sorted(EXPERIMENTS), default="wiki-vital")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = results_dir()
    cells = [c for e in EXPERIMENTS[args.corpus] for c in finished_cells(root, e)]
    out = root / "ladder" / f"fig4_{args.corpus}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(args.corpus, cells), encoding="utf-8")
    log.info("wrote %s (%d cells)", out, len(cells))


if __name__ == "__main__":
    main()
