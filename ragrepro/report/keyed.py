"""Table cells keyed on every recorded setting.

A table row is identified by all of its run's recorded settings, never by a few of them: two
runs that differ in any setting are two rows, and the setting that tells them apart is shown.
Two runs whose recorded settings are identical cannot be told apart in a table; the builder
refuses and names the config keys where they differ (or says they do not differ at all).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DataError
from .config_diff import IGNORED_PREFIXES, differing, flatten

# Per-run outputs and bookkeeping that are not settings.
NOT_SETTINGS = frozenset({"run_id", "experiment", "finished_at", "wall_s"})


@dataclass(frozen=True)
class KeyedRun:
    """What a keyed table needs of a run."""

    run_id: str
    settings: dict[str, Any]
    config: dict[str, Any]


def _canon(value: Any) -> str:
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return "null"
    return json.dumps(value, sort_keys=True, default=str)


def varying(settings: Sequence[dict[str, Any]], keys: Iterable[str] | None = None) -> list[str]:
    """Setting names whose values are not all equal across `settings` (missing = null)."""
    names: list[str] = []
    for s in settings:
        names += [k for k in s if k not in names and k not in NOT_SETTINGS]
    if keys is not None:
        wanted = set(keys)
        names = [k for k in names if k in wanted]
    return [k for k in names if len({_canon(s.get(k)) for s in settings}) > 1]


def constant(settings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Settings with one value across all runs."""
    if not settings:
        return {}
    vary = set(varying(settings))
    return {k: v for k, v in settings[0].items() if k not in vary and k not in NOT_SETTINGS}


def refuse_indistinguishable(runs: Sequence[KeyedRun], table: str) -> None:
    """Raise when two runs have identical recorded settings (they would fill one cell)."""
    groups: dict[str, list[KeyedRun]] = {}
    for r in runs:
        sig = _canon({k: v for k, v in r.settings.items() if k not in NOT_SETTINGS})
        groups.setdefault(sig, []).append(r)
    for group in groups.values():
        if len(group) < 2:
            continue
        diff = differing([flatten(r.config) for r in group], IGNORED_PREFIXES)
        named = ", ".join(f"{k} ({' vs '.join(map(str, v))})" for k, v in diff[:5])
        raise DataError(
            f"{table}: runs {', '.join(r.run_id for r in group)} record the same settings, so "
            f"they would fill the same cell. Their configs differ in: "
            f"{named or 'nothing recorded (e.g. a rerun after a code change)'}. Make the "
            f"pipeline record that setting, or remove the run folder you do not want.")


def distinguishing(runs: Sequence[KeyedRun], cell_of: Any) -> list[str]:
    """Settings that differ between runs sharing a cell label (cell_of(run) -> hashable):
    the columns a table must show so that its rows can be told apart."""
    by_cell: dict[Any, list[KeyedRun]] = {}
    for r in runs:
        by_cell.setdefault(cell_of(r), []).append(r)
    out: list[str] = []
    for group in by_cell.values():
        if len(group) > 1:
            out += [k for k in varying([r.settings for r in group]) if k not in out]
    return out


def one_per_cell(rows: Sequence[dict[str, Any]], key: Sequence[str], table: str,
                 settings_of: Any) -> list[dict[str, Any]]:
    """One row per `key` value. Several rows with the same key are refused, naming the
    settings where they differ (settings_of(row) -> that run's recorded settings): a table
    never silently keeps the newest of two different settings."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(str(r.get(k, "")) for k in key), []).append(r)
    for cell, group in groups.items():
        if len(group) < 2:
            continue
        ids = ", ".join(str(r.get("run_id")) for r in group)
        diff = varying([settings_of(r) for r in group])
        label = ", ".join(f"{k}={v}" for k, v in zip(key, cell))
        if diff:
            raise DataError(f"{table}: runs {ids} fill the same cell ({label}) but differ in "
                            f"{', '.join(diff)}. Keep one setting per table (move the other "
                            f"runs' rows out of the CSV, or run them under another experiment "
                            f"name).")
        raise DataError(f"{table}: runs {ids} fill the same cell ({label}) with the same "
                        f"recorded settings (e.g. reruns after a code change); remove the "
                        f"rows you do not want from the CSV.")
    return [group[0] for group in groups.values()]


def label_shared_cells(rows: Sequence[Any], by_id: dict[str, Any]) -> None:
    """Runs sharing one paper cell are different rows; label each by every recorded
    setting whose value differs between them (not only the shown ones)."""
    groups: dict[str, list[Any]] = {}
    for row in rows:
        if row.run_id and row.paper_row:
            groups.setdefault(row.cell, []).append(row)
    for group in groups.values():
        if len(group) < 2:
            continue
        settings = [dict(getattr(by_id.get(r.run_id), "settings", None) or
                         getattr(by_id.get(r.run_id), "row", None) or {}) for r in group]
        keys = varying(settings)
        for row, s in zip(group, settings):
            row.label = ", ".join(f"{k}={s.get(k)}" for k in keys) or f"run {row.run_id}"
            row.note = f"one of {len(group)} runs in this cell: {row.label}; {row.note}"
