"""Rows of the `ralm.table1` results table (RALM Table 1): one row per finished run, its
perplexities with 95% CIs and its paired gain over the reference (no-retrieval) run with the
same settings. Order, labels and model sizes come from the spec (the `results:` part of
ralm/conf/report/tables/ralm/table1.yaml)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ragrepro.report.flags import flags_text, has_diagnostics
from ragrepro.report.keyed import KeyedRun, refuse_indistinguishable, varying
from ragrepro.report.runs import experiment_runs
from ragrepro.report.samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for
from ragrepro.report.stats_cells import code_version
from ragrepro.stats import Interval

Run = dict[str, Any]


def finished_runs(root: Path, name: str) -> list[Run]:
    """The finished runs of experiment `name` that have a folder (ragrepro.report.runs, the
    one reader), in run-folder order: each its metrics.json with its folder, mtime and
    config."""
    recs = sorted((r for r in experiment_runs(root, name) if r.dir is not None),
                  key=lambda r: str(r.dir))
    return [{**r.metrics_json, "_mtime": r.mtime, "_dir": str(r.dir), "_config": r.config}
            for r in recs]


def keyed(r: Run) -> KeyedRun:
    return KeyedRun(str(r.get("run_id")), dict(r.get("settings") or {}), r.get("_config") or {})


def baseline_of(run: Run, runs: list[Run], spec: dict[str, Any]) -> Run | None:
    """The reference run of the same model with the same settings (apart from the
    retrieval- and reranker-only ones)."""
    key, ref = spec["row_key"], spec["reference"]
    skip = {key, *spec["retrieval_only"], *spec["rerank_only"]}
    for other in runs:
        if other["settings"].get(key) != ref or other is run:
            continue
        pair = [run["settings"], other["settings"]]
        if not [k for k in varying(pair) if k not in skip]:
            return other
    return None


def _ci(iv: Interval | None) -> dict[str, Any]:
    return {"low": iv.low, "high": iv.high, "n": iv.n} if iv else {"low": None, "high": None,
                                                                  "n": None}


def _gain(r: Run, base: Run | None, spec: dict[str, Any], st: StatsSettings) -> dict[str, Any]:
    """Relative gain (base - ppl) / base in %, its paired CI and permutation p-value."""
    is_ref = r["settings"].get(spec["row_key"]) == spec["reference"]
    out: dict[str, Any] = {"gain_vs_no_retrieval_pct": None, "gain_ci_low": None,
                           "gain_ci_high": None, "gain_p": None, "gain_includes_zero": None,
                           "baseline_run_id": base.get("run_id") if base else None,
                           "gain_note": "" if base else "no no-retrieval run with these settings"}
    if base is None or is_ref:
        out["gain_note"] = "" if is_ref else out["gain_note"]
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


def sort_key(spec: dict[str, Any]) -> Any:
    """Model size (spec.model_size), then the spec's row order, then age."""
    order = {rk: i for i, rk in enumerate(spec["order"])}
    sizes, key = spec["model_size"], spec["row_key"]
    return lambda r: (float(sizes.get(r["settings"].get("model"), 1e18)),
                      str(r["settings"].get("model")), order.get(r["settings"].get(key), 99),
                      str(r["settings"].get(key)), r["_mtime"])


def labels_of(spec: dict[str, Any], rk: Any, settings: dict[str, Any]) -> tuple[str, str]:
    """(Retrieval, Reranking) labels of a row: the spec's, with the recorded retriever."""
    ret, rr = spec["labels"].get(rk, (spec["default_retrieval"], rk))
    if rk not in spec["fixed_retrieval"]:
        ret = settings.get("retriever") or ret
    return ret, rr


def rows_of(runs: list[Run], spec: dict[str, Any],
            st: StatsSettings = DEFAULT_STATS) -> list[dict[str, Any]]:
    """One row per run (runs differing in any setting are different rows), ordered by model
    size then the spec's order, with 95% CIs and the paired gain over the matching
    reference run."""
    refuse_indistinguishable([keyed(r) for r in runs], spec["name"].replace("/", " "))
    runs = sorted(runs, key=sort_key(spec))
    return [row_of(r, runs, spec, st) for r in runs]


def row_of(r: Run, runs: list[Run], spec: dict[str, Any],
           st: StatsSettings = DEFAULT_STATS) -> dict[str, Any]:
    """The row of run `r`; its reference is found among `runs`."""
    key = spec["row_key"]
    s, m, rk = r["settings"], r["metrics"], r["settings"].get(key)
    ret, rr = labels_of(spec, rk, s)
    word = _ci(interval_for(Path(r["_dir"]), m, "ppl_word", st))
    tok = _ci(interval_for(Path(r["_dir"]), m, "ppl_token", st))
    return {
        "model": s.get("model"), "retrieval": ret, "reranking": rr, key: rk,
        "ppl_word": round(m["ppl_word"], 3), "ppl_word_ci_low": _r(word["low"]),
        "ppl_word_ci_high": _r(word["high"]),
        "ppl_token": round(m["ppl_token"], 3), "ppl_token_ci_low": _r(tok["low"]),
        "ppl_token_ci_high": _r(tok["high"]), "n_blocks": word["n"],
        **_gain(r, baseline_of(r, runs, spec), spec, st),
        "n_words": m.get("n_words"), "n_tokens": m.get("n_tokens"),
        # only a run with diagnostics has the key (older tables keep their columns)
        **({"flags": flags_text(m)} if has_diagnostics(m) else {}),
        "stats_resamples": st.resamples, "stats_seed": st.seed,
        "stats_block_tokens": st.block_tokens,
        **{k: v for k, v in s.items() if k not in ("model", key)},
        "git_commit": (r.get("metadata") or {}).get("git_commit"),
        "code_version": code_version(r),
        "wall_s": round(sum(r["timings_s"].values()), 1) if r.get("timings_s") else None,
        "run_id": r.get("run_id")}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
