"""Build In-Context RALM Table 1 from finished runs: `python -m ralm.table1`.

Reads every finished run of the experiment (results/<name>/<run-id>/metrics.json), one row
per run: runs that differ in any recorded setting are different rows, and the settings that
tell rows of one (model, rerank) apart are shown as columns; two runs with identical settings
are refused. Writes results/<name>_summary.csv and results/<name>.md: our word-level
perplexities with 95% bootstrap CIs (ragrepro.stats), each row's relative gain over the
no-retrieval run with the same settings, with its paired CI and p-value, the paper's GPT-2
numbers beside them, and the headline question answered from our numbers. (results/<name>.csv stays the runner's one-row-per-run file.)
"""
from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text, write_rows_csv
from ragrepro.paths import results_dir
from ragrepro.report.keyed import (
    KeyedRun,
    constant,
    distinguishing,
    refuse_indistinguishable,
    varying,
)
from ragrepro.report.paper import lookup
from ragrepro.report.samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for
from ragrepro.stats import Interval

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
# Settings that only exist for retrieval rows, only for one reranker, or per model: a
# difference between a retrieval row and the no-retrieval row in these is expected.
RETRIEVAL_ONLY = ("k", "retriever", "corpus", "n_forbidden_titles", "retrieval_file",
                  "forbidden_titles", "near_dup", "near_dup_ngram", "near_dup_threshold",
                  "near_dup_removed", "query_clean_spaces")
RERANK_ONLY = ("rerank_tokens", "scorer_model", "scorer_model_revision", "reranker_model",
               "reranker_encoder", "reranker_label_model")
MODEL_KEYS = ("model_revision", "add_bos", "window_bos")


def finished_runs(root: Path, name: str) -> list[dict[str, Any]]:
    runs = []
    for p in sorted((root / name).glob("*/metrics.json")):
        if p.parent.name.startswith("tmp_"):
            continue
        m = json.loads(p.read_text())
        m["_mtime"] = p.stat().st_mtime
        m["_dir"] = str(p.parent)
        cfg = p.parent / "config.json"
        m["_config"] = json.loads(cfg.read_text()) if cfg.exists() else {}
        runs.append(m)
    return runs


def _keyed(r: dict[str, Any]) -> KeyedRun:
    return KeyedRun(str(r.get("run_id")), dict(r.get("settings") or {}), r.get("_config") or {})


def _cell(r: dict[str, Any] | KeyedRun) -> tuple[Any, Any]:
    s = r.settings if isinstance(r, KeyedRun) else r["settings"]
    return (s.get("model"), s.get("rerank"))


def pick_cells(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, rerank) -> run, when every such cell has exactly one run (the headline's
    input); raises when two runs record identical settings."""
    refuse_indistinguishable([_keyed(r) for r in runs], "ralm table1")
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in runs:
        cells.setdefault(_cell(r), r)
    return cells


def baseline_of(run: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The no-retrieval run of the same model with the same settings (apart from the
    retrieval- and reranker-only ones)."""
    skip = {"rerank", *RETRIEVAL_ONLY, *RERANK_ONLY}
    for other in runs:
        if other["settings"].get("rerank") != "none" or other is run:
            continue
        pair = [run["settings"], other["settings"]]
        if not [k for k in varying(pair) if k not in skip]:
            return other
    return None


def _ci(iv: Interval | None) -> dict[str, Any]:
    return {"low": iv.low, "high": iv.high, "n": iv.n} if iv else {"low": None, "high": None,
                                                                  "n": None}


