"""Flags: name a results row whose generation diagnostics cross a threshold.

A weak row can come from the model or from the harness (a budget that cuts every answer
off, a prompt cut on the left, a filter that outputs nothing). The pipelines record per
sample why each generation stopped (ragrepro.generation); `summarize` turns that into row
columns (`gen_<stage>_length`, `gen_<stage>_empty`, `diag_<name>`, ...). This module reads
those columns against the rules of conf/report/flags.yaml and gives the text of one
"flags" cell per row ("length 100%"), so every table, `ragrepro compare` and the dashboard
can say when a number measures the harness. Pure functions over plain mappings: the core
learns no method or stage name; the YAML's patterns pick the columns.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..methods import MethodProfile, registered
from ..paths import CONF_DIR
from .runs import to_float

FLAGS_FILE = CONF_DIR / "report" / "flags.yaml"
_RULE_KEYS = {"name", "columns", "at_least", "means"}


@dataclass(frozen=True)
class FlagRule:
    """One line of flags.yaml: columns matching `columns` raise `name` at >= `at_least`."""

    name: str
    columns: str          # shell-style pattern; each `*` is one name part (a stage)
    at_least: float       # a share in [0, 1]
    means: str = ""

    def match(self, column: str) -> str | None:
        """None when the column is not this rule's; else what the `*`s matched ("" if none)."""
        m = _pattern(self.columns).fullmatch(column)
        return None if m is None else "/".join(m.groups())


@dataclass(frozen=True)
class Flag:
    name: str
    column: str
    value: float
    stage: str = ""       # what the pattern's `*` matched, named when a rule hits twice

    def text(self, with_stage: bool = False) -> str:
        where = f" ({self.stage})" if with_stage and self.stage else ""
        return f"{self.name} {100 * self.value:.0f}%{where}"


@lru_cache(maxsize=64)
def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("(.+?)".join(re.escape(part) for part in glob.split("*")))


def parse_rules(data: Any, source: str = "flags.yaml") -> list[FlagRule]:
    """Rules from the YAML's mapping ({flags: [{name, columns, at_least, means}, ...]})."""
    items = (data or {}).get("flags") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError(f"{source}: expected a top-level `flags:` list of rules.")
    rules = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConfigError(f"{source}: flags[{i}] must be a mapping, not {item!r}.")
        unknown, missing = set(item) - _RULE_KEYS, {"name", "columns", "at_least"} - set(item)
        if unknown or missing:
            raise ConfigError(f"{source}: flags[{i}] has unknown key(s) {sorted(unknown)} / "
                              f"lacks {sorted(missing)}; keys are {sorted(_RULE_KEYS)}.")
        at_least = to_float(item["at_least"])
        if at_least is None or not 0 < at_least <= 1:
            raise ConfigError(f"{source}: flags[{i}].at_least={item['at_least']!r}; give a "
                              f"share in (0, 1], e.g. 0.10 for 10%.")
        rules.append(FlagRule(str(item["name"]), str(item["columns"]), at_least,
                              " ".join(str(item.get("means") or "").split())))
    return rules


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> tuple[FlagRule, ...]:
    return tuple(parse_rules(yaml.safe_load(Path(path).read_text(encoding="utf-8")), path))


def load_rules(path: Path = FLAGS_FILE,
               profiles: Sequence[MethodProfile] | None = None) -> list[FlagRule]:
    """The rules of conf/report/flags.yaml (read again when the file changes), then each
    method's own (its profile's `flags`, over its diagnostics: FilCo's ctx_empty)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p} not found: the flag rules live there (see docs/report.md).")
    rules = list(_load(str(p), p.stat().st_mtime))
    names = {r.name for r in rules}
    for profile in registered() if profiles is None else profiles:
        for decl in profile.flags:
            if decl.name not in names:
                names.add(decl.name)
                rules.append(FlagRule(decl.name, decl.columns, decl.at_least,
                                      " ".join(decl.means.split())))
    return rules


def _diagnostics(row: Mapping[str, Any], rules: Sequence[FlagRule]):
    """(rule, stage, column, value) for every numeric column some rule reads."""
    for column in sorted(row):
        value = to_float(row.get(column))
        if value is None:
            continue
        for rule in rules:
            stage = rule.match(str(column))
            if stage is not None:
                yield rule, stage, str(column), value


def has_diagnostics(row: Mapping[str, Any], rules: Sequence[FlagRule] | None = None) -> bool:
    """Whether the row carries any column a rule reads (rows computed before the
    diagnostics existed do not, and get no flags cell at all rather than "0%")."""
    return any(True for _ in _diagnostics(row, load_rules() if rules is None else rules))


def row_flags(row: Mapping[str, Any], rules: Sequence[FlagRule] | None = None) -> list[Flag]:
    """The flags the row raises, in the YAML's rule order, then by column."""
    rules = load_rules() if rules is None else list(rules)
    hits = [Flag(rule.name, column, value, stage)
            for rule, stage, column, value in _diagnostics(row, rules)
            if value >= rule.at_least - 1e-12]
    order = {r.name: i for i, r in enumerate(rules)}
    return sorted(hits, key=lambda f: (order[f.name], f.column))


def flags_text(row: Mapping[str, Any], rules: Sequence[FlagRule] | None = None) -> str:
    """One cell: "length 100%; empty 35%" ("" when none). A rule raised by several stages of
    the row names each: "length 100% (filter); length 12% (answer)"."""
    flags = row_flags(row, rules)
    per_rule: dict[str, int] = {}
    for f in flags:
        per_rule[f.name] = per_rule.get(f.name, 0) + 1
    return "; ".join(f.text(with_stage=per_rule[f.name] > 1) for f in flags)


def flags_column(rows: Iterable[Mapping[str, Any]],
                 rules: Sequence[FlagRule] | None = None) -> list[str] | None:
    """The flags cell of every row, or None when no row has diagnostics (the table then
    gets no flags column, so tables of older runs stay as they were)."""
    rules = load_rules() if rules is None else list(rules)
    rows = list(rows)
    if not any(has_diagnostics(r, rules) for r in rows):
        return None
    return [flags_text(r, rules) for r in rows]


def merged_row(*parts: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's columns from several sources (its CSV row, its metrics.json metrics): an
    earlier source wins; a later one fills the numbers the earlier ones lack."""
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in (part or {}).items():
            if to_float(out.get(k)) is None:
                out[k] = v
    return out


def group_flags(named: Mapping[str, Mapping[str, Any]],
                rules: Sequence[FlagRule] | None = None) -> str | None:
    """One cell for a table line made of several runs (a pivot line: Full / FilCo / ...):
    "FilCo: ctx_empty 35%; Silver: length 12%". None when no run of the line has
    diagnostics; "" when some have and none is flagged."""
    rules = load_rules() if rules is None else list(rules)
    if not any(has_diagnostics(row, rules) for row in named.values()):
        return None
    parts = [(name, flags_text(row, rules)) for name, row in named.items()]
    return "; ".join(f"{name}: {text}" for name, text in parts if text)
