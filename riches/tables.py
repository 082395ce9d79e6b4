"""Result tables of the RICHES experiments (Markdown + CSV under results/riches/), built
from the per-run CSV rows the runner appends (results/riches/<table>.csv)."""
from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text
from ragrepro.report.keyed import one_per_cell
from ragrepro.report.samples import DEFAULT_STATS, interval_for, paired_for, run_metrics
from ragrepro.report.table_stats import zero_mark

METRICS = ["f1_squad", "em_squad", "autoais", "autoais_substitute", "autoais_mean_score",
           "autoais_substitute_mean_score", "keys_per_answer",
           "verbatim_rate", "gold_title_recall", "seconds_per_question", "n"]
TABLES: dict[str, list[str]] = {
    "keys": ["key_type"],
    "beam": ["beam_size"],
    "interleave": ["thoughts", "adaptive"],
    # the baselines' retriever is part of the setting: BM25 and dense rows may both exist
    "main": ["dataset_hops", "riches_method", "retriever", "k"],
}
CONTEXT = ["model", "dataset", "split", "limit", "key_type", "beam_size", "adaptive",
           "thoughts", "autoais_scorer", "autoais_judge_accuracy", "keys_articles",
           "keys_n_articles"]
# Metrics that get a 95% CI over questions, and the ones RICHES is paired against its
# baselines on (main table).
CI_METRICS = ["f1_squad", "em_squad", "autoais", "autoais_substitute", "autoais_mean_score",
              "autoais_substitute_mean_score", "keys_per_answer", "verbatim_rate",
              "gold_title_recall"]
PAIRED = ["f1_squad", "autoais", "autoais_substitute"]
RunDir = Callable[[dict[str, str]], "Path | None"]


def _fmt(v: str) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return v or ""
    return f"{x:.3f}" if not x.is_integer() else str(int(x))


def _sort_key(v: str) -> tuple[int, float, str]:
    """Numbers in numeric order (1, 5, 10, 20), then text."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _no_dir(_row: dict[str, str]) -> Path | None:
    return None


def _settings_of(run_dir: RunDir) -> Callable[[dict[str, str]], dict]:
    def settings(r: dict[str, str]) -> dict:
        recorded = run_metrics(run_dir(r))[1]
        return recorded or {k: v for k, v in r.items() if k not in METRICS and k not in
                            ("run_id", "finished_at", "wall_s", "git_commit", "git_dirty",
                             "code_version", "code_id", "code_versions_mixed")}
    return settings


def _cell(r: dict[str, str], col: str, run_dir: RunDir) -> str:
    """A metric with its 95% CI over questions when the run's records give one."""
    text = _fmt(r.get(col, ""))
    if col not in CI_METRICS or not text:
        return text
    d = run_dir(r)
    iv = interval_for(d, run_metrics(d)[0], col)
    return f"{text} [{iv.low:.3f}, {iv.high:.3f}]" if iv else f"{text} (no CI)"


def paired_vs_riches(r: dict[str, str], rows: Sequence[dict[str, str]], metric: str,
                     run_dir: RunDir) -> str:
    """RICHES minus this baseline row on the same questions: paired 95% CI, p, ≈0 mark."""
    if r.get("riches_method") in ("riches", None, "") or r.get(metric) in (None, ""):
        return ""
    same = ("dataset_hops", "model", "dataset", "limit")
    ref = [x for x in rows if x.get("riches_method") == "riches"
           and all(x.get(k, "") == r.get(k, "") for k in same)]
    if len(ref) != 1 or ref[0].get(metric) in (None, ""):
        return "(no RICHES run to pair)"
    a, b = run_dir(ref[0]), run_dir(r)
    test, _why = paired_for(a, run_metrics(a)[0], b, run_metrics(b)[0], metric, "diff")
    diff = float(ref[0][metric]) - float(r[metric])
    if test is None:
        return f"{diff:+.3f} (no CI)"
    return (f"{diff:+.3f} [{test.low:+.3f}, {test.high:+.3f}] p={test.p_value:.2f}"
            f"{zero_mark(test.includes_zero, test.p_value)}")


