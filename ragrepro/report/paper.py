"""The papers' reported numbers as data, with a lookup API: one file per paper,
report/paper/<paper>.yaml in its method's conf folder on the config search path (a built-in
method's or a plug-in's; ralm/conf/report/paper/ralm.yaml documents the layout), all read by
`papers`.

    >>> from ragrepro.report.paper import lookup
    >>> lookup("ralm", "table1", model="gpt2-small", retrieval="bm25",
    ...        rerank="zero-shot", dataset="wikitext-103").value
    28.6
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, DataError, unknown_name
from .spec import spec_dirs

Dirs = Path | Sequence[Path] | None


@dataclass(frozen=True)
class PaperNumber:
    """One reported number, where it is printed, and what it was measured under."""

    paper: str
    table: str
    row: str                      # the paper's row label
    column: str                   # the paper's column label
    value: float | None           # None: the paper prints "-" in this cell
    keys: dict[str, Any] = field(default_factory=dict)
    setting: dict[str, Any] = field(default_factory=dict)
    # The settings the number was measured under, named as our runs record them (a row's
    # settings are compared with these for the reproduction verdict, ragrepro.report.verdict);
    # empty: the record does not say, and no verdict is given.
    recorded: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return f"{self.paper} {self.table}, row {self.row!r}, column {self.column!r}"

    def matches(self, **keys: Any) -> bool:
        return all(_same(self.keys.get(k, self.setting.get(k)), v) for k, v in keys.items())


def _same(a: Any, b: Any) -> bool:
    return a is not None and str(a).lower() == str(b).lower()


def paper_files(spec_dir: Dirs = None) -> dict[str, Path]:
    """paper id -> report/paper/<paper>.yaml, the first on the search path (conf/ first)."""
    out: dict[str, Path] = {}
    for d in spec_dirs(spec_dir):
        for path in sorted((d / "paper").glob("*.yaml")):
            out.setdefault(path.stem, path)
    return out


@lru_cache(maxsize=16)
def _load(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a mapping (title, source, tables, ...).")
    return data


def papers(spec_dir: Dirs = None) -> dict[str, dict[str, Any]]:
    """paper id -> {title, source, figures_without_numbers, tables}."""
    return {paper: _load(path) for paper, path in paper_files(spec_dir).items()}


def table_info(paper: str, table: str, spec_dir: Dirs = None) -> dict[str, Any]:
    data = papers(spec_dir)
    if paper not in data:
        raise unknown_name("paper", paper, data)
    tables = data[paper].get("tables") or {}
    if table not in tables:
        raise unknown_name(f"{paper} table", table, tables)
    return tables[table]


def paper_table(paper: str, table: str, spec_dir: Dirs = None) -> list[PaperNumber]:
    """Every cell of one paper table, row-major, '-' cells included (value None)."""
    info = table_info(paper, table, spec_dir)
    columns: dict[str, dict[str, Any]] = info["columns"]
    out = []
    for row in info["rows"]:
        values = row["values"]
        if len(values) != len(columns):
            raise DataError(f"report/paper/{paper}.yaml: table {table} row {row['label']!r} has {len(values)} "
                            f"values for {len(columns)} columns.")
        for (col_label, col), value in zip(columns.items(), values):
            setting = {**(info.get("setting") or {}), **(col.get("setting") or {}),
                       **(row.get("setting") or {})}
            keys = {**(row.get("keys") or {}), **(col.get("keys") or {})}
            out.append(PaperNumber(paper, table, str(row["label"]), str(col_label),
                                   None if value is None else float(value), keys, setting,
                                   _merged("recorded", info, col, row)))
    return out


def _merged(name: str, *nodes: dict[str, Any]) -> dict[str, Any]:
    """`name` of the table, then the column, then the row (later wins; key order: first
    seen, so the table's settings lead when the differences are listed)."""
    out: dict[str, Any] = {}
    for node in nodes:
        block = node.get(name) or {}
        if not isinstance(block, dict):
            raise DataError(f"report/paper/*.yaml: `{name}` must be a mapping, not {block!r}.")
        out.update(block)
    return out


def table_recorded(paper: str, table: str, spec_dir: Dirs = None) -> dict[str, Any]:
    """The settings every cell of the table shares (its table-level `recorded`): what a row
    with no paper cell of its own is compared with."""
    return dict(table_info(paper, table, spec_dir).get("recorded") or {})


def find(paper: str, table: str, **keys: Any) -> list[PaperNumber]:
    """All cells whose keys (or settings) equal the given ones (case-insensitive)."""
    return [n for n in paper_table(paper, table) if n.matches(**keys)]


def lookup(paper: str, table: str, **keys: Any) -> PaperNumber:
    """The one cell identified by keys; raises ConfigError if none or several match."""
    hits = find(paper, table, **keys)
    if len(hits) == 1:
        return hits[0]
    cells = paper_table(paper, table)
    known = {k: sorted({str(c.keys[k]) for c in cells if k in c.keys})
             for k in sorted({k for c in cells for k in c.keys})}
    if not hits:
        raise ConfigError(f"No {paper} {table} cell has {keys}. Keys of this table: {known}.")
    raise ConfigError(f"{len(hits)} {paper} {table} cells match {keys}; add keys to pick one. "
                      f"Keys of this table: {known}.")
