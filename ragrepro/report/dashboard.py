"""results/index.html: one static page (opens from disk, no server, no CDN) with every run
in a sortable, filterable table, a side-by-side comparison of selected runs (with the
per-sample flips of two runs of one experiment), the paper tables and the plots. Each run's
config and metrics are embedded as JSON."""
from __future__ import annotations

import html
import json
import os
import re
import time
from itertools import combinations
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write_text
from ..methods import registered
from ..metrics.registry import headline_metrics
from .compare import paired_cell_text, scalar_metrics
from .dashboard_assets import CSS, JS
from .flags import flags_text, has_diagnostics, merged_row
from .flips import CHANGES, item_texts, pair_flips
from .grid import grid_html, is_demo
from .plots import PlotData
from .runs import RunRecord, is_missing, to_float
from .samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for
from .spec import load_dashboard_spec
from .tables import BuiltTable, render_html_table
from .wandb_sync import OfflineRun

# The flips view embeds, per pair of runs, at most this many changed items per direction
# (`ragrepro compare A B --flips --limit 0` lists all), each text cut to FLIPS_WIDTH chars:
# the page holds one pair per two runs of an experiment, so its size grows with their square.
FLIPS_LIMIT = 10
FLIPS_WIDTH = 80

ROW_META = {"run_id", "experiment", "finished_at", "git_commit", "git_dirty", "wall_s",
            "code_version", "code_id", "code_versions_mixed"}


def _run_payload(run: RunRecord, root: Path, index_dir: Path) -> dict[str, Any]:
    href = samples_href = None
    if run.dir is not None:
        href = os.path.relpath(run.dir, index_dir).replace(os.sep, "/") + "/"
        if (run.dir / "samples.jsonl").exists():
            samples_href = href + "samples.jsonl"
    diag = merged_row(run.metrics, run.row)
    settings = run.settings or {k: v for k, v in run.row.items() if k not in ROW_META}
    metrics = scalar_metrics(run.metrics) if run.metrics else {}
    intervals = {}
    for name, value in metrics.items():
        iv = interval_for(run.dir, run.metrics, name) if isinstance(value, float) else None
        if iv is not None:
            intervals[name] = [iv.low, iv.high, iv.n]
    return {"intervals": intervals, "experiment": run.experiment, "run_id": run.run_id, "href": href,
            "finished_at": run.row.get("finished_at"), "wall_s": run.row.get("wall_s"),
            "git_commit": run.metadata.get("git_commit") or run.row.get("git_commit"),
            "code_version": run.metadata.get("code_version") or run.row.get("code_version"),
            "wandb_mode": run.metadata.get("wandb_mode"),
            "wandb_url": run.metadata.get("wandb_url"), "samples_href": samples_href,
            "flags": flags_text(diag) if has_diagnostics(diag) else None,
            "settings": settings, "metrics": metrics, "row": run.row, "config": run.config}


def _pair_entry(a: RunRecord, b: RunRecord, st: StatsSettings,
                texts: dict[str, dict[str, Any]], ia: int, ib: int) -> dict[str, Any]:
    """Run b against run a: the flips (at most FLIPS_LIMIT items per direction), the paired
    test on the same metric as compare prints it in both orders, or why there are none.
    The items' texts go to `texts` (per run index, per item label), shared by all pairs."""
    try:
        f, why = pair_flips(a, b, None, st)
    except ConfigError as e:
        f, why = None, str(e)
    if f is None:
        return {"why": why}
    entry = f.to_dict(FLIPS_LIMIT)
    shown = [it for ch in CHANGES[f.kind] for it in f.of(ch)[:FLIPS_LIMIT]]
    for run, i in ((a, ia), (b, ib)):
        texts.setdefault(str(i), {}).update(item_texts(run, f, shown, FLIPS_WIDTH))
    test, why = paired_for(b.dir, b.metrics or {}, a.dir, a.metrics or {}, f.metric, "diff",
                           st)
    entry["paired"] = ([paired_cell_text(test.estimate, test.low, test.high, test.p_value,
                                         test.includes_zero),
                        paired_cell_text(-test.estimate, -test.high, -test.low, test.p_value,
                                         test.includes_zero)]
                       if test is not None else [f"({why})", f"({why})"])
    return entry