def _gain(r: dict[str, Any], base: dict[str, Any] | None, st: StatsSettings) -> dict[str, Any]:
    """Relative gain (base - ppl) / base in %, its paired CI and permutation p-value."""
    out: dict[str, Any] = {"gain_vs_no_retrieval_pct": None, "gain_ci_low": None,
                           "gain_ci_high": None, "gain_p": None, "gain_includes_zero": None,
                           "baseline_run_id": base.get("run_id") if base else None,
                           "gain_note": "" if base else "no no-retrieval run with these settings"}
    if base is None or r["settings"].get("rerank") == "none":
        out["gain_note"] = "" if r["settings"].get("rerank") == "none" else out["gain_note"]
        return out
    bp, pp = base["metrics"]["ppl_word"], r["metrics"]["ppl_word"]
    out["gain_vs_no_retrieval_pct"] = round(100 * (bp - pp) / bp, 1)
    test, why = paired_for(Path(r["_dir"]), r["metrics"], Path(base["_dir"]), base["metrics"],
                           "ppl_word", "rel", st)
    if test is None:
        out["gain_note"] = why
        return out
    # rel = (ppl - base) / base; the gain is its negative
    out.update(gain_ci_low=round(-100 * test.high, 1), gain_ci_high=round(-100 * test.low, 1),
               gain_p=round(test.p_value, 4), gain_includes_zero=test.includes_zero)
    return out


def rows_of(runs: list[dict[str, Any]], st: StatsSettings = DEFAULT_STATS) -> list[dict[str, Any]]:
    """One row per run (runs differing in any setting are different rows), ordered by model
    size then ROW_ORDER, with 95% CIs and the paired gain over the matching no-retrieval run."""
    refuse_indistinguishable([_keyed(r) for r in runs], "ralm table1")
    order = {rk: i for i, rk in enumerate(ROW_ORDER)}
    runs = sorted(runs, key=lambda r: (MODEL_SIZE.get(r["settings"].get("model"), 1e18),
                                       str(r["settings"].get("model")),
                                       order.get(r["settings"].get("rerank"), 99),
                                       str(r["settings"].get("rerank")), r["_mtime"]))
    rows = []
    for r in runs:
        s, m, rk = r["settings"], r["metrics"], r["settings"].get("rerank")
        ret, rr = ROW_LABEL.get(rk, ("BM25", rk))
        if rk not in ("none", "gold"):
            ret = s.get("retriever") or ret
        word = interval_for(Path(r["_dir"]), m, "ppl_word", st)
        tok = interval_for(Path(r["_dir"]), m, "ppl_token", st)
        rows.append({
            "model": s.get("model"), "retrieval": ret, "reranking": rr, "rerank": rk,
            "ppl_word": round(m["ppl_word"], 3), "ppl_word_ci_low": _r(_ci(word)["low"]),
            "ppl_word_ci_high": _r(_ci(word)["high"]),
            "ppl_token": round(m["ppl_token"], 3), "ppl_token_ci_low": _r(_ci(tok)["low"]),
            "ppl_token_ci_high": _r(_ci(tok)["high"]), "n_blocks": _ci(word)["n"],
            **_gain(r, baseline_of(r, runs), st),
            "n_words": m.get("n_words"), "n_tokens": m.get("n_tokens"),
            "stats_resamples": st.resamples, "stats_seed": st.seed,
            "stats_block_tokens": st.block_tokens,
            **{k: v for k, v in s.items() if k not in ("model", "rerank")},
            "git_commit": (r.get("metadata") or {}).get("git_commit"),
            "code_version": _code(r),
            "run_id": r.get("run_id")})
    return rows


def _code(r: dict[str, Any]) -> Any:
    """The code version a run was computed with (commit, +dirty), as the runner records it."""
    meta = r.get("metadata") or {}
    return meta.get("code_version") or meta.get("git_commit")


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


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


