"""Which config keys differ between runs: the flattened settings compared key by key, the
keys that never change a number left out (shared by `ragrepro compare` and the keyed readers)."""
from __future__ import annotations

import json
from typing import Any

# Config keys that never change a number (they are also excluded from the run id).
IGNORED_PREFIXES = ("wandb.", "hydra.", "overwrite", "results_dir", "log_level", "progress")
MISSING = "(unset)"


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values (shown as JSON)."""
    if not isinstance(obj, dict):
        return {prefix: obj} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def differing(dicts: list[dict[str, Any]], ignore: tuple[str, ...] = ()) -> list[tuple[str, list[Any]]]:
    """Keys whose values are not all equal (a key missing from some dicts differs)."""
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    out = []
    for k in sorted(keys):
        if any(k.startswith(p) for p in ignore):
            continue
        values = [d.get(k, MISSING) for d in dicts]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1:
            out.append((k, values))
    return out