def flips_payload(runs: list[RunRecord], st: StatsSettings = DEFAULT_STATS) -> dict[str, Any]:
    """{"pairs": {"i,j": flips of run j against run i (i < j)}, "texts": {i: {label: ...}}}
    for every two runs of one experiment (runs of different experiments score different
    examples); the page reads the other order by swapping (ragrepro.report.flips.swap)."""
    pairs: dict[str, Any] = {}
    texts: dict[str, dict[str, Any]] = {}
    by_exp: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        by_exp.setdefault(r.experiment, []).append(i)
    for idx in by_exp.values():
        for i, j in combinations(idx, 2):
            pairs[f"{i},{j}"] = _pair_entry(runs[i], runs[j], st, texts, i, j)
    return {"pairs": pairs, "texts": texts, "limit": FLIPS_LIMIT}


def _metric_columns(runs: list[RunRecord]) -> list[str]:
    seen: list[str] = []
    for r in runs:
        names = list(scalar_metrics(r.metrics)) if r.metrics else []
        seen += [m for m in names if m not in seen]
    if not any(r.metrics for r in runs):  # no metrics.json: take the known ones from the CSV
        seen = [m for m in headline_metrics()
                if any(not is_missing(r.row.get(m)) for r in runs)]
    order = {m: i for i, m in enumerate(headline_metrics())}
    return sorted(seen, key=lambda m: (order.get(m, len(order)), seen.index(m)))


def _setting_columns(runs: list[RunRecord]) -> list[str]:
    """The settings of conf/report/dashboard.yaml (what a run is, then what sweeps vary),
    then the methods' own (their profiles' `dashboard_settings`), that any run records."""
    spec = load_dashboard_spec()
    names = [*spec["key_settings"], *spec["sweep_settings"]]
    for profile in registered():
        names += [c for c in profile.dashboard_settings if c not in names]
    return [c for c in names if any(not is_missing(r.get(c)) for r in runs)]


def _td(value: Any) -> str:
    if is_missing(value):
        return '<td data-sort=""></td>'
    f = to_float(value)
    if f is not None and not isinstance(value, bool):
        text = f"{f:.4g}" if isinstance(value, float) else str(value)
        return f'<td data-sort="{f!r}" class="num">{html.escape(text)}</td>'
    return f'<td data-sort="{html.escape(str(value))}">{html.escape(str(value))}</td>'


