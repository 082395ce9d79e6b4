"""A config's swept cells as the Hydra basic sweeper expands them (cartesian product, in
order), as override lists: read by `ragrepro plan`, `ragrepro lock` and the rehearsal."""
from __future__ import annotations

import itertools
from collections.abc import Mapping


def split_values(value: object) -> list[str]:
    """`a,b,c` -> [a, b, c] (the basic sweeper's comma list); a scalar is one value."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def sweep_cells(params: Mapping[str, object] | None) -> list[list[str]]:
    """[["k1=v", "k2=w"], ...] in the basic sweeper's order; no params -> one empty cell."""
    if not params:
        return [[]]
    keys = list(params)
    values = [split_values(params[k]) for k in keys]
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in itertools.product(*values)]
