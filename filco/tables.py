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
from ragrepro.report.keyed import one_per_cell
from ragrepro.report.paper import find, paper_table
from ragrepro.report.samples import DEFAULT_STATS, interval_for, paired_for, run_metrics
from ragrepro.report.table_stats import zero_mark
from ragrepro.tracking import read_csv

log = logging.getLogger(__name__)

TASK_COLS = {"nq-open": "NQ", "nq-open-dpr": "NQ", "triviaqa": "TQA", "triviaqa-dpr": "TQA",
             "hotpotqa": "HotpotQA", "eli5": "ELI5", "fever": "FEVER", "wow": "WoW"}
SETTING_ORDER = ["full", "psg", "filco", "silver"]
MODEL_FAMILY = {"flan-t5-xl": "Flan-T5", "llama2-7b": "Llama 2"}

PAPER_COLS = ("NQ", "TQA", "HotpotQA", "ELI5", "FEVER", "WoW")
MEASURE_INDEX = {"strinc": 0, "lexical": 1, "cxmi": 2}
MINI_NOTE = ("Mini scale: vital-qa / fanout-grounded with wiki-vital BM25 passages, smollm2-135m "
             "(causal, LoRA, a few steps) and a tiny RANDOMLY initialised T5 (seq2seq plumbing "
             "only; its scores are meaningless). Paper columns apply to the paper's datasets "
             "only.")
PAPER_NOTE = ("Paper scale (results/filco/paper): the paper's datasets, models and settings "
              "as configured in conf/experiment/filco/paper/; see each row's n_eval and the "
              "run's config for what differs from the paper.")
# The paper's task numbers are the official eval.py's (EM with punctuation kept, character
# F1, FEVER accuracy = EM on the label), so the columns beside them are our `score_code`:
# the same metric on our predictions, extracted as the official scripts extract them.
VALUE = "score_code"
METRIC_NOTE = ("Scores: the official eval.py metric (`score_code`: EM or character-level F1, "
               "x100), the metric of the paper's numbers; `score` (SQuAD-normalised) is in the "
               "run CSV.")


def note_for(prefix: str) -> str:
    """The table note: mini or paper scale, from the results folder the table is built from."""
    return PAPER_NOTE if prefix.rstrip("/").endswith("paper") else MINI_NOTE

STATS_NOTE = ("Each of our numbers: [95% CI] from a percentile bootstrap over the evaluated "
              f"questions ({DEFAULT_STATS.resamples} resamples, seed {DEFAULT_STATS.seed}; "
              "ragrepro.stats). FilCo−Full: the paired "
              "difference on the same questions with its 95% CI, a paired permutation p-value, "
              "and ≈0 when the CI includes zero (not distinguishable from noise). The paper "
              "reports no intervals.")


# The paper's numbers live once, in ragrepro/report/paper_numbers.yaml; these functions only
# reshape them into {row: {column: value}} grids for the builders below.
def _grid(table: str, row_key: str, **keys: object) -> dict[str, dict[str, float | None]]:
    """{row key value: {column label: value}} of one FilCo paper table, cells filtered by keys."""
    out: dict[str, dict[str, float | None]] = {}
    for n in find("filco", table, **keys):
        out.setdefault(str(n.keys[row_key]), {})[n.column] = n.value
    return out


def paper_fig4_delta() -> dict[str, dict[str, float | None]]:
    """Figure 4 text: FilCo minus Full, top-1, by model family."""
    grid = _grid("fig4_delta", "model")
    return {MODEL_FAMILY[m]: {c: row[c] for c in PAPER_COLS} for m, row in grid.items()}


def paper_by_setting(table: str, **keys: object) -> dict[str, dict[str, float | None]]:
    """Table 3 / Table 5: rows Full, Psg, FilCo, Silver (Table 5: pass top_k=5)."""
    grid = _grid(table, "method", **keys)
    return {s: grid[s] for s in SETTING_ORDER}


def paper_table4() -> dict[str, dict[str, tuple[float | None, ...]]]:
    """Table 4: family -> dataset column -> (StrInc, Lexical, CXMI)."""
    out: dict[str, dict[str, list[float | None]]] = {}
    for n in paper_table("filco", "table4"):
        cell = out.setdefault(MODEL_FAMILY[n.keys["model"]], {}).setdefault(n.column, [None] * 3)
        cell[MEASURE_INDEX[n.keys["measure"]]] = n.value
    return {fam: {c: tuple(v) for c, v in cols.items()} for fam, cols in out.items()}


