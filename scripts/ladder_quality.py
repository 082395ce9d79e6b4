"""Per-token check of the Qwen2.5-Coder ladder: is the 0.5B file (converted from an AWQ
checkpoint) a sound small rung, or damaged? Both models share one tokenizer, so their per-token
log-probabilities on the same texts align exactly.

    python scripts/ladder_quality.py            # after `make setup-ladder`; ~10 GB peak RAM

Texts: the first held-out wiki-vital test articles (prose) and this repository's own source
(code, the models' training domain). Writes results/ladder/quality.json and .md.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Sequence

import numpy as np

from ragrepro.io import atomic_write_text
from ragrepro.paths import REPO_ROOT, results_dir

log = logging.getLogger("ladder_quality")
MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")


def compare(small: Sequence[float], large: Sequence[float]) -> dict[str, float]:
    """Summary of two aligned per-token log-prob arrays (nats): perplexities, their ratio,
    the share of tokens the small model predicts worse, and large losses (> 5 nats worse)."""
    a, b = np.asarray(small, dtype=np.float64), np.asarray(large, dtype=np.float64)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("per-token arrays must be non-empty and aligned")
    diff = b - a  # > 0: the small model gives the token lower probability
    return {"n_tokens": int(a.size), "ppl_small": math.exp(-a.mean()),
            "ppl_large": math.exp(-b.mean()), "ppl_ratio": math.exp(diff.mean()),
            "share_small_worse": float((diff > 0).mean()),
            "median_nats_worse": float(np.median(diff)),
            "share_over_5_nats_worse": float((diff > 5).mean())}


def texts(n_prose: int, max_tokens_hint: int) -> list[tuple[str, str]]:
    from ragrepro.data.vital import lm_docs

    out = [(f"prose: {d.title}", d.text) for d in lm_docs("test")[:n_prose]]
    for rel in ("ralm/windows.py", "ragrepro/hashing.py"):
        out.append((f"code: {rel}", (REPO_ROOT / rel).read_text()[: max_tokens_hint * 4]))
    return out


def run(dtype: str, max_tokens: int, n_prose: int) -> dict:
    from ragrepro.named_configs import load_model

    items = texts(n_prose, max_tokens)
    scores: dict[str, list[np.ndarray]] = {}
    ids_of: dict[str, list[list[int]]] = {}
    timing = {}
    for name in MODELS:
        t = time.time()
        lm, _ = load_model(name, dtype, "cpu")
        timing[f"{name}_load_s"] = round(time.time() - t, 1)
        ids = [lm.encode(x, add_bos=False)[:max_tokens] for _, x in items]
        t = time.time()
        scores[name] = lm.score_targets(ids, [1] * len(ids), batch_size=1)
        timing[f"{name}_score_s"] = round(time.time() - t, 1)
        ids_of[name] = ids
        del lm
    if ids_of[MODELS[0]] != ids_of[MODELS[1]]:
        raise SystemExit("the two models tokenise differently; per-token comparison is invalid")
    rows = [{"text": label, **compare(s, l)}
            for (label, _), s, l in zip(items, scores[MODELS[0]], scores[MODELS[1]])]
    return {"dtype": dtype, "max_tokens": max_tokens, "rows": rows, "timing": timing}


def to_markdown(res: dict) -> str:
    out = ["# Qwen2.5-Coder ladder: per-token check of the 0.5B against the 1.5B", "",
           (f"dtype={res['dtype']}, first {res['max_tokens']} tokens per text; "
            "`python scripts/ladder_quality.py`."), "",
           "| Text | Tokens | PPL 0.5B | PPL 1.5B | Ratio | 0.5B worse on | >5 nats worse |",
           "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        out.append(f"| {r['text']} | {r['n_tokens']} | {r['ppl_small']:.2f} | "
                   f"{r['ppl_large']:.2f} | {r['ppl_ratio']:.2f} | "
                   f"{100 * r['share_small_worse']:.0f}% | "
                   f"{100 * r['share_over_5_nats_worse']:.1f}% |")
    out += ["", "Timing (s): " + ", ".join(f"{k}={v}" for k, v in res["timing"].items()), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--prose", type=int, default=4)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    res = run(args.dtype, args.max_tokens, args.prose)
    out = results_dir() / "ladder"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "quality.json", json.dumps(res, indent=1))
    md = to_markdown(res)
    atomic_write_text(out / "quality.md", md)
    log.info("\n%s", md)


if __name__ == "__main__":
    main()
