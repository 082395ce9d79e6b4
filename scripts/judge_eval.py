"""Measure every offline attribution judge on the hand-checked set (`make judge-eval`).

Each judge is the RICHES `autoais_substitute` path itself: `load_autoais(backend="llm-judge")`
with the model of conf/model/<name>.yaml (loaded through the harness), the same prompt
(`JUDGE_PROMPT`), passage format and threshold as riches/conf/riches/base.yaml's autoais section.
Per-item decisions are appended to results/judge/judge_items.jsonl as they are made, so a
rerun resumes; results/judge/judge_eval.csv and .md summarise every judge and the always-yes /
always-no baselines (accuracy with its 95% bootstrap CI, precision and recall of
"attributable", seconds per item).

    python -m scripts.judge_eval                                  # all judges, float32
    python -m scripts.judge_eval --models qwen2.5-coder-1.5b:bfloat16
    python -m scripts.judge_eval --summary-only                   # rewrite the tables
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrepro.io import atomic_write_text, write_rows_csv
from ragrepro.metrics.judge_set import (
    NEGATIVE_KINDS,
    SUPPORTED,
    JudgeItem,
    accuracy_by_kind,
    best_threshold,
    cross_validated,
    judge_quality,
    load_judge_set,
    roc_auc,
)
from ragrepro.paths import results_dir

log = logging.getLogger("judge_eval")
MODELS = ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
PASSAGE_FORMAT = "text"   # riches/conf/riches/base.yaml riches.autoais.passage_format
THRESHOLD = 0.5          # load_autoais' default, which RICHES uses
CV_FOLDS = 5


def out_dir() -> Path:
    return results_dir() / "judge"


def done_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def judge_model(name: str, dtype: str, items: Sequence[JudgeItem], path: Path) -> None:
    """Score the items this judge has not scored yet, one at a time, appending each."""
    from ragrepro.metrics.autoais import AttributionItem, load_autoais
    from ragrepro.named_configs import load_model

    done = {(r["id"], r["item_sha"]) for r in done_rows(path)
            if r["judge"] == name and r["dtype"] == dtype}
    todo = [it for it in items if (it.id, it.content_sha) not in done]
    if not todo:
        return
    t = time.time()
    lm, _ = load_model(name, dtype, "cpu")
    log.info("%s (%s) loaded in %.0f s; %d items to judge", name, dtype, time.time() - t, len(todo))
    ev = load_autoais(backend="llm-judge", lm=lm, passage_format=PASSAGE_FORMAT,
                      threshold=THRESHOLD, batch_size=2)
    with path.open("a", encoding="utf-8") as f:
        for it in todo:
            t = time.time()
            res = ev.evaluate([AttributionItem(it.question, it.answer, it.evidence_title,
                                               it.evidence)])
            p = res.per_sample[0]
            f.write(json.dumps({"judge": name, "dtype": dtype, "id": it.id,
                                "item_sha": it.content_sha, "kind": it.kind,
                                "label": it.attributable, "attributed": p["attributed"],
                                "nli_score": p["nli_score"], "logp_yes": p["logp_yes"],
                                "logp_no": p["logp_no"], "seconds": time.time() - t}) + "\n")
            f.flush()


def summary_rows(items: Sequence[JudgeItem], rows: Sequence[dict[str, Any]]) -> list[dict]:
    """Per complete (judge, dtype): the judge as RICHES runs it (P(yes) > 0.5), and the same
    scores with a threshold chosen by 5-fold cross-validation over questions (an honest
    estimate of a calibrated judge; the threshold chosen on all items is what a setting would
    use). Then the two constant baselines."""
    ids, labels = [it.id for it in items], [it.attributable for it in items]
    groups = [it.qid for it in items]
    current = {(it.id, it.content_sha) for it in items}
    out = []
    for judge, dtype in dict.fromkeys((r["judge"], r["dtype"]) for r in rows):
        mine = {r["id"]: r for r in rows if r["judge"] == judge and r["dtype"] == dtype
                and (r["id"], r["item_sha"]) in current}
        if set(mine) != set(ids):
            log.warning("%s (%s): %d of %d items; left out of the table", judge, dtype,
                        len(mine), len(ids))
            continue
        scores = [float(mine[i]["nli_score"]) for i in ids]
        secs = sum(float(mine[i]["seconds"]) for i in ids) / len(ids)
        auc = roc_auc(labels, scores)
        base = {"judge": f"llm-judge:{judge}", "dtype": dtype, "roc_auc": auc,
                "seconds_per_item": round(secs, 2)}
        out.append(_row(base, THRESHOLD, ids, labels, [s > THRESHOLD for s in scores], items))
        cv_preds, fold_ts = cross_validated(groups, labels, scores, folds=CV_FOLDS)
        row = _row(base, f"{CV_FOLDS}-fold CV", ids, labels, cv_preds, items)
        row["fold_thresholds"] = " ".join(f"{t:.3f}" for t in fold_ts)
        row["full_set_threshold"] = round(best_threshold(labels, scores), 4)
        out.append(row)
    for always in (True, False):
        base = {"judge": f"always-{'yes' if always else 'no'}", "dtype": "", "roc_auc": 0.5,
                "seconds_per_item": 0.0}
        out.append(_row(base, "", ids, labels, [always] * len(ids), items))
    return out


def _row(base: dict[str, Any], threshold: float | str, ids: list[str], labels: list[bool],
         preds: list[bool], items: Sequence[JudgeItem]) -> dict[str, Any]:
    q = judge_quality(ids, labels, preds)
    by_kind = {f"acc_{k}": v for k, v in accuracy_by_kind(items, preds).items()}
    return {**base, "threshold": threshold, **q, "said_yes": sum(preds), **by_kind,
            "passage_format": PASSAGE_FORMAT}


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}"


def _who(r: dict[str, Any]) -> str:
    return f"| {r['judge']} | {r['dtype'] or '-'} | {r['threshold'] or '-'} | "


def to_markdown(rows: Sequence[dict[str, Any]], n_items: int) -> str:
    """Two readable tables (ragrepro.report.readable): the judges' accuracy, then their
    accuracy per item kind; every number is also in judge_eval.csv."""
    head = ["# Offline attribution judges on the hand-checked set", "",
            f"{n_items} items (ragrepro/data/embedded/attribution_judge.jsonl; half attributable; "
            "negatives: " + ", ".join(NEGATIVE_KINDS) + "). Each judge is RICHES' "
            "`autoais_substitute` path (llm-judge prompt, passage format "
            f"`{PASSAGE_FORMAT}`), CPU, one thread. Threshold {THRESHOLD}: attributed iff "
            f"P(yes) > {THRESHOLD}, as RICHES runs the judge. `{CV_FOLDS}-fold CV`: the same "
            "scores, each fold's items decided with the threshold that is most accurate on the "
            "other folds (folds by question): an honest estimate of a calibrated judge "
            "(judge_eval.csv has the fold thresholds and the all-items threshold). Accuracy "
            "with its 95% percentile-bootstrap CI over items; precision/recall of "
            "\"attributable\"; AUC: how well P(yes) ranks attributable above non-attributable "
            "items (0.5 = chance); accuracy per item kind in the second table. Made by "
            "`make judge-eval`.", "",
            ("| judge | dtype | threshold | n | accuracy [95% CI] | precision | recall | "
             "said yes | AUC | s/item |"), "|---" * 10 + "|"]
    for r in rows:
        head.append(_who(r) + f"{r['n']} | {_pct(r['accuracy'])} "
                    f"[{_pct(r['accuracy_ci_low'])}, {_pct(r['accuracy_ci_high'])}] | "
                    f"{_pct(r['precision'])} | {_pct(r['recall'])} | {r['said_yes']} | "
                    f"{r['roc_auc']:.3f} | {r['seconds_per_item']} |")
    kinds = [SUPPORTED, *NEGATIVE_KINDS]
    head += ["", "## Accuracy per item kind", "",
             ("Share of each kind's items the judge decides correctly (%): `supported` items "
              "are attributable, the others are not."), "",
             "| judge | dtype | threshold | " + " | ".join(kinds) + " |",
             "|---" * (3 + len(kinds)) + "|"]
    head += [_who(r) + " | ".join(_pct(r[f"acc_{k}"]) for k in kinds) + " |" for r in rows]
    return "\n".join(head) + "\n"


def parse_models(specs: Sequence[str], default_dtype: str) -> list[tuple[str, str]]:
    out = []
    for s in specs:
        name, _, dtype = s.partition(":")
        out.append((name, dtype or default_dtype))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS),
                    help="name[:dtype] of conf/model/*.yaml (default: all four, float32)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    items = load_judge_set()
    d = out_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / "judge_items.jsonl"
    if not args.summary_only:
        for name, dtype in parse_models(args.models, args.dtype):
            judge_model(name, dtype, items, path)
    rows = summary_rows(items, done_rows(path))
    write_rows_csv(d / "judge_eval.csv", rows)
    atomic_write_text(d / "judge_eval.md", to_markdown(rows, len(items)))
    log.info("wrote %s", d / "judge_eval.md")


if __name__ == "__main__":
    main()
