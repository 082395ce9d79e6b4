"""Result tables of the RICHES experiments (Markdown + CSV under results/riches/), built
from the per-run CSV rows the runner appends (results/riches/<table>.csv)."""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text

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
           "thoughts", "autoais_scorer", "keys_articles", "keys_n_articles"]


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


def build_table(rows: Sequence[dict[str, str]], by: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """One line per setting (the last finished run of it), sorted by the setting columns."""
    latest: dict[tuple, dict[str, str]] = {}
    for r in rows:
        latest[tuple(r.get(c, "") for c in by) + (r.get("model", ""), r.get("dataset", ""))] = r
    metrics = [m for m in METRICS if any(r.get(m) not in (None, "") for r in latest.values())]
    context = [c for c in ["model", "dataset", "limit"] + [c for c in CONTEXT[4:] if c not in by]
               if c not in by]
    header = list(by) + metrics + context
    body = [[_fmt(r.get(c, "")) for c in header]
            for _, r in sorted(latest.items(), key=lambda kv: tuple(_sort_key(v) for v in kv[0]))]
    return header, body


def to_markdown(title: str, header: list[str], body: list[list[str]], note: str = "") -> str:
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


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
    header, body = build_table(rows, TABLES[table])
    note = ("AutoAIS column `autoais_substitute` is the offline LLM-judge substitute, not the "
            "TRUE T5-XXL AutoAIS of the paper. verbatim_rate = share of decoded keys found "
            "verbatim in the corpus (empty for the retrieve-then-read baselines: they decode "
            "no keys). keys_articles / keys_n_articles: which articles the key index covers "
            "(all = every corpus article; sample = a seeded random sample chosen without "
            "looking at any question).")
    md = results / "riches" / f"{table}_table.md"
    out_csv = results / "riches" / f"{table}_table.csv"
    atomic_write_text(md, to_markdown(f"RICHES {table} (ours)", header, body, note))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(body)
    atomic_write_text(out_csv, buf.getvalue())
    return md, out_csv
