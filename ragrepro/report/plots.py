"""Sweep figures like the papers' (metric vs stride, query length, k, documents, beam
size; input length by context type). Each figure is written as PNG and SVG with the
plotted series as JSON next to it, so tests check the data rather than pixels."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..io import atomic_write_json
from ..methods import registered
from ..metrics.registry import MetricInfo
from .runs import is_missing, to_float
from .samples import interval_for
from .spec import _norm, metric_info

log = logging.getLogger(__name__)

# Settings that silently change a number: if they vary among a plot's runs, each value
# gets its own line instead of being averaged together. A method adds its own
# (its profile's `split_settings`).
SPLIT_IF_VARYING = ("scale", "dataset", "dataset_variant", "split", "limit", "max_length",
                    "model_revision")


def split_if_varying() -> tuple[str, ...]:
    return SPLIT_IF_VARYING + tuple(s for p in registered() for s in p.split_settings
                                    if s not in SPLIT_IF_VARYING)


@dataclass
class Point:
    x: Any
    y: float
    n: int                          # runs averaged (seeds)
    run_ids: list[str]
    low: float | None = None        # 95% bootstrap CI of a single run's value (error bar)
    high: float | None = None


@dataclass
class Series:
    label: str
    keys: dict[str, Any]
    points: list[Point] = field(default_factory=list)


@dataclass
class PlotData:
    name: str
    title: str
    kind: str
    x_label: str
    y_label: str
    metrics: list[str]
    series: list[Series]
    paper_note: str = ""
    n_runs: int = 0
    skipped: list[str] = field(default_factory=list)   # run ids lacking x or y


def _first(run: Any, columns: list[str]) -> tuple[Any, str | None]:
    for c in columns:
        v = run.get(c)
        if not is_missing(v):
            return v, c
    return None, None


def _as_list(v: Any) -> list[str]:
    return [v] if isinstance(v, str) else list(v or [])


def _passes(run: Any, where: dict[str, Any]) -> bool:
    for col, want in where.items():
        options = want if isinstance(want, list) else [want]
        if _norm(run.get(col)) not in {_norm(o) for o in options}:
            return False
    return True


def series_columns(spec: dict[str, Any], runs: list[Any]) -> list[str]:
    cols = _as_list(spec.get("series") or ["model"])
    for extra in split_if_varying():
        if extra not in cols and len({_norm(r.get(extra)) for r in runs}) > 1:
            cols.append(extra)
    return cols


def _x_sort_key(x: Any) -> tuple[int, Any]:
    f = to_float(x)
    return (0, f) if f is not None else (1, str(x))


def _ci(run: Any, metric: str, scale: float) -> tuple[float, float] | None:
    iv = interval_for(getattr(run, "dir", None), getattr(run, "metrics", None) or {}, metric)
    return None if iv is None else (scale * iv.low, scale * iv.high)


def _point(x: Any, vals: list[tuple[float, str]],
           ci: dict[str, tuple[float, float] | None]) -> Point:
    """Mean over the runs at x; a single run's point carries its CI as an error bar."""
    p = Point(x, sum(v for v, _ in vals) / len(vals), len(vals), [i for _, i in vals])
    bounds = ci.get(vals[0][1]) if len(vals) == 1 else None
    if bounds is not None:
        p.low, p.high = bounds
    return p


