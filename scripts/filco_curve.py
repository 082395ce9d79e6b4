"""The training curves of the models a FilCo experiment fine-tuned, from its run folders.

    python -m scripts.filco_curve filco/fig4_ladder   # -> results/ladder/filco_training_curve.md

Each run's metrics.json keeps the filter's and the generator's training log (`filter_train`,
`generator_train`: steps, pairs, the loss of every step, whether it came from the cache). A
model shared by two settings (the silver-trained generator of FilCo and Silver) is listed once.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.report.runs import experiment_runs

log = logging.getLogger(__name__)


def trained_models(metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per distinct fine-tuned model (by cache key), with the settings using it."""
    by_key: dict[str, dict[str, Any]] = {}
    for m in metas:
        # the variant names a fallback switch ("filco [switch fallback.test=top1]")
        setting = m["settings"].get("variant") or m["settings"].get("setting", "?")
        for part in ("filter_train", "generator_train"):
            info = m["metadata"].get(part) or {}
            if not info.get("losses"):
                continue
            entry = by_key.setdefault(info["key"], {**info, "used_by": []})
            entry["used_by"].append(setting)
    return sorted(by_key.values(), key=lambda e: e["role"])


def curve_points(losses: list[float], points: int = 6) -> list[tuple[int, float]]:
    """(step, loss) at about `points` evenly spaced steps, always the first and the last."""
    n = len(losses)
    steps = sorted({round(i * (n - 1) / max(1, points - 1)) for i in range(points)})
    return [(s + 1, losses[s]) for s in steps]


def render(models: list[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "",
             ("Training loss (mean cross-entropy per target token) of each fine-tuned model, at "
             "evenly spaced steps; `mean of last 5` smooths the last steps' batch-to-batch noise."),
             "", "| model (role) | used by | pairs | steps | loss by step | mean of last 5 |",
             "|---|---|---|---|---|---|"]
    for e in models:
        pts = ", ".join(f"{s}: {v:.3f}" for s, v in curve_points(e["losses"]))
        tail = e["losses"][-5:]
        lines.append(f"| {e['base']} ({e['role']}) | {', '.join(sorted(set(e['used_by'])))} | "
                     f"{e['n_pairs']} | {e['steps']} | {pts} | {sum(tail) / len(tail):.3f} |")
    return "\n".join(lines) + "\n"


def render_times(metas: list[dict[str, Any]]) -> str:
    """Each run's measured stage times (s): training happens in the first run needing a model."""
    lines = ["", ("Time per cell (s, the run's stage timings; a model trained for one setting is "
             "loaded from the cache by the next):"), "",
             "| setting | n_eval | filter | generator | total |", "|---|---|---|---|---|"]
    for m in sorted(metas, key=lambda m: str(m["settings"].get("setting"))):
        t = m.get("timings_s") or {}
        name = m["settings"].get("variant") or m["settings"].get("setting")
        lines.append(f"| {name} | {m['settings'].get('n_eval')} | "
                     f"{t.get('filter', 0):.0f} | {t.get('generator', 0):.0f} | "
                     f"{sum(t.values()):.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="e.g. filco/fig4_ladder")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = results_dir() / args.experiment
    metas = [r.metrics_json for r in sorted(experiment_runs(results_dir(), args.experiment),
                                           key=lambda r: str(r.dir)) if r.dir is not None]
    if not metas:
        raise SystemExit(f"No finished runs under {runs}: run `ragrepro -m "
                         f"experiment={args.experiment}` first.")
    out = args.out or results_dir() / "ladder" / "filco_training_curve.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(trained_models(metas), f"FilCo training curves: "
                                  f"{args.experiment}") + render_times(metas))
    log.info("Wrote %s", out)


if __name__ == "__main__":
    main()
