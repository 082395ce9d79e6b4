"""The `results:` part of a table spec: a method's own results table of its runs.

A table spec is one YAML, report/tables/<paper>/<table>.yaml, in conf/ or in a plug-in
method's conf folder (found through the config search path, ragrepro.report.spec.spec_dirs).
Its top-level keys are the paper grid that `ragrepro report` fills from every run
(ragrepro.report.tables); its `results:` mapping is the table written next to the method's
runs. That mapping says which layout builds it and everything the layout must not hard-code:
row order, labels, model sizes and families, dataset columns, notes and where the paper's
numbers sit in report/paper/<paper>.yaml. A `_defaults.yaml` beside the specs holds,
under its own `results:`, what the results tables of that folder share (a table's keys win).
`layout` is `runs` (the core's: one row per setting of the `by` columns, metrics with CIs,
paired against a reference row; ragrepro.report.run_rows) or the module path of a method's
own layout, which declares FIELDS and write_layout (`<package>.<module>`: the method packages
ship theirs, e.g. one row per run with its paired gain over a baseline row, or settings x a
pivoted column with the paper's grid beside; see docs/report.md).
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from .samples import StatsSettings
from .spec import _read_yaml, table_files

Dirs = Path | Sequence[Path] | None

# Layouts the core ships; any other `layout` is a module path (a method's own layout).
BUILTIN_LAYOUTS = {"runs": "ragrepro.report.run_rows"}


class Layout(Protocol):
    """A results-table layout: the spec fields it reads and the function writing its files."""

    FIELDS: frozenset[str]

    def write_layout(self, spec: dict[str, Any], root: Path, experiment: str,
                     st: StatsSettings, paper_scale: bool) -> list[Path]: ...


def layout_module(layout: str, where: Path | str = "the spec") -> Layout:
    """The layout named by a spec's `results.layout`: `runs` (the core's), or a module path
    (`<package>.<module>`) whose module has FIELDS and write_layout."""
    module = BUILTIN_LAYOUTS.get(layout, layout)
    if not isinstance(layout, str) or not layout:
        raise ConfigError(f"{where}: `results.layout` must be `runs` or a module path "
                          f"(`<package>.<module>` with FIELDS and write_layout), not {layout!r}.")
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise ConfigError(f"{where}: `results.layout: {layout}` names no importable module "
                          f"({e}); use `runs` or a module with FIELDS and write_layout.") from None
    if not hasattr(found, "FIELDS") or not hasattr(found, "write_layout"):
        raise ConfigError(f"{where}: module {module} has no FIELDS / write_layout, so it is not "
                          f"a results-table layout.")
    return found  # type: ignore[return-value]


def _results_part(path: Path) -> dict[str, Any] | None:
    part = _read_yaml(path).get("results") if path.exists() else None
    if part is not None and not isinstance(part, dict):
        raise ConfigError(f"{path}: `results` must be a mapping (the results table's fields).")
    return part


def load_result_spec(name: str, spec_dir: Dirs = None) -> dict[str, Any]:
    """The `results:` part of report/tables/<name>.yaml with its `name`, over the
    `results:` of the `_defaults.yaml` beside it; unknown fields are refused."""
    path = table_files(spec_dir).get(name)
    own = _results_part(path) if path else None
    if path is None or own is None:
        known = ", ".join(result_spec_names(spec_dir))
        where = path or f"report/tables/{name}.yaml"
        raise ConfigError(f"No results table {name!r} ({where} has no `results:` part); "
                          f"known: {known}.")
    data = {**(_results_part(path.parent / "_defaults.yaml") or {}), **own}
    layout = data.pop("layout", None)
    fields = layout_module(layout, path).FIELDS
    unknown = set(data) - fields
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {sorted(unknown)} for layout {layout}; "
                          f"allowed: {sorted(fields)}.")
    return {**data, "layout": layout, "name": name}


def result_spec_names(spec_dir: Dirs = None) -> list[str]:
    """Every table spec on the search path that has a `results:` part."""
    return sorted(n for n, p in table_files(spec_dir).items() if _results_part(p) is not None)


def spec_for_experiment(experiment: str, spec_dir: Dirs = None) -> dict[str, Any]:
    """The results spec whose name or `experiments` list is `experiment`."""
    names = result_spec_names(spec_dir)
    if experiment in names:
        return load_result_spec(experiment, spec_dir)
    for name in names:
        spec = load_result_spec(name, spec_dir)
        if experiment in (spec.get("experiments") or []):
            return spec
    raise ConfigError(f"No results table for experiment {experiment!r}; known tables: "
                      f"{', '.join(names)} (add the experiment to one's `experiments`).")
