"""Build In-Context RALM Table 1 from finished runs: `python -m ralm.table1`.

Reads every finished run of the experiment (results/<name>/<run-id>/metrics.json), keeps the
newest run per (model, rerank) cell, and writes results/<name>_summary.csv and
results/<name>.md: our word-level perplexities, each row's relative gain over the same
model without retrieval, the paper's GPT-2 numbers beside them, and the headline question
answered from our numbers. (results/<name>.csv stays the runner's one-row-per-run file.)
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import logging
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.report.paper import lookup

log = logging.getLogger(__name__)

ROW_ORDER = ("none", "first", "zeroshot", "predictive", "oracle", "gold")
# Upper bounds, shown beside the real rows but never used to answer the headline: the oracle
# picks the best of k candidates with the targets' own likelihood, gold leaks the article.
UPPER_BOUNDS = ("oracle", "gold")
ROW_LABEL = {"none": ("-", "-"), "first": ("BM25", "-"), "zeroshot": ("BM25", "zero-shot"),
             "predictive": ("BM25", "predictive"), "oracle": ("BM25", "oracle (upper bound)"),
             "random": ("BM25", "random"), "gold": ("own article", "gold (upper bound, leak)")}
# Paper Table 1 rows (WikiText-103 test, word-level perplexity); the numbers themselves live
# once, in ragrepro/report/paper_numbers.yaml. Our model key -> the paper's row label.
PAPER_MODELS = {"gpt2-small": "GPT-2 S (110M)", "gpt2-medium": "GPT-2 M (345M)",
                "gpt2-large": "GPT-2 L (762M)", "gpt2-xl": "GPT-2 XL (1.5B)"}
# Our rerank name -> the YAML's (retrieval, rerank) keys.
PAPER_ROW_KEYS = {"none": ("none", "none"), "first": ("bm25", "none"),
                  "zeroshot": ("bm25", "zero-shot"), "predictive": ("bm25", "predictive")}


def paper_wt103(model: str, rerank: str) -> float:
    """The paper's Table 1 WikiText-103 perplexity for a GPT-2 model and one of our reranks."""
    retrieval, rr = PAPER_ROW_KEYS[rerank]
    n = lookup("ralm", "table1", model=model, retrieval=retrieval, rerank=rr,
               dataset="wikitext-103")
    if n.value is None:
        raise DataError(f"{n.source} has no value in paper_numbers.yaml.")
    return n.value


# Parameter counts, to order our models small -> large.
MODEL_SIZE = {"smollm2-135m": 135e6, "gemma3-270m": 268e6, "qwen2.5-coder-0.5b": 494e6,
              "qwen2.5-coder-1.5b": 1.54e9}
SETTING_KEYS = ("model_revision", "dataset", "dataset_variant", "split", "limit", "max_length",
                "stride", "retrieval_stride", "query_len", "doc_max_tokens", "k",
                "rerank_tokens", "scorer_model", "word_count", "stream", "add_bos",
                "window_bos", "retriever", "dtype", "seed", "near_dup", "near_dup_ngram",
                "near_dup_threshold", "near_dup_removed")


def finished_runs(root: Path, name: str) -> list[dict[str, Any]]:
    runs = []
    for p in sorted((root / name).glob("*/metrics.json")):
        if p.parent.name.startswith("tmp_"):
            continue
        m = json.loads(p.read_text())
        m["_mtime"] = p.stat().st_mtime
        m["_dir"] = str(p.parent)
        runs.append(m)
    return runs