def paper_table2() -> dict[str, dict[str, tuple[float | None, ...]]]:
    """Table 2: recall / precision -> dataset column -> (top-1, top-5)."""
    out: dict[str, dict[str, dict[int, float | None]]] = {}
    for n in paper_table("filco", "table2"):
        col = n.column.split(" top-")[0]
        out.setdefault(n.keys["measure"], {}).setdefault(col, {})[int(n.keys["top_k"])] = n.value
    return {m: {c: (v[1], v[5]) for c, v in cols.items()} for m, cols in out.items()}


def _f(x: object, nd: int = 1) -> str:
    try:
        return f"{float(x):.{nd}f}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"


# Columns of a FilCo CSV row that are outputs, not settings.
OUTPUTS = frozenset({"score", "score_code", "context_precision", "input_tokens",
                     "context_tokens", "context_empty", "silver_empty_train", "metric",
                     "metric_code", "recall_answer", "recall_title", "precision", "git_commit",
                     "git_dirty", "wall_s", "finished_at", "em_squad", "f1_squad", "accuracy",
                     "em_filco_code", "f1_char_filco_code", "unigram_precision",
                     "recall_at_k", "code_version", "code_id", "code_versions_mixed"})


def with_run_dirs(rows: Sequence[dict], runs_dir: Path) -> list[dict]:
    """The CSV rows, each with `_dir`: its run folder (per-sample records for the CIs)."""
    return [{**r, "_dir": runs_dir / str(r["run_id"])} if r.get("run_id") else dict(r)
            for r in rows]


def _run_dir(r: dict) -> Path | None:
    return r.get("_dir")


def _settings_of(r: dict) -> dict:
    settings = run_metrics(_run_dir(r))[1]
    return settings or {k: v for k, v in r.items() if k not in OUTPUTS and k != "_dir"}


def _latest(rows: Sequence[dict], key: Sequence[str]) -> list[dict]:
    """One row per key; two runs with the same key are refused, naming the differing setting
    (a table never silently keeps the newest of two settings)."""
    return one_per_cell(rows, key, "FilCo table", _settings_of)


def _ci(r: dict, value: str, nd: int = 1) -> str:
    """The row's value with its 95% bootstrap CI over questions (per-sample records)."""
    d = _run_dir(r)
    iv = interval_for(d, run_metrics(d)[0], value)
    if iv is None:
        return f"{_f(r.get(value), nd)} (no CI)"
    return f"{_f(r.get(value), nd)} [{iv.low:.{nd}f}, {iv.high:.{nd}f}]"


def _paired_delta(a: dict, b: dict, value: str) -> str:
    """a - b on the same questions, its paired 95% CI, permutation p and the ≈0 mark."""
    diff = _f(float(a[value]) - float(b[value]))
    da, db = _run_dir(a), _run_dir(b)
    test, _why = paired_for(da, run_metrics(da)[0], db, run_metrics(db)[0], value, "diff")
    if test is None:
        return f"{diff} (no CI)"
    return (f"{diff} [{test.low:+.1f}, {test.high:+.1f}] p={test.p_value:.2f}"
            f"{zero_mark(test.includes_zero, test.p_value)}")


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
        line = [g, fam, k, ds, n] + [_ci(cells[s], value) if s in cells else "–" for s in settings]
        if "FilCo−Full" in header:
            try:
                line.append(_paired_delta(cells["filco"], cells["full"], value))
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


def paper_block(title: str, table: dict, cols: Sequence[str] = PAPER_COLS) -> str:
    rows = [[name] + [" / ".join(_f(v) for v in vals[c]) if isinstance(vals[c], tuple)
                      else _f(vals[c]) for c in cols] for name, vals in table.items()]
    return f"**{title}**\n\n" + _markdown(["", *cols], rows)


