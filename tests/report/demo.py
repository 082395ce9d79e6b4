"""A small synthetic results tree written through the real tracking.Run (the same files
and CSV rows the runner writes): a mini In-Context RALM Table 1, a stride sweep with two
models, FilCo Table 5 and Fig. 4 pairs, one run synced to W&B and one offline-only.
Used by the report tests; numbers are made up, and every run carries metadata.demo = true so
the dashboard and the tables say DEMO on the page itself. It lives with the tests: the core
never writes demo runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ragrepro.tracking import Run

MINI = {"scale": "mini", "seed": 0, "limit": 50, "dtype": "float32", "model_revision": None}


def make_run(root: Path, experiment: str, run_id: str, settings: dict[str, Any],
             metrics: dict[str, Any], wandb_mode: str = "disabled",
             wandb_url: str | None = None) -> Path:
    run = Run(experiment, run_id, root)
    run.start()
    run.add_sample({"id": 0, "value": 1.0})
    run.timings["score"] = 1.5
    if wandb_mode == "offline":
        (run.work_dir / "wandb" / f"offline-run-20260101_000000-{run_id}").mkdir(parents=True)
    config = {"name": experiment, **settings, "model": {"name": settings.get("model")},
              "wandb": {"mode": wandb_mode}}
    # metadata.demo: the dashboard and the tables label these runs DEMO
    return run.finish(config, metrics, settings, {"git_commit": "abc1234", "git_dirty": False,
                                                  "wandb_mode": wandb_mode,
                                                  "wandb_url": wandb_url, "demo": True})


def ralm(model: str, retriever: str | None, rerank: str, **extra: Any) -> dict[str, Any]:
    """Settings as ralm.lm_eval writes them (rerank: none = no retrieval, first = top BM25
    document, zeroshot / predictive = reranked)."""
    return {"method": "ralm-lm", **MINI, "model": model, "dataset": "wiki-vital",
            "dataset_variant": "heldout-leads", "split": "test", "max_length": 1024,
            "stride": 4, "query_len": 32, "doc_max_tokens": 256, "retriever": retriever,
            "rerank": rerank, "k": None if rerank == "none" else 16, "word_count": "spaces",
            **extra}


def filco(method: str, top_k: int, dataset: str = "vital-qa") -> dict[str, Any]:
    return {"method": method, **MINI, "model": "smollm2-135m", "dataset": dataset,
            "dataset_variant": "embedded-v1", "split": "test", "top_k": top_k,
            "measure": "strinc"}


def build_demo(root: Path) -> Path:
    """Write the demo runs under root (a results folder) and return root."""
    # In-Context RALM Table 1, mini: 40 -> 30 (BM25) -> 28 (BM25 + zero-shot rerank).
    make_run(root, "ralm/table1", "r1base", ralm("smollm2-135m", None, "none"),
             {"ppl_word": 40.0, "ppl_token": 20.0, "n_tokens": 5000})
    make_run(root, "ralm/table1", "r1bm25", ralm("smollm2-135m", "bm25", "first"),
             {"ppl_word": 30.0, "ppl_token": 16.0, "n_tokens": 5000},
             wandb_mode="online", wandb_url="https://wandb.ai/me/ragrepro/runs/r1bm25")
    make_run(root, "ralm/table1", "r1rerank", ralm("smollm2-135m", "bm25", "zeroshot",
                                                        scorer_model="smollm2-135m"),
             {"ppl_word": 28.0, "ppl_token": 15.0, "n_tokens": 5000}, wandb_mode="offline")
    # Stride sweep, two models (Fig. 5).
    for model, base in (("smollm2-135m", 30.0), ("gemma3-270m", 20.0)):
        for stride in (2, 4, 8):
            make_run(root, "ralm/fig5", f"f5{model[:5]}{stride}",
                     ralm(model, "bm25", "first", stride=stride, retrieval_stride=stride),
                     {"ppl_word": base + stride, "ppl_token": base / 2 + stride})
    # FilCo Table 5 (top-5 Full vs FilCo) and Fig. 4 (top-1 FilCo minus Full).
    make_run(root, "filco/table5", "t5full", filco("full", 5), {"em_filco_code": 0.40,
                                                               "em_squad": 0.42})
    make_run(root, "filco/table5", "t5filco", filco("filco", 5), {"em_filco_code": 0.52,
                                                                 "em_squad": 0.53})
    make_run(root, "filco/fig4", "f4full", filco("full", 1), {"em_filco_code": 0.30})
    make_run(root, "filco/fig4", "f4filco", filco("filco", 1), {"em_filco_code": 0.35})
    return root
