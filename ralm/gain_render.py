"""Markdown of the `ralm.table1` results table (RALM Table 1), a pure function of its summary rows
(ralm.gain_rows) and its spec: the table, which gains are distinguishable from
zero, the settings line, code versions, the paper's grid and the headline."""
from __future__ import annotations

import math
from typing import Any

from ragrepro.errors import DataError
from ragrepro.report import verdict as repro
from ragrepro.report.keyed import KeyedRun, constant, distinguishing
from ragrepro.report.paper import find, lookup, table_recorded
from ragrepro.report.samples import DEFAULT_STATS, StatsSettings

Row = dict[str, Any]
# Row columns that are outputs or labels, not the run's recorded settings.
OUTPUT_COLUMNS = ("model", "retrieval", "reranking", "ppl_word", "ppl_word_ci_low",
                  "ppl_word_ci_high", "ppl_token", "ppl_token_ci_low", "ppl_token_ci_high",
                  "n_blocks", "gain_vs_no_retrieval_pct", "gain_ci_low", "gain_ci_high",
                  "gain_p", "gain_includes_zero", "baseline_run_id", "gain_note", "n_words",
                  "n_tokens", "stats_resamples", "stats_seed", "stats_block_tokens",
                  "git_commit", "code_version", "run_id", "flags")


def settings_of(row: Row) -> dict[str, Any]:
    """The run's recorded settings, read back from its row."""
    return {"model": row["model"], **{k: v for k, v in row.items()
                                      if k not in OUTPUT_COLUMNS}}


def _keyed(row: Row, spec: dict[str, Any]) -> KeyedRun:
    return KeyedRun(str(row.get("run_id")), settings_of(row), {})


def paper_ppl(spec: dict[str, Any], model: str, rerank: str) -> float:
    """The paper's perplexity for one of its models and one of our reranks."""
    p = spec["paper"]
    col = p["columns"][rerank]
    look = dict(p["lookup"])
    n = lookup(look.pop("paper"), look.pop("table"), model=model, retrieval=col["retrieval"],
               rerank=col["rerank"], **look)
    if n.value is None:
        raise DataError(f"{n.source} has no value in {n.paper}/conf/report/paper/{n.paper}.yaml.")
    return n.value


def _label(spec: dict[str, Any], rk: str) -> str:
    return " + ".join(x for x in spec["labels"][rk] if x != "-")


def headline(cells: dict[tuple[str, str], Row], spec: dict[str, Any]) -> str:
    """Does the smaller model with retrieval reach the larger one without it?"""
    sizes, ref = spec["model_size"], spec["reference"]
    models = sorted({m for m, _ in cells}, key=lambda m: (float(sizes.get(m, 1e18)), m))
    if len(models) < 2 or (models[-1], ref) not in cells:
        return "Not answerable yet: it needs two models and the larger one without retrieval."
    small, large = models[0], models[-1]
    target = cells[(large, ref)]["ppl_word"]
    paper = spec["paper"]["headline"].format_map(_PaperCells(spec))
    if (small, ref) in cells and cells[(small, ref)]["ppl_word"] <= target:
        own = cells[(small, ref)]["ppl_word"]
        return (f"**Does the smaller model with retrieval reach the larger model without it? "
                f"Not a meaningful question here:** the smaller model {small} already has a "
                f"lower word-level perplexity without retrieval ({own:.2f}) than the larger "
                f"{large} ({target:.2f}), so these two models do not form a size ladder the "
                f"way {spec['paper']['ladder']} do ({paper}). Compare each model's rows with its own "
                f"no-retrieval row instead.")
    lines = [f"Larger model {large} without retrieval: word-level perplexity {target:.2f}."]
    reached = []
    for rk in spec["order"][1:]:
        if (small, rk) in cells and rk not in spec["upper_bounds"]:
            p = cells[(small, rk)]["ppl_word"]
            reached.append(p <= target)
            lines.append(f"- {small} + {_label(spec, rk)}: {p:.2f} -> "
                         f"{'reaches' if p <= target else 'does not reach'} it.")
    verdict_ = ("Yes" if any(reached) else "No") if reached else "Not answerable yet"
    lines.insert(0, f"**Does the smaller model with retrieval reach the larger model without "
                    f"it? {verdict_}** (our numbers; {paper}).")
    return "\n".join(lines)


