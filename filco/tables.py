"""Result tables for the FilCo experiments, with the paper's numbers beside ours.

    python -m filco.tables fig4 [table2 table3 table4 table5 fig6 | all] [--paper-scale]

Reads results/filco/<exp>.csv (one row per run, written by the runner) and writes
results/filco/<exp>_table.md and <exp>_table.csv. Paper numbers: reference §7 (arXiv 2311.08377)."""
from __future__ import annotations

import csv
import io
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.tracking import read_csv

log = logging.getLogger(__name__)

TASK_COLS = {"nq-open": "NQ", "nq-open-dpr": "NQ", "triviaqa": "TQA", "triviaqa-dpr": "TQA",
             "hotpotqa": "HotpotQA", "eli5": "ELI5", "fever": "FEVER", "wow": "WoW"}
SETTING_ORDER = ["full", "psg", "filco", "silver"]
MODEL_FAMILY = {"flan-t5-xl": "Flan-T5", "llama2-7b": "Llama 2"}

# Figure 4 text: FilCo minus Full, top-1
PAPER_FIG4_DELTA = {
    "Flan-T5": {"NQ": 4.3, "TQA": 1.1, "HotpotQA": 1.0, "ELI5": 0.6, "FEVER": 6.2, "WoW": 3.5},
    "Llama 2": {"NQ": 8.6, "TQA": 0.2, "HotpotQA": 1.3, "ELI5": 2.6, "FEVER": 4.3, "WoW": 1.1},
}
# Table 5 (Flan-T5, top-5; "filco_top1" is the paper's FilCo top-1 row)
PAPER_TABLE5 = {
    "full": {"NQ": 47.6, "TQA": 67.3, "HotpotQA": 61.5, "ELI5": 72.7, "FEVER": 88.0, "WoW": 64.8},
    "psg": {"NQ": 52.9, "TQA": 69.1, "HotpotQA": 62.3, "ELI5": 73.7, "FEVER": 90.7, "WoW": 64.6},
    "filco": {"NQ": 61.8, "TQA": 71.1, "HotpotQA": 65.0, "ELI5": 73.9, "FEVER": 91.4, "WoW": 66.0},
    "silver": {"NQ": 62.0, "TQA": 71.1, "HotpotQA": 65.2, "ELI5": 73.9, "FEVER": 92.2, "WoW": 66.1},
}
# Table 2: recall and precision, (top-1, top-5)
PAPER_TABLE2 = {
    "recall": {"NQ": (50.1, 74.1), "TQA": (61.2, 77.8), "HotpotQA": (16.7, 27.3),
               "ELI5": (13.1, 25.7), "FEVER": (57.0, 75.9), "WoW": (34.9, 54.8)},
    "precision": {"NQ": (2.5, 2.7), "TQA": (4.5, 4.8), "HotpotQA": (2.1, 0.4),
                  "ELI5": (97.7, 55.1), "FEVER": (1.3, 1.4), "WoW": (16.4, 17.7)},
}
# Table 3: unigram precision of outputs against the context
PAPER_TABLE3 = {
    "full": {"NQ": 2.5, "TQA": 4.5, "HotpotQA": 2.6, "ELI5": 92.9, "FEVER": 1.2, "WoW": 10.8},
    "psg": {"NQ": 1.3, "TQA": 3.0, "HotpotQA": 2.6, "ELI5": 92.5, "FEVER": 1.2, "WoW": 35.5},
    "filco": {"NQ": 5.1, "TQA": 8.4, "HotpotQA": 10.8, "ELI5": 98.8, "FEVER": 5.1, "WoW": 62.9},
    "silver": {"NQ": 7.3, "TQA": 4.6, "HotpotQA": 17.1, "ELI5": 98.8, "FEVER": 4.4, "WoW": 71.5},
}
# Table 4: StrInc / Lexical / CXMI
PAPER_TABLE4 = {
    "Flan-T5": {"NQ": (44.7, 30.0, 39.9), "TQA": (59.2, 39.0, 45.3), "HotpotQA": (59.2, 57.4, 60.0),
                "ELI5": (73.6, 73.9, 74.2), "FEVER": (80.9, 86.4, 95.8), "WoW": (63.4, 69.3, 66.6)},
    "Llama 2": {"NQ": (43.3, 35.2, 41.8), "TQA": (60.7, 57.1, 60.7), "HotpotQA": (59.5, 61.1, 61.3),
                "ELI5": (78.6, 78.8, 72.8), "FEVER": (86.6, 88.4, 92.3), "WoW": (65.5, 66.0, 65.4)},
}
MEASURE_INDEX = {"strinc": 0, "lexical": 1, "cxmi": 2}
NOTE = ("Mini scale: vital-qa / fanout-grounded with wiki-vital BM25 passages, smollm2-135m "
        "(causal, LoRA, a few steps) and a tiny RANDOMLY initialised T5 (seq2seq plumbing only; "
        "its scores are meaningless). Paper columns apply to the paper's datasets only.")