def runs_table(runs: list[RunRecord], payload: list[dict[str, Any]]) -> str:
    settings, metrics = _setting_columns(runs), _metric_columns(runs)
    heads = ['<th class="nosort">select</th>', '<th data-type="text">experiment</th>',
             '<th data-type="text">run</th>', '<th data-type="text">finished</th>']
    heads += [f'<th data-type="auto" data-col="{html.escape(c)}">{html.escape(c)}</th>'
              for c in settings]
    heads += [f'<th data-type="auto" class="metric" data-col="{html.escape(c)}">'
              f'{html.escape(c)}</th>' for c in metrics]
    heads += ['<th data-type="text">W&amp;B</th>']
    with_flags = any(p["flags"] is not None for p in payload)
    heads += ['<th data-type="text" data-col="flags">flags</th>'] if with_flags else []
    heads += ['<th data-type="text">samples</th>']
    body = []
    for i, (run, p) in enumerate(zip(runs, payload)):
        link = (f'<a href="{html.escape(p["href"])}">{html.escape(run.run_id)}</a>'
                if p["href"] else html.escape(run.run_id))
        if run.metadata.get("demo"):
            link += " <span class=\"run-demo\">DEMO</span>"
        if p["wandb_url"]:
            wb = f'<a href="{html.escape(p["wandb_url"])}">{html.escape(p["wandb_mode"] or "run")}</a>'
        else:
            wb = html.escape(p["wandb_mode"] or "")
        cells = [(f'<td><input type="checkbox" class="sel" value="{i}" '
                 f'aria-label="select {html.escape(run.run_id)}"></td>'),
                 f'<td data-sort="{html.escape(run.experiment)}">{html.escape(run.experiment)}</td>',
                 f'<td data-sort="{html.escape(run.run_id)}">{link}</td>',
                 _td(p["finished_at"])]
        cells += [_td(run.get(c)) for c in settings]
        cells += [_td(p["metrics"].get(m) if p["metrics"] else run.row.get(m)) for m in metrics]
        cells.append(f'<td data-sort="{html.escape(p["wandb_mode"] or "")}">{wb}</td>')
        if with_flags:
            flag = html.escape(p["flags"] or "")
            cells.append(f'<td class="flags" data-sort="{flag}">{flag}</td>')
        cells.append(_samples_td(run, p["samples_href"]))
        body.append(f'<tr data-run="{i}" data-experiment="{html.escape(run.experiment)}" '
                    f'data-run-id="{html.escape(run.run_id)}">{"".join(cells)}</tr>')
    return (f'<table id="runs-table"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _samples_td(run: RunRecord, href: str | None) -> str:
    """A link to the run's samples.jsonl; its title gives the command that prints them."""
    if not href:
        return '<td data-sort=""></td>'
    cmd = f"ragrepro samples {run.experiment} --run {run.run_id}"
    return (f'<td data-sort="samples"><a href="{html.escape(href)}" '
            f'title="{html.escape(cmd)}">samples</a></td>')


def _shown_path(root: Path) -> str:
    """The results folder as the reader would type it: relative to the current directory
    when it is below it (no machine-specific prefix in a shared page or screenshot)."""
    rel = os.path.relpath(Path(root).resolve(), Path.cwd())
    return str(root) if rel.startswith("..") else rel


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def tables_section(tables: list[BuiltTable], index_dir: Path) -> str:
    parts = []
    for t in tables:
        links = " · ".join(
            f'<a href="{html.escape(os.path.relpath(p, index_dir))}">{k}</a>'
            for k, p in t.paths.items())
        notes = "".join(f"<p class='note'>{html.escape(x)}</p>" for x in t.lines)
        n_ours = sum(1 for r in t.rows if r.ours is not None)
        is_open = " open" if n_ours else ""
        detail = (f'<details class="all-rows"><summary>All {len(t.rows)} rows with '
                  f"differences, gains, settings and comparability notes</summary>"
                  f'<div class="scroll">'
                  f"{render_html_table(t.rows, t.show, 'table-' + _slug(t.name))}</div>"
                  f"</details>")
        parts.append(f'<details class="paper-table" id="sec-{_slug(t.name)}"{is_open}>'
                     f"<summary><b>{html.escape(t.title)}</b> ({n_ours} of {len(t.rows)} "
                     f"rows with our number)</summary><p>{links}</p>{notes}"
                     f"{grid_html(t.rows, 'grid-' + _slug(t.name))}{detail}</details>")
    return "".join(parts) or "<p>No report tables configured (conf/report/tables/ or a method's conf/report/tables/).</p>"


def plots_section(plots: list[tuple[PlotData, dict[str, Path]]], index_dir: Path) -> str:
    parts = []
    for data, paths in plots:
        rel = {k: os.path.relpath(p, index_dir).replace(os.sep, "/") for k, p in paths.items()}
        state = f"{len(data.series)} line(s), {data.n_runs} run(s)" if data.series else "not run"
        parts.append(
            f'<figure id="plot-{_slug(data.name)}"><img src="{html.escape(rel["png"])}" '
            f'alt="{html.escape(data.title)}" width="640"><figcaption>'
            f"<b>{html.escape(data.title)}</b> ({state}) · "
            f'<a href="{html.escape(rel["svg"])}">SVG</a> · '
            f'<a href="{html.escape(rel["json"])}">data</a><br>{html.escape(data.paper_note)}'
            "</figcaption></figure>")
    return "".join(parts) or "<p>No plots configured (conf/report/plots/ or a method's conf/report/plots/).</p>"


def wandb_section(offline: list[OfflineRun], command: str | None) -> str:
    if not offline:
        return "<p>No offline-only W&amp;B runs.</p>"
    items = "".join(f"<li>{html.escape(o.experiment)}/{html.escape(o.run_id)}"
                    f"{'' if o.run_dirs else ' (no wandb/offline-run-* folder found)'}</li>"
                    for o in offline)
    cmd = (f'<pre id="wandb-sync">{html.escape(command)}</pre>' if command else "")
    return (f"<p>{len(offline)} run(s) were logged to W&amp;B offline only. Upload them with "
            f"(from the repository root):</p>{cmd}<ul>{items}</ul>")


def _json_script(obj: Any, element_id: str) -> str:
    text = json.dumps(obj, default=str, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def render_dashboard(root: Path, runs: list[RunRecord], tables: list[BuiltTable],
                     plots: list[tuple[PlotData, dict[str, Path]]], offline: list[OfflineRun],
                     command: str | None, index_path: Path) -> str:
    index_dir = index_path.parent
    payload = [_run_payload(r, root, index_dir) for r in runs]
    experiments = sorted({r.experiment for r in runs})
    options = "".join(f'<option value="{html.escape(e)}">{html.escape(e)}</option>'
                      for e in experiments)
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    demo = ('<p id="demo-banner" class="demo">DEMO DATA: these runs were written by '
            "tests/report/demo.py with made-up numbers. They are not results.</p>"
            if is_demo(runs) else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ragrepro results</title>
<style>{CSS}</style></head><body>
<h1>ragrepro results{" (DEMO)" if demo else ""}</h1>{demo}
<p id="summary">{len(runs)} run(s) in {len(experiments)} experiment(s) under
<code>{html.escape(_shown_path(root))}</code>; generated {generated} by <code>ragrepro report</code>.</p>
<nav><a href="#runs">Runs</a> · <a href="#compare">Compare</a> · <a href="#tables">Paper tables</a>
 · <a href="#plots">Plots</a> · <a href="#wandb">W&amp;B</a></nav>
<section id="runs"><h2>Runs</h2>
<div class="controls"><input id="filter" type="search" size="40"
 placeholder="filter: words that must all appear (e.g. ralm smollm2)">
<select id="experiment-filter"><option value="">all experiments</option>{options}</select>
<span id="shown-count">{len(runs)} of {len(runs)} runs shown</span>
<button id="clear-selection" type="button">clear selection</button></div>
<p class="hint">Click a column header to sort; tick two or more runs to compare them.</p>
<div class="scroll">{runs_table(runs, payload)}</div></section>
<section id="compare"><h2>Compare selected runs</h2>
<div id="compare-body"><p>Select two or more runs in the table above.</p></div></section>
<section id="tables"><h2>Paper tables</h2>
<p class="hint">Each table in the paper's shape: in every cell our number with its 95%
confidence interval [low, high] and n (questions, or blocks of perplexity windows), the
paired relative change versus the baseline row with its CI (≈0: the CI includes zero, the
change is not distinguishable from noise; ≠0: it is; for perplexity a negative change is an
improvement), then the paper's number. Runs sharing a paper cell are labelled by the settings
that differ between them. Paper rows we have not run
are folded away. Tables with at least one of our numbers are expanded.</p>
{tables_section(tables, index_dir)}</section>
<section id="plots"><h2>Plots</h2>{plots_section(plots, index_dir)}</section>
<section id="wandb"><h2>W&amp;B</h2>{wandb_section(offline, command)}</section>
{_json_script(payload, "runs-data")}
{_json_script(flips_payload(runs), "flips-data")}
<script>{JS}</script>
</body></html>
"""


def write_dashboard(root: Path, runs: list[RunRecord], tables: list[BuiltTable],
                    plots: list[tuple[PlotData, dict[str, Path]]], offline: list[OfflineRun],
                    command: str | None) -> Path:
    index = root / "index.html"
    atomic_write_text(index, render_dashboard(root, runs, tables, plots, offline, command, index))
    return index