def pick_cells(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Newest run per (model, rerank)."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: r["_mtime"]):
        st = r["settings"]
        cells[(st.get("model"), st.get("rerank"))] = r
    return cells


def rows_of(cells: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    models = sorted({m for m, _ in cells}, key=lambda m: (MODEL_SIZE.get(m, 1e18), m))
    rows = []
    for m in models:
        base = cells.get((m, "none"))
        base_ppl = base["metrics"]["ppl_word"] if base else None
        reranks = [x for x in ROW_ORDER if (m, x) in cells] + sorted(
            x for mm, x in cells if mm == m and x not in ROW_ORDER)
        for rk in reranks:
            r = cells[(m, rk)]
            ppl = r["metrics"]["ppl_word"]
            ret, rr = ROW_LABEL.get(rk, ("BM25", rk))
            if rk not in ("none", "gold"):
                ret = r["settings"].get("retriever") or ret
            rows.append({
                "model": m, "retrieval": ret, "reranking": rr, "rerank": rk,
                "ppl_word": round(ppl, 3), "ppl_token": round(r["metrics"]["ppl_token"], 3),
                "gain_vs_no_retrieval_pct": (round(100 * (base_ppl - ppl) / base_ppl, 1)
                                             if base_ppl and rk != "none" else None),
                "n_words": r["metrics"].get("n_words"), "n_tokens": r["metrics"].get("n_tokens"),
                **{k: r["settings"].get(k) for k in SETTING_KEYS},
                "run_id": r.get("run_id")})
    return rows


def headline(cells: dict[tuple[str, str], dict[str, Any]]) -> str:
    """Does the smaller model with retrieval reach the larger one without it?"""
    models = sorted({m for m, _ in cells}, key=lambda m: (MODEL_SIZE.get(m, 1e18), m))
    if len(models) < 2 or (models[-1], "none") not in cells:
        return "Not answerable yet: it needs two models and the larger one without retrieval."
    small, large = models[0], models[-1]
    target = cells[(large, "none")]["metrics"]["ppl_word"]
    paper = (f"paper: GPT-2 M + BM25 {paper_wt103('gpt2-medium', 'first')} beats GPT-2 L "
             f"{paper_wt103('gpt2-large', 'none')}, and with the predictive reranker GPT-2 M "
             f"{paper_wt103('gpt2-medium', 'predictive')} beats GPT-2 XL "
             f"{paper_wt103('gpt2-xl', 'none')}")
    if (small, "none") in cells and cells[(small, "none")]["metrics"]["ppl_word"] <= target:
        own = cells[(small, "none")]["metrics"]["ppl_word"]
        return (f"**Does the smaller model with retrieval reach the larger model without it? "
                f"Not a meaningful question here:** the smaller model {small} already has a "
                f"lower word-level perplexity without retrieval ({own:.2f}) than the larger "
                f"{large} ({target:.2f}), so these two models do not form a size ladder the "
                f"way GPT-2 S-XL do ({paper}). Compare each model's rows with its own "
                f"no-retrieval row instead.")
    lines = [f"Larger model {large} without retrieval: word-level perplexity {target:.2f}."]
    reached = []
    for rk in ROW_ORDER[1:]:
        if (small, rk) in cells and rk not in UPPER_BOUNDS:
            p = cells[(small, rk)]["metrics"]["ppl_word"]
            ok = p <= target
            reached.append(ok)
            lines.append(f"- {small} + {' + '.join(x for x in ROW_LABEL[rk] if x != '-')}: "
                         f"{p:.2f} -> {'reaches' if ok else 'does not reach'} it.")
    verdict = ("Yes" if any(reached) else "No") if reached else "Not answerable yet"
    lines.insert(0, f"**Does the smaller model with retrieval reach the larger model without "
                    f"it? {verdict}** (our numbers; {paper}).")
    return "\n".join(lines)


def to_markdown(rows: list[dict[str, Any]], cells: dict, name: str) -> str:
    out = [f"# In-Context RALM Table 1 (mini scale): `{name}`", "",
           ("Word-level perplexity (lower is better); gain = relative reduction versus the same "
            "model without retrieval. Settings of every row are in the summary CSV."), "",
           "| Model | Retrieval | Reranking | PPL (word) | PPL (token) | Gain vs none |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        g = "" if r["gain_vs_no_retrieval_pct"] is None else f"{r['gain_vs_no_retrieval_pct']}%"
        out.append(f"| {r['model']} | {r['retrieval']} | {r['reranking']} | {r['ppl_word']:.2f} "
                   f"| {r['ppl_token']:.2f} | {g} |")
    if rows:
        r0 = next((r for r in rows if r["rerank"] != "none"), rows[0])
        per_model = ("model_revision", "add_bos", "window_bos", "scorer_model", "rerank_tokens")
        out += ["", "Settings: " + ", ".join(f"{k}={r0.get(k)}" for k in SETTING_KEYS
                                            if k not in per_model) + " (k: retrieval rows).",
                "Per model: " + "; ".join(sorted({f"{r['model']} revision={r['model_revision']}"
                                                  f" add_bos={r['add_bos']} window_bos="
                                                  f"{r['window_bos']}" for r in rows})) + ".",
                "Zero-shot rows: s'=" + ", ".join(sorted({str(r["rerank_tokens"]) for r in rows
                                                          if r["rerank"] == "zeroshot"})
                                                  or ["-"]) + ", scored by the evaluated model.", ""]
    out += ["## Paper Table 1 (WikiText-103 test, word-level perplexity, GPT-2)", "",
            "| Model | none | BM25 | BM25 + zero-shot | BM25 + predictive |", "|---|---|---|---|---|"]
    for model, m in PAPER_MODELS.items():
        v = {rk: paper_wt103(model, rk) for rk in PAPER_ROW_KEYS}
        out.append(f"| {m} | {v['none']} | {v['first']} ({100 * (v['none'] - v['first']) / v['none']:.1f}%) "
                   f"| {v['zeroshot']} ({100 * (v['none'] - v['zeroshot']) / v['none']:.1f}%) "
                   f"| {v['predictive']} ({100 * (v['none'] - v['predictive']) / v['none']:.1f}%) |")
    out += ["", "## Headline", "", headline(cells), ""]
    return "\n".join(out)


def build(name: str = "ralm/table1", root: Path | None = None) -> tuple[Path, Path]:
    root = root or results_dir()
    runs = finished_runs(root, name)
    if not runs:
        raise SystemExit(f"No finished runs under {root / name}: run "
                         f"`ragrepro -m experiment={name}` first.")
    cells = pick_cells(runs)
    rows = rows_of(cells)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    csv_path = root / f"{name}_summary.csv"
    md_path = root / f"{name}.md"
    atomic_write_text(csv_path, buf.getvalue())
    atomic_write_text(md_path, to_markdown(rows, cells, name))
    log.info("Wrote %s and %s", csv_path, md_path)
    return csv_path, md_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", default="ralm/table1")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _csv, md = build(args.name)
    log.info("\n%s", md.read_text())


if __name__ == "__main__":
    main()
