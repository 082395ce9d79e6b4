"""Specs of the methods' results tables (conf/report/results/<method>/<table>.yaml).

One YAML per table says which layout builds it and everything the layout must not hard-code:
row order, labels, model sizes and families, dataset columns, notes and where the paper's
numbers sit in ragrepro/report/paper_numbers.yaml. Layouts (ragrepro.report.results_tables):
  gain:  one row per run with its paired gain over a reference row (RALM Table 1);
  runs:  one row per run, metrics with CIs, paired against a reference method (RICHES);
  pivot: rows of settings x a pivoted column, with the paper's grid beside (FilCo).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .spec import SPEC_DIR, _read_yaml

RESULTS_DIR = SPEC_DIR / "results"

_FIELDS: dict[str, set[str]] = {
    "gain": {"title", "intro", "experiments", "row_key", "reference", "order", "labels",
             "default_retrieval", "fixed_retrieval", "upper_bounds", "model_size",
             "retrieval_only", "rerank_only", "per_model", "scorer_line", "paper"},
    "runs": {"title", "by", "metrics", "ci_metrics", "context", "paired", "reference",
             "pair_on", "note", "row_hook"},
    "pivot": {"title", "kind", "value", "pivot", "values", "labels", "task_columns",
              "model_family", "paper_columns", "metric_note", "notes", "paper", "cells",
              "delta_label", "reduction", "label", "rows", "row_labels", "cell",
              "model_column", "dataset_column", "delta", "diagnostics"},
}


def load_result_spec(name: str, spec_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """conf/report/results/<name>.yaml with its `name`, over the `_defaults.yaml` of its
    folder (what the tables of one method share); unknown fields are refused."""
    path = spec_dir / f"{name}.yaml"
    if not path.exists() or path.name.startswith("_"):
        known = ", ".join(result_spec_names(spec_dir))
        raise ConfigError(f"No results table {name!r} ({path}); known: {known}.")
    defaults = path.parent / "_defaults.yaml"
    data = {**(_read_yaml(defaults) if defaults.exists() else {}), **_read_yaml(path)}
    layout = data.pop("layout", None)
    if layout not in _FIELDS:
        raise ConfigError(f"{path}: `layout` must be one of {sorted(_FIELDS)}, not {layout!r}.")
    unknown = set(data) - _FIELDS[layout]
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {sorted(unknown)} for layout {layout}; "
                          f"allowed: {sorted(_FIELDS[layout])}.")
    return {**data, "layout": layout, "name": name}


def result_spec_names(spec_dir: Path = RESULTS_DIR) -> list[str]:
    return sorted(p.relative_to(spec_dir).with_suffix("").as_posix()
                  for p in spec_dir.rglob("*.yaml") if not p.name.startswith("_"))


def spec_for_experiment(experiment: str, spec_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """The spec whose name or `experiments` list is `experiment`."""
    names = result_spec_names(spec_dir)
    if experiment in names:
        return load_result_spec(experiment, spec_dir)
    for name in names:
        spec = load_result_spec(name, spec_dir)
        if experiment in (spec.get("experiments") or []):
            return spec
    raise ConfigError(f"No results table for experiment {experiment!r}; known tables: "
                      f"{', '.join(names)} (add the experiment to one's `experiments`).")
