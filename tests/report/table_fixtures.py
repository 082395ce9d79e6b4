"""Run folders and CSV rows for the results-table regression test (tests/report/
test_results_tables.py): one small experiment per method, with per-sample records so every
CI and paired test of the tables is computed. The golden files under tests/report/golden/
are the output of the builders before they moved into ragrepro.report (commit 2381603)."""
from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path


def _write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header: list[str] = []
    for r in rows:
        header += [k for k in r if k not in header]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


def ralm_run(root: Path, name: str, run_id: str, model: str, rerank: str, nlls: list[float],
             mtime: float, code: str = "abc123", **extra: object) -> None:
    """A finished Table 1 run: 8 windows of 128 scored tokens (8 blocks), 100 words."""
    d = root / name / run_id
    d.mkdir(parents=True)
    (d / "samples.jsonl").write_text("".join(json.dumps(
        {"text": 0, "window": i, "nll_sum": x, "n_scored": 128}) + "\n" for i, x in enumerate(nlls)))
    total = sum(nlls)
    settings = {"dataset": "wiki-vital", "k": None if rerank == "none" else 4,
                "model": model, "model_revision": f"rev-{model}", "add_bos": False,
                "rerank": rerank, "retriever": None if rerank in ("none", "gold") else "bm25",
                "rerank_tokens": 16 if rerank == "zeroshot" else None, "seed": 0,
                "stride": 16, "retrieval_file": None, **extra}
    p = d / "metrics.json"
    p.write_text(json.dumps({"run_id": run_id, "metrics": {
        "ppl_word": math.exp(total / 100), "ppl_token": math.exp(total / 1024),
        "n_words": 100, "n_tokens": 1024}, "settings": dict(sorted(settings.items())),
        "metadata": {"code_version": code}}))
    (d / "config.json").write_text(json.dumps({"ralm": {"stride": settings["stride"]}}))
    os.utime(p, (mtime, mtime))


BASE = [30.0, 50.0, 20.0, 40.0, 35.0, 45.0, 25.0, 55.0]


def ralm_runs(root: Path, name: str = "ralm/table1") -> None:
    """Two models (the smaller better than the larger without retrieval is not the case:
    smollm2 40 vs gemma3 31), every rerank, a borderline and a zero-including gain."""
    ralm_run(root, name, "a", "smollm2-135m", "none", BASE, 1)
    ralm_run(root, name, "b", "smollm2-135m", "first", [x * 0.9 for x in BASE], 2)
    ralm_run(root, name, "c", "smollm2-135m", "zeroshot",
             [x + (-3 if i % 4 < 2 else 3) for i, x in enumerate(BASE)], 3, code="def456+dirty")
    ralm_run(root, name, "o", "smollm2-135m", "oracle", [x * 0.7 for x in BASE], 4)
    ralm_run(root, name, "g", "smollm2-135m", "gold", [x * 0.5 for x in BASE], 5)
    ralm_run(root, name, "h", "gemma3-270m", "none", [x * 0.92 for x in BASE], 1)
    ralm_run(root, name, "i", "gemma3-270m", "first", [x * 0.95 for x in BASE], 2)


def ralm_stride_runs(root: Path, name: str = "ralm/table1_strides") -> None:
    """Runs of one model and rerank differing in stride: a settings column, no headline."""
    for stride, f in ((16, 1.0), (32, 1.1)):
        ralm_run(root, name, f"n{stride}", "smollm2-135m", "none", [x * f for x in BASE], 1,
                 stride=stride)
        ralm_run(root, name, f"f{stride}", "smollm2-135m", "first",
                 [x * f * 0.93 for x in BASE], 2, stride=stride)


def _riches_dir(d: Path, settings: dict, f1: list[float]) -> None:
    d.mkdir(parents=True)
    (d / "samples.jsonl").write_text("".join(json.dumps(
        {"qid": f"q{i}", "f1_squad": v, "em_squad": float(v == 1.0)}) + "\n"
        for i, v in enumerate(f1)))
    (d / "metrics.json").write_text(json.dumps({"metrics": {
        "f1_squad": sum(f1) / len(f1), "em_squad": sum(v == 1.0 for v in f1) / len(f1)},
        "settings": settings}))