def build(exp: str, root: Path | None = None, prefix: str = "filco") -> Path:
    root = root or results_dir()
    src = root / prefix / f"{exp}.csv"
    rows = read_csv(src)
    rows = with_run_dirs(rows, root / prefix / exp)
    if not rows:
        raise SystemExit(f"No results in {src}: run `ragrepro -m experiment={prefix}/{exp}` first.")
    paper_md = ""
    if exp == "fig4":
        delta = paper_fig4_delta()
        header, body = table_settings(rows, VALUE, {"delta": delta})
        title = "Figure 4: Full / Psg / FilCo / Silver, top-1 passage (eval.py EM or F1, x100)"
        paper_md = paper_block("Paper, Figure 4 text: FilCo − Full (top-1)", delta)
    elif exp == "table5":
        table5 = paper_by_setting("table5", top_k=5)
        header, body = table_settings(rows, VALUE, table5)
        title = "Table 5: Full / Psg / FilCo / Silver, top-5 passages (eval.py EM or F1, x100)"
        paper_md = paper_block("Paper, Table 5 (Flan-T5, top-5)", table5)
    elif exp == "table3":
        table3 = paper_by_setting("table3")
        header, body = table_settings(rows, "context_precision", table3)
        title = "Table 3: unigram precision of the gold output against the context (x100)"
        paper_md = paper_block("Paper, Table 3", table3)
    elif exp == "fig6":
        header, body = table_settings(rows, "input_tokens", None, ["full", "psg", "filco"])
        header[-1] = "FilCo−Full (tokens)"
        header.append("FilCo reduction %")
        for line in body:
            try:
                full, fil = float(line[5].split()[0]), float(line[7].split()[0])
                line.append(_f(100 * (full - fil) / full))
            except ValueError:
                line.append("–")
        title = "Figure 6: generator input length in tokens (query + context), mean"
        paper_md = "**Paper, Figure 6:** FilCo reduces input length by 44–64% (Llama tokenizer)."
    elif exp == "table4":
        rows = _latest(rows, ["generator", "eval_dataset", "measure"])
        keys = sorted({(r["generator"], r["eval_dataset"]) for r in rows})
        table4 = paper_table4()
        header = ["generator", "dataset", "StrInc", "Lexical", "CXMI", "silver empty (train) S/L/C",
                  "paper StrInc", "paper Lexical", "paper CXMI"]
        body = []
        for g, ds in keys:
            cell = {r["measure"]: r for r in rows if (r["generator"], r["eval_dataset"]) == (g, ds)}
            paper = table4.get(MODEL_FAMILY.get(g, ""), {}).get(TASK_COLS.get(ds, ""))
            body.append([g, ds] + [_ci(cell[m], VALUE) if m in cell else "–" for m in MEASURE_INDEX]
                        + ["/".join(_f(100 * float(cell[m]["silver_empty_train"]), 0) if m in cell
                                    else "–" for m in MEASURE_INDEX)]
                        + [_f(paper[i]) if paper else "–" for i in range(3)])
        title = ("Table 4: FilCo score by the measure that built the silver contexts "
                 "(eval.py EM or F1, x100)")
        paper_md = paper_block("Paper, Table 4 (StrInc / Lexical / CXMI)", table4)
    elif exp == "table2":
        rows = _latest(rows, ["eval_dataset", "k"])
        keys = sorted({r["eval_dataset"] for r in rows})
        table2 = paper_table2()
        header = ["dataset", "n_eval", "recall@1 (answer)", "recall@5 (answer)", "recall@1 (title)",
                  "recall@5 (title)", "precision@1", "precision@5", "paper recall", "paper precision"]
        body = []
        for ds in keys:
            by_k = {str(r["k"]): r for r in rows if r["eval_dataset"] == ds}
            col = TASK_COLS.get(ds)

            def g(k: str, m: str, by_k: dict = by_k) -> str:
                return _ci(by_k[k], m) if k in by_k else "–"
            body.append([ds, next(iter(by_k.values())).get("n_eval", ""),
                         g("1", "recall_answer"), g("5", "recall_answer"), g("1", "recall_title"),
                         g("5", "recall_title"), g("1", "precision"), g("5", "precision"),
                         " / ".join(map(_f, table2["recall"][col])) if col else "–",
                         " / ".join(map(_f, table2["precision"][col])) if col else "–"])
        title = "Table 2: retrieval recall and unigram precision of positive passages (x100)"
        paper_md = paper_block("Paper, Table 2 (top-1 / top-5)", table2)
    else:
        raise SystemExit(f"Unknown FilCo table {exp!r}; use fig4, table2, table3, table4, table5, fig6.")
    note = note_for(prefix) + (f" {METRIC_NOTE}" if exp in ("fig4", "table5", "table4") else "")
    md = (f"## {title}\n\n{note}\n\n{STATS_NOTE}\n\n{_markdown(header, body)}\n\n{paper_md}\n\n"
          f"Source: {src}\n")
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