def _iv(v: Any, lo: Any, hi: Any, nd: int = 2) -> str:
    if lo is None or hi is None:
        return f"{v:.{nd}f} [no CI]"
    return f"{v:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def _gain_cells(r: dict[str, Any]) -> list[str]:
    g = r["gain_vs_no_retrieval_pct"]
    if r["rerank"] == "none":
        return ["(baseline)", "", ""]
    if g is None:
        return [f"– ({r['gain_note']})", "", ""]
    if r["gain_ci_low"] is None:
        return [f"{g:+.1f}% [no CI: {r['gain_note']}]", "", "unknown"]
    if r["gain_includes_zero"]:
        mark = "no (CI includes 0)"
    else:
        mark = "**yes**" if r["gain_p"] < 0.05 else "borderline (CI excludes 0, p >= 0.05)"
    return [f"{g:+.1f}% [{r['gain_ci_low']:+.1f}, {r['gain_ci_high']:+.1f}]",
            f"{r['gain_p']:.3f}", mark]


def _fmt_setting(v: Any) -> str:
    return "–" if v is None else str(v)


def _table_lines(rows: list[dict[str, Any]], extra: list[str]) -> list[str]:
    head = ["Model", "Retrieval", "Reranking", *extra, "n (blocks; tokens)",
            "PPL (word) [95% CI]", "PPL (token) [95% CI]", "Gain vs none [95% CI]", "p",
            "Gain distinguishable from 0"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join([
            str(r["model"]), str(r["retrieval"]), str(r["reranking"]),
            *[_fmt_setting(r.get(k)) for k in extra],
            f"{r['n_blocks'] if r['n_blocks'] is not None else '–'}; {r['n_tokens']}",
            _iv(r["ppl_word"], r["ppl_word_ci_low"], r["ppl_word_ci_high"]),
            _iv(r["ppl_token"], r["ppl_token_ci_low"], r["ppl_token_ci_high"]),
            *_gain_cells(r)]) + " |")
    return out


def verdict(rows: list[dict[str, Any]]) -> str:
    """Which gains are distinguishable from zero (their 95% CI excludes 0)."""
    gains = [r for r in rows if r["rerank"] != "none" and r["gain_includes_zero"] is not None]
    if not gains:
        return "No gain has an interval yet (no paired no-retrieval run)."
    sure = [r for r in gains if not r["gain_includes_zero"]]
    shaky = [r for r in sure if r["gain_p"] >= 0.05]
    names = "; ".join(
        f"{r['model']} {' + '.join(x for x in (r['retrieval'], r['reranking']) if x != '-')} "
        f"{r['gain_vs_no_retrieval_pct']:+.1f}% "
        f"({'retrieval helps' if r['gain_vs_no_retrieval_pct'] > 0 else 'retrieval hurts'})"
        for r in sure)
    caveat = (f" Of these, {len(shaky)} have a permutation p >= 0.05 (few units: read them "
              f"as borderline)." if shaky else "")
    return (f"**Gains distinguishable from zero (95% CI excludes 0): {len(sure)} of "
            f"{len(gains)}**{': ' + names if sure else ''}.{caveat} The others are within the "
            f"noise of this sample: their sign is not established.")


def settings_lines(rows: list[dict[str, Any]], runs: list[dict[str, Any]],
                   extra: list[str]) -> list[str]:
    """The settings common to the rows, printed once; per-scope settings on their own line."""
    all_s = [r["settings"] for r in runs]
    ret_s = [r["settings"] for r in runs if r["settings"].get("rerank") != "none"]
    scoped = {*RETRIEVAL_ONLY, *RERANK_ONLY, *MODEL_KEYS, "model", "rerank", *extra}
    common = {k: v for k, v in constant(all_s).items() if k not in scoped}
    lines = ["Settings common to all rows: " + ", ".join(f"{k}={v}" for k, v in common.items())
             + "."]
    if ret_s:
        rc = {k: v for k, v in constant(ret_s).items() if k in RETRIEVAL_ONLY and k not in extra}
        lines.append("Retrieval rows: " + ", ".join(f"{k}={v}" for k, v in rc.items()) + ".")
    lines.append("Per model: " + "; ".join(sorted({
        f"{r['model']} " + " ".join(f"{k}={r.get(k)}" for k in MODEL_KEYS if k not in extra)
        for r in rows})) + ".")
    codes = sorted({str(_code(r)) for r in runs})
    lines.append("Code version: " + codes[0] + "." if len(codes) == 1 else
                  "Code versions differ between rows: " + ", ".join(codes) +
                  " (see code_version in the summary CSV).")
    zs = sorted({str(r.get("rerank_tokens")) for r in rows if r["rerank"] == "zeroshot"})
    lines.append("Zero-shot rows: s'=" + (", ".join(zs) or "-") + ", scored by the "
                 "evaluated model (scorer_model).")
    return lines


