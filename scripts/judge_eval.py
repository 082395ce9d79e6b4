"""Measure every offline attribution judge on the hand-checked set (`make judge-eval`).

Each judge is the RICHES `autoais_substitute` path itself: `load_autoais(backend="llm-judge")`
with the model of conf/model/<name>.yaml (loaded through the harness), the same prompt
(`JUDGE_PROMPT`), passage format and threshold as conf/riches/base.yaml's autoais section.
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
    judge_quality,
    load_judge_set,
)
from ragrepro.paths import results_dir

log = logging.getLogger("judge_eval")
MODELS = ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
PASSAGE_FORMAT = "text"   # conf/riches/base.yaml riches.autoais.passage_format
THRESHOLD = 0.5


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
    """One row per complete (judge, dtype), then the two constant baselines."""
    ids, labels = [it.id for it in items], [it.attributable for it in items]
    current = {(it.id, it.content_sha) for it in items}
    out = []
    for judge, dtype in dict.fromkeys((r["judge"], r["dtype"]) for r in rows):
        mine = {r["id"]: r for r in rows if r["judge"] == judge and r["dtype"] == dtype
                and (r["id"], r["item_sha"]) in current}
        if set(mine) != set(ids):
            log.warning("%s (%s): %d of %d items; left out of the table", judge, dtype,
                        len(mine), len(ids))
            continue
        preds = [bool(mine[i]["attributed"]) for i in ids]
        secs = sum(float(mine[i]["seconds"]) for i in ids) / len(ids)
        out.append(_row(f"llm-judge:{judge}", dtype, ids, labels, preds, items, secs))
    for always in (True, False):
        out.append(_row(f"always-{'yes' if always else 'no'}", "", ids, labels,
                        [always] * len(ids), items, 0.0))
    return out


def _row(judge: str, dtype: str, ids: list[str], labels: list[bool], preds: list[bool],
         items: Sequence[JudgeItem], secs: float) -> dict[str, Any]:
    q = judge_quality(ids, labels, preds)
    by_kind = {f"acc_{k}": v for k, v in accuracy_by_kind(items, preds).items()}
    return {"judge": judge, "dtype": dtype, **q, "said_yes": sum(preds), **by_kind,
            "seconds_per_item": round(secs, 2), "passage_format": PASSAGE_FORMAT,
            "threshold": THRESHOLD}


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}"


def to_markdown(rows: Sequence[dict[str, Any]], n_items: int) -> str:
    head = ["# Offline attribution judges on the hand-checked set", "",
            f"{n_items} items (ragrepro/data/embedded/attribution_judge.jsonl; half attributable; "
            "negatives: " + ", ".join(NEGATIVE_KINDS) + "). Each judge is RICHES' "
            "`autoais_substitute` path (llm-judge prompt, passage format "
            f"`{PASSAGE_FORMAT}`, P(yes) > {THRESHOLD}), CPU, one thread. Accuracy with its 95% "
            "percentile-bootstrap CI over items; precision/recall of \"attributable\"; "
            "accuracy per item kind. Made by `make judge-eval`.", "",
            "| judge | dtype | n | accuracy [95% CI] | precision | recall | said yes | "
            f"{SUPPORTED} | " + " | ".join(NEGATIVE_KINDS) + " | s/item |",
            "|---" * (9 + len(NEGATIVE_KINDS)) + "|"]
    for r in rows:
        kinds = " | ".join(_pct(r[f"acc_{k}"]) for k in NEGATIVE_KINDS)
        head.append(f"| {r['judge']} | {r['dtype'] or '-'} | {r['n']} | {_pct(r['accuracy'])} "
                    f"[{_pct(r['accuracy_ci_low'])}, {_pct(r['accuracy_ci_high'])}] | "
                    f"{_pct(r['precision'])} | {_pct(r['recall'])} | {r['said_yes']} | "
                    f"{_pct(r[f'acc_{SUPPORTED}'])} | {kinds} | {r['seconds_per_item']} |")
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