def riches_runs(root: Path) -> None:
    """results/riches/main.csv and keys.csv with their run folders."""
    main = []
    for hops in (1, 2):
        for rid, method, retr, k, f1 in (
                (f"r{hops}", "riches", "", "", [1.0, 1.0, 0.5, 0.0, 0.25]),
                (f"n{hops}", "no_retrieval", "", "", [0.0, 0.0, 0.5, 0.0, 0.0]),
                (f"d{hops}", "dense_reader", "bm25", str(hops), [1.0, 0.5, 0.5, 0.0, 1.0]),
                (f"e{hops}", "dense_reader", "dense-minilm", str(hops), [0.0, 0.5, 1.0, 0.0, 1.0])):
            s = {"dataset_hops": hops, "riches_method": method, "model": "m", "dataset": "d",
                 "limit": 5, "retriever": retr, "k": k}
            _riches_dir(root / "riches" / "main" / rid, s, f1)
            main.append({"run_id": rid, "dataset_hops": str(hops), "riches_method": method,
                         "retriever": retr, "k": k, "model": "m", "dataset": "d", "limit": "5",
                         "f1_squad": str(sum(f1) / len(f1)),
                         "em_squad": str(sum(v == 1.0 for v in f1) / len(f1)),
                         "verbatim_rate": "1.0" if method == "riches" else "",
                         "seconds_per_question": "2.5", "n": "5",
                         "keys_articles": "sample" if method == "riches" else "",
                         "keys_n_articles": "103" if method == "riches" else ""})
    _write_csv(root / "riches" / "main.csv", main)
    keys = []
    for rid, kt, f1 in (("kt", "title", [0.5, 0.0, 1.0]), ("kp", "proposition", [1.0, 1.0, 0.0]),
                        ("ks", "sentence", [0.0, 0.0, 0.5])):
        s = {"key_type": kt, "model": "m", "dataset": "d", "limit": 3}
        _riches_dir(root / "riches" / "keys" / rid, s, f1)
        keys.append({"run_id": rid, "key_type": kt, "model": "m", "dataset": "d", "limit": "3",
                     "f1_squad": str(sum(f1) / len(f1)), "n": "3", "beam_size": "10"})
    _write_csv(root / "riches" / "keys.csv", keys)


def _filco_dir(d: Path, settings: dict, values: dict[str, list[float]]) -> dict:
    d.mkdir(parents=True)
    n = len(next(iter(values.values())))
    (d / "samples.jsonl").write_text("".join(json.dumps(
        {"qid": f"q{i}", **{k: v[i] for k, v in values.items()}}) + "\n" for i in range(n)))
    metrics = {k: 100 * sum(v) / len(v) for k, v in values.items()}
    (d / "metrics.json").write_text(json.dumps({"metrics": metrics, "settings": settings}))
    return {"run_id": d.name, **{k: str(v) for k, v in settings.items()},
            **{k: str(v) for k, v in metrics.items()}}


def filco_runs(root: Path) -> None:
    """fig4, table5, table3, fig6, table4, table2 CSVs with run folders."""
    for exp, value in (("fig4", "score_code"), ("table5", "score_code"),
                       ("table3", "context_precision"), ("fig6", "input_tokens")):
        rows = []
        for gen, fam, ds in (("smollm2-135m", "causal", "vital-qa"),
                             ("llama2-7b", "causal", "nq-open"),
                             ("flan-t5-xl", "seq2seq", "hotpotqa")):
            for j, setting in enumerate(("full", "psg", "filco", "silver")):
                vals = [((i * 7 + j * 3 + len(ds)) % 5) / 4 for i in range(6)]
                if value == "input_tokens":
                    vals = [0.01 * (100 - 20 * j + i) for i in range(6)]
                s = {"generator": gen, "family": fam, "k": 1, "eval_dataset": ds,
                     "setting": setting, "n_eval": 6}
                rows.append(_filco_dir(root / "filco" / exp / f"{gen}-{ds}-{setting}", s,
                                       {value: vals, "score": vals}))
        _write_csv(root / "filco" / f"{exp}.csv", rows)
    rows = []
    for ds in ("fever", "nq-open"):
        for j, m in enumerate(("strinc", "lexical", "cxmi")):
            s = {"generator": "flan-t5-xl", "eval_dataset": ds, "measure": m,
                 "silver_empty_train": 0.25 * j}
            rows.append(_filco_dir(root / "filco" / "table4" / f"{ds}-{m}", s,
                                   {"score_code": [(i + j) % 2 for i in range(5)]}))
    _write_csv(root / "filco" / "table4.csv", rows)
    rows = []
    for ds in ("nq-open", "hotpotqa"):
        for k in (1, 5):
            s = {"eval_dataset": ds, "k": k, "n_eval": 4}
            rows.append(_filco_dir(root / "filco" / "table2" / f"{ds}-{k}", s, {
                "recall_answer": [1, 0, k == 5, 1], "recall_title": [0, 1, 1, k == 5],
                "precision": [0.2, 0.4, 0.1 * k, 0.3]}))
    _write_csv(root / "filco" / "table2.csv", rows)
