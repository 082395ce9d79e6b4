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

import functools
import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

# Hydra's own search-path type (internal module, the one Hydra itself builds): the search-path
# plugins fill it, so a spec folder is found wherever Hydra finds the method's configs.
from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from ..errors import ConfigError
from ..metrics.registry import MetricInfo, metric_infos
from ..paths import CONF_DIR
from .runs import is_missing

SPEC_DIR = CONF_DIR / "report"


def _as_dir(entry: str) -> Path | None:
    """A search-path entry (file://DIR or pkg://module) as a folder; None for other schemes."""
    if entry.startswith("file://"):
        return Path(entry[len("file://"):])
    if entry.startswith("pkg://"):
        module = entry[len("pkg://"):].replace("/", ".")
        try:
            return Path(str(importlib.resources.files(module)))
        except (ModuleNotFoundError, TypeError):
            return None
    return None


@functools.lru_cache(maxsize=1)
def plugin_conf_dirs() -> tuple[Path, ...]:
    """The conf folders Hydra's search-path plugins add after conf/ (each registered method's
    `conf_dir`: hydra_plugins/ragrepro_methods), in their order."""
    path = ConfigSearchPathImpl()
    for plugin in Plugins.instance().discover(SearchPathPlugin):
        plugin().manipulate_search_path(path)  # type: ignore[operator]
    dirs = (_as_dir(e.path) for e in path.get_path() if e.path)
    return tuple(d for d in dirs if d is not None and d.resolve() != CONF_DIR.resolve())


def spec_dirs(given: Path | Sequence[Path] | None = None) -> list[Path]:
    """The `report/` folders table specs are looked up in: `given` (tests, a folder of one's
    own), else conf/report/ and then the `report/` folder of every conf folder on the config
    search path (a plug-in method's specs, e.g. <its conf>/report/tables/toy/main.yaml)."""
    if given is not None:
        return [Path(given)] if isinstance(given, (str, Path)) else [Path(d) for d in given]
    return [SPEC_DIR, *(d / "report" for d in plugin_conf_dirs() if (d / "report").is_dir())]


def table_files(given: Path | Sequence[Path] | None = None) -> dict[str, Path]:
    """Spec name ('<paper>/<table>') -> its file under a `tables/` folder of the search path;
    the first folder holding a name wins (conf/ before plug-ins, as in Hydra). Files whose
    name starts with `_` hold what a folder's specs share, never a table."""
    out: dict[str, Path] = {}
    for d in spec_dirs(given):
        for path in sorted((d / "tables").rglob("*.yaml")):
            name = path.relative_to(d / "tables").with_suffix("").as_posix()
            if not path.name.startswith("_"):
                out.setdefault(name, path)
    return out


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


def load_table_specs(spec_dir: Path | Sequence[Path] | None = None) -> list[dict[str, Any]]:
    """The paper-grid part of every table spec (report/tables/<paper>/<table>.yaml on the
    search path; its `results:` part is the method's own table, ragrepro.report.result_specs),
    each with its `name` '<paper>/<table>'. A file with only a `results:` part has no grid."""
    specs = []
    for name, path in sorted(table_files(spec_dir).items()):
        data = _read_yaml(path)
        data.pop("results", None)
        if not data:
            continue
        _check_fields(path, data, _TABLE_FIELDS)
        data.setdefault("name", name)
        for required in ("paper", "experiments", "metric"):
            if required not in data:
                raise ConfigError(f"{path}: missing `{required}`.")
        specs.append(data)
    return specs


def plot_files(given: Path | Sequence[Path] | None = None) -> dict[str, Path]:
    """Plot name (its file's stem) -> report/plots/<name>.yaml, the first folder of
    spec_dirs(given) holding a name winning (conf/ before the methods' conf folders)."""
    out: dict[str, Path] = {}
    for d in spec_dirs(given):
        for path in sorted((d / "plots").glob("*.yaml")):
            out.setdefault(path.stem, path)
    return out


def load_plot_specs(spec_dir: Path | Sequence[Path] | None = None) -> list[dict[str, Any]]:
    """Every plot spec (report/plots/*.yaml on the search path, a method's own included),
    by name."""
    specs = []
    for _name, path in sorted(plot_files(spec_dir).items()):
        data = _read_yaml(path)
        _check_fields(path, data, _PLOT_FIELDS)
        data.setdefault("name", path.stem)
        for required in ("experiments", "x", "y"):
            if required not in data:
                raise ConfigError(f"{path}: missing `{required}`.")
        specs.append(data)
    return specs