def plot_data(spec: dict[str, Any], runs: list[Any], infos: dict[str, MetricInfo]) -> PlotData:
    """Group runs into series (one per model, by default) of (x, mean y) points."""
    exps = set(spec.get("experiments") or [])
    xs = spec["x"] if isinstance(spec["x"], dict) else {"column": spec["x"]}
    ys = spec["y"] if isinstance(spec["y"], dict) else {"metric": spec["y"]}
    x_cols, y_cols = _as_list(xs.get("column")), _as_list(ys.get("metric"))
    chosen = [r for r in runs if r.experiment in exps and _passes(r, spec.get("where") or {})]
    cols = series_columns(spec, chosen)
    groups: dict[tuple[str, ...], dict[Any, list[tuple[float, str]]]] = {}
    used_metrics: list[str] = []
    skipped = []
    ci: dict[str, tuple[float, float] | None] = {}
    for run in chosen:
        x, _ = _first(run, x_cols)
        y, metric = _first(run, y_cols)
        yf = to_float(y)
        if x is None or yf is None or metric is None:
            skipped.append(run.run_id)
            continue
        if metric not in used_metrics:
            used_metrics.append(metric)
        key = tuple(_norm(run.get(c)) if is_missing(run.get(c)) else str(run.get(c))
                    for c in cols)
        scale = metric_info(metric, infos).scale
        groups.setdefault(key, {}).setdefault(x, []).append((yf * scale, run.run_id))
        ci[run.run_id] = _ci(run, metric, scale)
    series = []
    for key in sorted(groups):
        points = [_point(x, vals, ci)
                  for x, vals in sorted(groups[key].items(), key=lambda kv: _x_sort_key(kv[0]))]
        label = ", ".join(key) if len(cols) > 1 else key[0]
        series.append(Series(label, dict(zip(cols, key)), points))
    y_label = str(ys.get("label") or " / ".join(
        metric_info(m, infos).label or m for m in (used_metrics or y_cols[:1])))
    return PlotData(spec["name"], str(spec.get("title") or spec["name"]),
                    str(spec.get("kind") or "line"), str(xs.get("label") or x_cols[0]),
                    y_label, used_metrics, series, str(spec.get("paper_note") or ""),
                    len(chosen), skipped)


def render(data: PlotData, out_dir: Path, xscale: str | None = None) -> dict[str, Path]:
    """PNG + SVG + JSON; an empty plot says 'not run' instead of disappearing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if not data.series:
        ax.text(0.5, 0.5, "not run: no finished run with these settings yet",
                ha="center", va="center", transform=ax.transAxes)
    elif data.kind == "bar":
        _bars(ax, data)
    else:
        for s in data.series:
            line = ax.plot([p.x for p in s.points], [p.y for p in s.points], marker="o",
                           label=s.label)[0]
            bars = [p for p in s.points if p.low is not None and p.high is not None]
            if bars:  # 95% bootstrap CI of each single-run point
                ax.errorbar([p.x for p in bars], [p.y for p in bars],
                            yerr=[[p.y - p.low for p in bars], [p.high - p.y for p in bars]],
                            fmt="none", ecolor=line.get_color(), capsize=3, alpha=0.7)
        if xscale == "log2" and all(to_float(p.x) and to_float(p.x) > 0
                                    for s in data.series for p in s.points):
            ax.set_xscale("log", base=2)
            ticks = sorted({float(p.x) for s in data.series for p in s.points})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel(data.x_label)
    ax.set_ylabel(data.y_label)
    ax.set_title(data.title, fontsize=10)
    if data.series:
        ax.legend(fontsize=8, title="model" if len(data.series[0].keys) == 1 else None)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths = {"png": out_dir / f"{data.name}.png", "svg": out_dir / f"{data.name}.svg",
             "json": out_dir / f"{data.name}.json"}
    fig.savefig(paths["png"], dpi=110)
    fig.savefig(paths["svg"])
    plt.close(fig)
    atomic_write_json(paths["json"], asdict(data))
    return paths


def _bars(ax: Any, data: PlotData) -> None:
    cats = sorted({p.x for s in data.series for p in s.points}, key=_x_sort_key)
    width = 0.8 / max(1, len(data.series))
    for i, s in enumerate(data.series):
        by_x = {p.x: p.y for p in s.points}
        pos = [c + i * width for c in range(len(cats)) if cats[c] in by_x]
        ax.bar(pos, [by_x[c] for c in cats if c in by_x], width, label=s.label)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(cats))], [str(c) for c in cats])
