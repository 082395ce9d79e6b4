"""Declarative report specs (conf/report/): which experiments feed which paper table, how
a run's CSV row maps onto the paper's cell keys, and which metric column gives the number.

A key rule (one per paper key) is evaluated in this order:
  cases:    [{when: {column: value | [values] | "$other_column" | null}, value: v}, ...]
            first case whose conditions all hold gives the value (null = missing);
  column:   a column name or a list (first non-missing wins); `default` when all missing;
  map:      {our value: paper value}; "null" maps a missing value; unmapped values pass;
  stand_in: {our value: paper value} like map, but recorded: the paper's cell used a
            different model/dataset, so the comparability note names the substitution.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from ..errors import ConfigError
from ..metrics.registry import MetricInfo, metric_infos
from ..paths import CONF_DIR
from .runs import is_missing

SPEC_DIR = CONF_DIR / "report"


class HasGet(Protocol):
    def get(self, key: str) -> Any: ...


@dataclass
class Derived:
    """A run's paper keys, and the stand-ins used to get them."""

    keys: dict[str, Any]
    stand_ins: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def _norm(value: Any) -> str:
    return "null" if is_missing(value) else str(value).strip().lower()


def _condition_holds(row: HasGet, column: str, wanted: Any) -> bool:
    have = row.get(column)
    options = wanted if isinstance(wanted, list) else [wanted]
    for opt in options:
        if isinstance(opt, str) and opt.startswith("$"):
            other = row.get(opt[1:])
            if not is_missing(have) and _norm(have) == _norm(other):
                return True
        elif _norm(have) == _norm(opt):
            return True
    return False


def derive_key(rule: dict[str, Any], row: HasGet) -> tuple[Any, tuple[Any, Any] | None]:
    """(paper value, (ours, paper) if a stand-in was used) for one key rule."""
    for case in rule.get("cases") or []:
        if all(_condition_holds(row, c, w) for c, w in (case.get("when") or {}).items()):
            return case.get("value"), None
    columns = rule.get("column")
    columns = [columns] if isinstance(columns, str) else list(columns or [])
    value = next((row.get(c) for c in columns if not is_missing(row.get(c))), None)
    if is_missing(value):
        value = rule.get("default")
    mapping = {_norm(k): v for k, v in (rule.get("map") or {}).items()}
    if _norm(value) in mapping:
        value = mapping[_norm(value)]
    stand_in = {_norm(k): v for k, v in (rule.get("stand_in") or {}).items()}
    if _norm(value) in stand_in:
        return stand_in[_norm(value)], (value, stand_in[_norm(value)])
    return value, None


def derive_keys(spec_keys: dict[str, dict[str, Any]], row: HasGet) -> Derived:
    out = Derived({})
    for name, rule in spec_keys.items():
        value, stand_in = derive_key(rule or {}, row)
        out.keys[name] = value
        if stand_in is not None:
            out.stand_ins[name] = stand_in
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a YAML mapping.")
    return data


def load_metric_infos() -> dict[str, MetricInfo]:
    """The metric registry's facts (ragrepro.metrics.registry), the only source of labels,
    scales and directions."""
    return metric_infos()


def load_dashboard_spec(spec_dir: Path = SPEC_DIR) -> dict[str, list[str]]:
    """conf/report/dashboard.yaml: the setting columns of the dashboard's runs table."""
    path = spec_dir / "dashboard.yaml"
    data = _read_yaml(path)
    _check_fields(path, data, {"key_settings", "sweep_settings"})
    return {k: list(data.get(k) or []) for k in ("key_settings", "sweep_settings")}


def metric_info(name: str, infos: dict[str, MetricInfo]) -> MetricInfo:
    return infos.get(name) or MetricInfo(name, label=name)


_TABLE_FIELDS = {"paper", "table", "title", "experiments", "keys", "metric", "baseline",
                 "pair_on", "compare", "show", "delta", "average", "notes", "name"}
_PLOT_FIELDS = {"name", "title", "experiments", "x", "y", "series", "where", "kind", "xlabel",
                "ylabel", "xscale", "paper_note", "notes", "facet"}


def _check_fields(path: Path, data: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {sorted(unknown)}; allowed: "
                          f"{sorted(allowed)}.")


def load_table_specs(spec_dir: Path = SPEC_DIR) -> list[dict[str, Any]]:
    """conf/report/tables/<paper>/<table>.yaml, each with its `name` '<paper>/<table>'."""
    specs = []
    for path in sorted((spec_dir / "tables").rglob("*.yaml")):
        data = _read_yaml(path)
        _check_fields(path, data, _TABLE_FIELDS)
        data.setdefault("name", path.relative_to(spec_dir / "tables").with_suffix("").as_posix())
        for required in ("paper", "experiments", "metric"):
            if required not in data:
                raise ConfigError(f"{path}: missing `{required}`.")
        specs.append(data)
    return specs


def load_plot_specs(spec_dir: Path = SPEC_DIR) -> list[dict[str, Any]]:
    specs = []
    for path in sorted((spec_dir / "plots").glob("*.yaml")):
        data = _read_yaml(path)
        _check_fields(path, data, _PLOT_FIELDS)
        data.setdefault("name", path.stem)
        for required in ("experiments", "x", "y"):
            if required not in data:
                raise ConfigError(f"{path}: missing `{required}`.")
        specs.append(data)
    return specs