def _paper_cells(spec: dict[str, Any]) -> list[Any]:
    look = dict(spec["paper"]["lookup"])
    return find(look.pop("paper"), look.pop("table"), **look)


class _PaperCells(dict):
    """`{model/rerank}` in the spec's headline text -> the paper's number."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.spec = spec

    def __missing__(self, key: str) -> float:
        model, rerank = key.split("/")
        return paper_ppl(self.spec, model, rerank)


def _iv(v: Any, lo: Any, hi: Any, nd: int = 2) -> str:
    if lo is None or hi is None:
        return f"{v:.{nd}f} [no CI]"
    return f"{v:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def gain_cells(r: Row, reference: str = "none", key: str = "rerank") -> list[str]:
    """Gain [CI], p and the distinguishable-from-zero mark of one row."""
    g = r["gain_vs_no_retrieval_pct"]
    if r[key] == reference:
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


def row_verdicts(rows: list[Row], spec: dict[str, Any]) -> list[repro.Verdict]:
    """Each row against the paper's cell of its model and reranking (spec.paper.columns
    maps our reranking onto the paper's keys); ragrepro.report.verdict has the rule."""
    p = spec["paper"]
    look = dict(p["lookup"])
    paper, table = look.pop("paper"), look.pop("table")
    shared = table_recorded(paper, table)
    out = []
    for r in rows:
        col = p["columns"].get(r[spec["row_key"]])
        cells = find(paper, table, **look, **{k: v for k, v in col.items() if k != "label"}) \
            if col else []
        out.append(repro.row_verdict(cells, shared, settings_of(r), lambda m, r=r: (
            r.get(f"{m}_ci_low"), r.get(f"{m}_ci_high"))))
    return out


def flags_of(rows: list[Row]) -> list[str] | None:
    """The Flags column (ragrepro.report.flags): present when a row carries the `flags` key,
    i.e. its run recorded diagnostics; None for tables of older runs."""
    if not any("flags" in r for r in rows):
        return None
    return [str(r.get("flags") or "") for r in rows]


def table_lines(rows: list[Row], extra: list[str], reference: str = "none",
                key: str = "rerank", verdicts: list[str] | None = None,
                flags: list[str] | None = None) -> list[str]:
    head = ["Model", "Retrieval", "Reranking", *extra, "n (blocks; tokens)",
            *(["Flags"] if flags is not None else []),
            "PPL (word) [95% CI]", "PPL (token) [95% CI]", "Gain vs none [95% CI]", "p",
            "Gain distinguishable from 0", *(["Verdict vs paper"] if verdicts else [])]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows):
        out.append("| " + " | ".join([
            str(r["model"]), str(r["retrieval"]), str(r["reranking"]),
            *[_fmt_setting(r.get(k)) for k in extra],
            f"{r['n_blocks'] if r['n_blocks'] is not None else '–'}; {r['n_tokens']}",
            *([flags[i]] if flags is not None else []),
            _iv(r["ppl_word"], r["ppl_word_ci_low"], r["ppl_word_ci_high"]),
            _iv(r["ppl_token"], r["ppl_token_ci_low"], r["ppl_token_ci_high"]),
            *gain_cells(r, reference, key), *([verdicts[i]] if verdicts else [])]) + " |")
    return out


def verdict(rows: list[Row], reference: str = "none", key: str = "rerank") -> str:
    """Which gains are distinguishable from zero (their 95% CI excludes 0)."""
    gains = [r for r in rows if r[key] != reference and r["gain_includes_zero"] is not None]
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


def settings_lines(rows: list[Row], spec: dict[str, Any], extra: list[str]) -> list[str]:
    """The settings common to the rows, printed once; per-scope settings on their own line."""
    key, ref = spec["row_key"], spec["reference"]
    retrieval_only, per_model = spec["retrieval_only"], spec["per_model"]
    all_s = [settings_of(r) for r in rows]
    ret_s = [s for s in all_s if s.get(key) != ref]
    scoped = {*retrieval_only, *spec["rerank_only"], *per_model, "model", key, *extra}
    common = {k: v for k, v in constant(all_s).items() if k not in scoped}
    lines = ["Settings common to all rows: " + ", ".join(f"{k}={v}" for k, v in common.items())
             + "."]
    if ret_s:
        rc = {k: v for k, v in constant(ret_s).items() if k in retrieval_only and k not in extra}
        lines.append("Retrieval rows: " + ", ".join(f"{k}={v}" for k, v in rc.items()) + ".")
    lines.append("Per model: " + "; ".join(sorted({
        f"{r['model']} " + " ".join(f"{k}={r.get(k)}" for k in per_model if k not in extra)
        for r in rows})) + ".")
    codes = sorted({str(r.get("code_version")) for r in rows})
    lines.append("Code version: " + codes[0] + "." if len(codes) == 1 else
                 "Code versions differ between rows: " + ", ".join(codes) +
                 " (see code_version in the summary CSV).")
    if any(r.get("wall_s") not in (None, "") for r in rows):
        lines.append(time_line(rows, key))
    scorer = spec["scorer_line"]
    zs = sorted({str(r.get(scorer["column"])) for r in rows if r[key] == scorer["rows"]})
    lines.append(scorer["text"].format(values=", ".join(zs) or "-"))
    return lines