def build_table(rows: Sequence[dict[str, str]], by: Sequence[str],
                run_dir: RunDir = _no_dir) -> tuple[list[str], list[list[str]]]:
    """One line per setting, sorted by the setting columns; two runs of one setting are
    refused, naming what differs. Metrics carry their 95% CI; baseline rows of the main
    table carry RICHES minus the row as a paired test."""
    key = list(by) + ["model", "dataset"]
    kept = one_per_cell(rows, key, "RICHES table", _settings_of(run_dir))
    kept.sort(key=lambda r: tuple(_sort_key(r.get(c, "")) for c in key))
    metrics = [m for m in METRICS if any(r.get(m) not in (None, "") for r in kept)]
    context = [c for c in ["model", "dataset", "limit"] + [c for c in CONTEXT[4:] if c not in by]
               if c not in by]
    paired = [m for m in PAIRED if m in metrics] if "riches_method" in by else []
    header = list(by) + metrics + [f"RICHES − row: {m}" for m in paired] + context
    body = [[_cell(r, c, run_dir) for c in list(by) + metrics]
            + [paired_vs_riches(r, kept, m, run_dir) for m in paired]
            + [_fmt(r.get(c, "")) for c in context] for r in kept]
    return header, body


def to_markdown(title: str, header: list[str], body: list[list[str]], note: str = "") -> str:
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def judge_note(rows: Sequence[dict[str, str]]) -> str:
    """The AutoAIS substitute's judge and its accuracy on the hand-checked set, for the label."""
    judges = sorted({f"{r.get('autoais_scorer')}: "
                     f"{r.get('autoais_judge_accuracy') or 'not recorded (an older row)'}"
                     for r in rows if str(r.get("autoais_scorer", "")).startswith("llm-judge")})
    if not judges:
        return ""
    return (" Judge accuracy on the hand-checked attribution set (docs/autoais.md; always-yes "
            "and always-no score 50%; results/judge/judge_eval.md): " + "; ".join(judges) + ".")


def fill_soft_score(row: dict[str, str], runs: Path) -> dict[str, str]:
    """Add the mean NLI score (RICHES app. 10.2) from the run's autoais.jsonl when the row
    predates that column."""
    import json

    key = "autoais_substitute" if row.get("autoais_substitute") not in (None, "") else "autoais"
    col = f"{key}_mean_score"
    path = runs / str(row.get("run_id")) / "autoais.jsonl"
    if row.get(col) in (None, "") and path.exists():
        scores = [json.loads(line).get("nli_score") or 0.0
                  for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        row[col] = str(sum(scores) / len(scores)) if scores else ""
    return row


def write_table(table: str, results: Path) -> tuple[Path, Path]:
    if table not in TABLES:
        raise DataError(f"unknown RICHES table {table!r}; use one of {sorted(TABLES)}.")
    src = results / "riches" / f"{table}.csv"
    if not src.exists():
        raise DataError(f"{src} does not exist: run `ragrepro -m experiment=riches/{table}` first.")
    with open(src, newline="", encoding="utf-8") as f:
        rows = [fill_soft_score(r, results / "riches" / table) for r in csv.DictReader(f)]
    runs = results / "riches" / table
    header, body = build_table(rows, TABLES[table], lambda r: runs / str(r.get("run_id")))
    note = ("AutoAIS column `autoais_substitute` is the offline LLM-judge substitute, not the "
            "TRUE T5-XXL AutoAIS of the paper. verbatim_rate = share of decoded keys found "
            "verbatim in the corpus (empty for the retrieve-then-read baselines: they decode "
            "no keys). keys_articles / keys_n_articles: which articles the key index covers "
            "(all = every corpus article; sample = a seeded random sample chosen without "
            "looking at any question). [low, high]: 95% percentile bootstrap CI over the "
            f"questions ({DEFAULT_STATS.resamples} resamples, seed {DEFAULT_STATS.seed}; "
            "ragrepro.stats). `RICHES − row`: RICHES minus "
            "the baseline on the same questions, paired bootstrap 95% CI, paired permutation "
            "p-value, ≈0 when the CI includes zero (not distinguishable from noise)."
            + judge_note(rows))
    md = results / "riches" / f"{table}_table.md"
    out_csv = results / "riches" / f"{table}_table.csv"
    atomic_write_text(md, to_markdown(f"RICHES {table} (ours)", header, body, note))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(body)
    atomic_write_text(out_csv, buf.getvalue())
    return md, out_csv