def to_markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]], name: str,
                st: StatsSettings = DEFAULT_STATS) -> str:
    extra = distinguishing([_keyed(r) for r in runs], _cell)
    out = [f"# In-Context RALM Table 1 (mini scale): `{name}`", "",
           ("Word-level perplexity (lower is better) with its 95% confidence interval; gain = "
            "relative reduction versus the same model without retrieval (positive = retrieval "
            "helps), with the 95% CI of the paired difference and a two-sided paired "
            "permutation p-value. Every setting of every row is in the summary CSV."), "",
           (f"Uncertainty: {st.describe()}. The perplexity CIs are wide because the sample "
            f"is one stream of a few documents; the gains are paired on the same blocks and "
            f"are much tighter. With under ~20 blocks a percentile interval is approximate "
            f"(it tends to be too narrow); the permutation p-value is exact when all 2^n "
            f"swaps are enumerated (n <= {int(math.log2(st.resamples))} at {st.resamples} "
            f"resamples)."), ""]
    if extra:
        out += [(f"Rows of the same model and reranking differ in: {', '.join(extra)} "
                 f"(shown as columns)."), ""]
    out += _table_lines(rows, extra)
    out += ["", verdict(rows), ""]
    if rows:
        out += [*settings_lines(rows, runs, extra), ""]
    out += ["## Paper Table 1 (WikiText-103 test, word-level perplexity, GPT-2)", "",
            "| Model | none | BM25 | BM25 + zero-shot | BM25 + predictive |", "|---|---|---|---|---|"]
    for model, m in PAPER_MODELS.items():
        v = {rk: paper_wt103(model, rk) for rk in PAPER_ROW_KEYS}
        out.append(f"| {m} | {v['none']} | {v['first']} ({100 * (v['none'] - v['first']) / v['none']:.1f}%) "
                   f"| {v['zeroshot']} ({100 * (v['none'] - v['zeroshot']) / v['none']:.1f}%) "
                   f"| {v['predictive']} ({100 * (v['none'] - v['predictive']) / v['none']:.1f}%) |")
    out += ["", "The paper reports no confidence intervals.", "", "## Headline", ""]
    if extra:
        out.append(f"Not computed: several runs share a (model, reranking) cell (they differ "
                   f"in {', '.join(extra)}); build the table from one setting.")
    else:
        out.append(headline(pick_cells(runs)))
    return "\n".join(out + [""])


def build(name: str = "ralm/table1", root: Path | None = None,
          st: StatsSettings = DEFAULT_STATS) -> tuple[Path, Path]:
    root = root or results_dir()
    runs = finished_runs(root, name)
    if not runs:
        raise SystemExit(f"No finished runs under {root / name}: run "
                         f"`ragrepro -m experiment={name}` first.")
    rows = rows_of(runs, st)
    csv_path = root / f"{name}_summary.csv"
    md_path = root / f"{name}.md"
    write_rows_csv(csv_path, rows)
    atomic_write_text(md_path, to_markdown(rows, runs, name, st))
    log.info("Wrote %s and %s", csv_path, md_path)
    return csv_path, md_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", default="ralm/table1")
    ap.add_argument("--resamples", type=int, default=StatsSettings.resamples)
    ap.add_argument("--seed", type=int, default=StatsSettings.seed,
                    help="seed of the bootstrap and permutation resamples")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _csv, md = build(args.name, st=StatsSettings(args.resamples, args.seed))
    log.info("\n%s", md.read_text())


if __name__ == "__main__":
    main()