def time_line(rows: list[Row], key: str) -> str:
    """Measured seconds per cell (the run's stage timings: loading, retrieval, reranker
    training, evaluation), so a reader can size a rerun; they depend on the machine's load."""
    timed = [r for r in rows if r.get("wall_s") not in (None, "")]
    cells = "; ".join(f"{r['model']} {r[key]} {float(r['wall_s']):.0f}" for r in timed)
    total = sum(float(r["wall_s"]) for r in timed)
    return (f"Time per cell (s, sum of the run's stage timings): {cells}; total "
            f"{total / 60:.1f} min.")


def paper_lines(spec: dict[str, Any]) -> list[str]:
    """The paper's grid: one line per paper model, the gain over `none` in brackets."""
    p = spec["paper"]
    cols = list(p["columns"])
    out = [f"## {p['title']}", "",
           "| Model | " + " | ".join(p["columns"][c]["label"] for c in cols) + " |",
           "|" + "---|" * (len(cols) + 1)]
    for model, label in p["models"].items():
        v = {rk: paper_ppl(spec, model, rk) for rk in cols}
        base = v[cols[0]]
        cells = [str(base)] + [f"{v[c]} ({100 * (base - v[c]) / base:.1f}%)" for c in cols[1:]]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def cells_of(rows: list[Row], spec: dict[str, Any]) -> dict[tuple[str, str], Row]:
    """(model, rerank) -> row (the headline's input; called when no two rows share a
    cell)."""
    cells: dict[tuple[str, str], Row] = {}
    for r in rows:
        cells.setdefault((r["model"], r[spec["row_key"]]), r)
    return cells


def to_markdown(rows: list[Row], spec: dict[str, Any], experiment: str,
                st: StatsSettings = DEFAULT_STATS) -> str:
    key, ref = spec["row_key"], spec["reference"]
    extra = distinguishing([_keyed(r, spec) for r in rows],
                           lambda k: (k.settings.get("model"), k.settings.get(key)))
    out = [f"# {spec['title'].format(experiment=experiment)}", "", spec["intro"], "",
           (f"Uncertainty: {st.describe()}. The perplexity CIs are wide because the sample "
            f"is one stream of a few documents; the gains are paired on the same blocks and "
            f"are much tighter. With under ~20 blocks a percentile interval is approximate "
            f"(it tends to be too narrow); the permutation p-value is exact when all 2^n "
            f"swaps are enumerated (n <= {int(math.log2(st.resamples))} at {st.resamples} "
            f"resamples)."), ""]
    if extra:
        out += [(f"Rows of the same model and reranking differ in: {', '.join(extra)} "
                 f"(shown as columns)."), ""]
    verdicts = row_verdicts(rows, spec)
    out += table_lines(rows, extra, ref, key, [v.text for v in verdicts], flags_of(rows))
    out += ["", verdict(rows, ref, key), ""]
    for line in (repro.summary_line(verdicts),
                 repro.margin_line([str(c.setting.get("metric")) for c in _paper_cells(spec)])):
        out += [line, ""] if line else []
    if rows:
        out += [*settings_lines(rows, spec, extra), ""]
    out += [*paper_lines(spec), "", "The paper reports no confidence intervals.", "",
            "## Headline", ""]
    if extra:
        out.append(f"Not computed: several runs share a (model, reranking) cell (they differ "
                   f"in {', '.join(extra)}); build the table from one setting.")
    else:
        out.append(headline(cells_of(rows, spec), spec))
    return "\n".join(out + [""])