def _f(x: object, nd: int = 1) -> str:
    try:
        return f"{float(x):.{nd}f}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"


def _latest(rows: Sequence[dict], key: Sequence[str]) -> list[dict]:
    """One row per key (the last finished)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        out[tuple(r.get(k, "") for k in key)] = r
    return list(out.values())


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def _csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _family(r: dict) -> str:
    return MODEL_FAMILY.get(r.get("generator", ""), r.get("generator", ""))


def table_settings(rows: Sequence[dict], value: str, paper: dict | None,
                   settings: Sequence[str] = SETTING_ORDER) -> tuple[list[str], list[list[str]]]:
    """Rows (generator, family, k, dataset) x settings; FilCo-Full; paper values beside."""
    rows = _latest(rows, ["generator", "eval_dataset", "k", "setting"])
    keys = sorted({(r["generator"], r.get("family", ""), r.get("k", ""), r["eval_dataset"])
                   for r in rows})
    header = ["generator", "family", "k", "dataset", "n_eval", *settings]
    if "filco" in settings and "full" in settings:
        header.append("FilCo−Full")
    if paper is not None:
        header += [f"paper {s}" for s in settings if s in paper] + (
            ["paper FilCo−Full"] if "delta" in paper else [])
    out = []
    for g, fam, k, ds in keys:
        cells = {r["setting"]: r for r in rows
                 if (r["generator"], r.get("family", ""), r.get("k", ""), r["eval_dataset"]) == (g, fam, k, ds)}
        n = next(iter(cells.values())).get("n_eval", "")
        line = [g, fam, k, ds, n] + [_f(cells[s].get(value)) if s in cells else "–" for s in settings]
        if "FilCo−Full" in header:
            try:
                line.append(_f(float(cells["filco"][value]) - float(cells["full"][value])))
            except (KeyError, ValueError):
                line.append("–")
        if paper is not None:
            col = TASK_COLS.get(ds)
            line += [_f(paper[s].get(col)) if col else "–" for s in settings if s in paper]
            if "delta" in paper:
                fam_name = MODEL_FAMILY.get(g)
                line.append(_f(paper["delta"].get(fam_name, {}).get(col)) if col and fam_name else "–")
        out.append(line)
    return header, out


def paper_block(title: str, table: dict, cols: Sequence[str] = ("NQ", "TQA", "HotpotQA", "ELI5",
                                                                 "FEVER", "WoW")) -> str:
    rows = [[name] + [" / ".join(_f(v) for v in vals[c]) if isinstance(vals[c], tuple)
                      else _f(vals[c]) for c in cols] for name, vals in table.items()]
    return f"**{title}**\n\n" + _markdown(["", *cols], rows)


def build(exp: str, root: Path | None = None, prefix: str = "filco") -> Path:
    root = root or results_dir()
    src = root / prefix / f"{exp}.csv"
    rows = read_csv(src)
    if not rows:
        raise SystemExit(f"No results in {src}: run `ragrepro -m experiment={prefix}/{exp}` first.")
    paper_md = ""
    if exp == "fig4":
        header, body = table_settings(rows, "score", {"delta": PAPER_FIG4_DELTA})
        title = "Figure 4: Full / Psg / FilCo / Silver, top-1 passage (score: EM or F1, x100)"
        paper_md = paper_block("Paper, Figure 4 text: FilCo − Full (top-1)", PAPER_FIG4_DELTA)
    elif exp == "table5":
        header, body = table_settings(rows, "score", PAPER_TABLE5)
        title = "Table 5: Full / Psg / FilCo / Silver, top-5 passages (x100)"
        paper_md = paper_block("Paper, Table 5 (Flan-T5, top-5)", PAPER_TABLE5)
    elif exp == "table3":
        header, body = table_settings(rows, "context_precision", PAPER_TABLE3)
        title = "Table 3: unigram precision of the gold output against the context (x100)"
        paper_md = paper_block("Paper, Table 3", PAPER_TABLE3)
    elif exp == "fig6":
        header, body = table_settings(rows, "input_tokens", None, ["full", "psg", "filco"])
        header[-1] = "FilCo−Full (tokens)"
        header.append("FilCo reduction %")
        for line in body:
            try:
                full, fil = float(line[5]), float(line[7])
                line.append(_f(100 * (full - fil) / full))
            except ValueError:
                line.append("–")
        title = "Figure 6: generator input length in tokens (query + context), mean"
        paper_md = "**Paper, Figure 6:** FilCo reduces input length by 44–64% (Llama tokenizer)."
    elif exp == "table4":
        rows = _latest(rows, ["generator", "eval_dataset", "measure"])
        keys = sorted({(r["generator"], r["eval_dataset"]) for r in rows})
        header = ["generator", "dataset", "StrInc", "Lexical", "CXMI", "silver empty (train) S/L/C",
                  "paper StrInc", "paper Lexical", "paper CXMI"]
        body = []
        for g, ds in keys:
            cell = {r["measure"]: r for r in rows if (r["generator"], r["eval_dataset"]) == (g, ds)}
            paper = PAPER_TABLE4.get(MODEL_FAMILY.get(g, ""), {}).get(TASK_COLS.get(ds, ""))
            body.append([g, ds] + [_f(cell[m]["score"]) if m in cell else "–" for m in MEASURE_INDEX]
                        + ["/".join(_f(100 * float(cell[m]["silver_empty_train"]), 0) if m in cell
                                    else "–" for m in MEASURE_INDEX)]
                        + [_f(paper[i]) if paper else "–" for i in range(3)])
        title = "Table 4: FilCo score by the measure that built the silver contexts (x100)"
        paper_md = paper_block("Paper, Table 4 (StrInc / Lexical / CXMI)", PAPER_TABLE4)
    elif exp == "table2":
        rows = _latest(rows, ["eval_dataset", "k"])
        keys = sorted({r["eval_dataset"] for r in rows})
        header = ["dataset", "n_eval", "recall@1 (answer)", "recall@5 (answer)", "recall@1 (title)",
                  "recall@5 (title)", "precision@1", "precision@5", "paper recall", "paper precision"]
        body = []
        for ds in keys:
            by_k = {str(r["k"]): r for r in rows if r["eval_dataset"] == ds}
            col = TASK_COLS.get(ds)

            def g(k: str, m: str, by_k: dict = by_k) -> str:
                return _f(by_k[k][m]) if k in by_k else "–"
            body.append([ds, next(iter(by_k.values())).get("n_eval", ""),
                         g("1", "recall_answer"), g("5", "recall_answer"), g("1", "recall_title"),
                         g("5", "recall_title"), g("1", "precision"), g("5", "precision"),
                         " / ".join(map(_f, PAPER_TABLE2["recall"][col])) if col else "–",
                         " / ".join(map(_f, PAPER_TABLE2["precision"][col])) if col else "–"])
        title = "Table 2: retrieval recall and unigram precision of positive passages (x100)"
        paper_md = paper_block("Paper, Table 2 (top-1 / top-5)", PAPER_TABLE2)
    else:
        raise SystemExit(f"Unknown FilCo table {exp!r}; use fig4, table2, table3, table4, table5, fig6.")
    md = f"## {title}\n\n{NOTE}\n\n{_markdown(header, body)}\n\n{paper_md}\n\nSource: {src}\n"
    out = root / prefix / f"{exp}_table.md"
    atomic_write_text(out, md)
    atomic_write_text(out.with_suffix(".csv"), _csv(header, body))
    log.info("Wrote %s", out)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    prefix = "filco/paper" if "--paper-scale" in args else "filco"
    names = [a for a in args if not a.startswith("--")] or ["all"]
    if names == ["all"]:
        names = ["table2", "fig4", "table3", "table4", "table5", "fig6"]
    for n in names:
        try:
            build(n, prefix=prefix)
        except SystemExit as e:
            log.warning("%s", e)


if __name__ == "__main__":
    main()
